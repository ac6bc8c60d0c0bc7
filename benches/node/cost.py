#!/usr/bin/env python3
"""Recorder CPU per 1,000 samples (issue 47): a C target (tests/data/chains.c, its
worker thread) against a Node program (benches/node/vs_cpuprof.py's: megamorphic
loads, an optimized loop, a caller of a large loop; its JavaScript frames named
without flags), each one busy thread, attached by pid at -F 99 for SECS; paired
rounds, the order reversed every other round. The recorder's CPU is its whole
rusage (start, symbolisation and writing included) over every sample.

Usage: benches/node/cost.py PROFILE_BINARY [ROUNDS] [SECS]   (root, or
perf_event_paranoid <= 1 and ptrace allowed)
"""
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vs_cpuprof import program  # noqa: E402

BIN = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
SECS = sys.argv[3] if len(sys.argv) > 3 else "5"
OUT = tempfile.mkdtemp(prefix="node-cost-")
HERE = os.path.dirname(os.path.abspath(__file__))
CHAINS = f"{OUT}/chains"
subprocess.run(["cc", "-O2", "-g", "-pthread", f"{HERE}/../../tests/data/chains.c",
                "-o", CHAINS], check=True)
JS = f"{OUT}/four.js"
program(JS)


def target(kind):
    if kind == "C":
        p = subprocess.Popen([CHAINS, "worker"], stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"
        return p
    p = subprocess.Popen(["node", JS, "3600000", f"{OUT}/clock.json"])
    time.sleep(1.5)  # past startup and the first compilations
    return p


tot = {}
for r in range(ROUNDS):
    kinds = ["C", "Node"] if r % 2 == 0 else ["Node", "C"]
    for k in kinds:
        p = target(k)
        time.sleep(0.3)
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([BIN, "record", "-F", "99", "-p", str(p.pid), "-d", SECS, "-o",
                        f"{OUT}/x.prof"], capture_output=True)
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        p.kill()
        p.wait()
        cpu = (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)
        folded = subprocess.run([BIN, "report", "-i", f"{OUT}/x.prof", "--folded", "-"],
                                capture_output=True, text=True).stdout
        n_s = sum(int(l.rsplit(" ", 1)[1]) for l in folded.splitlines()
                  if "[unsampled]" not in l)
        named = sum(int(l.rsplit(" ", 1)[1]) for l in folded.splitlines()
                    if "_[j]" in l)
        t = tot.setdefault(k, [0.0, 0])
        t[0] += cpu
        t[1] += n_s
        print(f"round {r + 1} {k}: {n_s} samples ({named} with a JS frame), {cpu:.3f} s, "
              f"{cpu * 1e6 / max(n_s, 1):.0f} ms per 1k", flush=True)
load = " ".join(open("/proc/loadavg").read().split()[:3])
for k, (c, s) in tot.items():
    print(f"{k}: {s} samples, {c:.2f} s, {c * 1e6 / max(s, 1):.0f} ms per 1k (load {load})")
(cc, cs), (nc, ns) = tot["C"], tot["Node"]
print(f"Node / C per 1k samples = {(nc / max(ns, 1)) / (cc / max(cs, 1)):.2f}")
shutil.rmtree(OUT)
