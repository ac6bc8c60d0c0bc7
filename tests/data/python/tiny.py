# A target for tests/it/python.rs: a worker thread (named "pytiny" for the kernel)
# whose Python frames change as fast as they can, tiny functions called in a loop,
# so that most frames read after a sample have changed since. It stops when the
# file named by argv[1] exists.
import ctypes
import os
import sys
import threading


def leaf():
    return 3


def middle():
    return leaf() * 2


def top():
    return middle() + 1


def spin(stop):
    try:
        ctypes.CDLL(None).prctl(15, b"pytiny", 0, 0, 0)
    except Exception:
        pass
    while not os.path.exists(stop):
        for _ in range(20000):
            top()


t = threading.Thread(target=spin, args=(sys.argv[1],))
t.start()
print("ready", flush=True)
t.join()
