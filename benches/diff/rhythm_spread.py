#!/usr/bin/env python3
"""How evenly a recorder samples tests/data/diff/bench.c's three equal functions.

    python3 benches/diff/rhythm_spread.py BIN MODE RUNS HZ

MODE is `sh` (the benchmark started by `sh -c`, a child of the launched shell) or
`direct` (launched itself). Each run records the benchmark (1000 rounds of 1.25 ms)
with `BIN record -F HZ` and counts the samples of f1, f2 and f3. Prints each run's
counts, then the dispersion (the spread of the counts over what multinomial sampling
gives: 1 for random draws, below 1 for more even) and how many runs deviate by more
than 2.5 and 3 standard errors: a recorder sampling in lock-step with the
benchmark's rhythm shows as runs far out (docs/accounting.md, "Threads created
during the recording").
"""
import json
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    binp, mode, runs, hz = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    tmp = tempfile.mkdtemp(prefix="rhythm-")
    bench = os.path.join(tmp, "bench")
    subprocess.run(["gcc", "-O2", "-g", "-o", bench,
                    os.path.join(ROOT, "tests/data/diff/bench.c")], check=True)
    out = os.path.join(tmp, "r.prof")
    rows = []
    for i in range(runs):
        cmd = [binp, "record", "-q", "-F", hz, "-o", out, "--"]
        if mode == "sh":
            cmd += ["sh", "-c", f"{bench} --rounds 1000 >/dev/null; :"]
        else:
            cmd += [bench, "--rounds", "1000"]
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
        rep = subprocess.run([binp, "report", "-i", out, "--json", "--top", "50"],
                             capture_output=True, text=True, check=True)
        fns = {f["name"]: f for f in json.loads(rep.stdout).get("functions", [])}
        counts = [fns.get(k, {}).get("self_samples", 0) for k in ("f1", "f2", "f3")]
        rows.append(counts)
        print(i, counts, flush=True)
    total = [sum(r[k] for r in rows) for k in range(3)]
    p = [t / sum(total) for t in total]
    chi, zs = 0.0, []
    for r in rows:
        m = sum(r)
        chi += sum((r[k] - m * p[k]) ** 2 / (m * p[k]) for k in range(3))
        zs.append(max(abs(r[k] - m * p[k]) / math.sqrt(m * p[k] * (1 - p[k]))
                      for k in range(3)))
    print(f"{binp} {mode} {hz} Hz, {runs} runs: shares "
          f"{[round(x * 100, 1) for x in p]}, dispersion {chi / (2 * runs):.2f}, "
          f"|z| > 2.5 in {sum(z > 2.5 for z in zs)}, > 3 in {sum(z > 3 for z in zs)}, "
          f"largest {max(zs):.2f}")


if __name__ == "__main__":
    main()
