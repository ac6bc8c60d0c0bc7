# A target for tests/it/python_replay.rs: threads whose Python stacks are known and
# stay so. The main thread sleeps in <module> -> outer -> middle -> time.sleep;
# "pydeep" (its name for the kernel) sleeps at the bottom of a recursion 40 deep;
# "pyspin" runs hot() in a loop under spin(), at the bottom of another such recursion.
# Prints "ready" once the sleepers are asleep.
import ctypes
import functools
import threading
import time


def name(n):
    try:
        ctypes.CDLL(None).prctl(15, n, 0, 0, 0)
    except Exception:
        pass


def deep(n, then):
    if n == 0:
        then()
    return deep(n - 1, then)


def sleeper():
    name(b"pydeep")
    deep(40, functools.partial(time.sleep, 3600))


def hot():
    s = 0
    for i in range(20000):
        s += i % 7
    return s


def spin():
    while True:
        hot()


def spinner():
    name(b"pyspin")
    deep(40, spin)


def middle():
    print("ready", flush=True)
    time.sleep(3600)


def outer():
    middle()


threading.Thread(target=sleeper, daemon=True).start()
threading.Thread(target=spinner, daemon=True).start()
time.sleep(0.3)
outer()
