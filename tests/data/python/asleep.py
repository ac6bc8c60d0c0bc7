# A target for tests/it/python_replay.rs: threads whose Python stacks are known.
# The main thread sleeps in <module> -> outer -> middle -> time.sleep; "pydeep" (its
# name for the kernel) sleeps at the bottom of a recursion 40 deep; "pyspin" runs
# hot() in a loop under spin(). Prints "ready" once the sleepers are asleep.
import ctypes
import threading
import time


def name(n):
    try:
        ctypes.CDLL(None).prctl(15, n, 0, 0, 0)
    except Exception:
        pass


def deep(n):
    if n == 0:
        time.sleep(3600)
    return deep(n - 1)


def sleeper():
    name(b"pydeep")
    deep(40)


def hot():
    s = 0
    for i in range(20000):
        s += i % 7
    return s


def spin():
    name(b"pyspin")
    while True:
        hot()


def middle():
    print("ready", flush=True)
    time.sleep(3600)


def outer():
    middle()


threading.Thread(target=sleeper, daemon=True).start()
threading.Thread(target=spin, daemon=True).start()
time.sleep(0.3)
outer()
