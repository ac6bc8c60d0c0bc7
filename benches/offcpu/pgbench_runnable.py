#!/usr/bin/env python3
"""PostgreSQL backends under pgbench: `record --off-cpu`'s runnable and running time
against perf's record of the same scheduler events and the kernel's own account
(issue 28).

Sets up a throwaway PostgreSQL cluster in a temporary directory (as the `postgres`
user; installs Debian's `postgresql` with apt-get when initdb is missing), loads it
with `pgbench -c CLIENTS -j 2`, attaches `profile record --off-cpu -p BACKENDS -d
SECONDS` to the backends, and meanwhile records the backends' `sched:sched_switch`
and `sched:sched_wakeup` tracepoints with `perf record -a` (CLOCK_MONOTONIC, the
recording's clock). Each backend's runnable time is compared with the kernel's
run-queue delay (/proc/PID/task/TID/schedstat, field 2), its running time with its
CPU clock (field 1), and its states' sum with its life in the recording. perf's
runnable (from a wake-up of the blocked thread, or a preempted switch-out, to its
next switch-in) is shown beside, not judged: the kernel stamps both sides of a
switch with its run-queue clock, which it does not update at a switch that follows a
wake-up preemption, so it moves time between a thread's CPU clock and its delay
(docs/measurements/pgbench.md, "The kernel's run-queue delay"), and a report splits
running and runnable as the kernel does (docs/off-cpu.md); the column "perf running -
clock" shows how much was moved. What it moved is the kernel's own disagreement,
which a report's runnable inherits (its running is the clock): the runnable goal
allows it on top (on a loaded machine it reached 90 ms of a backend's 500 ms of
delay in 5 s, where perf's runnable was 5 to 13% off the kernel's delay too).

The kernel's figures are read every 5 ms while recording and interpolated at the
recording's window (`report --json`'s `summary.attached_ns` to `summary.end_time_ns`),
so the recorder's own start-up and exit are not in them.

usage: sudo benches/offcpu/pgbench_runnable.py [SECONDS] [CLIENTS] [--profile=PATH] [--fp]
    [--mmap-pages=N] (from the repository root, after cargo build --release; --fp
    records with --call-graph fp, --mmap-pages is passed to record; PGRUN_KEEP=PATH
    keeps the recording there; PGRUN_ROWS=PATH writes every schedstat read there, a
    line each: pid, CLOCK_MONOTONIC before and after the read, CPU clock, run-queue
    delay; PGRUN_PERF=PATH keeps perf's recording there, and PGRUN_PERF_ALL=1 makes it
    record every thread's switches and wake-ups, not only the backends', for
    benches/offcpu/rq_clock_skip.py). Also prints the recorder's own CPU time and the
    hypervisor's steal time per CPU during the recording. Prints a markdown table;
    exits 1 when a backend misses (runnable off the kernel's run-queue delay by more
    than 5% or 30 ms plus what the kernel moved between its clock and its delay,
    running off its CPU clock by more than 2%, or its states' sum off
    its life by more than 1%), 2 when it misses and the recorder lost records, 3 when
    the only misses are runnable off the kernel's delay where perf's record of the same
    scheduler events agrees with the recording within 2.5% (the kernel's account off
    its own tracepoints; seen once in 20 runs).
"""

import bisect
import json
import os
import pwd
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pg_bin():
    """The PostgreSQL binaries' directory, installing postgresql if there is none."""
    found = sorted(
        (d for d in os.listdir("/usr/lib/postgresql") if os.path.exists(f"/usr/lib/postgresql/{d}/bin/initdb")),
        key=lambda d: int(d) if d.isdigit() else 0,
    ) if os.path.isdir("/usr/lib/postgresql") else []
    if not found:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", "postgresql"], check=True, env=env)
        return pg_bin()
    return f"/usr/lib/postgresql/{found[-1]}/bin"


def as_postgres(cmd, **kw):
    return subprocess.run(["runuser", "-u", "postgres", "--", *cmd], **kw)


def steal_ticks():
    """Each CPU's steal time so far (/proc/stat, clock ticks)."""
    with open("/proc/stat") as f:
        return [int(l.split()[8]) for l in f if l.startswith("cpu") and l[3].isdigit()]


SWITCH = re.compile(r"prev_pid=(\d+) .*prev_state=(\S+) ==> .*next_pid=(\d+) ")
WAKEUP = re.compile(r" pid=(\d+) prio=")


def perf_account(path, tids, start, end):
    """Each of `tids`' running and runnable ns between start and end (CLOCK_MONOTONIC)
    by the perf recording at `path` of sched_switch and sched_wakeup: running from a
    switch-in to the next switch-out, runnable from a wake-up of a blocked thread, or
    a preempted switch-out (prev_state R), to its next switch-in."""
    out = subprocess.run(["perf", "script", "-i", path, "--ns", "-F", "time,event,trace"],
                         capture_output=True, text=True).stdout
    since = {}  # tid -> ("running" | "blocked" | "runnable", time)
    total = {t: {"running": 0, "runnable": 0, "blocked": 0} for t in tids}

    def close(tid, t):
        s = since.get(tid)
        if s:
            total[tid][s[0]] += max(0, min(t, end) - max(s[1], start))

    for line in out.splitlines():
        head, _, rest = line.partition(": sched:")
        try:
            t = int(round(float(head.strip()) * 1e9))
        except ValueError:
            continue
        if rest.startswith("sched_switch"):
            m = SWITCH.search(rest)
            if not m:
                continue
            prev, state, nxt = int(m.group(1)), m.group(2), int(m.group(3))
            if prev in total:
                close(prev, t)
                since[prev] = ("runnable" if state.startswith("R") else "blocked", t)
            if nxt in total:
                close(nxt, t)
                since[nxt] = ("running", t)
        elif rest.startswith("sched_wakeup"):
            m = WAKEUP.search(rest)
            tid = int(m.group(1)) if m else None
            if tid in total and since.get(tid, ("",))[0] == "blocked":
                close(tid, t)
                since[tid] = ("runnable", t)
    for tid in since:
        close(tid, end)
    return total


def perf_filters(tids):
    """perf's filters for the switches and wake-ups of `tids`."""
    switch = " || ".join(f"prev_pid == {t} || next_pid == {t}" for t in tids)
    wakeup = " || ".join(f"pid == {t}" for t in tids)
    return switch, wakeup


def schedstat(pid):
    """(CPU clock ns, run-queue delay ns) of a single-threaded process, or None."""
    try:
        with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
            run, delay = f.read().split()[:2]
        return int(run), int(delay)
    except (OSError, ValueError):
        return None


class Sampler(threading.Thread):
    """Reads the backends' schedstat every 5 ms with CLOCK_MONOTONIC times."""

    def __init__(self, pids):
        super().__init__(daemon=True)
        self.pids = pids
        self.rows = {p: [] for p in pids}
        self.raw = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            for p in self.pids:
                t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
                s = schedstat(p)
                t1 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
                if s:
                    self.rows[p].append(((t0 + t1) // 2, *s))
                    self.raw.append((p, t0, t1, *s))
            time.sleep(0.005)

    def at(self, pid, t):
        """(run, delay, bracket) of pid at time t, interpolated between the reads
        around it (bracket: how far apart they were, ns); None outside the reads."""
        rows = self.rows[pid]
        i = bisect.bisect_left(rows, (t,))
        if i == 0 or i == len(rows):
            return None
        (ta, ra, da), (tb, rb, db) = rows[i - 1], rows[i]
        f = (t - ta) / (tb - ta) if tb > ta else 0.0
        return ra + f * (rb - ra), da + f * (db - da), tb - ta


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    profile = os.path.join(ROOT, "target/release/profile")
    extra = []
    for a in sys.argv[1:]:
        if a.startswith("--profile="):
            profile = a.split("=", 1)[1]
        elif a == "--fp":
            extra += ["--call-graph", "fp"]
        elif a.startswith("--mmap-pages="):
            extra += ["--mmap-pages", a.split("=", 1)[1]]
    seconds = args[0] if args else "10"
    clients = args[1] if len(args) > 1 else "4"
    bindir = pg_bin()
    tmp = tempfile.mkdtemp(prefix="pgrun-")
    os.chmod(tmp, 0o755)
    pg = pwd.getpwnam("postgres")
    data = os.path.join(tmp, "data")
    sock = os.path.join(tmp, "sock")
    os.makedirs(sock)
    os.chown(tmp, pg.pw_uid, pg.pw_gid)
    os.chown(sock, pg.pw_uid, pg.pw_gid)
    port = str(5400 + os.getpid() % 500)
    bench = perf = None
    try:
        as_postgres([f"{bindir}/initdb", "-D", data, "-A", "trust"], check=True, capture_output=True)
        as_postgres(
            [f"{bindir}/pg_ctl", "-D", data, "-w", "-l", os.path.join(tmp, "pg.log"),
             "-o", f"-p {port} -k {sock} -c listen_addresses= -c fsync=off", "start"],
            check=True, capture_output=True,
        )
        pgbench = shutil.which("pgbench") or f"{bindir}/pgbench"
        as_postgres([pgbench, "-h", sock, "-p", port, "-i", "-s", "2", "-q", "postgres"],
                    check=True, capture_output=True)
        bench = subprocess.Popen(
            ["runuser", "-u", "postgres", "--", pgbench, "-h", sock, "-p", port,
             "-c", clients, "-j", "2", "-T", str(int(float(seconds)) + 60), "postgres"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        with open(os.path.join(data, "postmaster.pid")) as f:
            pm = int(f.readline())
        backends = []
        for _ in range(100):
            time.sleep(0.1)
            out = subprocess.run(["ps", "--ppid", str(pm), "-o", "pid=,args="],
                                 capture_output=True, text=True).stdout
            backends = [int(l.split()[0]) for l in out.splitlines() if "[local]" in l]
            if len(backends) == int(clients):
                break
        if len(backends) != int(clients):
            sys.exit(f"found {len(backends)} backends, not {clients}")
        time.sleep(1.0)
        sampler = Sampler(backends)
        sampler.start()
        time.sleep(0.05)
        out = os.path.join(tmp, "pg.prof")
        load = os.getloadavg()[0]
        steal0 = steal_ticks()
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        perf_data = os.environ.get("PGRUN_PERF") or os.path.join(tmp, "perf.data")
        switch_f, wakeup_f = perf_filters(backends)
        if os.environ.get("PGRUN_PERF_ALL"):
            events = ["-e", "sched:sched_switch", "-e", "sched:sched_wakeup"]
        else:
            events = ["-e", "sched:sched_switch", "--filter", switch_f,
                      "-e", "sched:sched_wakeup", "--filter", wakeup_f]
        perf_err = os.path.join(tmp, "perf.err")
        with open(perf_err, "w") as err:
            perf = subprocess.Popen(["perf", "record", "-q", "-k", "mono", *events, "-a", "-o", perf_data],
                                    stdout=subprocess.DEVNULL, stderr=err)
        # perf has its events open once it has written its header.
        for _ in range(100):
            if perf.poll() is not None or os.path.exists(perf_data) and os.path.getsize(perf_data) > 0:
                break
            time.sleep(0.05)
        time.sleep(0.2)
        if perf.poll() is not None:
            with open(perf_err) as err:
                sys.exit(f"perf record failed: {err.read()}")
        rec = subprocess.run(
            [profile, "record", "--off-cpu", "-p", ",".join(map(str, backends)),
             "-d", seconds, "-o", out, *extra],
            capture_output=True, text=True,
        )
        steal1 = steal_ticks()
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        perf.send_signal(2)
        perf.wait()
        rec_cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
        time.sleep(0.05)
        sampler.stop.set()
        sampler.join()
        if rec.returncode != 0:
            sys.exit(f"profile record failed: {rec.stderr}")
        if os.environ.get("PGRUN_ROWS"):
            with open(os.environ["PGRUN_ROWS"], "w") as f:
                for r in sampler.raw:
                    f.write(" ".join(map(str, r)) + "\n")
        if os.environ.get("PGRUN_KEEP"):
            shutil.copy(out, os.environ["PGRUN_KEEP"])
        rep = subprocess.run([profile, "report", "-i", out, "--json"], capture_output=True, text=True)
        v = json.loads(rep.stdout)
        # The recording's window: from the attach (its events enabled) to the end.
        start, end = v["summary"]["attached_ns"], v["summary"]["end_time_ns"]
        traced = perf_account(perf_data, backends, start, end)
        worst_runnable = worst_running = worst_sum = 0.0
        missed = kernel_off = False
        rows = []
        ms = lambda ns: f"{ns / 1e6:.1f}"
        pc = lambda d, ref: f"{100 * d / ref if ref else 0:+.2f}%"
        for t in v["threads"]:
            if t["tid"] not in backends:
                continue
            st = t["states"]
            # Every backend lives through the recording: its life is the window.
            life = end - start
            states_sum = sum(st.values())
            a, b = sampler.at(t["tid"], start), sampler.at(t["tid"], end)
            if a is None or b is None:
                rows.append(f"| {t['tid']} | (schedstat not read around the recording) |")
                missed = True
                continue
            k_run, k_delay = b[0] - a[0], b[1] - a[1]
            p = traced[t["tid"]]
            runnable, running = st.get("runnable", 0), st.get("running", 0)
            d_runnable = runnable - k_delay
            d_running = running - k_run
            e_runnable = abs(d_runnable) / k_delay if k_delay else 1.0
            e_running = abs(d_running) / k_run if k_run else 0.0
            e_sum = abs(states_sum - life) / life
            worst_runnable = max(worst_runnable, e_runnable)
            worst_running = max(worst_running, e_running)
            worst_sum = max(worst_sum, e_sum)
            # The kernel's clock against its own switch tracepoints (perf's record of
            # them): the time it moved between the clock and the delay.
            moved = abs(p["running"] - k_run)
            miss = (abs(d_runnable) > max(30e6, 0.05 * k_delay) + moved
                    or e_running > 0.02 or e_sum > 0.01)
            missed |= miss
            # The kernel's own account off its own tracepoints: runnable off its delay
            # while running is its clock, the states add up, and perf's record of the
            # same sched_wakeup and sched_switch events agrees with ours (seen once in
            # 20 runs: a backend 37% over its delay, perf's runnable within 1.6%).
            kernel_off |= miss and e_running <= 0.02 and e_sum <= 0.01 and abs(
                runnable - p["runnable"]) <= max(30e6, 0.025 * p["runnable"])
            rows.append(
                f"| {t['tid']} | {ms(life)} | {ms(states_sum)} | {ms(runnable)} | {ms(k_delay)} | "
                f"{pc(d_runnable, k_delay)} | {ms(p['runnable'])} | {pc(runnable - p['runnable'], p['runnable'])} | "
                f"{ms(running)} | {ms(k_run)} | {pc(d_running, k_run)} | {ms(p['running'] - k_run)} | "
                f"{ms(st.get('io', 0))} | {ms(st.get('lock', 0))} | {ms(st.get('wait', 0))} | "
                f"{ms(st.get('sleep', 0) + st.get('other', 0))} | {ms(a[2])}, {ms(b[2])} |"
            )
        summary = [l for l in rec.stderr.splitlines()
                   if "off-CPU" in l or "lost" in l or "stacks cover" in l]
        print(f"`sudo benches/offcpu/pgbench_runnable.py {seconds} {clients}{' ' + ' '.join(a for a in sys.argv[3:] if not a.startswith('--profile')) if len(sys.argv) > 3 else ''}`: pgbench -c {clients} -j 2 "
              f"(scale 2, fsync off) on PostgreSQL ({bindir}), the {len(backends)} backends attached for "
              f"{seconds} s; 1-minute load average {load:.2f} at the start, {os.cpu_count()} CPUs.\n")
        print("| backend | life in recording (ms) | states sum | runnable | kernel run-queue delay | off "
              "| perf's runnable | off | running | kernel CPU clock | off | perf running - clock | io | lock "
              "| wait | sleep+other | schedstat reads apart at start, end |")
        print("|---" * 17 + "|")
        print("\n".join(rows))
        print(f"\nsteal during the recording (ticks per CPU): {[b - a for a, b in zip(steal0, steal1)]}")
        print(f"recorder's own CPU time: {rec_cpu:.2f} s; nice {os.nice(0)}")
        print("\nrecorder's summary:\n")
        for l in summary:
            print(f"    {l}")
        ok = not missed and len(rows) == len(backends)
        print(f"\nworst runnable {100 * worst_runnable:.2f}% off the kernel's run-queue delay (goal 5%, or 30 ms, "
              f"plus what the kernel moved), "
              f"worst running {100 * worst_running:.2f}% off its CPU clock (goal 2%), worst states sum "
              f"{100 * worst_sum:.2f}% off its life (goal 1%): {'met' if ok else 'MISSED'}")
        lost = " 0 lost," not in rec.stderr
        if not ok and kernel_off and not lost:
            print("a backend's runnable agrees with perf's record of the same scheduler events "
                  "but not with the kernel's run-queue delay (exit 3)")
        return 0 if ok else 2 if lost else 3 if kernel_off else 1
    finally:
        if perf and perf.poll() is None:
            perf.send_signal(2)
            perf.wait()
        # The server first: pgbench then ends by itself (its connections are gone).
        if os.path.exists(os.path.join(data, "postmaster.pid")):
            as_postgres([f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"],
                        capture_output=True)
        if bench:
            try:
                bench.wait(timeout=10)
            except subprocess.TimeoutExpired:
                bench.kill()
                bench.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
