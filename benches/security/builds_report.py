#!/usr/bin/env python3
"""One markdown row of benches/security/builds.sh for one agent and round.

    builds_report.py DIR BIN ROUND BUILDS TICKS CLK_TCK SECS HWM_KIB INTERVAL

DIR holds the agent's stderr (agent.txt), the ingest server's log (ingest.log) and
the pushed profiles (kept/N.pb.gz). A sample of a built program (its `process`
label `bbprog`) is judged by its innermost frame: `[name pending: ...]`, a name
(a function of the program, or of a library under it), or none (`module+0x...`);
inlined frames are locations with more than one line.
"""
import gzip
import os
import re
import sys

d, binary, rnd, builds, ticks, tck, secs, hwm, interval = sys.argv[1:10]


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        yield f, v


def ints(v):
    """A repeated integer field: packed bytes or one varint."""
    if isinstance(v, int):
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(x)
    return out


def profile(path):
    """(count, innermost function name, whether that location is inlined) per sample
    of the built program."""
    b = gzip.decompress(open(path, "rb").read())
    strings, samples, locs, funcs = [], [], {}, {}
    for f, v in fields(b):
        if f == 2:
            lids, vals, labels = [], [], []
            for k, x in fields(v):
                if k == 1:
                    lids += ints(x)
                elif k == 2:
                    vals += ints(x)
                elif k == 3:
                    labels.append(dict(fields(x)))
            samples.append((lids, vals, labels))
        elif f == 4:
            lid, fids = None, []
            for k, x in fields(v):
                if k == 1:
                    lid = x
                elif k == 4:
                    fids.append(dict(fields(x)).get(1))
            locs[lid] = fids
        elif f == 5:
            m = dict(fields(v))
            funcs[m.get(1)] = m.get(2, 0)
        elif f == 6:
            strings.append(v.decode(errors="replace"))
    out = []
    for lids, vals, labels in samples:
        proc = [strings[l.get(2, 0)] for l in labels if strings[l.get(1, 0)] == "process"]
        if proc != ["bbprog"] or not lids:
            continue
        fids = locs.get(lids[0], [])
        # Lines innermost first: the first names the innermost frame.
        name = strings[funcs.get(fids[0], 0)] if fids else ""
        out.append((vals[0] if vals else 1, name, len(fids) > 1))
    return out


total = pending = unnamed = inlined = 0
unnamed_names = {}
kept = os.path.join(d, "kept")
for f in os.listdir(kept):
    for count, name, inl in profile(os.path.join(kept, f)):
        total += count
        if name.startswith("[name pending"):
            pending += count
        elif not name or re.search(r"\+0x[0-9a-f]+$", name):
            unnamed += count
            unnamed_names[name] = unnamed_names.get(name, 0) + count
        elif inl:
            inlined += count

late = 0
interval = float(interval)
for line in open(os.path.join(d, "ingest.log")):
    p = line.split()
    if len(p) >= 3 and p[2] != "None" and float(p[0]) - int(p[2]) / 1e9 > interval:
        late += 1
summary = open(os.path.join(d, "agent.txt")).read()
m = re.search(r"push: (\d+) of (\d+) windows", summary)
lost = int(m.group(2)) - int(m.group(1)) if m else "?"

if unnamed_names:
    top = sorted(unnamed_names.items(), key=lambda kv: -kv[1])[:3]
    print("%s: unnamed innermost frames, most sampled: %s" % (binary, top), file=sys.stderr)
cpu_s = int(ticks) / int(tck)
pct = lambda n: "%.1f%%" % (100.0 * n / total) if total else "-"
print("| %s | %s | %s | %.2f%% | %.2f | %d MiB | %d / %s | %d | %s | %s | %s |" % (
    binary, rnd, builds,
    100.0 * cpu_s / float(secs), cpu_s, int(hwm) // 1024, late, lost, total,
    pct(pending), pct(unnamed), pct(inlined)))
