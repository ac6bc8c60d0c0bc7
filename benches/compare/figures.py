"""The measurements of the side-by-side benchmark (benches/compare/run.sh), one function
per figure of issue 8, each returning plain data that report.py turns into
docs/benchmarks.md: target overhead (with the stack-size sweep), the attach-mode
recording run that yields recorder cost, post-processing time and size on disk,
accuracy against a split known by construction, and scale to many threads.
"""

import os
import re
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections import Counter

import harness as h

STACK_SIZES = [4096, 8192, 16384, 32768, 64512]  # 64512: the most a sample record holds


def _units_per_sec(text):
    m = re.search(r"units_per_sec ([\d.]+)", text)
    return float(m.group(1)) if m else float("nan")


def _run_launched(tool, target_argv, hz, stack, out):
    """Runs target_argv under tool (or alone when tool is None) to its end; returns
    (target's stdout, recorder's stderr)."""
    argv = target_argv if tool is None else tool.record_argv(out, hz, stack, ("cmd", target_argv))
    ctx = tool.context() if tool else h.contextlib.nullcontext()
    with ctx, tempfile.TemporaryFile("w+") as err:
        p = h.spawn(argv, stdout=subprocess.PIPE, stderr=err, text=True)
        stdout, _ = p.communicate()
        err.seek(0)
        return stdout, err.read()


def throughput_rounds(configs, target_argv, rounds, tmp, log, on_recording=None):
    """Runs every config once per round, in an order rotated each round to cancel drift.
    configs: {label: (tool or None, hz, stack)}. Returns {label: [units/s per round]}
    and calls on_recording(label, tool, path) after each recorded run."""
    labels = list(configs)
    thr = {label: [] for label in labels}
    for r in range(rounds):
        order = labels[r % len(labels):] + labels[:r % len(labels)]
        for label in order:
            tool, hz, stack = configs[label]
            out = os.path.join(tmp, f"run-{tool.name if tool else 'none'}"
                                    + (".json.gz" if tool and tool.name == "samply" else ""))
            stdout, err = _run_launched(tool, target_argv, hz, stack, out)
            thr[label].append(_units_per_sec(stdout))
            if tool is not None:
                if on_recording:
                    on_recording(label, tool, out)
                if os.path.exists(out):
                    os.remove(out)
            log(f"  round {r + 1}/{rounds} {label}: {thr[label][-1]:.0f} units/s")
    return thr


def overhead_from(thr, baseline="none"):
    """{label: median over rounds of (1 - throughput / that round's baseline)}."""
    base = thr[baseline]
    res = {}
    for label, vals in thr.items():
        if label != baseline:
            ratios = [1 - v / b for v, b in zip(vals, base) if b > 0 and v == v]
            res[label] = statistics.median(ratios) if ratios else float("nan")
    return res


class Ticks:
    """The "tick SECONDS UNITS" lines of `spin N 0 -T`, read on a thread as they come."""

    def __init__(self, proc):
        self.points = []
        self._t = threading.Thread(target=self._read, args=(proc.stdout,), daemon=True)
        self._t.start()

    def _read(self, stream):
        for line in stream:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "tick":
                self.points.append((float(parts[1]), int(parts[2])))

    def throughput(self, start, end):
        """Units per second between the first tick at or after start and the last at or
        before end."""
        inside = [p for p in self.points if start <= p[0] <= end]
        if len(inside) < 2:
            return float("nan")
        (t0, u0), (t1, u1) = inside[0], inside[-1]
        return (u1 - u0) / (t1 - t0)


def attached_overhead(configs, spin, rounds, tmp, log, base_s=1.5, settle_s=0.5, measure_s=2.5):
    """Figure 1: one long-running `spin 2`, recorders attached to it in turn. Each round
    runs unprofiled / config / unprofiled / config / ... / unprofiled (order rotated per
    round); a config's overhead in a round is 1 - its throughput over the neighbouring
    unprofiled intervals' mean. Only the steady state counts: the first settle_s after
    attaching (the recorder's setup) and the recorder's end-of-recording work are
    outside the measured interval. Same process, same placement, adjacent intervals:
    the drift and per-process variance of launching a workload per run cancel.
    configs: {label: (tool, hz, stack)}. Returns {label: [overhead per round]} and the
    unprofiled throughputs."""
    target = h.spawn([spin, "2", "0", "-0.05"], stdout=subprocess.PIPE,
                     stderr=subprocess.DEVNULL, text=True)
    ticks = Ticks(target)
    labels = list(configs)
    over = {label: [] for label in labels}
    base_thr = []
    try:
        time.sleep(1.0)

        def unprofiled():
            t0 = time.monotonic()
            time.sleep(base_s)
            thr = ticks.throughput(t0, time.monotonic())
            base_thr.append(thr)
            return thr

        for r in range(rounds):
            order = labels[r % len(labels):] + labels[:r % len(labels)]
            before = unprofiled()
            for label in order:
                tool, hz, stack = configs[label]
                out = os.path.join(tmp, f"ovh-{tool.name}"
                                   + (".json.gz" if tool.name == "samply" else ""))
                with tool.context():
                    rec = h.spawn(tool.record_argv(out, hz, stack, ("pid", target.pid)),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(settle_s)
                    t0 = time.monotonic()
                    time.sleep(measure_s)
                    thr = ticks.throughput(t0, time.monotonic())
                    os.killpg(rec.pid, signal.SIGINT)
                    h.wait(rec)
                if os.path.exists(out):
                    os.remove(out)
                time.sleep(0.2)
                after = unprofiled()
                over[label].append(1 - thr / ((before + after) / 2))
                log(f"  round {r + 1}/{rounds} {label}: {thr:.0f} units/s, "
                    f"{100 * over[label][-1]:+.2f}% against {before:.0f}/{after:.0f}")
                before = after
    finally:
        h.kill(target)
    return {"overhead_rounds": over, "unprofiled": base_thr,
            "plan": {"base_s": base_s, "settle_s": settle_s, "measure_s": measure_s,
                     "rounds": rounds}}


def sweep(name, target_argv, profile, rounds, tmp, log, extra_configs=None):
    """Overhead at -F 999 and truncated-stack share for every stack size on one
    workload; extra_configs are measured in the same rounds (figure 1 uses this)."""
    configs = {"none": (None, 0, 0)}
    configs.update(extra_configs or {})
    for ss in STACK_SIZES:
        configs.setdefault(f"profile F999 stack {ss}", (profile, 999, ss))
    cut = Counter()
    total = Counter()

    def on_recording(label, tool, out):
        if tool.name == "profile" and label.startswith("profile F999 stack"):
            folded = profile.folded(out)
            total[label] += sum(folded.values())
            cut[label] += sum(n for s, n in folded.items() if s[0] == h.TRUNCATION_MARKER)

    log(f"{name}: {len(configs)} configurations x {rounds} rounds")
    thr = throughput_rounds(configs, target_argv, rounds, tmp, log, on_recording)
    over = overhead_from(thr)
    rows = {ss: {"overhead": over[f"profile F999 stack {ss}"],
                 "truncated": cut[f"profile F999 stack {ss}"]
                 / max(1, total[f"profile F999 stack {ss}"]),
                 "samples": total[f"profile F999 stack {ss}"]} for ss in STACK_SIZES}
    return {"throughput": thr, "overhead": over, "sweep": rows}


def attached_run(tool, target_argv, hz, stack, window, tmp, svg_path, log, ready_line=None,
                 svg=True):
    """Attaches tool to a running target for `window` seconds, then stops it with
    SIGINT and turns its recording into an SVG. Returns the recorder's CPU during
    sampling, samples, lost, size, attach time, fds and ring memory, the time and CPU
    from the end of the window to the SVG, and each step's peak RSS."""
    target = h.spawn(target_argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        if ready_line:
            while target.stdout.readline().strip() != ready_line:
                if target.poll() is not None:
                    raise RuntimeError(f"{target_argv[0]} exited early")
        time.sleep(0.5)
        out = os.path.join(tmp, f"attach-{tool.name}" + (".json.gz" if tool.name == "samply" else ""))
        with tool.context(), tempfile.TemporaryFile("w+") as err:
            target_cpu0 = h.process_cpu_seconds(target.pid)
            t0 = time.monotonic()
            rec = h.spawn(tool.record_argv(out, hz, stack, ("pid", target.pid)), measure=True,
                          stdout=subprocess.DEVNULL, stderr=err, text=True)
            pid = h.measured_pid(rec)
            fds, rings = [], 0
            while time.monotonic() - t0 < window:
                fds.append((time.monotonic() - t0, h.fd_count(pid)))
                rings = max(rings, h.ring_bytes(pid))
                time.sleep(0.02)
            rec_cpu = h.cpu_seconds(pid)
            target_cpu = h.process_cpu_seconds(target.pid) - target_cpu0
            t_end = time.monotonic()
            # /usr/bin/time ignores SIGINT; the recorder in its group gets it.
            os.killpg(rec.pid, signal.SIGINT)
            done = h.wait(rec)
            err.seek(0)
            stderr_text = err.read()
    finally:
        h.kill(target)
    r = tool.read(out, stderr_text)
    max_fd = max(n for _, n in fds)
    attach_s = next(t for t, n in fds if n >= 0.95 * max_fd)
    post = tool.postprocess_steps(out, svg_path) if svg else []
    steps, post_wall = [], 0.0
    if post:
        with open(svg_path, "w") as f:
            steps, post_wall = h.run_pipeline(post, f)
    res = {
        "tool": tool.name,
        "samples": r.samples,
        "lost": r.lost,
        "recorder_cpu_s": rec_cpu,
        "target_cpu_s": target_cpu,
        # The share of the target's CPU time during the window that samples stand for.
        "coverage": r.samples / hz / target_cpu if target_cpu > 0 else float("nan"),
        "cpu_per_1000": rec_cpu / r.samples * 1000 if r.samples else float("nan"),
        "bytes": os.path.getsize(out),
        "bytes_per_sample": os.path.getsize(out) / r.samples if r.samples else float("nan"),
        "attach_s": attach_s,
        "fds": max_fd,
        "ring_bytes": rings,
        "finish_s": done.at - t_end,
        "finish_cpu_s": max(0.0, done.cpu - rec_cpu),
        "recorder_maxrss_mib": done.maxrss_mib,
        "post_s": post_wall,
        "post_steps": [{"argv0": os.path.basename(a[0]) + (" " + a[1] if len(a) > 1 else ""),
                        "cpu_s": e.cpu, "maxrss_mib": e.maxrss_mib} for a, e in
                       zip(post, steps)],
        "stderr": stderr_text[-2000:],
        "recording": out,
    }
    res["to_svg_s"] = res["finish_s"] + res["post_s"]
    res["to_svg_cpu_s"] = res["finish_cpu_s"] + sum(s["cpu_s"] for s in res["post_steps"])
    if not svg:
        os.remove(out)
    log(f"  {tool.name}: {r.samples} samples ({100 * res['coverage']:.0f}% of the target's CPU), "
        f"{r.lost} lost, recorder {rec_cpu:.2f} s CPU, "
        f"{res['bytes_per_sample']:.0f} B/sample, end of window to SVG {res['to_svg_s']:.2f} s")
    return res


def _shares(counts):
    total = sum(counts.values())
    return {k: 100 * v / total for k, v in counts.items()} if total else {}


def _max_error(truth, measured):
    return max(abs(truth[k] - measured.get(k, 0.0)) for k in truth)


def accuracy(tool, split_bin, secs, hz, tmp, log):
    """Per-thread and per-function shares of tool on the split workload against the
    truth the workload measured; errors in percentage points."""
    out = os.path.join(tmp, f"split-{tool.name}" + (".json.gz" if tool.name == "samply" else ""))
    stdout, _ = _run_launched(tool, [split_bin, str(secs)], hz, 16384, out)
    threads = {m[1]: (m[0], int(m[2])) for m in re.findall(r"thread (\S+) (\d+) (\d+)", stdout)}
    funcs = {m[0]: int(m[1]) for m in re.findall(r"func (\S+) (\d+)", stdout)}
    truth_t = _shares({name: ns for name, ns in threads.values()})
    truth_f = _shares(funcs)
    by_tid = {tid: name for tid, (name, _) in threads.items()}
    if tool.name == "profile":
        folded = tool.folded(out, per_thread=True)
        t_counts, f_counts = Counter(), Counter()
        for stack, n in folded.items():
            tid = next((f for f in stack[:3] if f.isdigit() or f.startswith("tid")), "")
            tid = re.sub(r"\D", "", tid)
            if tid in by_tid:
                t_counts[by_tid[tid]] += n
            if stack[-1] in funcs:
                f_counts[stack[-1]] += n
    elif tool.name.startswith("perf"):
        t_counts = Counter()
        for key, pct in tool.shares(out, "pid").items():
            tid = key.split(":")[0].strip()
            if tid in by_tid:
                t_counts[by_tid[tid]] += pct
        f_counts = Counter()
        for key, pct in tool.shares(out, "sym").items():
            name = key.split()[-1]
            if name in funcs:
                f_counts[name] += pct
    else:
        t_counts = Counter({by_tid[str(t)]: n for t, n in tool.thread_samples(out).items()
                            if str(t) in by_tid})
        f_counts = Counter()
        syms = _function_ranges(split_bin, funcs)
        for addr, n in tool.leaf_addresses(out, os.path.basename(split_bin)).items():
            name = next((f for f, (lo, hi) in syms.items() if lo <= addr < hi), None)
            if name:
                f_counts[name] += n
    meas_t, meas_f = _shares(t_counts), _shares(f_counts)
    res = {
        "tool": tool.name, "hz": hz,
        "threads": {k: (truth_t[k], meas_t.get(k, 0.0)) for k in truth_t},
        "functions": {k: (truth_f[k], meas_f.get(k, 0.0)) for k in truth_f},
        "thread_error_pp": _max_error(truth_t, meas_t) if meas_t else float("nan"),
        "function_error_pp": _max_error(truth_f, meas_f) if meas_f else float("nan"),
    }
    log(f"  {tool.name} F{hz}: thread error {res['thread_error_pp']:.2f} pp, "
        f"function error {res['function_error_pp']:.2f} pp")
    return res


def _function_ranges(binary, names):
    """{name: (start, end)} of functions in binary from nm -S (file-relative)."""
    text = subprocess.run(["nm", "-S", binary], capture_output=True, text=True).stdout
    ranges = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3] in names:
            lo = int(parts[0], 16)
            ranges[parts[3]] = (lo, lo + int(parts[1], 16))
    return ranges
