"""A process hostile to a profiler that reads it from outside (issue 44): it spends
half its time in steady(), a function of an ordinary name, and half in functions
rebuilt with code.replace, a fresh one every 2 ms, each named by a string of 64 KiB
never met before (its first characters tell them apart) and given a first line of its
own (a code object, name and table freed and built again at the same addresses would
otherwise look like the one before), so that a reader keeping every name it meets
would grow without bound. Only the last 64 stay alive: the
process itself stays small.

argv[1]: a file whose existence stops it. Prints "ready" once it runs."""

import os
import sys
import time
import types

stop = sys.argv[1]
NAME = 64 * 1024


def steady(until):
    x = 0
    while time.monotonic() < until:
        for i in range(1000):
            x = (x + i) % 1000003
    return x


def rotated(until):
    x = 0
    while time.monotonic() < until:
        for i in range(1000):
            x = (x + i) % 1000003
    return x


base = rotated.__code__
n = 0
alive = []
print("ready", flush=True)
while not os.path.exists(stop):
    steady(time.monotonic() + 0.05)
    end = time.monotonic() + 0.05
    while time.monotonic() < end:
        n += 1
        prefix = f"f{n}_"
        name = prefix + "x" * (NAME - len(prefix))
        fields = {"co_name": name, "co_firstlineno": 1000 + n}
        if sys.version_info >= (3, 11):
            fields["co_qualname"] = name
        f = types.FunctionType(base.replace(**fields), globals(), name)
        alive = (alive + [f])[-64:]
        f(time.monotonic() + 0.002)
