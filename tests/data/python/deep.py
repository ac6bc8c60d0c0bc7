# A target for tests/it/python.rs: the main thread recurses argv[2] calls deep
# (`level`), deeper than the kernel's copy of a chain (128 frames) and, on 3.8-3.10
# (one native eval call per Python call), than the native stack copy, then spins in
# `hot` until the file named by argv[1] exists. The chain stays as it is meanwhile,
# so every sample of `hot` has it whole: <module>, level x (argv[2] + 1), hot.
import os
import sys


def hot(stop):
    s = 0
    while not os.path.exists(stop):
        for i in range(20000):
            s += i * i
    return s


def level(n, stop):
    if n == 0:
        return hot(stop)
    return level(n - 1, stop)


sys.setrecursionlimit(5000)
print("ready", flush=True)
level(int(sys.argv[2]), sys.argv[1])
