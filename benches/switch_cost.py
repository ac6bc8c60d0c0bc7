#!/usr/bin/env python3
"""What a profiler costs a target that switches threads often (issue 45).

`perf bench sched pipe` passes a byte back and forth between two threads pinned to
CPU 0: nearly all its time is context switches, so the slowdown a profiler adds is its
cost per switch. Each round runs every configuration once, each right after an
unprofiled run (its pair), so that the machine's load, which drifts, is nearly the same
for both; the figure is the median over rounds of (profiled / unprofiled - 1), with
the smallest and largest, and the noise: the same figure for two unprofiled runs.

Usage (root): [BEFORE=OLD_PROFILE_BIN] python3 benches/switch_cost.py PROFILE_BIN [ROUNDS] [LOOPS] [CONFIG...]
Prints a Markdown table headed by the command, commit, date and load (docs/measurements/switch-cost.md).
"""

import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

# The benchmark's own CPU time comes from its rusage (its threads' clocks, as the
# kernel gives them at exit: time other tasks run on CPU 0 is not in it, nor the
# hypervisor's steal), which is far less disturbed by other work on the machine than
# the wall time perf bench reports. Timer starts and context switches are counted on
# CPU 0 by a CPU-wide perf stat: hrtimer starts per switch say whether the kernel
# took its slow context switch (about 1 or more) or swapped contexts (about 0). Not
# by counters inherited into the benchmark: with `inherit_stat` on a profiler's events
# and no count in samples, the kernel swaps counts between the contexts it swaps, and
# an inherited perf stat beside them reports garbage (docs/accounting.md).
STAT = ["perf", "stat", "-x", ",", "-a", "-C", "0", "-e", "timer:hrtimer_start", "-e", "context-switches"]
RUSAGE = [sys.executable, "-c", "import resource, subprocess, sys; subprocess.run(sys.argv[1:]); "
          "r = resource.getrusage(resource.RUSAGE_CHILDREN); print('cpu-seconds', r.ru_utime + r.ru_stime, file=sys.stderr)"]
BENCH = ["taskset", "-c", "0", "perf", "bench", "sched", "pipe"]


def configs(profile, out):
    """Each configuration: name and the command put before the benchmark."""
    prof = lambda *a: [profile, "record", "-q", *a, "-o", out + ".prof", "--"]
    # -B: no build-id pass at the end (perf 6.1 here crashed in it once the
    # benchmark had finished; it is not part of the target's cost).
    perf = lambda *a: ["perf", "record", "-q", "-B", *a, "-o", out + ".data", "--"]
    return {
        "unprofiled (noise)": [],
        "profile -F 99": prof("-F", "99"),
        "perf record -g -F 99": perf("-g", "-F", "99"),
        "profile -F 999": prof("-F", "999"),
        "perf record -g -F 999": perf("-g", "-F", "999"),
        "profile --exact-weights -F 99": prof("--exact-weights", "-F", "99"),
        "profile --exact-weights -F 999": prof("--exact-weights", "-F", "999"),
        "profile --off-cpu -F 99": prof("--off-cpu", "-F", "99"),
        # perf's closest equivalent of --off-cpu: CPU samples plus a sample (with
        # its stack) at every context switch.
        "perf -g task-clock + context-switches -c 1": perf(
            "-g", "-e", "task-clock/freq=99/", "-e", "context-switches/period=1/"
        ),
        # BEFORE=BIN in the environment: the previous build's --off-cpu beside it.
        **({"before: profile --off-cpu -F 99": [os.environ["BEFORE"], "record", "-q", "--off-cpu", "-F", "99",
                                                "-o", out + ".before.prof", "--"]}
           if os.environ.get("BEFORE") else {}),
    }


def run(prefix, loops):
    """Wall us per round trip (perf bench), CPU us per round trip (its rusage), and
    hrtimer starts per context switch on CPU 0."""
    with tempfile.NamedTemporaryFile(mode="r", suffix=".stat") as stat:
        cmd = STAT + ["-o", stat.name, "--"] + prefix + RUSAGE + BENCH + ["-l", str(loops)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        counts = {}
        for line in stat.read().splitlines():
            f = line.split(",")
            if len(f) > 3 and f[0].replace(".", "").isdigit():
                counts[f[2]] = float(f[0])
    m = re.search(r"([\d.]+) usecs/op", p.stdout)
    c = re.search(r"cpu-seconds ([\d.]+)", p.stderr)
    # The figures are the benchmark's: a recorder that fails afterwards (its own
    # post-processing) does not void them.
    if not m or not c:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    cpu_us = float(c.group(1)) * 1e6 / loops
    starts = counts.get("timer:hrtimer_start", 0) / max(counts.get("context-switches", 1), 1)
    return float(m.group(1)), cpu_us, starts


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    profile = os.path.abspath(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    loops = int(sys.argv[3]) if len(sys.argv) > 3 else 200000
    wanted = sys.argv[4:]
    tmp = tempfile.mkdtemp(prefix="switch-cost-")
    all_configs = configs(profile, os.path.join(tmp, "rec"))
    chosen = {k: v for k, v in all_configs.items() if not wanted or k in wanted or k == "unprofiled (noise)"}
    added = {k: [] for k in chosen}
    added_cpu = {k: [] for k in chosen}
    starts = {k: [] for k in chosen}
    base_us = []
    base_cpu = []
    load0 = os.getloadavg()[0]
    for r in range(rounds):
        for name, prefix in chosen.items():
            base, bcpu, _ = run([], loops)
            got, cpu, st = run(prefix, loops)
            base_us.append(base)
            base_cpu.append(bcpu)
            added[name].append((got / base - 1) * 100)
            added_cpu[name].append((cpu / bcpu - 1) * 100)
            starts[name].append(st)
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)
    load1 = os.getloadavg()[0]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    before = f"BEFORE={os.environ['BEFORE']} " if os.environ.get("BEFORE") else ""
    print(f"`{before}{shlex.join(['python3', 'benches/switch_cost.py'] + sys.argv[1:])}`, commit {commit}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load0:.1f} to {load1:.1f}, "
          f"{rounds} rounds of `{' '.join(BENCH)} -l {loops}`, unprofiled median "
          f"{statistics.median(base_us):.2f} us per round trip ({statistics.median(base_cpu):.2f} us of CPU)")
    print()
    print("| configuration | added wall time, median | min to max | added CPU time, median | min to max | hrtimer starts per switch |")
    print("|---|---|---|---|---|---|")
    for name, xs in added.items():
        c = added_cpu[name]
        print(f"| {name} | {statistics.median(xs):+.1f}% | {min(xs):+.1f}% to {max(xs):+.1f}% "
              f"| {statistics.median(c):+.1f}% | {min(c):+.1f}% to {max(c):+.1f}% | {statistics.median(starts[name]):.3f} |")


if __name__ == "__main__":
    main()
