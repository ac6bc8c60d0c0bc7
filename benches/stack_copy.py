#!/usr/bin/env python3
"""What the user-stack copy costs a CPU-bound target (issue 45's stack-copy study).

One thread of benches/workloads/spin.c pinned to CPU 0 (`taskset -c 0 spin 1 0.3 S`)
prints its throughput; each configuration runs right after an unprofiled run (its
pair) and the figure is the median over rounds of (throughput / its pair's - 1),
with the smallest and largest. The configurations vary what each sample copies:
`--stack-size` from 8 bytes (no copy worth the name: what is left is the sample
itself, the recorder's work and the timer) to 64512, frame-pointer mode (the kernel
walks the user stack instead, with `leaf_stack` bytes copied for a frameless leaf),
and perf's `-g` and `--call-graph dwarf` beside. The cost of one copy is the
difference between a size and 8 bytes, divided by the samples taken a second: run at
a frequency high enough (default -F 4999) that the difference stands out of the
noise, then scale to -F 999 (the cost is linear in the rate).

The study's question: would copying only the leaf frames (a few hundred bytes) and
taking the rest of the stack from the kernel's frame-pointer callchain save enough
to build? Its cost is about the `--stack-size 512` row plus the kernel's user
frame-pointer walk (the `fp` row against the 8-byte row).

Usage (root): python3 benches/stack_copy.py PROFILE_BIN SPIN_BIN [ROUNDS] [HZ] [SECONDS]
(SPIN_BIN: `gcc -O2 -g -pthread benches/workloads/spin.c -o spin`.) Prints a
Markdown table headed by the command, commit, date and load.
"""

import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time


def configs(profile, hz, out):
    prof = lambda *a: [profile, "record", "-F", str(hz), *a, "-o", out + ".prof", "--"]
    perf = lambda *a: ["perf", "record", "-q", "-B", "-e", "task-clock", "-F", str(hz), *a, "-o", out + ".data", "--"]
    return {
        "unprofiled (noise)": [],
        "profile --stack-size 8": prof("--stack-size", "8"),
        "profile --stack-size 512": prof("--stack-size", "512"),
        "profile --stack-size 8192": prof("--stack-size", "8192"),
        "profile (default, 32768)": prof(),
        "profile --stack-size 64512": prof("--stack-size", "64512"),
        "profile --call-graph fp": prof("--call-graph", "fp"),
        "perf -g": perf("-g"),
        "perf --call-graph dwarf,32768": perf("--call-graph", "dwarf,32768"),
    }


def run(prefix, spin, seconds):
    """Units a second, and samples a second (profile's summary; None for others)."""
    cmd = prefix + ["taskset", "-c", "0", spin, "1", "0.3", str(seconds)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"units_per_sec ([\d.]+)", p.stdout)
    if not m:
        sys.exit(f"{shlex.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    s = re.search(r"(\d+) samples from \d+ threads? in ([\d.]+) s", p.stderr)
    rate = int(s.group(1)) / float(s.group(2)) if s else None
    return float(m.group(1)), rate


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    profile, spin = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    hz = int(sys.argv[4]) if len(sys.argv) > 4 else 4999
    seconds = float(sys.argv[5]) if len(sys.argv) > 5 else 2
    tmp = tempfile.mkdtemp(prefix="stack-copy-")
    chosen = configs(profile, hz, os.path.join(tmp, "rec"))
    change = {k: [] for k in chosen}
    rates = {k: [] for k in chosen}
    load0 = os.getloadavg()[0]
    for r in range(rounds):
        for name, prefix in chosen.items():
            base, _ = run([], spin, seconds)
            got, rate = run(prefix, spin, seconds)
            change[name].append((got / base - 1) * 100)
            if rate:
                rates[name].append(rate)
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)
    load1 = os.getloadavg()[0]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"`{shlex.join(['python3', 'benches/stack_copy.py'] + sys.argv[1:])}`, commit {commit}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load0:.1f} to {load1:.1f}, "
          f"{rounds} rounds of `taskset -c 0 spin 1 0.3 {seconds:g}` at -F {hz}")
    print()
    print("| configuration | throughput change, median | min to max | samples a second | cost a sample against 8 bytes | at -F 999 |")
    print("|---|---|---|---|---|---|")
    floor = statistics.median(change["profile --stack-size 8"])
    for name, xs in change.items():
        med = statistics.median(xs)
        rate = statistics.median(rates[name]) if rates[name] else None
        if rate and name != "profile --stack-size 8":
            # Throughput lost beyond the 8-byte run's, as CPU time a second, a sample.
            us = (floor - med) / 100 * 1e6 / rate
            per, at999 = f"{us:.2f} us", f"{us * 999 / 1e4:+.2f}%"
        else:
            per = at999 = ""
        shown = f"{rate:.0f}" if rate else ""
        print(f"| {name} | {med:+.1f}% | {min(xs):+.1f}% to {max(xs):+.1f}% | {shown} | {per} | {at999} |")


if __name__ == "__main__":
    main()
