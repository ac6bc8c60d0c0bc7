#!/usr/bin/env python3
"""Off-CPU benchmarks (issue 12): prints a markdown section for docs/measurements/off-cpu.md.

1. Overhead on a switch-heavy target: benches/workloads/pingpong.c (two threads
   ping-ponging through pipes, ~50,000 switch-outs a second unprofiled), launched
   ROUNDS times each unprofiled, under `profile record --off-cpu`, and under
   `perf record -e context-switches -c 1 --call-graph dwarf`, the order rotated each
   round; throughput is the round trips per second the program itself counts after
   its warm-up, so neither recorder's setup nor its end-of-recording work is in it.
   Lost and throttled counts from each recorder's own summary.
2. States by construction: tests/data/offcpu.c attached for 3 s; each thread's share
   of time in the state it was built for, and its total against the recording's
   duration.
3. Size of the recording per off-CPU interval and the time to finish (end of the
   workload to the recorder's exit, and `report --flamegraph`).

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


def run(cmd):
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    took = time.monotonic() - t0
    if r.returncode != 0:
        sys.exit(f"{cmd} failed: {r.stderr}")
    return r, took


def overhead(rounds, tmp):
    pp = os.path.join(tmp, "pingpong")
    build(os.path.join(ROOT, "benches/workloads/pingpong.c"), pp)
    prof_out = os.path.join(tmp, "pp.prof")
    perf_out = os.path.join(tmp, "pp.data")
    runs = {
        "unprofiled": [pp, WARMUP, MEASURE],
        "profile record --off-cpu": [PROFILE, "record", "--off-cpu", "-o", prof_out, "--", pp, WARMUP, MEASURE],
        "perf record -e context-switches -c 1 --call-graph dwarf": [
            "perf", "record", "-e", "context-switches", "-c", "1",
            "--call-graph", "dwarf", "-o", perf_out, "--", pp, WARMUP, MEASURE,
        ],
    }
    names = list(runs)
    tp = {n: [] for n in names}
    extra = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for n in order:
            res, took = run(runs[n])
            tp[n].append(float(re.search(r"round_trips_per_sec (\d+)", res.stdout).group(1)))
            finish = took - float(WARMUP) - float(MEASURE)
            if n.startswith("profile"):
                m = re.search(r"(\d+) lost, (\d+) throttled", res.stderr)
                iv = re.search(r"off-CPU: (\d+) intervals, (\d+) with a stack copy, (\d+) with", res.stderr)
                extra[n].append({
                    "lost": int(m.group(1)), "throttled": int(m.group(2)),
                    "intervals": int(iv.group(1)), "stacked": int(iv.group(2)), "borrowed": int(iv.group(3)),
                    "bytes": os.path.getsize(prof_out), "finish": finish,
                })
            elif n.startswith("perf"):
                lost = re.findall(r"(\d+) (?:chunks|samples|events) (?:lost|LOST)|lost (\d+)", res.stderr)
                extra[n].append({"stderr": res.stderr.strip().replace("\n", " ")[:160],
                                 "bytes": os.path.getsize(perf_out), "finish": finish})
    t0 = time.monotonic()
    run([PROFILE, "report", "-i", prof_out, "--per-thread", "--flamegraph", os.path.join(tmp, "pp.svg")])
    report_s = time.monotonic() - t0
    t0 = time.monotonic()
    subprocess.run(f"perf script -i {perf_out} > /dev/null 2>&1", shell=True)
    perf_script_s = time.monotonic() - t0
    return names, tp, extra, report_s, perf_script_s


def states(tmp):
    fx = os.path.join(tmp, "offcpu")
    build(os.path.join(ROOT, "tests/data/offcpu.c"), fx)
    p = subprocess.Popen([fx], stdout=subprocess.PIPE, text=True)
    p.stdout.readline()
    out = os.path.join(tmp, "states.prof")
    pid = str(p.pid)
    tids = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        tids[t] = open(f"/proc/{pid}/task/{t}/comm").read().strip()
    before = {t: int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[0]) for t in tids}
    t0 = time.monotonic()
    run([PROFILE, "record", "--off-cpu", "-q", "-p", pid, "-d", "3", "-o", out])
    window = time.monotonic() - t0
    after = {t: int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[0]) for t in tids}
    p.kill()
    p.wait()
    r, _ = run([PROFILE, "report", "-i", out, "--json"])
    v = json.loads(r.stdout)
    wall = v["summary"]["end_time_ns"] - v["summary"]["attached_ns"]
    want = {"sleeper": "sleep", "holder": "sleep", "waiter": "lock", "piper": "io",
            "socker": "io", "feeder": "sleep", "spin-a": "runnable", "spin-b": "runnable"}
    rows = []
    for t in v["threads"]:
        s = t["states"]
        total = sum(s.values())
        name = t["name"]
        if name in want:
            st = want[name]
            if st == "runnable":
                truth = 1 - (after[str(t["tid"])] - before[str(t["tid"])]) / 1e9 / window
                truth_note = f"{truth * 100:.1f}% (1 − schedstat CPU share)"
            else:
                truth, truth_note = 1.0, "≈100% by construction"
            rows.append((name, st, s[st] / total, truth_note, abs(s[st] / total - truth), total / wall - 1))
    return rows


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    tmp = tempfile.mkdtemp(prefix="offcpu-bench-")
    rows = states(tmp)
    names, tp, extra, report_s, perf_script_s = overhead(rounds, tmp)
    load = os.getloadavg()[0]
    print("## Off-CPU recording (issue 12)\n")
    print(f"Written by `sudo benches/offcpu/run.py {rounds}` (benches/offcpu/run.py), separately from the "
          f"harness above; 1-minute load average {load:.2f} at the end. Other work on this shared 2-core VM "
          "spreads these figures: repeat before relying on a difference of a few points.\n")
    print("### States by construction\n")
    print("tests/data/offcpu.c attached for 3 s with `profile record --off-cpu -p PID -d 3`: each thread's share "
          "of its time in the state it was built for, and its total (all states) against the recording's "
          "duration (from the attach to the end).\n")
    print("| thread | state | measured | truth | error (points) | total vs duration |")
    print("|---|---|---|---|---|---|")
    for name, st, got, truth, err, tot in rows:
        print(f"| {name} | {st} | {got * 100:.1f}% | {truth} | {err * 100:.1f} | {tot * 100:+.2f}% |")
    print()
    base = statistics.median(tp["unprofiled"])
    print("### Switch-heavy target\n")
    print(f"`pingpong {WARMUP} {MEASURE}` (benches/workloads/pingpong.c): two threads passing a byte through two "
          f"pipes with ~15 µs of work per trip. {rounds} rounds, each launching the workload unprofiled and under "
          "each recorder, order rotated; medians.\n")
    print("| run | round trips/s | change | rounds |")
    print("|---|---|---|---|")
    for n in names:
        med = statistics.median(tp[n])
        change = "" if n == "unprofiled" else f"{(med / base - 1) * 100:+.1f}%"
        print(f"| `{n}` | {med:.0f} | {change} | {', '.join(f'{x:.0f}' for x in tp[n])} |")
    print()
    e = extra["profile record --off-cpu"]
    switches = base * 2 * float(MEASURE)
    print("| recorder | lost | throttled | intervals (last round) | with a stack copy / the site's stack | "
          "bytes per interval | file | end of workload to exit | report --flamegraph / perf script |")
    print("|---|---|---|---|---|---|---|---|---|")
    last = e[-1]
    print(f"| profile --off-cpu | {', '.join(str(x['lost']) for x in e)} | {', '.join(str(x['throttled']) for x in e)} | "
          f"{last['intervals']} | {last['stacked']} / {last['borrowed']} | {last['bytes'] / max(last['intervals'], 1):.1f} "
          f"(whole file / intervals) | {last['bytes'] / 1e6:.2f} MB | {statistics.median(x['finish'] for x in e):.2f} s | {report_s:.2f} s |")
    p = extra["perf record -e context-switches -c 1 --call-graph dwarf"]
    print(f"| perf -c 1 --call-graph dwarf | see below | | | every switch-out | | {p[-1]['bytes'] / 1e6:.1f} MB | "
          f"{statistics.median(x['finish'] for x in p):.2f} s | {perf_script_s:.1f} s |")
    print()
    print(f"perf's own summary (last round): `{p[-1]['stderr']}`\n")


if __name__ == "__main__":
    main()
