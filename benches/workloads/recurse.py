"""Stack-size sweep workload (c): CPython recursion of varying depth (1 to 60 Python
frames, each a few hundred bytes of C stack under `python3.12 -X perf`). Runs WARMUP
seconds, then prints "units_per_sec N" for the next MEASURE seconds (0: until killed).

usage: python3.12 -X perf recurse.py WARMUP MEASURE
"""

import sys
import time


def descend(n, acc):
    if n == 0:
        x = acc
        for i in range(200):
            x = (x * 1103515245 + 12345) & 0xFFFFFFFF
        return x
    return descend(n - 1, acc + n)


def main():
    warmup, measure = float(sys.argv[1]), float(sys.argv[2])
    units, seed = 0, 0
    start = time.monotonic()
    t0 = start + warmup
    u0 = None
    while True:
        descend(1 + seed % 60, seed)
        seed += 1
        units += 1
        if units % 64 == 0:
            now = time.monotonic()
            if u0 is None and now >= t0:
                u0, t0 = units, now
            elif u0 is not None and measure > 0 and now >= t0 + measure:
                print(f"units_per_sec {(units - u0) / (now - t0):.1f}", flush=True)
                return


main()
