# A target for tests/it/python.rs: a worker thread (named "pystat" for the kernel)
# that calls os.path.exists in a loop, a Python function (genericpath.exists) whose
# eval call runs a C function (os.stat) that makes a system call, between calls of
# tiny Python functions; so that the C frames of the innermost eval call are often
# where the outer calls' just were. It stops when the file named by argv[1] exists.
import ctypes
import os
import sys
import threading


def leaf():
    return 3


def probe(stop):
    return os.path.exists(stop)


def spin(stop):
    try:
        ctypes.CDLL(None).prctl(15, b"pystat", 0, 0, 0)
    except Exception:
        pass
    while not probe(stop):
        for _ in range(20):
            leaf()


t = threading.Thread(target=spin, args=(sys.argv[1],))
t.start()
print("ready", flush=True)
t.join()
