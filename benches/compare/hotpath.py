"""The recorder's own CPU per 1,000 samples, profile (one or two builds) against samply
and perf --call-graph dwarf, in paired rounds (issue 27, "the hot path"). Each run
attaches a recorder at -F HZ with 16 KiB stack copies to a fresh `spin 2` (C, no frame
pointers), waits SETTLE seconds, samples for WINDOW seconds and stops it with SIGINT.
Two figures per run, both in ms of recorder CPU per 1,000 samples:
- while sampling: the recorder's CPU from the end of SETTLE to the end of WINDOW (its
  setup and its end-of-recording work left out), over the samples taken meanwhile
  (the run's samples times the share of the target's CPU that fell in that interval);
- start to exit: all the recorder's CPU (attach, sampling, draining, naming the frames:
  samply with --unstable-presymbolicate), over all its samples.
The tools run in an order rotated each round; the ratios are taken within each round
(same minute, same load) and their median reported. The 1-minute load is shown before
and after: figures taken while other work runs are noisy.

    sudo python3 benches/compare/hotpath.py --spin target/bench-compare/bin/spin \\
        --bin profile=target/release/profile --bin samply=$HOME/.cache/profile-bench/bin/samply \\
        --bin perf=/usr/bin/perf [--bin profile-before=OLD] [--rounds 5] [--out FILE.md]

It prints (or writes to --out) one markdown section: the command, date, builds and
load, the medians and the per-round figures; docs/measurements/recorder-cost.md holds
such sections.

(`benches/compare/run.sh` builds spin and installs samply; run it once first, or build
spin with `gcc -O2 -g -fomit-frame-pointer -pthread -o spin benches/workloads/spin.c`.)
"""

import argparse
import datetime
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as h  # noqa: E402


def log(msg):
    print(f"hotpath.py: {msg}", file=sys.stderr, flush=True)


class Named:
    """A profile build under another name (e.g. the one before a change)."""

    def __init__(self, tool, name):
        self.tool, self.name = tool, name

    def __getattr__(self, attr):
        return getattr(self.tool, attr)


def one_run(tool, spin, hz, stack, settle, window, tmp):
    target = h.spawn([spin, "2", "0", "0"], stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        out = os.path.join(tmp, f"hot-{tool.name}" + (".json.gz" if tool.name == "samply" else ""))
        with tool.context(), tempfile.TemporaryFile("w+") as err:
            tc0 = h.process_cpu_seconds(target.pid)
            rec = h.spawn(tool.record_argv(out, hz, stack, ("pid", target.pid)), measure=True,
                          stdout=subprocess.DEVNULL, stderr=err, text=True)
            pid = h.measured_pid(rec)
            time.sleep(settle)
            c1, tc1 = h.cpu_seconds(pid), h.process_cpu_seconds(target.pid)
            time.sleep(window)
            c2, tc2 = h.cpu_seconds(pid), h.process_cpu_seconds(target.pid)
            os.killpg(rec.pid, signal.SIGINT)
            done = h.wait(rec)
            err.seek(0)
            stderr_text = err.read()
    finally:
        h.kill(target)
    r = tool.read(out, stderr_text)
    if os.path.exists(out):
        os.remove(out)
    if not r.samples:
        raise RuntimeError(f"{tool.name}: no samples\n{stderr_text[-2000:]}")
    steady_samples = r.samples * (tc2 - tc1) / max(1e-9, tc2 - tc0)
    res = {
        "samples": r.samples,
        "lost": r.lost,
        "steady_ms": (c2 - c1) / steady_samples * 1e6 if steady_samples else float("nan"),
        "total_ms": done.cpu / r.samples * 1e6,
        "cpu_s": done.cpu,
    }
    log(f"  {tool.name}: {r.samples} samples, {r.lost} lost, while sampling "
        f"{res['steady_ms']:.2f} ms, start to exit {res['total_ms']:.2f} ms per 1,000")
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--spin", required=True, help="the spin workload's binary")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--hz", type=int, default=999)
    ap.add_argument("--stack", type=int, default=16384)
    ap.add_argument("--settle", type=float, default=1.5)
    ap.add_argument("--window", type=float, default=6.0)
    ap.add_argument("--out", help="write the markdown section here (else stdout)")
    ap.add_argument("--label", default="", help="the section's title (e.g. 'before and after')")
    a = ap.parse_args()
    bins = dict(b.split("=", 1) for b in a.bin)
    tools = [h.Profile(bins)]
    if "profile-before" in bins:
        tools.insert(0, Named(h.Profile({"profile": bins["profile-before"]}), "profile-before"))
    if "samply" in bins:
        tools.append(h.Samply(bins))
    if "perf" in bins:
        tools.append(h.Perf(bins, "dwarf"))
    load_before = h.loadavg()
    started = datetime.datetime.now(datetime.timezone.utc)
    runs = {t.name: [] for t in tools}
    tmp = tempfile.mkdtemp(prefix="hotpath-")
    try:
        for r in range(a.rounds):
            order = tools[r % len(tools):] + tools[:r % len(tools)]
            log(f"round {r + 1}/{a.rounds} (load {h.loadavg():.2f})")
            for t in order:
                runs[t.name].append(one_run(t, a.spin, a.hz, a.stack, a.settle, a.window, tmp))
    finally:
        h.cleanup()
        os.rmdir(tmp) if not os.listdir(tmp) else None
    load_after = h.loadavg()
    text = table(runs, a, started, load_before, load_after)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
        log(f"wrote {a.out}")
    else:
        print(text)


def version(path):
    """`profile --version` of a build (it names its commit when built from git)."""
    try:
        return subprocess.run([path, "--version"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except OSError:
        return "?"


def table(runs, a, started, load_before, load_after):
    names = list(runs)
    samply = "samply" if "samply" in runs else None
    bins = dict(b.split("=", 1) for b in a.bin)
    argv = " ".join(["python3", "benches/compare/hotpath.py", *sys.argv[1:]])
    lines = [
        f"## {a.label or 'Recorder CPU per 1,000 samples'}",
        "",
        f"`{argv}`",
        "",
        f"- {started:%Y-%m-%d %H:%M} UTC, {a.rounds} rounds, -F {a.hz}, stack {a.stack} B, "
        f"settle {a.settle} s, window {a.window} s",
        "- builds: " + "; ".join(f"{n}: {version(p)}" for n, p in bins.items()
                                 if n.startswith("profile")),
        f"- 1-minute load average: {load_before:.2f} before, {load_after:.2f} after",
        "",
        "| recorder | samples (median) | while sampling, ms / 1,000 | start to exit, ms / 1,000 "
        "| while sampling / samply | start to exit / samply |",
        "|---|---|---|---|---|---|",
    ]
    for n in names:
        rs = runs[n]
        med = lambda k: statistics.median(x[k] for x in rs)  # noqa: E731
        ratio = lambda k: (statistics.median(x[k] / s[k] for x, s in zip(rs, runs[samply]))  # noqa: E731
                           if samply else float("nan"))
        lines.append(f"| {n} | {med('samples'):.0f} | {med('steady_ms'):.2f} | {med('total_ms'):.2f} "
                     f"| {ratio('steady_ms'):.2f}x | {ratio('total_ms'):.2f}x |")
    lines.append("")
    lines.append("Per round (while sampling / start to exit, ms per 1,000 samples):")
    lines.append("")
    for n in names:
        cells = ", ".join(f"{x['steady_ms']:.2f} / {x['total_ms']:.2f}" for x in runs[n])
        lines.append(f"- {n}: {cells}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
