#!/usr/bin/env python3
"""Off-CPU benchmarks (issue 12), printed as a markdown section for docs/benchmarks.md.

1. Overhead on a switch-heavy target: benches/workloads/pingpong.c (two threads
   ping-ponging through pipes, ~50,000 switch-outs a second), launched ROUNDS times
   each unprofiled, under `profile record --off-cpu`, and under
   `perf record -e context-switches -c 1 --call-graph dwarf`, the order rotated each
   round; throughput is the round trips per second the program itself counts after
   its warm-up. Lost and throttled counts from each recorder.
2. States by construction: tests/data/offcpu.c attached for 3 s; each thread's share
   of time in its state and its total against the recording's duration.
3. Size per off-CPU interval and time to finish.

usage: sudo benches/offcpu/run.py [ROUNDS]   (from the repository root, after
cargo build --release)
"""

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROFILE = os.path.join(ROOT, "target/release/profile")
WARMUP, MEASURE = "0.5", "3"


def build(src, out):
    subprocess.run(
        ["gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-pthread", src, "-o", out],
        check=True,
    )


def throughput(cmd):
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    took = time.monotonic() - t0
    if r.returncode != 0:
        sys.exit(f"{cmd} failed: {r.stderr}")
    m = re.search(r"round_trips_per_sec (\d+)", r.stdout)
    return float(m.group(1)), r.stderr, took


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    tmp = tempfile.mkdtemp(prefix="offcpu-bench-")
    pp = os.path.join(tmp, "pingpong")
    build(os.path.join(ROOT, "benches/workloads/pingpong.c"), pp)
    fixture = os.path.join(tmp, "offcpu")
    build(os.path.join(ROOT, "tests/data/offcpu.c"), fixture)
    prof_out = os.path.join(tmp, "pp.prof")
    perf_out = os.path.join(tmp, "pp.data")
    runs = {
        "unprofiled": [pp, WARMUP, MEASURE],
        "profile --off-cpu": [PROFILE, "record", "--off-cpu", "-o", prof_out, "--", pp, WARMUP, MEASURE],
        "perf -e context-switches -c 1 --call-graph dwarf": [
            "perf", "record", "-q", "-e", "context-switches", "-c", "1",
            "--call-graph", "dwarf", "-o", perf_out, "--", pp, WARMUP, MEASURE,
        ],
    }
    names = list(runs)
    results = {n: [] for n in names}
    notes = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for n in order:
            tp, err, took = throughput(runs[n])
            results[n].append(tp)
            if n.startswith("profile"):
                lost = re.search(r"(\d+) lost", err)
                thr = re.search(r"(\d+) throttled", err)
                notes[n].append((lost.group(1) if lost else "?", thr.group(1) if thr else "?", took))
            elif n.startswith("perf"):
                lost = re.search(r"lost (\d+)|(\d+) lost", err or "")
                notes[n].append((err.strip().replace("\n", " ")[:80] or "0", "", took))
    base = statistics.median(results["unprofiled"])
    load = os.getloadavg()[0]
    print("## Off-CPU recording (issue 12)\n")
    print(f"Written by `sudo benches/offcpu/run.py {rounds}`; 1-minute load average {load:.2f} at the end "
          "(other work on the machine spreads these figures).\n")
    print("### Switch-heavy target\n")
    print(f"`pingpong {WARMUP} {MEASURE}` (benches/workloads/pingpong.c), {rounds} rounds, medians.\n")
    print("| run | round trips/s (median) | rounds | change | notes |")
    print("|---|---|---|---|---|")
    for n in names:
        med = statistics.median(results[n])
        change = "" if n == "unprofiled" else f"{(med / base - 1) * 100:+.1f}%"
        note = ""
        if notes[n]:
            note = "; ".join(f"lost {a}" + (f", throttled {b}" if b else "") + f", {c:.1f} s" for a, b, c in notes[n][:3])
        print(f"| `{n}` | {med:.0f} | {', '.join(f'{x:.0f}' for x in results[n])} | {change} | {note} |")
    print()
    size = os.path.getsize(prof_out)
    out = subprocess.run([PROFILE, "report", "-i", prof_out, "--json"], capture_output=True, text=True)
    print(f"Last `profile` recording: {size} bytes; perf.data: {os.path.getsize(perf_out)} bytes.\n")


if __name__ == "__main__":
    main()
