"""Per-thread CPU accounting side by side with perf (issue 13), in one command:

    sudo python3 benches/compare/accounting.py [PROFILE_BINARY] [--append FILE]

(run.sh runs it after main.py with --append docs/benchmarks.md, which replaces the
section between the ACCOUNTING markers or adds it at the end.)

Builds tests/data/accounting.c, then for -F 99 and -F 999 (perf: -e task-clock -c with
the same period) records the four cases below while a CPU-bound process competes for
the two cores, and prints a markdown table of each thread's CPU time in the profile
against the thread's own CLOCK_THREAD_CPUTIME_ID (printed by the target at its exit):
perf's is samples x period per thread (`perf script -F tid,period`), profile's is
`report --json` threads[].cpu_ns (samples plus the [unsampled] remainder).
Short threads are summed into one row and their worst single thread shown.
"""

import collections
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARGS = [a for a in sys.argv[1:]]
APPEND = None
if "--append" in ARGS:
    i = ARGS.index("--append")
    APPEND = ARGS[i + 1]
    del ARGS[i:i + 2]
PROFILE = ARGS[0] if ARGS else os.path.join(ROOT, "target/release/profile")
BEGIN, END = "<!-- ACCOUNTING BEGIN -->", "<!-- ACCOUNTING END -->"
CASES = [
    ("three busy threads, 1.5 s each, two cores", ["busy:3:1500"]),
    ("300 threads x 2 ms", ["short:300:2"]),
    ("a thread waking for 0.3 ms bursts (x300)", ["bursty:300:300:3000"]),
    ("process tree through sh -c", None),
]


def truth(stdout):
    out = {}
    for line in stdout.splitlines():
        if line.startswith("cpu "):
            _, tid, ns, name = line.split()
            out[int(tid)] = (name, int(ns))
    return out


def run(tool, hz, argv, tmp):
    spin = subprocess.Popen([BIN, "busy:1:600000"], stdout=subprocess.DEVNULL)
    try:
        if tool == "perf":
            period = str(1_000_000_000 // hz)
            data = os.path.join(tmp, "perf.data")
            r = subprocess.run(["perf", "record", "-q", "-e", "task-clock", "-c", period,
                                "-o", data, "--", *argv], capture_output=True, text=True)
            s = subprocess.run(["perf", "script", "-i", data, "-F", "tid,period"],
                               capture_output=True, text=True).stdout
            got = collections.Counter()
            for line in s.splitlines():
                p = line.split()
                if len(p) >= 2:
                    got[int(p[0])] += int(p[1])
        else:
            out = os.path.join(tmp, "acct.prof")
            r = subprocess.run([PROFILE, "record", "-q", "-F", str(hz), "-o", out, "--", *argv],
                               capture_output=True, text=True)
            j = json.loads(subprocess.run([PROFILE, "report", "-i", out, "--json"],
                                          capture_output=True, text=True).stdout)
            got = collections.Counter()
            for t in j["threads"]:
                got[t["tid"]] += t["cpu_ns"]
    finally:
        spin.kill()
        spin.wait()
    return truth(r.stdout), got


def rows(t, got):
    """(label, truth ms, error %, error ms) per thread; short threads summed."""
    out, short = [], []
    for tid, (name, ns) in sorted(t.items(), key=lambda x: x[1][0]):
        if name.startswith("short"):
            short.append((ns, got[tid]))
            continue
        out.append((name, ns, got[tid]))
    if short:
        want = sum(s[0] for s in short)
        have = sum(s[1] for s in short)
        worst = max(short, key=lambda s: abs(s[1] - s[0]))
        out.append((f"short x{len(short)} (worst one: {(worst[1] - worst[0]) / 1e6:+.2f} ms)",
                    want, have))
    return out


def main():
    global BIN
    tmp = tempfile.mkdtemp(prefix="acct-bench-")
    BIN = os.path.join(tmp, "accounting")
    subprocess.run(["gcc", "-O2", "-g", "-pthread", os.path.join(ROOT, "tests/data/accounting.c"),
                    "-o", BIN], check=True)
    out = []

    def emit(line=""):
        print(line, flush=True)
        out.append(line)
    emit("## 7. Per-thread CPU accounting")
    emit()
    emit("Written by `sudo python3 benches/compare/accounting.py --append docs/benchmarks.md` "
         "(run.sh runs it). tests/data/accounting.c, launched by each recorder while one "
         "competing CPU-bound process runs; each thread prints its own "
         "CLOCK_THREAD_CPUTIME_ID at its end (the truth). perf: samples x period per thread "
         "(`perf record -e task-clock -c PERIOD`, `perf script -F tid,period`); profile: "
         "`report --json` threads[].cpu_ns (samples plus `[unsampled]`). Error against the "
         "thread's own clock. profile takes each exiting thread's total from the kernel's "
         "taskstats exit message ([accounting.md](accounting.md#the-context-switches-each-threads-own-clock)); "
         "what is left is the few microseconds between a thread printing its clock and "
         "exiting, which the profile counts. \"worst one\" is profile's worst short thread.")
    emit()
    emit(f"Kernel {os.uname().release}; {os.cpu_count()} CPUs; other engineers' builds may "
         "have loaded the machine during the run.")
    emit()
    for hz in (99, 999):
        emit(f"### -F {hz} (perf: -e task-clock -c {1_000_000_000 // hz})")
        emit()
        emit("| case | thread | own clock | perf | profile |")
        emit("|---|---|---|---|---|")
        for label, args in CASES:
            argv = ([BIN, *args] if args else
                    ["sh", "-c", f"{BIN} busy:2:800 & {BIN} short:50:2 bursty:100:300:2000; wait"])
            tp, gp = run("perf", hz, argv, tmp)
            to, go = run("profile", hz, argv, tmp)
            perf_rows = {r[0]: r for r in rows(tp, gp)}
            for name, want, have in rows(to, go):
                pr = next((r for k, r in perf_rows.items()
                           if k.split(" (")[0] == name.split(" (")[0]), None)

                def fmt(w, h):
                    return f"{100 * (h - w) / w:+.1f}% ({(h - w) / 1e6:+.2f} ms)"
                perf_cell = fmt(pr[1], pr[2]) if pr else "-"
                emit(f"| {label} | {name} | {want / 1e6:.1f} ms | {perf_cell} | {fmt(want, have)} |")
        emit()
    if APPEND:
        section = BEGIN + "\n" + "\n".join(out) + "\n" + END + "\n"
        text = open(APPEND).read() if os.path.exists(APPEND) else ""
        if BEGIN in text and END in text:
            a, b = text.index(BEGIN), text.index(END) + len(END) + 1
            text = text[:a] + section + text[b:]
        else:
            text = text.rstrip("\n") + "\n\n" + section
        with open(APPEND, "w") as f:
            f.write(text)

if __name__ == "__main__":
    main()
