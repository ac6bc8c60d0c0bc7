#!/usr/bin/env python3
"""Java methods named by profile (from outside) against JFR (inside), in the same run
(issue 30, docs/measurements/java-frames.md).

Runs, for each of three workloads, `profile record` launching a JVM that also records
JFR (-XX:+UnlockDiagnosticVMOptions -XX:+DebugNonSafepoints, the `profile` settings:
jdk.ExecutionSample every 10 ms):
  huge    a thread `huge-worker` running a method of 11 KB of bytecode, which HotSpot
          never compiles, for CPU_MS of its CPU time;
  javac   `javac` compiling that file (the JVM's own startup included);
  inline  tests/data/java/Inline.java: `inline-worker` loops on outer() -> mixA()
          (3/4 of the work) and mixB() (1/4), all inlined by C2, for CPU_MS of its CPU.
Prints, per workload: profile's samples, the share naming the huge method (huge) or
carrying a bare `Interpreter` / `[java: unknown method]` frame; JFR's execution samples
and the share whose top frame is the huge method (huge); for inline, the top-10 self
methods of the worker thread side by side (each side's share of its own samples of
that thread) and the largest gap; for every workload, the share of Java frames
(weighted by samples) that carry a line (lambda proxies, which have no line table, left
out). Needs root, a JDK 17 and a build of profile
(PROFILE, default target/release/profile).

usage: sudo benches/java/frames_vs_jfr.py [CPU_MS]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

PROFILE = os.environ.get("PROFILE", "target/release/profile")
CPU_MS = sys.argv[1] if len(sys.argv) > 1 else "3000"


def huge_source():
    head = """import java.lang.management.ManagementFactory;
public class Huge {
    static volatile long sink;
    public static void main(String[] a) throws Exception {
        Thread t = new Thread(() -> { long x = 1; while (true) { x = huge(x); sink = x; } }, "huge-worker");
        t.setDaemon(true); t.start(); long want = Long.parseLong(a[0]) * 1000000L;
        while (ManagementFactory.getThreadMXBean().getThreadCpuTime(t.getId()) < want) Thread.sleep(20);
    }
    public static long huge(long x) {
"""
    body = "".join(
        f"        x = x * {31 + 2 * i} + {i}; x ^= x >>> {1 + i % 13};\n" for i in range(700)
    )
    return head + body + "        return x;\n    }\n}\n"


# A Java method as the perf map (and so profile) writes it: `ret Class.name(args)`,
# with `:LINE` under --lines, and the colour suffix.
JAVA = re.compile(r"^\S+ [\w.$+/]+\.[\w$<>]+\(.*\)(:\d+)?_\[[ji]\]$")


def folded(prof, lines=False):
    out = subprocess.run(
        [PROFILE, "report", "-i", prof, "--per-thread", "--folded", "-"]
        + (["--lines"] if lines else []),
        check=True, capture_output=True, text=True,
    ).stdout
    for line in out.splitlines():
        stack, n = line.rsplit(" ", 1)
        frames = stack.split(";")
        if frames[-1] != "[unsampled]":
            yield frames, int(n)


def with_lines(prof):
    """Java frames (each counted once per sample it is in) and how many carry a line."""
    frames = with_line = 0
    for f, n in folded(prof, lines=True):
        for x in f:
            # Lambda proxies (hidden classes) have no source and no line table.
            if JAVA.match(x) and "$$Lambda$" not in x:
                frames += n
                if re.search(r":\d+_\[[ji]\]$", x):
                    with_line += n
    return with_line, frames


def self_methods(stacks, thread):
    """Method -> samples of `thread` whose innermost user frame it is (profile)."""
    out = {}
    for f, n in stacks:
        if f[0] != thread:
            continue
        user = [x for x in f if not x.endswith("_[k]")]
        leaf = re.sub(r"_\[[a-z]\]$", "", user[-1])
        # `long Inline.mixA(long)` -> `Inline.mixA(long)`, as JFR writes it.
        if JAVA.match(user[-1]):
            leaf = leaf.split(" ", 1)[1]
        out[leaf] = out.get(leaf, 0) + n
    return out


def jfr_samples(jfr):
    """(thread, top frame) of each jdk.ExecutionSample."""
    out = subprocess.run(
        ["jfr", "print", "--events", "jdk.ExecutionSample", "--stack-depth", "1", jfr],
        check=True, capture_output=True, text=True,
    ).stdout
    thread, top = None, None
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("sampledThread ="):
            thread = line.split('"')[1] if '"' in line else line
        elif line.startswith("line:") or (top is None and "line:" in line):
            top = line
        elif line.startswith("jdk.ExecutionSample"):
            if thread is not None:
                yield thread, top or ""
            thread, top = None, None
    if thread is not None:
        yield thread, top or ""


def run(name, cmd, d):
    prof, jfr = os.path.join(d, name + ".prof"), os.path.join(d, name + ".jfr")
    env = dict(os.environ)
    env["JAVA_TOOL_OPTIONS"] = (
        "-XX:+UnlockDiagnosticVMOptions -XX:+DebugNonSafepoints "
        f"-XX:StartFlightRecording=filename={jfr},settings=profile"
    )
    subprocess.run([PROFILE, "record", "-F", "999", "-o", prof, "--"] + cmd,
                   check=True, env=env, capture_output=True)
    stacks = list(folded(prof))
    return stacks, list(jfr_samples(jfr))


def share(part, whole):
    return f"{part}/{whole} ({100.0 * part / max(whole, 1):.1f}%)"


def compare_top10(mine, theirs):
    """The top-10 self methods of either side, each side's share; the largest gap."""
    tm, tt = sum(mine.values()), sum(theirs.values())
    top = sorted(set(mine) | set(theirs),
                 key=lambda k: -(mine.get(k, 0) / max(tm, 1) + theirs.get(k, 0) / max(tt, 1)))
    gap = 0.0
    print(f"inline top-10 self methods of inline-worker: profile ({tm} samples) | JFR ({tt})")
    for k in top[:10]:
        a, b = 100.0 * mine.get(k, 0) / max(tm, 1), 100.0 * theirs.get(k, 0) / max(tt, 1)
        gap = max(gap, abs(a - b))
        print(f"  {a:5.1f}% | {b:5.1f}%  {k}")
    print(f"inline largest gap: {gap:.1f} points")


def main():
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "Huge.java")
        with open(src, "w") as f:
            f.write(huge_source())
        subprocess.run(["javac", "-d", d, src], check=True)

        stacks, jfr = run("huge", ["java", "-cp", d, "Huge", CPU_MS], d)
        mine = [(f, n) for f, n in stacks if f[0] == "huge-worker"]
        total = sum(n for _, n in mine)
        named = sum(n for f, n in mine if any(x.startswith("long Huge.huge(long)") for x in f))
        print(f"huge  profile: huge() named in {share(named, total)} of huge-worker's samples")
        theirs = [top for t, top in jfr if t == "huge-worker"]
        hit = sum(1 for top in theirs if "Huge.huge(long)" in top)
        print(f"huge  JFR:     huge() on top in {share(hit, len(theirs))} of huge-worker's samples")
        with_line, frames = with_lines(os.path.join(d, "huge.prof"))
        print(f"huge  profile: lines on {share(with_line, frames)} of Java frames")

        stacks, jfr = run("javac", ["javac", "-d", d, src], d)
        total = sum(n for _, n in stacks)
        bare = sum(n for f, n in stacks if "Interpreter_[j]" in f)
        unknown = sum(n for f, n in stacks if "[java: unknown method]_[j]" in f)
        print(f"javac profile: bare Interpreter in {share(bare, total)} of samples, "
              f"[java: unknown method] in {share(unknown, total)}")
        print(f"javac JFR:     {len(jfr)} execution samples (Java threads only)")
        with_line, frames = with_lines(os.path.join(d, "javac.prof"))
        print(f"javac profile: lines on {share(with_line, frames)} of Java frames")

        here = os.path.dirname(os.path.abspath(__file__))
        shutil.copy(os.path.join(here, "../../tests/data/java/Inline.java"), d)
        subprocess.run(["javac", "-d", d, os.path.join(d, "Inline.java")], check=True)
        stacks, jfr = run("inline", ["java", "-cp", d, "Inline", CPU_MS], d)
        mine = self_methods(stacks, "inline-worker")
        theirs = {}
        for t, top in jfr:
            if t == "inline-worker":
                m = re.sub(r"\s+line:.*$", "", top.strip())
                theirs[m] = theirs.get(m, 0) + 1
        compare_top10(mine, theirs)
        with_line, frames = with_lines(os.path.join(d, "inline.prof"))
        print(f"inline profile: lines on {share(with_line, frames)} of Java frames")


if __name__ == "__main__":
    main()
