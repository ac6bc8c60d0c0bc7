# A target for tests/it/python.rs: a worker thread (named "pyworker" for the kernel)
# that runs, in a loop, a recursion 40 deep, two functions whose CPU time it measures
# with its own thread clock, and a C extension call (zlib.compress). It stops when the
# file named by argv[1] exists, then prints "split A B": the CPU seconds hot_a and
# hot_b took, by time.thread_time(). The recursion's innermost call runs long (tens of
# ms), so that its whole chain is still there when a profiler reads it afterwards.
import ctypes
import os
import sys
import threading
import time
import zlib


def deep(n):
    if n == 0:
        s = 0
        for i in range(300000):
            s += i * i
        return s
    return deep(n - 1)


def hot_a():
    s = 0
    for i in range(120000):
        s += i % 7
    return s


def hot_b():
    s = 0
    for i in range(40000):
        s += i % 7
    return s


def compress(data):
    return zlib.compress(data, 6)


totals = [0.0, 0.0]


def worker(stop):
    try:
        ctypes.CDLL(None).prctl(15, b"pyworker", 0, 0, 0)
    except Exception:
        pass
    data = bytes(range(256)) * 2048
    while not os.path.exists(stop):
        deep(40)
        t = time.thread_time()
        hot_a()
        u = time.thread_time()
        hot_b()
        v = time.thread_time()
        totals[0] += u - t
        totals[1] += v - u
        compress(data)


t = threading.Thread(target=worker, args=(sys.argv[1],))
t.start()
print("ready", flush=True)
t.join()
print("split", totals[0], totals[1], flush=True)
