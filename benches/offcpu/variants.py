#!/usr/bin/env python3
"""What a context switch costs under each recorder variant (docs/off-cpu.md, "Cost").

Interleaved pingpong throughput, order rotated each round, medians; prints a markdown
table. The `offcpu-*` and `cpu-noexact` variants set PROFILE_EXP, which only a
recorder built with the patch kept in history (`git show f63872c:benches/offcpu/variants.patch`,
applied to commit 846b0c6, the design before the change) reads: noexact (no PERF_SAMPLE_READ / inherit_stat),
nostack (no stack event), nostate, nocc (state samples without callchain), noswrec
(no SWITCH records), swonclock (SWITCH records on the task-clock event).
`offcpu-new` and `cpu-new` run /tmp/ov/profile-new (the current build, copied there).
The second set, for the design after that change, needs a recorder built with
`git show f63872c:benches/offcpu/variants-2.patch` (applied to commit 8f78691): notcsample (the task-clock
event counts but does not sample: no hrtimer), nocc, nostack, noswrec, noregs, and
their combinations below. `perf-both` is perf recording what `--off-cpu` records: CPU
samples at 999 Hz and every switch-out, with DWARF stacks.

`offcpu-nowakeups` is the same build as `offcpu` with tracefs hidden from it (no wake-up or
switch-in events: its fallback), for the cost of those events (issue 28).

`offcpu-noswitchtp` (no sched_switch event), `offcpu-waking` (sched_waking for
sched_wakeup), `offcpu-minsample` (tracepoint samples with id, time and raw fields
only), `offcpu-wakeupnone`/`offcpu-switchnone`/`offcpu-tpnone` (filters that match
nothing: the tracepoints' probes and filters without their output) need a recorder
built with variants-3.patch, kept in git history (`git show 99f1392:benches/offcpu/variants-3.patch`;
applies to a2bc462).

Besides throughput, the table has the workload's own CPU time per round trip
(pingpong's cpu_ns_per_trip: the kernel's work in its threads' context included),
steadier than throughput on a loaded machine.

usage: [PIN=CPU] [W=0.5] [M=3] variants.py ROUNDS PROFILE_BIN VARIANT...
(as root, fuzzers and other work paused if possible)
"""
import os, re, resource, statistics, subprocess, sys, json
rounds = int(sys.argv[1]); prof = sys.argv[2]; wanted = sys.argv[3:]
os.makedirs("/tmp/ov", exist_ok=True)
pp = "/tmp/ov/pingpong"
subprocess.run(["gcc","-O2","-g","-fno-omit-frame-pointer","-pthread",os.path.join(os.path.dirname(os.path.abspath(__file__)), "../workloads/pingpong.c"),"-o",pp],check=True)
W, M = os.environ.get("W","0.5"), os.environ.get("M","3")
PIN = os.environ.get("PIN")
def P(exp, *args):
    return ({"PROFILE_EXP": exp} if exp else {}), [prof, "record", "-o", "/tmp/ov/pp.prof", *args, "--", pp, W, M]
V = {
 "unprofiled": ({}, [pp, W, M]),
 "cpu": P(""),
 "cpu-noexact": P("noexact"),
 "offcpu": P("", "--off-cpu"),
 "offcpu-noexact": P("noexact", "--off-cpu"),
 "offcpu-nostack": P("nostack", "--off-cpu"),
 "offcpu-nostate": P("nostate", "--off-cpu"),
 "offcpu-swonclock": P("swonclock", "--off-cpu"),
 "offcpu-nocc": P("nocc", "--off-cpu"),
 "offcpu-noswrec": P("noswrec", "--off-cpu"),
 "offcpu-nostack-noexact": P("nostack,noexact", "--off-cpu"),
 "offcpu-notcsample": P("notcsample", "--off-cpu"),
 "offcpu-notcs-nocc-nostack": P("notcsample,nocc,nostack", "--off-cpu"),
 "offcpu-nocc-nostack": P("nocc,nostack", "--off-cpu"),
 "offcpu-noregs": P("noregs", "--off-cpu"),
 "offcpu-new": ({}, ["/tmp/ov/profile-new", "record", "-o", "/tmp/ov/pp2.prof", "--off-cpu", "--", pp, W, M]),
 # Another build, for before/after rounds: copied to /tmp/ov/profile-before.
 "offcpu-before": ({}, ["/tmp/ov/profile-before", "record", "-o", "/tmp/ov/pp2.prof", "--off-cpu", "--", pp, W, M]),
 "cpu-new": ({}, ["/tmp/ov/profile-new", "record", "-o", "/tmp/ov/pp2.prof", "--", pp, W, M]),
 # --off-cpu without its sched tracepoints (wake-ups, switch-ins): tracefs hidden
 # from the recorder in a private mount namespace (a non-empty tmpfs over both
 # places it looks, so it mounts none), so it takes its documented fallback. The
 # same binary, no option: the wake-up events' own cost is offcpu against this.
 "offcpu-nowakeups": ({}, ["unshare", "-m", "sh", "-c",
    "mount -t tmpfs none /sys/kernel/tracing && echo x > /sys/kernel/tracing/x && "
    "{ ! [ -d /sys/kernel/debug ] || { mount -t tmpfs none /sys/kernel/debug && "
    "mkdir -p /sys/kernel/debug/tracing && echo x > /sys/kernel/debug/tracing/x; }; } && "
    'exec "$0" "$@"', prof, "record", "-o", "/tmp/ov/pp.prof", "--off-cpu", "--", pp, W, M]),
 # Issue 28, the wake-up events' cost: a recorder built with
 # variants-3.patch (`git show 99f1392:benches/offcpu/variants-3.patch | git apply`) reads these switches.
 "offcpu-noswitchtp": P("noswitchtp", "--off-cpu"),
 "offcpu-waking": P("waking", "--off-cpu"),
 "offcpu-minsample": P("minsample", "--off-cpu"),
 "offcpu-wakeupnone": P("wakeupnone", "--off-cpu"),
 "offcpu-switchnone": P("switchnone", "--off-cpu"),
 "offcpu-tpnone": P("wakeupnone,switchnone", "--off-cpu"),
 "perf-cs": ({}, ["perf","record","-q","-e","context-switches","-c","1","--call-graph","dwarf","-o","/tmp/ov/pp.data","--",pp,W,M]),
 "perf-both": ({}, ["perf","record","-q","-e","task-clock/freq=999/","-e","context-switches/period=1/","--call-graph","dwarf","-o","/tmp/ov/pp.data","--",pp,W,M]),
 "perf-both": ({}, ["perf","record","-q","-e","task-clock/freq=999/","-e","context-switches/period=1/","--call-graph","dwarf","-o","/tmp/ov/pp.data","--",pp,W,M]),
 "perf-cpu": ({}, ["perf","record","-q","-e","task-clock","-F","999","--call-graph","dwarf","-o","/tmp/ov/pp.data","--",pp,W,M]),
}
names = wanted
tp = {n: [] for n in names}
# CPU seconds (user + system) of each run's processes: the workload, and the recorder.
cpu = {n: [] for n in names}
# The workload's own CPU time per round trip (kernel work in its threads' context
# included): what a switch costs it, less sensitive to other work than throughput.
per_trip = {n: [] for n in names}
info = {n: "" for n in names}
for r in range(rounds):
    order = names[r % len(names):] + names[:r % len(names)]
    for n in order:
        env, cmd = V[n]
        if PIN: cmd = ["taskset", "-c", PIN, *cmd]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        res = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu[n].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        m = re.search(r"round_trips_per_sec (\d+)", res.stdout)
        if not m:
            print(n, "FAILED", res.stderr[-500:], file=sys.stderr); continue
        tp[n].append(float(m.group(1)))
        c = re.search(r"cpu_ns_per_trip (\d+)", res.stdout)
        if c: per_trip[n].append(float(c.group(1)))
        lt = re.search(r"(\d+) lost, (\d+) throttled", res.stderr)
        if lt: info[n] = f"lost {lt.group(1)} thr {lt.group(2)}"
    print(f"round {r+1} done; load {os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
base = statistics.median(tp[names[0]])
# Paired: each round's run against the first variant's run of the same round.
def paired(n):
    r = [b / a - 1 for a, b in zip(tp[names[0]], tp[n]) if a]
    return f"{statistics.median(r) * 100:+.1f}%" if r else ""
print(f"| variant | median trips/s | vs {names[0]} | median of per-round changes | CPU ns per trip (workload, median) | CPU s per run (all processes, median) | rounds | note |\n|---|---|---|---|---|---|---|---|")
for n in names:
    med = statistics.median(tp[n])
    print(f"| {n} | {med:.0f} | {(med/base-1)*100:+.1f}% | {paired(n)} | {statistics.median(per_trip[n]) if per_trip[n] else 0:.0f} | {statistics.median(cpu[n]):.2f} | {', '.join(f'{x:.0f}' for x in tp[n])} | {info[n]} |")
for n in names:
    print(f"{n} CPU ns per trip by round: {', '.join(f'{x:.0f}' for x in per_trip[n])}")
print(f"load at end {os.getloadavg()}")
