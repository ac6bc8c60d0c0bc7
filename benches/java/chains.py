#!/usr/bin/env python3
"""Java stacks with no setup: how many samples of a JVM's hot thread have their whole
call chain, exact, with and without -XX:+PreserveFramePointer (docs/measurements/java-stacks.md, "Java
without setup").

The workload (tests/data/java/Chain.java) runs Chain.run -> levelA -> levelB -> recurse
(9 frames) -> spin on a thread named chain-worker, with no profiling flag. Each
configuration starts a fresh JVM, lets it run WARMUP seconds (default 10) after it is
ready, records it by pid for DURATION seconds with the profile binary, and classifies every chain-worker sample (its
[unsampled] remainder aside):

  exact      the stack reaches the thread's first frame (clone3), its native part is the
             reference's (the most common one of the PreserveFramePointer run), and its Java
             part is levelA, levelB, up to 9 recurse and spin in that order;
  truncated  the stack is marked [truncated: ...];
  wrong      anything else (a frame missing, extra or out of order).

usage: sudo benches/java/chains.py [PROFILE_BIN] [DURATION] [ROUNDS] [WARMUP]

Also prints the recorder's CPU time (user + system, naming included) per 1,000 samples of
the whole JVM.
"""

import collections
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROFILE = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/profile")
DURATION = sys.argv[2] if len(sys.argv) > 2 else "10"
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 1
WARMUP = float(sys.argv[4]) if len(sys.argv) > 4 else 10
JAVA_PART = ["void Chain.levelA()", "void Chain.levelB(int)"] + ["long Chain.recurse(int, long)"] * 9 + ["long Chain.spin(long)"]


def build(tmp):
    src = os.path.join(ROOT, "tests/data/java/Chain.java")
    subprocess.run(["javac", "-d", tmp, src], check=True)


def record(tmp, jvm_flags, profile_flags):
    cmd = ["java", "-XX:CompileCommand=quiet", "-XX:CompileCommand=dontinline,Chain::*"] + jvm_flags + ["-cp", tmp, "Chain"]
    jvm = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert jvm.stdout.readline().strip() == "ready"
        time.sleep(WARMUP)  # a running service, past its first compilations
        out = os.path.join(tmp, "java.prof")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([PROFILE, "record", "-p", str(jvm.pid), "-d", DURATION, "-q", "-o", out] + profile_flags, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        folded = subprocess.run([PROFILE, "report", "-i", out, "--per-thread", "--folded", "-"], check=True, capture_output=True, text=True).stdout
    finally:
        jvm.kill()
        jvm.wait()
        try:
            os.remove(f"/tmp/perf-{jvm.pid}.map")
        except FileNotFoundError:
            pass
    stacks = []
    samples = 0
    for line in folded.splitlines():
        frames, count = line.rsplit(" ", 1)
        frames = frames.split(";")
        samples += int(count)
        if frames[0] != "chain-worker" or frames[2:] == ["[unsampled]"]:
            continue
        user = [f.removesuffix("_[j]") for f in frames[2:] if not f.endswith("_[k]")]
        stacks.append((user, int(count)))
    return stacks, cpu, samples


def split(user):
    """The native part (up to levelA) and the Java part of a stack."""
    if "void Chain.levelA()" in user:
        i = user.index("void Chain.levelA()")
        return tuple(user[:i]), user[i:]
    return tuple(user), []


def classify(stacks, reference):
    counts = collections.Counter()
    for user, n in stacks:
        native, java = split(user)
        if any(f.startswith("[truncated") for f in user):
            counts["truncated"] += n
        elif native == reference and java and JAVA_PART[: len(java)] == java:
            counts["exact"] += n
        else:
            counts["wrong"] += n
    return counts


def main():
    with tempfile.TemporaryDirectory() as tmp:
        build(tmp)
        configs = [
            ("-XX:+PreserveFramePointer", ["-XX:+PreserveFramePointer"], []),
            ("no flag", [], []),
            ("no flag, --no-jvm-perfmap", [], ["--no-jvm-perfmap"]),
        ]
        results = {name: collections.Counter() for name, _, _ in configs}
        cost = {name: [0.0, 0] for name, _, _ in configs}
        reference = None
        for _ in range(ROUNDS):
            for name, jvm_flags, profile_flags in configs:
                stacks, cpu, samples = record(tmp, jvm_flags, profile_flags)
                cost[name][0] += cpu
                cost[name][1] += samples
                if reference is None:
                    natives = collections.Counter()
                    for user, n in stacks:
                        native, java = split(user)
                        if java and not any(f.startswith("[truncated") for f in user):
                            natives[native] += n
                    reference = natives.most_common(1)[0][0]
                    print("reference native part:", " -> ".join(reference))
                results[name] += classify(stacks, reference)
        print(f"{'JVM':32} {'samples':>8} {'exact':>7} {'truncated':>10} {'wrong':>7}   recorder CPU per 1,000 samples (all threads)")
        for name, c in results.items():
            total = sum(c.values()) or 1
            per_k = 1000 * cost[name][0] / max(cost[name][1], 1)
            print(f"{name:32} {total:8} {100*c['exact']/total:6.1f}% {100*c['truncated']/total:9.1f}% {100*c['wrong']/total:6.1f}%   {per_k:.2f} s")


if __name__ == "__main__":
    main()
