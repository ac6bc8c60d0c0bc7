#!/usr/bin/env python3
"""Why a thread's run-queue delay in /proc/PID/task/TID/schedstat is not the time the
scheduler's tracepoints say it waited for a CPU (issue 28): a model of the kernel's
run-queue clock at each switch, against the kernel's CPU clocks.

The kernel stamps both sides of a switch with its run-queue clock: the outgoing
thread's CPU clock stops there (and its delay starts there when it was preempted), the
incoming thread's delay ends there and its CPU clock starts. A wake-up that preempts
the running thread asks the next switch not to update that clock
(`wakeup_preempt()` -> `rq_clock_skip_update()` in kernel/sched/core.c): the switch
then uses the clock of the last update, at the wake-up or after it, while the
preempted thread may run on for a while (a kernel built with PREEMPT_NONE switches
only when it returns to user space or calls cond_resched). The kernel then counts
that stretch as the preempted thread's run-queue delay and the woken thread's CPU
time; `sched_switch` puts it where it happened.

The model: at a switch prev (preempted, prev_state R) -> next where next was woken
onto this CPU since the previous switch there, the kernel's clock is that of the
latest wake-up onto this CPU (ticks, 4 ms apart at HZ=250, update it too: gaps over
1 ms are left out). It predicts, per thread, how far the tracepoints' running time is
over its CPU clock, printed beside the measured difference.

usage: benches/offcpu/rq_clock_skip.py PROF ROWS PERF, the files that
    `PGRUN_KEEP=PROF PGRUN_ROWS=ROWS PGRUN_PERF=PERF PGRUN_PERF_ALL=1
    benches/offcpu/pgbench_runnable.py` keeps (PROFILE=PATH: the profile binary,
    target/release/profile by default).
"""

import bisect
import collections
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_GAP = 1_000_000

SWITCH = re.compile(r"prev_pid=(\d+) .*prev_state=(\S+) ==> .*next_pid=(\d+) ")
WAKEUP = re.compile(r" pid=(\d+) prio=\d+ target_cpu=(\d+)")
LINE = re.compile(r"\s*\[(\d+)\]\s+([\d.]+): sched:(\w+): (.*)")


def main():
    prof, rows_path, perf = sys.argv[1:4]
    profile = os.environ.get("PROFILE", os.path.join(ROOT, "target/release/profile"))
    v = json.loads(subprocess.run([profile, "report", "-i", prof, "--json"],
                                  capture_output=True, text=True, check=True).stdout)
    start, end = v["summary"]["attached_ns"], v["summary"]["end_time_ns"]
    rows = collections.defaultdict(list)
    with open(rows_path) as f:
        for line in f:
            pid, t0, t1, run, delay = map(int, line.split())
            rows[pid].append(((t0 + t1) // 2, run, delay))

    def clock_at(pid, t):
        r = rows[pid]
        i = bisect.bisect_left(r, (t,))
        (ta, ra, _), (tb, rb, _) = r[max(i - 1, 0)], r[min(i, len(r) - 1)]
        return ra + (t - ta) / (tb - ta) * (rb - ra) if tb > ta else ra

    out = subprocess.run(["perf", "script", "-i", perf, "--ns", "-F", "cpu,time,event,trace"],
                         capture_output=True, text=True, check=True).stdout
    tids = set(rows)
    woken_onto = collections.defaultdict(dict)  # CPU -> {tid: time} since its last switch
    last_update = {}  # CPU -> the latest wake-up onto it since its last switch
    predicted = collections.Counter()
    switches = collections.Counter()
    running = collections.Counter()
    since = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        cpu, t, event, rest = int(m.group(1)), int(round(float(m.group(2)) * 1e9)), m.group(3), m.group(4)
        if event == "sched_wakeup":
            w = WAKEUP.search(rest)
            if w:
                woken_onto[int(w.group(2))][int(w.group(1))] = t
                last_update[int(w.group(2))] = t
        elif event == "sched_switch":
            s = SWITCH.search(rest)
            if not s:
                continue
            prev, state, nxt = int(s.group(1)), s.group(2), int(s.group(3))
            if prev in since:
                running[prev] += max(0, min(t, end) - max(since.pop(prev), start))
            if nxt in tids:
                since[nxt] = t
            woken = woken_onto[cpu].get(nxt)
            if state.startswith("R") and woken is not None and start <= t <= end:
                gap = t - last_update.get(cpu, woken)
                if gap <= MAX_GAP:
                    predicted[prev] += gap
                    predicted[nxt] -= gap
                    switches[prev] += 1
                    switches[nxt] += 1
            woken_onto[cpu].clear()
            last_update.pop(cpu, None)
    print("| thread | tracepoints' running - CPU clock (ms) | predicted by the skipped clock updates | switches modelled |")
    print("|---|---|---|---|")
    for tid in sorted(tids):
        clock = clock_at(tid, end) - clock_at(tid, start)
        print(f"| {tid} | {(running[tid] - clock) / 1e6:+.1f} | {predicted[tid] / 1e6:+.1f} | {switches[tid]} |")


if __name__ == "__main__":
    main()
