# A target for tests/it/hostile_python.rs: a harmless busy process beside the
# attackers. A thread named "pyharmless" for the kernel spends its time in busy(), a
# Python loop whose frame lasts for the whole run, so that every sample of that
# thread must name busy(). It stops when the file named by argv[1] exists.
import ctypes
import os
import sys
import threading


def busy(stop):
    x = 0
    while not os.path.exists(stop):
        for i in range(200000):
            x = (x + i) % 1000003
    return x


def run(stop):
    try:
        ctypes.CDLL(None).prctl(15, b"pyharmless", 0, 0, 0)
    except Exception:
        pass
    busy(stop)


t = threading.Thread(target=run, args=(sys.argv[1],))
t.start()
print("ready", flush=True)
t.join()
