#!/usr/bin/env python3
"""The power of `profile diff` on real recordings (issues 20, 32): prints markdown tables.

1. Builds tests/data/diff/bench.c (three functions f1, f2, f3 of equal fixed work)
   and records a POOL of runs with `target/release/profile record` at each rate
   (-F): BASE runs (`bench --rounds R`) and, for each slowdown PCT, runs with f2
   doing PCT% more work (`--slower f2:PCT`), or for a slowdown `allPCT` runs of PCT%
   more rounds (every function slower alike, every share unchanged). Recordings are taken one at a time, the
   conditions interleaved in a fresh random order every round, so drift of the
   machine (load, frequency) falls on every condition alike.
2. For each design K+K (K runs per side) it draws DRAWS random comparisons from the
   pool and runs `profile diff --base ... --new ... --fail-on-regression GATE --json`
   on each: BASE against BASE (2K distinct base runs: any regression is a false
   alarm) and BASE against each slowdown (power: f2 named as a regression, or for
   `allPCT` the whole run, `[whole run]`). It counts
   the false alarms, the detections, regressions of another function, and diffs that
   said INCONCLUSIVE (no regression, but some function could have risen by the gate
   unseen).
3. The same designs on synthetic runs drawn from the binomial (multinomial) model
   that `profile diff` assumes, at the same setting: the stacks and sample counts
   of the real pool, each run a fresh multinomial draw, written as folded files and
   compared by the same binary. The gap between the two tables is what real runs do
   that the model does not.

Draws reuse recordings: a pool of N base runs holds only N/(2K) disjoint BASE-vs-BASE
comparisons, and 1,000 draws are not 1,000 independent trials. Each rate is an
average over subsets (a U-statistic); its standard error is estimated from the
first-order Hoeffding term (how much the rate moves with each recording, from the
draws that hold it, less the Monte Carlo part) plus the Monte Carlo error of the
draws, and the 95% interval is Wilson's at the implied effective number of trials.
When a rate is 0% or 100% that estimate is 0: the interval then uses the number of
disjoint comparisons the pool holds, which is conservative.

usage: benches/diff/power.py [--pool DIR] [--profile BIN] [--base-runs N] ...
       (from the repository root, after `cargo build --release`; perf_event must be
       allowed: root, or kernel.perf_event_paranoid <= 1). With --pool DIR an
       existing pool is reused and only missing recordings are taken; --profile BIN
       judges the pool with another build's `profile diff` (before/after tables on
       the same recordings). The defaults take 60 recordings and about 1,000 diffs:
       a few minutes.
"""

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROFILE = os.path.join(ROOT, "target/release/profile")
# The functions whose work never changes: naming one is a wrong alarm.
UNCHANGED = {"f1", "f3"}
WHOLE = "[whole run]"
SOURCE = os.path.join(ROOT, "tests/data/diff/bench.c")
SLOWED = "f2"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pool", help="directory of the pool (default: a new temporary one)")
    p.add_argument("--profile", default=PROFILE,
                   help="the profile binary that records and compares (default "
                        "target/release/profile)")
    p.add_argument("--rates", default="999", help="-F values (default 999)")
    p.add_argument("--rounds", type=int, default=600,
                   help="bench --rounds: 600 is about 0.75 s of CPU here")
    p.add_argument("--slowdowns", default="10,30,all20",
                   help="PCT of extra work in f2, or allPCT: PCT%% more rounds "
                        "(default 10,30,all20)")
    p.add_argument("--background", type=int, default=0,
                   help="PCT more work in f1 and f3 in every run, so f2 is a smaller share "
                        "(100: a fifth, 200: a seventh, 500: 1/13; default 0: a third)")
    p.add_argument("--base-runs", type=int, default=24, help="BASE runs per rate")
    p.add_argument("--slow-runs", type=int, default=12, help="runs per slowdown and rate")
    p.add_argument("--designs", default="3", help="runs per side (default 3)")
    p.add_argument("--draws", type=int, default=250, help="comparisons per cell")
    p.add_argument("--model-draws", type=int, default=0,
                   help="comparisons per cell of the binomial model (default 0: skip it)")
    p.add_argument("--gates", default="5,10",
                   help="--fail-on-regression PCT values (default 5,10); the diffs run at "
                        "the smallest and are judged at each")
    p.add_argument("--seed", type=int, default=20)
    p.add_argument("--json", help="also write every rate and interval here")
    p.add_argument("--record-only", action="store_true", help="take the pool and stop")
    return p.parse_args()


def log(*a):
    print("power.py:", *a, file=sys.stderr, flush=True)


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


# --- The pool -------------------------------------------------------------------

def conditions(args):
    rates = [int(r) for r in args.rates.split(",")]
    slows = args.slowdowns.split(",")
    out = []
    for rate in rates:
        out.append((rate, "0", args.base_runs))
        out.extend((rate, s, args.slow_runs) for s in slows)
    return out


def path_of(pool, rate, slow, i, background=0):
    bg = f"bg{background}-" if background else ""
    return os.path.join(pool, f"{bg}F{rate}-slow{slow}-{i:03d}.prof")


def record_pool(args, pool, rng):
    bench = os.path.join(pool, "bench")
    if not os.path.exists(bench) or os.path.getmtime(bench) < os.path.getmtime(SOURCE):
        subprocess.run(["gcc", "-O2", "-g", "-o", bench, SOURCE], check=True)
    conds = conditions(args)
    todo = [(rate, slow, i) for rate, slow, n in conds for i in range(n)
            if not os.path.exists(path_of(pool, rate, slow, i, args.background))]
    if not todo:
        return
    log(f"recording {len(todo)} runs into {pool} (load {loadavg():.2f})")
    # Round-robin over conditions, each round in a fresh random order.
    by_round = {}
    for rate, slow, i in todo:
        by_round.setdefault(i, []).append((rate, slow, i))
    started = time.time()
    done = 0
    for i in sorted(by_round):
        batch = by_round[i]
        rng.shuffle(batch)
        for rate, slow, i in batch:
            cmd = [bench, "--rounds", str(args.rounds)]
            if args.background:
                cmd += ["--slower", f"f1:{args.background}", "--slower", f"f3:{args.background}"]
            if slow.startswith("all"):
                cmd[2] = str(args.rounds * (100 + int(slow[3:])) // 100)
            elif slow != "0":
                cmd += ["--slower", f"{SLOWED}:{slow}"]
            out = path_of(pool, rate, slow, i, args.background)
            subprocess.run([args.profile, "record", "-q", "-F", str(rate), "-o", out + ".tmp", "--"]
                           + cmd, check=True, stdout=subprocess.DEVNULL)
            os.rename(out + ".tmp", out)
            done += 1
        log(f"round {i}: {done}/{len(todo)} runs, {time.time() - started:.0f} s, "
            f"load {loadavg():.2f}")


def label(s):
    """A condition's name in the tables."""
    if s == "0":
        return "BASE"
    return f"all +{s[3:]}%" if s.startswith("all") else f"f2 +{s}%"


def folded(path, profile=PROFILE):
    """A recording's stacks as {stack: samples}, from `profile report --folded`."""
    text = subprocess.run([profile, "report", "-i", path, "--folded", "-"], check=True,
                          capture_output=True, text=True).stdout
    out = {}
    for line in text.splitlines():
        stack, n = line.rsplit(" ", 1)
        out[stack] = out.get(stack, 0) + int(n)
    return out


def self_share(stacks, fn):
    n = sum(stacks.values())
    return sum(c for s, c in stacks.items() if s.split(";")[-1] == fn) / n, n


# --- Comparisons ----------------------------------------------------------------

class Differ:
    """Runs `profile diff` and reads its verdict; remembers comparisons already made."""

    def __init__(self, gate, profile):
        self.gate = gate
        self.profile = profile
        self.cache = {}
        self.calls = 0

    def __call__(self, base, new):
        key = (tuple(sorted(base)), tuple(sorted(new)))
        if key not in self.cache:
            self.cache[key] = self.run(base, new)
        return self.cache[key]

    def run(self, base, new):
        cmd = [self.profile, "diff", "--fail-on-regression", str(self.gate), "--json"]
        for b in base:
            cmd += ["--base", b]
        for n in new:
            cmd += ["--new", n]
        r = subprocess.run(cmd, capture_output=True, text=True)
        self.calls += 1
        if r.returncode not in (0, 3):
            raise SystemExit(f"power.py: {' '.join(cmd)} exited {r.returncode}: {r.stderr}")
        d = json.loads(r.stdout)
        rows = [(row["function"], row["verdict"], row["change_pct"], row["detectable_pct"])
                for row in d["rows"]]
        # The exit status and the JSON must agree: 3 exactly when a row regressed.
        regressed = any(v == "regression" for _, v, _, _ in rows)
        assert (r.returncode == 3) == regressed == d["regression"], (cmd, r.returncode)
        assert d["inconclusive"] == any(v == "inconclusive" for _, v, _, _ in rows)
        return rows


def outcome(rows, gate, run_gate, slow="0"):
    """What the diff decided at `gate` (>= the gate it ran at, `run_gate`): the
    Holm rejections do not depend on the gate, so a regression at `gate` is one at
    `run_gate` whose change reaches `gate`, and an inconclusive row one whose
    detectable rise is still above it."""
    assert gate >= run_gate
    named = {f for f, v, change, _ in rows
             if v == "regression" and (change is None or change >= gate)}
    inconclusive = any(v == "inconclusive" and (d is None or d > gate)
                       for _, v, _, d in rows)
    uniform = slow.startswith("all")
    return {
        "alarm": bool(named),
        "found": (WHOLE if uniform else SLOWED) in named,
        "other": bool(named & UNCHANGED) and not uniform,
        "inconclusive": inconclusive and not named,
    }


def estimate(trials, key, pools):
    """The rate of `key` over trials, with a standard error for reused recordings.

    `trials` is a list of (outcome, {pool: [recording ids]}); `pools` maps a pool to
    its size. First-order U-statistic variance: for each pool, c²/n · ζ1, where c is
    the recordings a trial draws from it and ζ1 the variance over recordings of the
    rate among the trials holding each (its Monte Carlo noise subtracted); plus the
    Monte Carlo variance of the draws themselves.
    """
    d = len(trials)
    p = sum(t[0][key] for t in trials) / d
    var = p * (1 - p) / d
    disjoint = []
    for pool, n in pools.items():
        sums, counts = {}, {}
        c = len(trials[0][1][pool])
        for o, used in trials:
            for i in used[pool]:
                sums[i] = sums.get(i, 0) + o[key]
                counts[i] = counts.get(i, 0) + 1
        g = [sums[i] / counts[i] for i in counts]
        if len(g) > 1:
            mc = statistics.fmean(p * (1 - p) / counts[i] for i in counts)
            zeta1 = max(0.0, statistics.pvariance(g) - mc)
            var += c * c / n * zeta1
        disjoint.append(n // c)
    # Trials from a shared pool of 2K each (BASE vs BASE) or K from each of two.
    n_disjoint = max(1, min(disjoint))
    if 0 < p < 1 and var > 0:
        n_eff = min(d, max(n_disjoint, p * (1 - p) / var))
    else:
        n_eff = n_disjoint
    lo, hi = wilson(p, n_eff)
    return {"rate": p, "se": math.sqrt(var), "lo": lo, "hi": hi, "n_eff": n_eff}


def wilson(p, n, z=1.96):
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def cell(differ, rng, draws, k, base, new, gates, slow="0"):
    """`draws` comparisons of K runs from `base` against K from `new` (disjoint when
    they are the same pool), judged at each gate."""
    trials = []
    same = new is base
    for _ in range(draws):
        if same:
            pick = rng.sample(range(len(base)), 2 * k)
            used = {"base": pick}
            b, n = [base[i] for i in pick[:k]], [base[i] for i in pick[k:]]
        else:
            bi, ni = rng.sample(range(len(base)), k), rng.sample(range(len(new)), k)
            used = {"base": bi, "new": ni}
            b, n = [base[i] for i in bi], [new[i] for i in ni]
        trials.append((differ(b, n), used))
    pools = {"base": len(base)} if same else {"base": len(base), "new": len(new)}
    keys = ["alarm", "inconclusive"] if same else ["found", "other", "inconclusive"]
    out = {}
    for g in gates:
        judged = [(outcome(rows, g, differ.gate, slow), used) for rows, used in trials]
        out[g] = {key: estimate(judged, key, pools) for key in keys}
    return out


# --- The binomial model -----------------------------------------------------------

def model_cell(differ, rng, draws, k, base_mix, new_mix, sizes, tmp, gates):
    """Like `cell`, each run a fresh multinomial draw from a mix of stacks, with a
    sample count drawn from the real runs'."""
    def run(mix, j):
        stacks, weights = mix
        n = rng.choice(sizes)
        counts = {}
        for s in rng.choices(stacks, weights, k=n):
            counts[s] = counts.get(s, 0) + 1
        path = os.path.join(tmp, f"m{j}.folded")
        with open(path, "w") as f:
            f.writelines(f"{s} {c}\n" for s, c in counts.items())
        return path

    results = []
    for _ in range(draws):
        b = [run(base_mix, j) for j in range(k)]
        n = [run(new_mix, k + j) for j in range(k)]
        results.append(differ.run(b, n))
    out = {}
    for g in gates:
        judged = [outcome(rows, g, differ.gate) for rows in results]
        out[g] = {}
        for key in ["alarm", "found", "other", "inconclusive"]:
            p = sum(o[key] for o in judged) / draws
            lo, hi = wilson(p, draws)
            out[g][key] = {"rate": p, "se": math.sqrt(p * (1 - p) / draws), "lo": lo,
                           "hi": hi, "n_eff": draws}
    return out


def mix_of(stacks_list, slow_pct):
    """The pooled stacks of runs, with every stack through f2 weighted 1 + PCT/100."""
    pooled = {}
    for stacks in stacks_list:
        for s, c in stacks.items():
            pooled[s] = pooled.get(s, 0) + c
    keys = sorted(pooled)
    w = [pooled[s] * (1 + slow_pct / 100 if SLOWED in s.split(";") else 1) for s in keys]
    return keys, w


# --- Report ---------------------------------------------------------------------

def pct(e):
    return f"{100 * e['rate']:.1f}% ({100 * e['lo']:.0f}–{100 * e['hi']:.0f})"


def main():
    args = parse_args()
    rng = random.Random(args.seed)
    if not os.access(args.profile, os.X_OK):
        raise SystemExit("power.py: build first: cargo build --release")
    pool = args.pool or tempfile.mkdtemp(prefix="profile-power-")
    os.makedirs(pool, exist_ok=True)
    load_start = loadavg()
    record_pool(args, pool, rng)
    load_recorded = loadavg()
    if args.record_only:
        return
    rates = [int(r) for r in args.rates.split(",")]
    slows = args.slowdowns.split(",")
    designs = [int(k) for k in args.designs.split(",")]
    gates = sorted(float(g) for g in args.gates.split(","))
    differ = Differ(gates[0], args.profile)
    results = {"args": vars(args), "pool": pool, "rates": {}}
    describe = []
    for rate in rates:
        runs = {s: [path_of(pool, rate, s, i, args.background)
                    for i in range(args.base_runs if s == "0" else args.slow_runs)]
                for s in ["0"] + slows}
        stacks = {s: [folded(p, args.profile) for p in paths] for s, paths in runs.items()}
        # How much f2's share varies between runs, against binomial sampling.
        for s in ["0"] + slows:
            shares = [self_share(st, SLOWED) for st in stacks[s]]
            p = statistics.fmean(x for x, _ in shares)
            n = statistics.fmean(m for _, m in shares)
            sd = statistics.stdev(x for x, _ in shares)
            binom = math.sqrt(p * (1 - p) / n)
            describe.append(f"| {rate} | {label(s)} | "
                            f"{len(shares)} | {n:.0f} | {100 * p:.2f}% | "
                            f"{100 * sd:.2f} | {100 * binom:.2f} | {sd / binom:.2f} |")
        res = {"real": {}, "model": {}}
        sizes = [sum(st.values()) for st in stacks["0"]]
        base_mix = mix_of(stacks["0"], 0)
        with tempfile.TemporaryDirectory() as tmp:
            for k in designs:
                log(f"-F {rate}, {k}+{k}: real ({differ.calls} diffs so far)")
                base = runs["0"]
                row = {"false": cell(differ, rng, args.draws, k, base, base, gates)}
                for s in slows:
                    row[s] = cell(differ, rng, args.draws, k, base, runs[s], gates, s)
                res["real"][k] = row
                if args.model_draws:
                    log(f"-F {rate}, {k}+{k}: binomial model")
                    mrow = {"false": model_cell(differ, rng, args.model_draws, k, base_mix,
                                                base_mix, sizes, tmp, gates)}
                    for s in slows:
                        if s.startswith("all"):
                            continue  # the model draws shares: a uniform slowdown is none
                        mrow[s] = model_cell(differ, rng, args.model_draws, k, base_mix,
                                             mix_of(stacks["0"], int(s)), sizes, tmp, gates)
                    res["model"][k] = mrow
        results["rates"][rate] = res

    # The tables.
    print(f"Pool: {pool}; bench --rounds {args.rounds} (f1, f3 +{args.background}%); {args.base_runs} BASE runs and "
          f"{args.slow_runs} per slowdown at each rate; {args.draws} draws per cell "
          f"(real), {args.model_draws} (model); 1-minute load {load_start:.2f} at the "
          f"start, {load_recorded:.2f} after recording, {loadavg():.2f} at the end; "
          f"{differ.calls} diffs.\n")
    print("| -F | runs | count | samples per run | f2 self share | SD between runs "
          "(points) | binomial SD (points) | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(describe))
    head = " | ".join(label(s) for s in slows)
    for g in gates:
        for kind in ["real", "model"]:
            if kind == "model" and not args.model_draws:
                continue
            what = "Real recordings" if kind == "real" else "Binomial model, same setting"
            print(f"\n{what}, --fail-on-regression {g:g}: rate (95% interval)\n")
            print(f"| -F | runs per side | false alarms | inconclusive (same build) | {head} "
                  "| other function named | inconclusive (slowed) |")
            print("|---|---|---|---|" + "---|" * len(slows) + "---|---|")
            for rate in rates:
                for k in designs:
                    row = {c: v[g] for c, v in results["rates"][rate][kind][k].items()}
                    cells = [pct(row["false"]["alarm"]), pct(row["false"]["inconclusive"])]
                    cells += [pct(row[s]["found"]) if s in row else "-" for s in slows]
                    other = max(row[s]["other"]["rate"] for s in slows if s in row)
                    inc = [f"{100 * row[s]['inconclusive']['rate']:.0f}%" if s in row else "-"
                           for s in slows]
                    cells += [f"{100 * other:.1f}%", " / ".join(inc)]
                    print(f"| {rate} | {k} + {k} | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)


if __name__ == "__main__":
    main()
