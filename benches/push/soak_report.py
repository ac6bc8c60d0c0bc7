#!/usr/bin/env python3
"""Figures of a soak run (benches/push/soak.sh OUT): the recorder's RSS over the hour,
its CPU time per 10 s window early and late, the windows the server received (count,
bytes, back to back or not).

    python3 benches/push/soak_report.py OUT
"""
import sys

out = sys.argv[1]
usage = [l.split() for l in open(out + "/usage.log") if len(l.split()) == 5]
t0 = float(usage[0][0])
rows = [(float(t) - t0, int(rss), int(cpu), int(tcpu), int(tick)) for t, rss, cpu, tcpu, tick in usage]
tick = rows[0][4]


def at(minute):
    best = min(rows, key=lambda r: abs(r[0] - minute * 60))
    return best


print("RSS (MiB) at minute:", ", ".join(
    "%d: %.1f" % (m, at(m)[1] / 1024) for m in (1, 5, 10, 20, 30, 40, 50, 60) if rows[-1][0] >= m * 60 - 30))


def cpu_per_window(a, b):
    """Recorder CPU ms per 10 s between minutes a and b, and the target's CPU s."""
    r0, r1 = at(a), at(b)
    secs = r1[0] - r0[0]
    return (r1[2] - r0[2]) * 1000 / tick / secs * 10, (r1[3] - r0[3]) / tick / secs * 10


for a, b in ((1, 11), (25, 35), (50, 60)):
    if rows[-1][0] >= b * 60 - 30:
        rec, tgt = cpu_per_window(a, b)
        print("minutes %d-%d: recorder %.0f ms CPU per 10 s window (%.2f%% of the target's %.2f s)" % (
            a, b, rec, rec / 10 / tgt if tgt else 0, tgt))

ing = [l.split() for l in open(out + "/ingest.log")]
ok = [l for l in ing if l[-1] == "ok"]
sizes = [int(l[3]) for l in ok]
froms = [int(l[1]) for l in ok]
untils = [int(l[2]) for l in ok]
gaps = sum(1 for a, b in zip(untils, froms[1:]) if a != b)
lens = [(u - f) / 1e9 for f, u in zip(froms, untils)]
# An empty profile (no sample in the window) is about 150 bytes.
empty = sum(1 for x in sizes if x < 200)
print("windows: %d received, %d refused; %d not back to back; length %.2f-%.2f s; %d without samples" % (
    len(ok), len(ing) - len(ok), gaps, min(lens), max(lens), empty))
n = len(sizes)
print("bytes per window: mean %.1f KiB (first 10 min %.1f, last 10 min %.1f), max %.1f KiB; %.1f MiB per hour" % (
    sum(sizes) / n / 1024, sum(sizes[:60]) / min(60, n) / 1024, sum(sizes[-60:]) / min(60, n) / 1024,
    max(sizes) / 1024, sum(sizes) / 1024 / 1024 * 3600 / max(1.0, (untils[-1] - froms[0]) / 1e9)))
