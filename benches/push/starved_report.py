#!/usr/bin/env python3
"""Figures of benches/push/starved.sh OUT: for each pushed window and target thread,
the CPU the window's profile gives the thread (samples and [unsampled]) against what
the thread's own clock advanced by over the window, as far as the readings (10 ms
apart) bracket it: the error is how far the profile is outside the bracket. Also
windows without a sample, and the share of CPU that is [unsampled].

    python3 benches/push/starved_report.py OUT
"""
import gzip
import os
import sys
from bisect import bisect_left

out = sys.argv[1]


def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
            yield f, v
        elif wt == 2:
            n, i = varint(b, i)
            yield f, b[i:i + n]
            i += n
        elif wt == 1:
            yield f, b[i:i + 8]
            i += 8
        elif wt == 5:
            yield f, b[i:i + 4]
            i += 4
        else:
            raise ValueError("wire type %d" % wt)


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def packed(b):
    i, out = 0, []
    while i < len(b):
        v, i = varint(b, i)
        out.append(v)
    return out


def window(path):
    """{tid: (cpu ns, unsampled ns)} and whether any sample has a stack."""
    b = gzip.decompress(open(path, "rb").read())
    strings, types, samples, locs, funcs = [], [], [], {}, {}
    for f, v in fields(b):
        if f == 1:
            d = dict(fields(v))
            types.append(d.get(1, 0))
        elif f == 2:
            vals, labels, lids = [], [], []
            for k, x in fields(v):
                if k == 2:
                    vals += packed(x) if isinstance(x, bytes) else [x]
                elif k == 1:
                    lids += packed(x) if isinstance(x, bytes) else [x]
                elif k == 3:
                    labels.append(dict(fields(x)))
            samples.append((vals, labels, lids))
        elif f == 4:
            d = list(fields(v))
            lid = dict((k, x) for k, x in d if k == 1).get(1)
            fids = [dict(fields(x)).get(1) for k, x in d if k == 4]
            locs[lid] = fids
        elif f == 5:
            d = dict(fields(v))
            funcs[d.get(1)] = d.get(2)
        elif f == 6:
            strings.append(v.decode())
    cpu = [strings[t] for t in types].index("cpu")
    per, stacked = {}, False
    for vals, labels, lids in samples:
        tid = next(l.get(3) for l in labels if strings[l.get(1)] == "tid")
        names = [strings[funcs[f]] for l in lids for f in locs.get(l, [])]
        un = names == ["[unsampled]"]
        stacked |= not un
        c, u = per.get(tid, (0, 0))
        per[tid] = (c + vals[cpu], u + (vals[cpu] if un else 0))
    return per, stacked


clocks = {}
for line in open(out + "/clocks.log"):
    p = line.split()
    if len(p) == 4:
        clocks.setdefault(int(p[2]), []).append((int(p[0]), int(p[1]), int(p[3])))


def bracket(tid, frm, until):
    """What the thread's clock advanced by from frm to until: (at least, at most)."""
    r = clocks[tid]
    lo = lambda u: max((c for t0, t1, c in r if t1 <= u), default=None)
    hi = lambda u: min((c for t0, t1, c in r if t0 >= u), default=None)
    a, b, c, d = lo(frm), hi(frm), lo(until), hi(until)
    if None in (a, b, c, d):
        return None
    return max(0, c - b), d - a


for side in ("before", "after"):
    log = out + "/%s.log" % side
    if not os.path.exists(log) or os.path.getsize(log) == 0:
        continue
    rows = [l.split() for l in open(log)]
    errs, widths, empty, busy_empty, total, unsampled, n = [], [], 0, 0, 0, 0, 0
    for i, r in enumerate(rows):
        frm, until = int(r[1]), int(r[2])
        per, stacked = window(os.path.join(out, side, "%d.pb.gz" % i))
        n += 1
        truth_all = 0
        for tid in clocks:
            br = bracket(tid, frm, until)
            if br is None:
                continue
            lo, hi = br
            truth_all += lo
            got = per.get(tid, (0, 0))
            errs.append((got[0] - hi if got[0] > hi else (got[0] - lo if got[0] < lo else 0)) / 1e6)
            widths.append((hi - lo) / 1e6)
            total += got[0]
            unsampled += got[1]
        if not stacked:
            empty += 1
            if truth_all > 1e6:
                busy_empty += 1
    errs.sort()
    abs_errs = sorted(abs(e) for e in errs)
    print("%s: %d windows, %d without a sample (%d of them while the target used CPU); "
          "%.0f%% of the CPU is [unsampled]" % (side, n, empty, busy_empty,
                                                100.0 * unsampled / max(total, 1)))
    widths.sort()
    print("  per window and thread, profile outside its clock's bracket (median width %.1f ms): "
          "%d of %d thread-windows; median %.1f ms, 90th %.1f ms, max %.1f ms; "
          "the target's CPU %.2f s per window" % (
              widths[len(widths) // 2], sum(1 for e in errs if e), len(errs),
              abs_errs[len(abs_errs) // 2], abs_errs[int(len(abs_errs) * 0.9)], abs_errs[-1],
              total / 1e9 / max(n, 1)))
