#!/usr/bin/env python3
"""Java frames of a JVM's first seconds: profile (from outside) against JFR (inside), in
the same JVM (issue 48).

Launches tests/data/java/Deploy.java under `profile record -F 999` for CPU_MS of its
worker's CPU time (10 s of a JVM's start by default), with JFR recording in the same
JVM (-XX:+UnlockDiagnosticVMOptions -XX:+DebugNonSafepoints, the `profile` settings:
jdk.ExecutionSample every 10 ms). Deploy loads a new copy of its App class in a new
class loader every 150 ms, each copy going from the interpreter to C1 to C2 within tens
of milliseconds, old copies unloaded and their code freed: what a server does after a
deploy. Prints, per side:
  lines    the share of Java frames (weighted by samples) that carry a line;
  inlined  the share of deploy-worker's samples holding an inlined frame;
and profile's notes about compiled frames it could not read. JVM_FLAGS (environment)
adds flags to the JVM (e.g. `-XX:-TieredCompilation`). These are not CPU timings: they
hold on a loaded machine. Needs root, a JDK 17 and a build of profile
(PROFILE, default target/release/profile).

usage: sudo benches/java/deploy_vs_jfr.py [CPU_MS]
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from frames_vs_jfr import PROFILE, folded, share, with_lines  # noqa: E402

CPU_MS = sys.argv[1] if len(sys.argv) > 1 else "10000"
THREAD = "deploy-worker"


def jfr_shares(jfr):
    """(frames with a line, Java frames, samples of THREAD with an inlined frame,
    samples of THREAD) from JFR's execution samples."""
    out = subprocess.run(
        ["jfr", "print", "--json", "--events", "jdk.ExecutionSample",
         "--stack-depth", "64", jfr],
        check=True, capture_output=True, text=True,
    ).stdout
    events = json.loads(out)["recording"]["events"]
    lines = frames = inlined = samples = 0
    for e in events:
        v = e["values"]
        stack = (v.get("stackTrace") or {}).get("frames") or []
        for f in stack:
            if "$$Lambda$" in f["method"]["type"]["name"]:
                continue
            frames += 1
            lines += f.get("lineNumber", -1) > 0
        name = ((v.get("sampledThread") or {}).get("javaName")) or ""
        if name == THREAD:
            samples += 1
            inlined += any(f.get("type") == "Inlined" for f in stack)
    return lines, frames, inlined, samples


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as d:
        shutil.copy(os.path.join(here, "../../tests/data/java/Deploy.java"), d)
        subprocess.run(["javac", "-d", d, os.path.join(d, "Deploy.java")], check=True)
        prof, jfr = os.path.join(d, "deploy.prof"), os.path.join(d, "deploy.jfr")
        env = dict(os.environ)
        env["JAVA_TOOL_OPTIONS"] = (
            "-XX:+UnlockDiagnosticVMOptions -XX:+DebugNonSafepoints "
            f"-XX:StartFlightRecording=filename={jfr},settings=profile "
            + os.environ.get("JVM_FLAGS", "")
        )
        r = subprocess.run(
            [PROFILE, "record", "-F", "999", "-o", prof, "--",
             "java", "-cp", d, "Deploy", CPU_MS],
            check=True, env=env, capture_output=True, text=True,
        )
        for line in r.stderr.splitlines():
            if "compiled" in line or "note" in line.lower():
                print("profile summary:", line.strip())
        with_line, frames = with_lines(prof)
        mine = [(f, n) for f, n in folded(prof) if f[0] == THREAD]
        total = sum(n for _, n in mine)
        held = sum(n for f, n in mine if any(x.endswith("_[i]") for x in f))
        print(f"deploy profile: lines on {share(with_line, frames)} of Java frames; "
              f"inlined frame in {share(held, total)} of {THREAD}'s samples")
        lines, jframes, inl, samples = jfr_shares(jfr)
        print(f"deploy JFR:     lines on {share(lines, jframes)} of Java frames; "
              f"inlined frame in {share(inl, samples)} of {THREAD}'s samples")


if __name__ == "__main__":
    main()
