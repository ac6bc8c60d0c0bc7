#!/usr/bin/env python3
"""Interpreted Java methods named by profile (from outside) against JFR (inside), in
the same run (issue 30, docs/measurements/java-frames.md).

Runs, for each of two workloads, `profile record` launching a JVM that also records
JFR (-XX:+UnlockDiagnosticVMOptions -XX:+DebugNonSafepoints, the `profile` settings:
jdk.ExecutionSample every 10 ms):
  huge   a thread `huge-worker` running a method of 11 KB of bytecode, which HotSpot
         never compiles, for CPU_MS of its CPU time;
  javac  `javac` compiling that file (the JVM's own startup included).
Prints, per workload: profile's samples, the share naming the huge method (huge) or
carrying a bare `Interpreter` / `[java: unknown method]` frame; JFR's execution samples
and the share whose top frame is the huge method (huge). Needs root, a JDK 17 and a
build of profile (PROFILE, default target/release/profile).

usage: sudo benches/java/frames_vs_jfr.py [CPU_MS]
"""
import os
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


def folded(prof):
    out = subprocess.run(
        [PROFILE, "report", "-i", prof, "--per-thread", "--folded", "-"],
        check=True, capture_output=True, text=True,
    ).stdout
    for line in out.splitlines():
        stack, n = line.rsplit(" ", 1)
        frames = stack.split(";")
        if frames[-1] != "[unsampled]":
            yield frames, int(n)


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

        stacks, jfr = run("javac", ["javac", "-d", d, src], d)
        total = sum(n for _, n in stacks)
        bare = sum(n for f, n in stacks if "Interpreter_[j]" in f)
        unknown = sum(n for f, n in stacks if "[java: unknown method]_[j]" in f)
        print(f"javac profile: bare Interpreter in {share(bare, total)} of samples, "
              f"[java: unknown method] in {share(unknown, total)}")
        print(f"javac JFR:     {len(jfr)} execution samples (Java threads only)")


if __name__ == "__main__":
    main()
