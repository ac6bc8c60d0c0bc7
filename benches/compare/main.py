"""The benchmark's driver (started by benches/compare/run.sh, which builds and installs
everything first): waits for a quiet machine, runs every figure of issue 8 in one go
through figures.py, saves the raw numbers as JSON and writes docs/benchmarks.md through
report.py. `--quick` shrinks every duration for a smoke test and writes its report
under the work directory instead of docs/.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import figures as fig  # noqa: E402
import harness as h  # noqa: E402
import report  # noqa: E402


def log(msg):
    print(f"main.py: {msg}", file=sys.stderr, flush=True)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--root", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--bin", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--quick", action="store_true", help="short smoke run")
    ap.add_argument("--quiet-load", type=float, default=0.5,
                    help="wait until the 1-minute load is below this")
    ap.add_argument("--max-wait", type=float, default=3600, help="seconds to wait for quiet")
    ap.add_argument("--render", action="store_true",
                    help="only rewrite docs/benchmarks.md from the work dir's results.json")
    ap.add_argument("--only", default="", help="comma-separated subset: overhead,sweep,"
                    "pipeline,large,accuracy,scale")
    return ap.parse_args()


def plan(quick):
    """Durations and repetitions; the full plan keeps the whole run near 20 minutes."""
    if quick:
        return dict(rounds=1, ovh_rounds=1, sweep_rounds=1, warmup=0.3, measure=1.0, window=2.0,
                    split_secs=2, scale_window=2.0)
    return dict(rounds=5, ovh_rounds=11, sweep_rounds=3, warmup=0.5, measure=3.0, window=8.0,
                split_secs=8, scale_window=10.0)


def main():
    a = parse_args()
    if a.render:
        with open(os.path.join(a.work, "results.json")) as f:
            res = json.load(f)
        with open(os.path.join(a.root, "docs", "benchmarks.md"), "w") as f:
            f.write(report.markdown(res))
        return
    bins = dict(b.split("=", 1) for b in a.bin)
    p = plan(a.quick)
    only = set(filter(None, a.only.split(",")))
    want = (lambda name: not only or name in only)
    wb = os.path.join(a.work, "bin")
    spin, split, threads, deep = (os.path.join(wb, n) for n in ("spin", "split", "threads", "deep"))
    workloads = os.path.join(a.root, "benches", "workloads")

    profile = h.Profile(bins)
    perf_dwarf, perf_fp, samply = h.Perf(bins, "dwarf"), h.Perf(bins, "fp"), h.Samply(bins)

    load_seen = h.loadavg()
    if a.quick:
        load_start, waited = load_seen, 0.0
    else:
        load_start, waited = h.wait_quiet(a.quiet_load, a.max_wait, log)
    started = time.monotonic()
    res = {"plan": p, "quick": a.quick, "load_seen": load_seen, "load_start": load_start,
           "waited_s": waited, "machine": report.machine(bins, a.root)}
    tmp = tempfile.mkdtemp(prefix="run-", dir=a.work)
    try:
        c_argv = [spin, "2", str(p["warmup"]), str(p["measure"])]
        if want("overhead"):
            configs = {}
            for hz in (99, 999):
                configs[f"profile F{hz}"] = (profile, hz, 16384)
                configs[f"perf-dwarf F{hz}"] = (perf_dwarf, hz, 16384)
                configs[f"perf-fp F{hz}"] = (perf_fp, hz, 16384)
                configs[f"samply F{hz}"] = (samply, hz, 16384)
            log(f"overhead: {len(configs)} recorders attached in turn x {p['ovh_rounds']} rounds")
            res["attached_overhead"] = fig.attached_overhead(configs, spin, p["ovh_rounds"],
                                                             tmp, log)
            res["overhead"] = fig.sweep("(a) C workload", c_argv, profile, p["sweep_rounds"],
                                        tmp, log)
        if want("sweep"):
            secs = [str(1.0 if not a.quick else 0.5), str(p["measure"] * 2 / 3)]
            sweeps = {
                "(b) Rust (deep.rs)": [deep, *secs],
                "(c) python3.12 -X perf": [bins["python3.12"], "-X", "perf",
                                           os.path.join(workloads, "recurse.py"), *secs],
                "(d) node --perf-basic-prof": [bins["node"], "--perf-basic-prof",
                                               os.path.join(workloads, "recurse.js"), *secs],
            }
            res["sweeps"] = {name: fig.sweep(name, argv, profile, p["sweep_rounds"], tmp, log)
                             for name, argv in sweeps.items()}
        forever = [spin, "2", "0", "0"]
        if want("pipeline") or want("large"):
            log("recorder cost, post-processing, size: C workload, attached, -F 999")
            res["pipeline"] = {t.name: fig.attached_run(t, forever, 999, 16384, p["window"], tmp,
                                                        os.path.join(tmp, f"c-{t.name}.svg"), log)
                               for t in (profile, perf_dwarf, samply)}
        if want("large"):
            big = os.path.join(a.work, "big.prof")
            shutil.copy(res["pipeline"]["profile"]["recording"], big)
            loop = ["sh", "-c", f"while :; do {bins['profile-fulldebug']} report -i {big} "
                                f"--flamegraph /dev/null; done"]
            log("post-processing: large binary (profile with full debug info), -F 999")
            res["large"] = {t.name: fig.attached_run(t, loop, 999, 16384, p["window"], tmp,
                                                     os.path.join(tmp, f"big-{t.name}.svg"), log)
                            for t in (profile, perf_dwarf)}
        if want("accuracy"):
            log("accuracy: split workload")
            runs = [(profile, 99), (profile, 999), (perf_dwarf, 999), (samply, 999)]
            res["accuracy"] = [fig.accuracy(t, split, p["split_secs"], hz, tmp, log)
                               for t, hz in runs]
        if want("scale"):
            res["scale"] = {}
            for kind, arg in (("many", "1000"), ("churn", "1000")):
                log(f"scale: threads {kind} {arg}, -F 99")
                res["scale"][kind] = {
                    t.name: fig.attached_run(t, [threads, kind, arg], 99, 16384,
                                             p["scale_window"], tmp, os.devnull, log,
                                             ready_line="ready", svg=False)
                    for t in (profile, perf_dwarf)}
    finally:
        h.cleanup()
        res["load_end"] = h.loadavg()
        res["elapsed_s"] = time.monotonic() - started
        shutil.rmtree(tmp, ignore_errors=True)
        with open(os.path.join(a.work, "results.json"), "w") as f:
            json.dump(res, f, indent=1, default=str)
    out = (os.path.join(a.work, "benchmarks.md") if a.quick or only
           else os.path.join(a.root, "docs", "benchmarks.md"))
    with open(out, "w") as f:
        f.write(report.markdown(res))
    log(f"wrote {out} ({res['elapsed_s'] / 60:.1f} min)")


if __name__ == "__main__":
    main()
