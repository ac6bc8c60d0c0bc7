#!/usr/bin/env python3
"""Per-thread CPU totals of an off-CPU recording (from SWITCH records) and of a
CPU-only one (from PERF_SAMPLE_READ counts) against each thread's own clock
(tests/data/accounting.c). usage: sudo benches/offcpu/accounting.py (after cargo build --release)
"""
import json, os, subprocess, sys, re
os.makedirs("/tmp/ov", exist_ok=True)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
P = os.path.join(ROOT, "target/release/profile")
subprocess.run(["gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-pthread", os.path.join(ROOT, "tests/data/accounting.c"), "-o", "/tmp/ov/acct"], check=True)
for mode in (["--off-cpu"], []):
    r = subprocess.run([P, "record", *mode, "-o", "/tmp/ov/a.prof", "--", "/tmp/ov/acct", "busy:3:800", "short:40:2", "bursty:200:300:1000", "main:30"], capture_output=True, text=True)
    truth = {}
    for l in r.stdout.splitlines():
        m = re.match(r"cpu (\d+) (\d+) (\S+)", l)
        if m: truth[int(m.group(1))] = (int(m.group(2)), m.group(3))
    v = json.loads(subprocess.run([P, "report", "-i", "/tmp/ov/a.prof", "--json"], capture_output=True, text=True).stdout)
    got = {t["tid"]: t["cpu_ns"] for t in v["threads"]}
    rows = {}
    for tid, (ns, name) in truth.items():
        key = re.sub(r"\d+$", "", name) if name.startswith("short") else name
        g = got.get(tid, 0)
        a = rows.setdefault(key, [0, 0, 0, 0.0])
        a[0] += ns; a[1] += g; a[2] += 1; a[3] = max(a[3], abs(g - ns) / 1e6)
    print("mode", mode or "cpu-only", "lost:", re.findall(r"\d+ lost", r.stderr))
    for k, (ns, g, n, worst) in rows.items():
        print(f"  {k:8} x{n:3} own {ns/1e6:9.2f} ms  profile {g/1e6:9.2f} ms  {((g/ns-1)*100 if ns else 0):+6.2f}%  worst thread {worst:.2f} ms")
