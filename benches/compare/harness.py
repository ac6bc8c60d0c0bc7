"""Process plumbing and the recorders under comparison, for the side-by-side benchmark
(benches/compare/run.sh). Owns: starting every child in its own process group and
killing all of them on exit (no target or recorder is ever left running), waiting with
rusage (CPU and peak RSS of each step), reading a live process's CPU time, fd count and
ring-buffer mappings from /proc, the perf_event_paranoid switch samply needs, and how
each tool (profile, perf record with DWARF or frame-pointer stacks, samply) is invoked
and how its recording is read back (samples, lost, per-thread and per-function shares).
"""

import atexit
import contextlib
import gzip
import json
import os
import re
import signal
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field

_CHILDREN = []


def spawn(argv, measure=False, **kw):
    """Starts argv in a new process group that cleanup() kills if still running. With
    measure, argv runs under /usr/bin/time so wait() reports its own CPU time and peak
    RSS (rusage from wait4 here would carry this Python process's RSS across the exec)."""
    timefile = None
    if measure:
        fd, timefile = tempfile.mkstemp(prefix="time-")
        os.close(fd)
        argv = ["/usr/bin/time", "-f", "%U %S %M", "-o", timefile, *argv]
    p = subprocess.Popen(argv, start_new_session=True, **kw)
    p.timefile = timefile
    _CHILDREN.append(p)
    return p


def measured_pid(p):
    """The pid of the measured command itself (the child of /usr/bin/time)."""
    if p.timefile is None:
        return p.pid
    for _ in range(500):
        with contextlib.suppress(OSError):
            with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
                kids = f.read().split()
            if kids:
                return int(kids[0])
        time.sleep(0.002)
    raise RuntimeError(f"no child under /usr/bin/time ({p.args})")


def cleanup():
    for p in _CHILDREN:
        if p.returncode is None and p.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                p.wait()


atexit.register(cleanup)
for _sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(_sig, lambda s, f: (cleanup(), os._exit(128 + s)))


def kill(p):
    """Kills p's whole process group and reaps p."""
    if p.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            p.wait()


@dataclass
class Exit:
    """How a waited-for child ended and what it cost."""

    code: int
    at: float  # time.monotonic() when it was reaped
    cpu: float  # user + system seconds of the child (its threads included)
    maxrss_mib: float


def wait(p):
    """Waits for p; its CPU time and peak RSS come from /usr/bin/time when it was
    spawned with measure, else from wait4 (peak RSS then includes ours)."""
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    at = time.monotonic()
    cpu, rss_kib = ru.ru_utime + ru.ru_stime, ru.ru_maxrss
    if p.timefile:
        with open(p.timefile) as f:
            last = f.read().strip().splitlines()[-1].split()
        os.remove(p.timefile)
        cpu, rss_kib = float(last[0]) + float(last[1]), int(last[2])
    return Exit(p.returncode, at, cpu, rss_kib / 1024)


def run_timed(argv, **kw):
    """Runs one command to completion; returns (Exit, wall seconds)."""
    t0 = time.monotonic()
    e = wait(spawn(argv, **kw))
    return e, e.at - t0


def run_pipeline(argvs, stdout):
    """Runs argvs connected by pipes, the last writing to stdout (a file); returns
    ([Exit per step], wall seconds until the last step ended)."""
    t0 = time.monotonic()
    procs, prev = [], None
    for i, argv in enumerate(argvs):
        last = i == len(argvs) - 1
        p = spawn(argv, measure=True, stdin=prev, stdout=stdout if last else subprocess.PIPE,
                  stderr=subprocess.DEVNULL)
        if prev is not None:
            prev.close()
        prev = p.stdout
        procs.append(p)
    exits = [wait(p) for p in procs]
    return exits, max(e.at for e in exits) - t0


def cpu_seconds(pid):
    """CPU time of a live process so far, all threads, from their schedstat (ns)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
    return total / 1e9


def process_cpu_seconds(pid):
    """CPU time of a process so far, exited threads included (/proc/PID/stat, in ticks)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fd_count(pid):
    with contextlib.suppress(OSError):
        return len(os.listdir(f"/proc/{pid}/fd"))
    return 0


def ring_bytes(pid):
    """Bytes of perf ring buffer a process has mapped (its locked memory for perf)."""
    total = 0
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                if "perf_event" in line:
                    lo, hi = line.split()[0].split("-")
                    total += int(hi, 16) - int(lo, 16)
    return total


@contextlib.contextmanager
def paranoid(value):
    """Sets kernel.perf_event_paranoid for the block and restores it after."""
    path = "/proc/sys/kernel/perf_event_paranoid"
    with open(path) as f:
        old = f.read().strip()
    with open(path, "w") as f:
        f.write(str(value))
    try:
        yield
    finally:
        with open(path, "w") as f:
            f.write(old)


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def wait_quiet(threshold, max_wait, log):
    """Sleeps in steps until the 1-minute load is below threshold (or max_wait passes);
    returns (load when starting, seconds waited)."""
    t0 = time.monotonic()
    while loadavg() >= threshold and time.monotonic() - t0 < max_wait:
        log(f"load {loadavg():.2f} >= {threshold}: waiting for a quiet machine "
            f"({(time.monotonic() - t0) / 60:.0f} of {max_wait / 60:.0f} min)")
        time.sleep(30)
    return loadavg(), time.monotonic() - t0


# --- The tools -------------------------------------------------------------------


@dataclass
class Recording:
    """What one recorder run left behind, read back uniformly."""

    tool: str
    path: str
    samples: int = 0
    lost: int = 0
    extra: dict = field(default_factory=dict)


class Tool:
    """A recorder: how to launch it and how to read its recording."""

    name = ""
    needs_paranoid_1 = False

    def __init__(self, bins, call_graph="dwarf"):
        self.bins = bins
        self.call_graph = call_graph

    def record_argv(self, out, hz, stack, target):
        raise NotImplementedError

    def read(self, out, stderr_text):
        raise NotImplementedError

    def context(self):
        return paranoid(1) if self.needs_paranoid_1 else contextlib.nullcontext()

    def postprocess_steps(self, out, svg):
        """Commands that turn a recording into an SVG on stdout; none when not compared."""
        return []


def _target_args(target):
    """target is ("pid", PID) or ("cmd", [argv...])."""
    kind, what = target
    return ["-p", str(what)] if kind == "pid" else ["--", *what]


class Profile(Tool):
    name = "profile"

    def record_argv(self, out, hz, stack, target):
        # Like perf -p, follow the processes the attached one starts.
        children = ["--children"] if target[0] == "pid" else []
        return [self.bins["profile"], "record", "-F", str(hz), "--call-graph", self.call_graph,
                "--stack-size", str(stack), *children, "-o", out, *_target_args(target)]

    def read(self, out, stderr_text):
        m = re.search(r"profile: (\d+) samples from .*?, (\d+) lost", stderr_text)
        r = Recording(self.name, out)
        if m:
            r.samples, r.lost = int(m.group(1)), int(m.group(2))
        m = re.search(r"named \d+ of \d+ unique frames in (\d+) ms", stderr_text)
        if m:
            r.extra["symbolize_ms"] = int(m.group(1))
        return r

    def folded(self, out, per_thread=False):
        """Folded stacks of a recording as a Counter of tuples of frames."""
        argv = [self.bins["profile"], "report", "-i", out, "--folded", "-"]
        if per_thread:
            argv.append("--per-thread")
        text = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        return parse_folded(text)

    def postprocess_steps(self, out, svg):
        return [[self.bins["profile"], "report", "-i", out, "--flamegraph", "-"]]


class Perf(Tool):
    def __init__(self, bins, call_graph="dwarf"):
        super().__init__(bins, call_graph)
        self.name = "perf-dwarf" if call_graph == "dwarf" else "perf-fp"

    def record_argv(self, out, hz, stack, target):
        cg = ["--call-graph", f"dwarf,{stack}"] if self.call_graph == "dwarf" else ["-g"]
        return [self.bins["perf"], "record", "-e", "task-clock", "-F", str(hz), *cg,
                "-q", "-o", out, *_target_args(target)]

    def read(self, out, stderr_text):
        text = subprocess.run([self.bins["perf"], "report", "-i", out, "--stats"],
                              capture_output=True, text=True).stdout
        r = Recording(self.name, out)
        m = re.search(r"SAMPLE events:\s+(\d+)", text)
        r.samples = int(m.group(1)) if m else 0
        r.lost = sum(int(n) for n in re.findall(r"LOST(?:_SAMPLES)? events:\s+(\d+)", text))
        return r

    def shares(self, out, sort):
        """{key: percent} from perf report --sort KEY (self time, no call graphs)."""
        text = subprocess.run(
            [self.bins["perf"], "report", "-i", out, "--no-children", "-g", "none",
             "--sort", sort, "--stdio", "-q", "--percentage", "relative"],
            capture_output=True, text=True).stdout
        out = {}
        for line in text.splitlines():
            m = re.match(r"\s*([\d.]+)%\s+(.*\S)", line)
            if m:
                out[m.group(2)] = out.get(m.group(2), 0.0) + float(m.group(1))
        return out

    def postprocess_steps(self, out, svg):
        return [[self.bins["perf"], "script", "-i", out],
                [self.bins["inferno-collapse-perf"]],
                [self.bins["inferno-flamegraph"]]]


class Samply(Tool):
    name = "samply"
    needs_paranoid_1 = True

    def record_argv(self, out, hz, stack, target):
        return [self.bins["samply"], "record", "--save-only", "--unstable-presymbolicate",
                "-r", str(hz), "-o", out, *_target_args(target)]

    def _load(self, out):
        opener = gzip.open if out.endswith(".gz") else open
        with opener(out, "rt") as f:
            return json.load(f)

    def read(self, out, stderr_text):
        r = Recording(self.name, out)
        with contextlib.suppress(OSError, ValueError):
            prof = self._load(out)
            r.samples = sum(_sample_count(t) for t in prof.get("threads", []))
        return r

    def thread_samples(self, out):
        """{tid as text: samples} from samply's profile (its tids are strings)."""
        prof = self._load(out)
        return {str(t.get("tid")): _sample_count(t) for t in prof.get("threads", [])}

    def leaf_addresses(self, out, lib_name):
        """Counter of leaf-frame addresses (relative to lib_name) over all samples."""
        prof = self._load(out)
        libs = [lib.get("name") for lib in prof.get("libs", [])]
        leaves = Counter()
        for t in prof.get("threads", []):
            s, st, fr, fn, res = (t.get(k, {}) for k in
                                  ("samples", "stackTable", "frameTable", "funcTable",
                                   "resourceTable"))
            for stack in s.get("stack", []):
                if stack is None:
                    continue
                frame = st["frame"][stack]
                res_i = fn["resource"][fr["func"][frame]]
                lib_i = res["lib"][res_i] if res_i is not None and res_i >= 0 else None
                if lib_i is not None and libs[lib_i] == lib_name:
                    leaves[fr["address"][frame]] += 1
        return leaves


def _sample_count(thread):
    s = thread.get("samples", {})
    return s.get("length") or len(s.get("stack", []))


def parse_folded(text):
    c = Counter()
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        if stack:
            c[tuple(stack.split(";"))] += int(n)
    return c


TRUNCATION_MARKER = "[truncated: stack copy too small]"


def truncated_share(folded):
    total = sum(folded.values())
    cut = sum(n for s, n in folded.items() if s and s[0] == TRUNCATION_MARKER)
    return cut / total if total else float("nan")
