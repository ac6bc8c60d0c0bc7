#!/usr/bin/env python3
"""Recorder CPU per 1,000 samples (issue 49): a C target (tests/data/chains.c, its
worker thread) against a Ruby program (benches/ruby/vs_rbspy.sh's split program:
`Object#alpha` runs a loop in a block given to `Array#each`, `Object#beta` one pass;
its Ruby frames named without flags, each sample read at its drain), each one busy
thread, attached by pid at -F FREQ for SECS; paired rounds, the order reversed every
other round. The recorder's CPU is its whole rusage (start, symbolisation and
writing included) over every sample. Model: benches/node/cost.py.

Usage: benches/ruby/cost.py PROFILE_BINARY [ROUNDS] [SECS] [FREQ]   (root, or
perf_event_paranoid <= 1 and ptrace allowed)
"""
import os
import resource
import subprocess
import sys
import tempfile
import time

BIN = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
SECS = sys.argv[3] if len(sys.argv) > 3 else "5"
FREQ = sys.argv[4] if len(sys.argv) > 4 else "499"
OUT = tempfile.mkdtemp(prefix="ruby-cost-")
HERE = os.path.dirname(os.path.abspath(__file__))
CHAINS = f"{OUT}/chains"
subprocess.run(["cc", "-O2", "-g", "-pthread", f"{HERE}/../../tests/data/chains.c",
                "-o", CHAINS], check=True)
RB = f"{OUT}/split.rb"
with open(RB, "w") as f:
    f.write("""def alpha(n)
  [0, 1, 2].each do |_|
    i = 0
    x = 0
    while i < n
      x += i * i % 7
      i += 1
    end
  end
end

def beta(n)
  i = 0
  x = 0
  while i < n
    x += i * i % 7
    i += 1
  end
  x
end

$stdout.puts 'ready'
$stdout.flush
loop do
  alpha(20_000)
  beta(20_000)
end
""")


def target(kind):
    if kind == "C":
        p = subprocess.Popen([CHAINS, "worker"], stdout=subprocess.PIPE, text=True)
    else:
        p = subprocess.Popen(["ruby", RB], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


tot = {}
for r in range(ROUNDS):
    kinds = ["C", "Ruby"] if r % 2 == 0 else ["Ruby", "C"]
    for k in kinds:
        p = target(k)
        time.sleep(0.3)
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([BIN, "record", "-F", FREQ, "-p", str(p.pid), "-d", SECS, "-o",
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
        print(f"round {r + 1} {k}: {n_s} samples ({named} with a Ruby frame), {cpu:.3f} s, "
              f"{cpu * 1e6 / max(n_s, 1):.0f} ms per 1k", flush=True)
load = " ".join(open("/proc/loadavg").read().split()[:3])
for k, (c, s) in tot.items():
    print(f"{k}: {s} samples, {c:.2f} s, {c * 1e6 / max(s, 1):.0f} ms per 1k (load {load})")
(cc, cs), (rc, rs) = tot["C"], tot["Ruby"]
print(f"Ruby / C per 1k samples = {(rc / max(rs, 1)) / (cc / max(cs, 1)):.2f}")
