"""Turns one run's results (main.py) into docs/benchmarks.md: the machine and tool
versions, the exact commands, every figure of issue 8 as a ratio or difference, each
goal with whether it is met, and the stack-size sweep with the default it points to.
Also collects the machine description at the start of a run.
"""

import datetime
import os
import platform
import subprocess


def _sh(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def machine(bins, root):
    cpu = next((line.split(":", 1)[1].strip() for line in _sh(["lscpu"]).splitlines()
                if line.startswith("Model name")), "?")
    hyp = next((line.split(":", 1)[1].strip() for line in _sh(["lscpu"]).splitlines()
                if line.startswith("Hypervisor vendor")), "none")
    mem = next((line.split()[1] for line in open("/proc/meminfo") if line.startswith("MemTotal")))
    return {
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "cpu": cpu, "cores": os.cpu_count(), "hypervisor": hyp,
        "mem_gib": round(int(mem) / 2**20, 1), "kernel": platform.release(),
        "profile": _sh(["git", "-C", root, "rev-parse", "--short", "HEAD"]),
        "perf": _sh([bins["perf"], "--version"]),
        "inferno": _sh([bins["inferno-flamegraph"], "--version"]),
        "samply": _sh([bins["samply"], "--version"]),
        "python": _sh([bins["python3.12"], "--version"]),
        "node": _sh([bins["node"], "--version"]),
        "gcc": _sh(["gcc", "-dumpfullversion"]),
    }


def _pct(x):
    return "n/a" if x != x else f"{100 * x:+.2f}%"


def _f(x, fmt="{:.2f}"):
    return "n/a" if x is None or x != x else fmt.format(x)


def _ratio(a, b):
    return a / b if b else float("nan")


def _table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def _yes(ok):
    return "**met**" if ok else "**missed**"


COMMANDS = """\
| step | profile | perf | samply |
|---|---|---|---|
| record (launch) | `profile record -F HZ --call-graph dwarf --stack-size 16384 -o F -- CMD` | `perf record -e task-clock -F HZ --call-graph dwarf,16384 -q -o F -- CMD` (`-g` for perf-fp) | `samply record --save-only --unstable-presymbolicate -r HZ -o F.json.gz -- CMD` |
| record (attach) | `... -p PID`, stopped with SIGINT | `... -p PID`, stopped with SIGINT | `... -p PID`, stopped with SIGINT |
| to an SVG | `profile report -i F --flamegraph -` | `perf script -i F \\| inferno-collapse-perf \\| inferno-flamegraph` | |
| shares | `profile report -i F --folded - [--per-thread]` | `perf report -i F --no-children -g none --sort pid\\|sym --stdio -q` | the profile's JSON |
"""


def markdown(r):
    m = r["machine"]
    L = ["# Benchmarks against perf and samply\n",
         "Written by `sudo benches/compare/run.sh` (benches/compare/); every figure below "
         "comes from that one run (and section 7 from benches/compare/accounting.py, which "
         "run.sh runs after it). Do not edit by hand: rerun it. Every other measurement has a "
         "file of its own in [measurements/](measurements/), headed by its command.\n",
         "## Machine and run\n",
         f"- {m['date']}: {m['cpu']}, {m['cores']} cores, {m['mem_gib']} GiB, hypervisor "
         f"{m['hypervisor']} (software perf events only), Linux {m['kernel']}",
         f"- profile {m['profile']}; {m['perf']}; {m['inferno']}; {m['samply']}; "
         f"{m['python']}; node {m['node']}; gcc {m['gcc']}",
         f"- 1-minute load average: {r['load_seen']:.2f} when started, {r['load_start']:.2f} "
         f"when measuring began (after waiting {r['waited_s'] / 60:.0f} min for < 0.5), "
         f"{r.get('load_end', float('nan')):.2f} at the end; the run took "
         f"{r.get('elapsed_s', 0) / 60:.1f} min."
         + (" **The machine was not quiet: timings carry that noise.**"
            if r["load_start"] >= 0.5 else ""),
         f"- Plan: {r['plan']}" + (" (**quick smoke run**, not for quoting)" if r["quick"] else ""),
         "\n## Commands\n", COMMANDS]
    goals, body = [], []
    if "attached_overhead" in r:
        body += _attached_overhead(r["attached_overhead"], goals)
    elif "overhead" in r:
        body += _overhead(r["overhead"], goals)
    if "pipeline" in r:
        body += _recorder_cost(r["pipeline"])
        body += _post(r["pipeline"], r.get("large"), goals)
        body += _size(r["pipeline"], r.get("large"), goals)
    if "accuracy" in r:
        body += _accuracy(r["accuracy"], goals)
    if "scale" in r:
        body += _scale(r["scale"], goals)
    if "overhead" in r or "sweeps" in r:
        body += _sweep(r, goals)
    L += ["\n## Goals (issue 8)\n", _table(["goal", "measured", "status"], goals)]
    return "\n".join(L + body) + "\n"


def _median(v):
    v = sorted(x for x in v if x == x)
    if not v:
        return float("nan")
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def _interval(v):
    """A distribution-free interval for the median of v, from the sign test: the
    (k+1)-th lowest to the (k+1)-th highest value, k as large as keeps the confidence
    at 90% or more. Returns (low, high, confidence)."""
    from math import comb
    v = sorted(x for x in v if x == x)
    n = len(v)
    if not n:
        return float("nan"), float("nan"), float("nan")

    def conf(k):
        return 1 - 2 * sum(comb(n, i) for i in range(k + 1)) / 2 ** n

    k = 0
    while 2 * (k + 1) < n and conf(k + 1) >= 0.9:
        k += 1
    return v[k], v[-1 - k], conf(k)


def _attached_overhead(o, goals):
    over, base, plan = o["overhead_rounds"], o["unprofiled"], o["plan"]
    rows = []
    for hz in (99, 999):
        for tool in ("profile", "perf-dwarf", "perf-fp", "samply"):
            v = over.get(f"{tool} F{hz}", [])
            lo, hi, _ = _interval(v)
            rows.append([tool, hz, _pct(-_median(v)), f"{_pct(-hi)} to {_pct(-lo)}",
                         " ".join(_pct(-x) for x in v)])
    out = ["\n## 1. Target overhead\n",
           "Throughput of `spin 2` (benches/workloads/spin.c: two threads of fixed work units, "
           "-O2 without frame pointers, on the 2 cores), one process running throughout while "
           "each recorder attaches to it in turn (`-p PID`, stopped with SIGINT). Each of "
           f"{plan['rounds']} rounds runs unprofiled / recorder / unprofiled / recorder / ... "
           "/ unprofiled, the order rotated each round; a recorder's change in a round is its "
           "throughput against the mean of the two unprofiled intervals around it. "
           f"Intervals: {plan['base_s']:g} s unprofiled; with a recorder, {plan['measure_s']:g} s "
           f"measured after {plan['settle_s']:g} s of setup (its attach work and its "
           "end-of-recording work fall outside). Same process, adjacent intervals: unlike one "
           "launch per run, neither drift nor the few percent by which separate runs of the "
           "same binary differ enter the comparison. "
           f"Unprofiled: {_median(base):.0f} units/s (intervals from {min(base):.0f} to "
           f"{max(base):.0f}). Stack copies of 16384 bytes for profile and perf-dwarf (samply "
           "has no option for it). The interval is the sign test's distribution-free interval "
           f"for the median (≥ 90%; with {plan['rounds']} rounds, "
           f"{100 * _interval(list(range(plan['rounds'])))[2]:.1f}%).\n",
           _table(["recorder", "Hz", "throughput change (median)", "interval", "rounds"], rows)]
    for hz in (99, 999):
        ours, perf = over.get(f"profile F{hz}", []), over.get(f"perf-dwarf F{hz}", [])
        diff = [a - b for a, b in zip(ours, perf)]
        d, (lo, hi, c) = _median(diff), _interval(diff)
        goals.append([f"overhead ≤ perf --call-graph dwarf at -F {hz}, same stack size",
                      f"{_pct(-_median(ours))} vs {_pct(-_median(perf))}; paired difference "
                      f"{100 * d:+.2f} points of overhead (interval {100 * lo:+.2f} to "
                      f"{100 * hi:+.2f}, {100 * c:.0f}%)",
                      _yes(True) if d <= 0.002 else
                      "**not shown**: higher, but within the interval's noise" if lo <= 0.002
                      else _yes(False)])
    v = over.get("profile F99", [])
    ours, (lo, hi, c) = _median(v), _interval(v)
    goals.append(["overhead < 1% at the default -F 99",
                  f"{_pct(-ours)} (interval {_pct(-hi)} to {_pct(-lo)}, {100 * c:.0f}%)",
                  _yes(True) if ours < 0.01 else
                  "**not shown**: higher, but within the interval's noise" if lo < 0.01
                  else _yes(False)])
    out.append("A goal comparison takes the median of the per-round differences (our "
               "overhead minus perf's, in the same round) and allows 0.2 points of noise; "
               "a higher median whose interval still reaches 0.2 is reported as not shown "
               "rather than as met or missed.\n")
    return out


def _overhead(o, goals):
    ov, thr = o["overhead"], o["throughput"]
    base = sorted(thr["none"])[len(thr["none"]) // 2]
    rows = []
    for hz in (99, 999):
        for label in (f"profile F{hz} stack 16384" if hz == 99 else "profile F999 stack 16384",
                      f"perf-dwarf F{hz}", f"perf-fp F{hz}", f"samply F{hz}"):
            rows.append([label.replace(" stack 16384", ""), hz, _pct(-ov.get(label, float("nan")))])
    out = ["\n## 1. Target overhead\n",
           "Throughput of `spin 2` (benches/workloads/spin.c: two threads of fixed work units, "
           "-O2 without frame pointers, on the 2 cores) under each recorder, launched by it; "
           f"median over {len(thr['none'])} rounds of the change against the unprofiled run "
           "of the same round (configurations alternated, order rotated each round). "
           f"Unprofiled: {base:.0f} units/s (from {min(thr['none']):.0f} to {max(thr['none']):.0f} "
           f"across rounds: differences smaller than that spread are noise). Stack copies of 16384 bytes for profile and "
           "perf-dwarf (samply has no option for it).\n",
           _table(["recorder", "Hz", "throughput change"], rows)]
    for hz in (99, 999):
        ours = ov[f"profile F{hz} stack 16384"]
        perf = ov[f"perf-dwarf F{hz}"]
        goals.append([f"overhead ≤ perf --call-graph dwarf at -F {hz}, same stack size",
                      f"{_pct(-ours)} vs {_pct(-perf)}", _yes(ours <= perf + 0.002)])
    ours = ov["profile F99 stack 16384"]
    goals.append(["overhead < 1% at the default -F 99", _pct(-ours), _yes(ours < 0.01)])
    out.append("The goal comparisons allow 0.2 points of measurement noise.\n")
    return out


def _recorder_cost(p):
    ours = p["profile"]["cpu_per_1000"]
    rows = [[t, v["samples"], f"{100 * v['coverage']:.0f}%", _f(v["recorder_cpu_s"]), _f(v["cpu_per_1000"] * 1e3, "{:.1f}"),
             _f(_ratio(v["cpu_per_1000"], ours), "{:.1f}x")] for t, v in p.items()]
    return ["\n## 2. Recorder cost\n",
            "CPU time (user + system, all threads, from /proc/PID/task/*/schedstat) of the "
            "recorder process while it sampled `spin 2` at -F 999 for the window, read just "
            "before it was stopped (so perf's and our end-of-recording work is excluded: see 3).\n",
            _table(["recorder", "samples", "samples cover (of target CPU)", "CPU s",
                    "CPU ms per 1000 samples", "vs profile"],
                   rows)]


def _post_rows(p):
    rows = []
    for t, v in p.items():
        if not v["post_steps"]:
            continue
        steps = "; ".join(f"{s['argv0']} {s['cpu_s']:.2f} s CPU, {s['maxrss_mib']:.0f} MiB"
                          for s in v["post_steps"])
        rows.append([t, v["samples"], _f(v["finish_s"]), _f(v["post_s"]), _f(v["to_svg_s"]),
                     _f(v["to_svg_cpu_s"]), f"{v['recorder_maxrss_mib']:.0f} MiB", steps])
    return rows


def _post(p, large, goals):
    head = ["recorder", "samples", "finish recording s", "to SVG s", "end of window → SVG s",
            "CPU s (whole pipeline)", "recorder peak RSS", "steps: CPU, peak RSS"]
    out = ["\n## 3. Post-processing: end of the sampling window to an SVG\n",
           "Attached with `-p`, stopped with SIGINT after the window. \"finish recording\" is "
           "SIGINT to the recorder's exit (ours: drain, name every frame, write; perf: its "
           "build-id pass); then the SVG pipeline.\n",
           "C workload (`spin 2`, -F 999):\n", _table(head, _post_rows(p))]
    sets = [("C workload", p)]
    if large:
        out += ["Large binary: profile itself built with full debug info "
                "(`CARGO_PROFILE_RELEASE_DEBUG=true`), running `profile report --flamegraph` "
                "on a recording in a loop, -F 999:\n", _table(head, _post_rows(large))]
        sets.append(("large binary", large))
    for name, s in sets:
        speed = _ratio(s["perf-dwarf"]["to_svg_s"], s["profile"]["to_svg_s"])
        cpu = _ratio(s["perf-dwarf"]["to_svg_cpu_s"], s["profile"]["to_svg_cpu_s"])
        goals.append([f"post-processing ≥ 10x faster than perf's pipeline ({name})",
                      f"{speed:.1f}x faster ({cpu:.1f}x less CPU)", _yes(speed >= 10)])
    return out


def _size(p, large, goals):
    rows, sets = [], [("C workload", p)] + ([("large binary", large)] if large else [])
    for name, s in sets:
        for t, v in s.items():
            rows.append([name, t, v["samples"], f"{v['bytes'] / 2**20:.2f} MiB",
                         _f(v["bytes_per_sample"], "{:.0f}"),
                         _f(_ratio(v["bytes_per_sample"], s["profile"]["bytes_per_sample"]),
                            "{:.1f}x")])
        r = _ratio(s["perf-dwarf"]["bytes_per_sample"], s["profile"]["bytes_per_sample"])
        goals.append([f"≥ 20x smaller on disk than perf.data with DWARF stacks ({name})",
                      f"{r:.0f}x smaller", _yes(r >= 20)])
    return ["\n## 4. Size on disk\n", "The recordings of 3 (16384-byte stack copies).\n",
            _table(["workload", "recorder", "samples", "file", "bytes per sample",
                    "vs profile"], rows)]


def _accuracy(acc, goals):
    rows = []
    for a in acc:
        th = ", ".join(f"{k} {t:.1f}/{m:.1f}" for k, (t, m) in a["threads"].items())
        fn = ", ".join(f"{k} {t:.1f}/{m:.1f}" for k, (t, m) in a["functions"].items())
        rows.append([a["tool"], a["hz"], th, _f(a["thread_error_pp"]), fn,
                     _f(a["function_error_pp"])])
        if a["tool"] == "profile":
            goals.append([f"per-thread share error < 2 points (-F {a['hz']})",
                          f"{a['thread_error_pp']:.2f} points", _yes(a["thread_error_pp"] < 2)])
    return ["\n## 5. Accuracy\n",
            "benches/workloads/split.c, launched by each recorder: threads busy 100%, 60% and "
            "30% of the time, each calling burn_a/burn_b/burn_c with work 50:30:20. Truth: "
            "each thread's /proc/self/task/TID/schedstat at its end, and each function's CPU "
            "time measured around every call. Shares in percent, truth/measured; error is the "
            "largest absolute difference in percentage points.\n",
            _table(["recorder", "Hz", "per-thread share", "error", "per-function share",
                    "error"], rows)]


def _scale(s, goals):
    rows = []
    for kind, tools in s.items():
        for t, v in tools.items():
            rows.append([kind, t, _f(v["attach_s"]), v["fds"], f"{v['ring_bytes'] / 2**20:.1f}",
                         v["samples"], f"{100 * v['coverage']:.0f}%", v["lost"], _f(v["recorder_cpu_s"]),
                         _f(v["cpu_per_1000"] * 1e3, "{:.0f}")])
    many = s["many"]["profile"]
    goals.append(["no lost samples at the default rate with 1,000 threads",
                  f"{many['lost']} lost, but samples cover {100 * many['coverage']:.1f}% of the "
                  f"target's CPU", _yes(many["lost"] == 0) + (" (vacuously)" if
                                                               many["coverage"] < 0.5 else "")])
    return ["\n## 6. Scale\n",
            "benches/workloads/threads.c: `many 1000` (1,000 spinning threads) and `churn 1000` "
            "(1,000 short threads created and ended per second); attached at -F 99. Attach time "
            "is from starting the recorder until its fd count reached 95% of its peak (polled "
            "every 20 ms); ring memory is the size of its perf_event mappings.\n",
            _table(["target", "recorder", "attach s", "fds", "ring MiB", "samples",
                    "samples cover (of target CPU)", "lost",
                    "recorder CPU s", "CPU ms per 1000 samples"], rows)]


def _sweep(r, goals):
    sets = {}
    if "overhead" in r:
        sets["(a) C workload (spin.c)"] = r["overhead"]
    sets.update(r.get("sweeps", {}))
    sizes = sorted({int(ss) for s in sets.values() for ss in s["sweep"]})
    rows = []
    for name, s in sets.items():
        sw = {int(k): v for k, v in s["sweep"].items()}
        rows.append([name] + [f"{_pct(-sw[ss]['overhead'])} / {100 * sw[ss]['truncated']:.1f}%"
                              for ss in sizes])
    fits = [ss for ss in sizes
            if all({int(k): v for k, v in s["sweep"].items()}[ss]["truncated"] < 0.01
                   for s in sets.values())]
    pick = fits[0] if fits else None
    return ["\n## Stack-size sweep\n",
            "profile at -F 999, `--stack-size` varied; each cell: throughput change against the "
            "unprofiled run (median of the rounds) / share of samples whose stack was cut "
            "(root frame `[truncated: stack copy too small]`).\n",
            _table(["workload"] + [str(ss) for ss in sizes], rows),
            f"Smallest size that cuts under 1% of stacks on every workload: "
            f"**{pick if pick else 'none'}**. Each run here launches its own workload, so "
            "overhead differences of a few points are run-to-run spread (figure 1 measures "
            "overhead the careful way). `profile`'s default is 32768: it cuts no C, Rust or "
            "Node stack, and only the deepest python3.12 recursions; 64512 doubles every "
            "sample's copy for them.\n"]
