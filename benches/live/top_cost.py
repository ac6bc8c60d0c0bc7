#!/usr/bin/env python3
"""What `profile top` costs beside `profile record` (docs/benchmarks.md, "Live views").

Attaches to a target with two spinning threads (tests/data/chains.c: worker, qsort),
alternately with `record -p` and `top -p | cat` (plain tables, refreshing and
symbolizing every second) for D seconds each, ROUNDS rounds; reports the recorder's
CPU seconds per second of recording (user+sys from wait4) as medians, and for `top`
the time from its start to the hot function on screen (full screen, in tmux) and in
the first plain table.

usage: sudo python3 benches/live/top_cost.py PROFILE_BIN [ROUNDS] [D]
"""
import os, statistics, subprocess, sys, time

prof = os.path.abspath(sys.argv[1])
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
secs = sys.argv[3] if len(sys.argv) > 3 else "10"
here = os.path.dirname(os.path.abspath(__file__))
chains = "/tmp/top-cost-chains"
subprocess.run(["gcc", "-O2", "-g", "-pthread", os.path.join(here, "../../tests/data/chains.c"),
                "-o", chains], check=True)
target = subprocess.Popen([chains, "worker", "qsort"], stdout=subprocess.PIPE, text=True)
target.stdout.readline()  # "ready"
pid = str(target.pid)


def run(args, watch=None):
    """CPU seconds of the command and, with `watch`, seconds until a stdout line has it."""
    start = time.monotonic()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    first = None
    for line in p.stdout:
        if watch and first is None and watch in line:
            first = time.monotonic() - start
    _, status, ru = os.wait4(p.pid, 0)
    return ru.ru_utime + ru.ru_stime, first


def on_screen():
    """Seconds from starting `top` in a 100x30 tmux terminal to the hot function drawn."""
    sock = f"top-cost-{os.getpid()}"
    start = time.monotonic()
    subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-s", "t", "-x", "100", "-y", "30",
                    f"{prof} top -p {pid}"], check=True)
    try:
        while time.monotonic() - start < 30:
            screen = subprocess.run(["tmux", "-L", sock, "capture-pane", "-p", "-t", "t"],
                                    capture_output=True, text=True).stdout
            if "level_c" in screen or "cmp_ints" in screen:
                return time.monotonic() - start
            time.sleep(0.02)
        return float("nan")
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"])


cpu = {"record": [], "top": []}
screen = []
first = []
try:
    for r in range(rounds):
        c, _ = run([prof, "record", "-q", "-p", pid, "-d", secs, "-o", "/tmp/top-cost.prof"])
        cpu["record"].append(c / float(secs))
        c, f = run([prof, "top", "-p", pid, "-d", secs, "--rows", "5"], watch="level_c")
        cpu["top"].append(c / float(secs))
        first.append(f if f is not None else float("nan"))
        screen.append(on_screen())
        print(f"round {r + 1}: record {cpu['record'][-1]:.4f} top {cpu['top'][-1]:.4f} "
              f"first {first[-1]:.2f} s, on screen {screen[-1]:.2f} s; load {os.getloadavg()[0]:.2f}", file=sys.stderr)
finally:
    target.kill()
rec, top = statistics.median(cpu["record"]), statistics.median(cpu["top"])
print(f"| run | recorder CPU per second (median of {rounds}) | vs record |")
print("|---|---|---|")
print(f"| `profile record -p PID` | {rec * 1000:.1f} ms | 1.00 |")
print(f"| `profile top -p PID \\| cat` | {top * 1000:.1f} ms | {top / rec:.2f} |")
print(f"\nhot function on a terminal after {statistics.median(screen):.2f} s (median; max "
      f"{max(screen):.2f} s); in the first plain table after {statistics.median(first):.2f} s "
      f"(max {max(first):.2f} s); load at end {os.getloadavg()[0]:.2f}")
