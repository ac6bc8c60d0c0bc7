"""A process hostile to a profiler that reads it from outside (issue 44): its code
objects are rebuilt every 0.3 s with code.replace, each new set with a new first line
(so each is a code object never met before) and each carrying a line table of about
a megabyte: one bytes object shared by all, so the process itself stays small.

argv[1]: "near", a table just under what the function's bytecode could need (the
reader must keep within its bytes budget by letting go of what it used least), or
"over", far more than a small function could need (refused outright); argv[2]: a
file whose existence stops it. Prints "ready" once the first set runs."""

import os
import sys
import time
import types

mode, stop = sys.argv[1], sys.argv[2]
MIB = 1 << 20

if mode == "near":
    # 7,000 statements: about 70 KB of bytecode, for which 1 MiB of line table is
    # within what a table could need.
    body = "\n".join(f"    x = x + {i % 7}" for i in range(7000))
    src = f"def big(x):\n{body}\n    return x % 1000\n"
else:
    src = "def big(x):\n    for i in range(3000):\n        x = x + i % 7\n    return x % 1000\n"
ns = {}
exec(compile(src, "hostile_lines.py", "exec"), ns)
base = ns["big"].__code__
field = "co_linetable" if sys.version_info >= (3, 10) else "co_lnotab"
table = getattr(base, field)
# Zero bytes after the real entries: never reached by a lookup (every instruction is
# covered before them), no-ops where a table is read to its end.
BIG = table + bytes(MIB - 1 - len(table))

x = 0
first = 1000
alive = []
ready = False
while not os.path.exists(stop):
    first += 1
    fresh = [base.replace(co_firstlineno=first, **{field: BIG}) for _ in range(16)]
    funcs = [types.FunctionType(c, ns, "big") for c in fresh]
    # The last 60 sets (960 code objects, 70 MB) stay alive: their addresses are not
    # reused, so each new code object is one more to keep.
    alive = (alive + [funcs])[-60:]
    if not ready:
        print("ready", flush=True)
        ready = True
    until = time.monotonic() + 0.3
    while time.monotonic() < until:
        for f in funcs:
            x = f(x)
