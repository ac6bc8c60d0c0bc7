#!/usr/bin/env python3
"""Tomcat from a cold start: profile (from outside, attached by pid) against JFR
(inside), in the same JVM (issue 48, docs/runtimes.md).

Starts Debian's Tomcat 10 (`tomcat10`, `tomcat10-examples`: installed with apt if
missing) in a private CATALINA_BASE on a free port, its JVM recording JFR from its
start (-XX:+UnlockDiagnosticVMOptions -XX:+DebugNonSafepoints, the `profile` settings
with jdk.ExecutionSample every JFR_PERIOD, 1 ms by default: at the `profile` settings'
10 ms JFR took about 750 samples per 20 s round, too few to rank methods that each
hold 0.5-2% of a flat profile; at 1 ms about 5 times more). As soon as the JVM's pid exists, `profile record -p
PID -F 999 -d SECS` attaches (within its first second), and CLIENTS threads of this
script request the examples' servlets and JSPs (each JSP compiled on its first request,
as after a deploy) for the whole recording, driven by wrk (CLIENTS connections; a
Python client could not keep Tomcat busy, and JFR then took too few samples to rank
methods). Then JFR's recording is dumped and both are compared over the same window
(JFR's samples taken before profile attached are left out). With ROUNDS > 1 the whole
cold start is repeated and the counts are pooled over the rounds, both sides alike:
  lines   the share of Java frames (weighted by samples) that carry a line;
  top-10  the ten Java methods most often running (self: the leaf frame is Java code,
          as in JFR's execution samples, which leave threads in native code to its
          native-method samples), each side's share of its own such samples, and how
          many of the ten the two share. JFR's share of a method is counted over its
          execution samples; profile's over its samples with a Java leaf.
  inlined the share of samples holding a Java frame that hold an inlined one (JFR: of
          its execution samples), and profile's samples with a bare `Interpreter`
          frame (a Java frame it could not read).
With WARM=SECONDS in the environment, Tomcat is first loaded that long and profile
attaches then: the same figures for a warm JVM.
These are not CPU timings: they hold on a loaded machine. Needs root, a JDK 17 (java,
jcmd, jfr), wrk (installed with apt if missing) and a build of profile (PROFILE,
default target/release/profile).

usage: sudo [WARM=S] [JFR_PERIOD=1ms] [KEEP=DIR] benches/java/tomcat_cold.py [SECS]
            [CLIENTS] [ROUNDS]
"""
import collections
import datetime
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from frames_vs_jfr import PROFILE, folded, share, with_lines  # noqa: E402

SECS = sys.argv[1] if len(sys.argv) > 1 else "20"
CLIENTS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 1
HOME = "/usr/share/tomcat10"
JFR_PERIOD = os.environ.get("JFR_PERIOD", "1ms")
# With KEEP=DIR each round's recording and JFR file are copied there.
KEEP = os.environ.get("KEEP")
WARM = float(os.environ.get("WARM", "0"))
PATHS = [
    "/examples/servlets/servlet/HelloWorldExample",
    "/examples/servlets/servlet/RequestInfoExample",
    "/examples/servlets/servlet/RequestHeaderExample",
    "/examples/jsp/jsp2/el/basic-arithmetic.jsp",
    "/examples/jsp/jsp2/el/functions.jsp?foo=JSP+2.0",
    "/examples/jsp/jsp2/simpletag/hello.jsp",
    "/examples/jsp/dates/date.jsp",
    "/examples/jsp/snp/snoop.jsp",
    "/examples/jsp/num/numguess.jsp?guess=42",
    "/examples/jsp/jsptoserv/jsptoservlet.jsp",
]
# `ret pkg.Class.name(args)` (a perf-map name) or `pkg.Class.name(args)`.
METHOD = re.compile(r"^(?:\S+ )?([\w.$/]+)\.([\w$<>]+)\(.*\)(?::\d+)?_\[[ji]\]$")


def install():
    if not (os.path.exists(f"{HOME}/bin/catalina.sh")
            and os.path.isdir("/usr/share/tomcat10-examples")
            and shutil.which("wrk")):
        subprocess.run(["apt-get", "install", "-y", "tomcat10", "tomcat10-examples",
                        "wrk"], check=True, stdout=subprocess.DEVNULL)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base(d, port):
    """A CATALINA_BASE of our own: Debian's configuration on PORT, the examples app."""
    b = os.path.join(d, "base")
    shutil.copytree("/etc/tomcat10", os.path.join(b, "conf"), symlinks=False,
                    ignore=shutil.ignore_patterns("Catalina", "policy.d"))
    server = os.path.join(b, "conf", "server.xml")
    text = open(server).read().replace('port="8080"', f'port="{port}"')
    text = text.replace('port="8005"', 'port="-1"')
    open(server, "w").write(text)
    for sub in ("logs", "temp", "work", "webapps"):
        os.makedirs(os.path.join(b, sub), exist_ok=True)
    shutil.copytree("/usr/share/tomcat10-examples/examples",
                    os.path.join(b, "webapps", "examples"), symlinks=True)
    return b


def wrk_script(d):
    """A wrk script that requests PATHS in turn."""
    path = os.path.join(d, "paths.lua")
    quoted = ", ".join('"' + p + '"' for p in PATHS)
    with open(path, "w") as f:
        f.write(f"local paths = {{{quoted}}}\nlocal i = 0\n"
                "request = function()\n  i = i + 1\n"
                "  return wrk.format(\"GET\", paths[i % #paths + 1])\nend\n")
    return path


def wait_for(port, limit=60):
    """Wait until Tomcat answers on PORT (wrk gives up on a refused connection)."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.02)
    sys.exit(f"tomcat_cold.py: Tomcat did not listen on port {port}")


def norm(method):
    """One spelling on both sides: dots, lambda proxies without their numbers."""
    return re.sub(r"\$\$Lambda\$[\w/]*", "$$Lambda", method.replace("/", "."))


def profile_inlined(prof):
    """Samples holding a Java frame, those holding an inlined one, those with a bare
    `Interpreter` frame."""
    java = inlined = bare = 0
    for frames, n in folded(prof):
        if any(METHOD.match(f) for f in frames):
            java += n
            inlined += n * any(f.endswith("_[i]") for f in frames)
        bare += n * any(f.split("_[")[0] == "Interpreter" for f in frames)
    return java, inlined, bare


def profile_top(prof):
    """The Java method of each sample whose leaf is Java code: Counter, total."""
    top = collections.Counter()
    for frames, n in folded(prof):
        # Only samples running Java code (a Java leaf): JFR's execution samples are
        # of threads in Java; those in native code are its native-method samples.
        leaf = METHOD.match(frames[-1])
        if leaf:
            top[norm(f"{leaf.group(1)}.{leaf.group(2)}")] += n
    return top, sum(top.values())


def jfr_stats(jfr, since):
    """JFR's execution samples taken at or after `since` (a datetime): lines, Java
    frames, the Counter of innermost methods, the number of samples and how many of
    them hold an inlined frame."""
    out = subprocess.run(
        ["jfr", "print", "--json", "--events", "jdk.ExecutionSample",
         "--stack-depth", "64", jfr],
        check=True, capture_output=True, text=True,
    ).stdout
    lines = frames = inlined = 0
    top = collections.Counter()
    for e in json.loads(out)["recording"]["events"]:
        v = e["values"]
        at = datetime.datetime.fromisoformat(v["startTime"].replace("Z", "+00:00"))
        stack = (v.get("stackTrace") or {}).get("frames") or []
        if at < since or not stack:
            continue
        for f in stack:
            if "$$Lambda$" in f["method"]["type"]["name"]:
                continue
            frames += 1
            lines += f.get("lineNumber", -1) > 0
        m = stack[0]["method"]
        top[norm(f"{m['type']['name']}.{m['name']}")] += 1
        inlined += any(f.get("type") == "Inlined" for f in stack)
    return lines, frames, top, sum(top.values()), inlined


def one_round(d, secs):
    """One cold start: (profile's recording, JFR's counts, summary lines)."""
    port = free_port()
    b = base(d, port)
    prof, jfr = os.path.join(d, "tomcat.prof"), os.path.join(d, "tomcat.jfr")
    env = dict(os.environ, CATALINA_HOME=HOME, CATALINA_BASE=b,
               CATALINA_TMPDIR=os.path.join(b, "temp"))
    env["JAVA_OPTS"] = (
        "-XX:+UnlockDiagnosticVMOptions -XX:+DebugNonSafepoints "
        f"-XX:StartFlightRecording=filename={jfr},settings=profile,"
        f"jdk.ExecutionSample#period={JFR_PERIOD}"
    )
    started = time.monotonic()
    tomcat = subprocess.Popen([f"{HOME}/bin/catalina.sh", "run"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # catalina.sh execs java: the pid is the JVM's once its command is java.
    while "java" not in open(f"/proc/{tomcat.pid}/comm").read():
        time.sleep(0.01)
    if WARM:
        wait_for(port)
        # wrk runs until the recording ends (its own -d is only an upper bound).
        load = subprocess.Popen(
            ["wrk", "-t", "1", "-c", str(CLIENTS), "-d", f"{int(WARM + float(secs)) + 5}s",
             "-s", wrk_script(d), f"http://127.0.0.1:{port}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        time.sleep(WARM)
    since = datetime.datetime.now(datetime.timezone.utc)
    rec = subprocess.Popen(
        [PROFILE, "record", "-p", str(tomcat.pid), "-F", "999", "-d", secs, "-o", prof],
        stderr=subprocess.PIPE, text=True,
    )
    attached = time.monotonic() - started
    if not WARM:
        wait_for(port)
        # wrk runs until the recording ends (its own -d is only an upper bound).
        load = subprocess.Popen(
            ["wrk", "-t", "1", "-c", str(CLIENTS), "-d", f"{int(secs) + 5}s",
             "-s", wrk_script(d), f"http://127.0.0.1:{port}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
    _, err = rec.communicate()
    load.terminate()
    out, _ = load.communicate()
    subprocess.run(["jcmd", str(tomcat.pid), "JFR.dump", f"filename={jfr}"],
                   check=True, stdout=subprocess.DEVNULL)
    tomcat.terminate()
    tomcat.wait()
    said = [f"profile summary: {line.strip()}" for line in err.splitlines()
            if "compiled" in line or "note" in line.lower()]
    requests = re.search(r"(\d+) requests in", out or "")
    said.append(f"Tomcat: profile attached {attached:.2f} s after the start; "
                f"{requests.group(1) if requests else 'unknown'} requests "
                f"(wrk, {CLIENTS} connections)")
    return prof, jfr_stats(jfr, since), said


def main():
    if os.geteuid() != 0:
        sys.exit("tomcat_cold.py: run as root")
    install()
    with_line = frames = lines = jframes = pn = jn = 0
    pjava = pinl = pbare = jinl = 0
    ptop, jtop = collections.Counter(), collections.Counter()
    for r in range(ROUNDS):
        with tempfile.TemporaryDirectory() as d:
            prof, (jl, jf, jt, n, ji), said = one_round(d, SECS)
            for line in said:
                print(f"round {r + 1}: {line}")
            if KEEP:
                os.makedirs(KEEP, exist_ok=True)
                shutil.copy(prof, os.path.join(KEEP, f"tomcat-{r + 1}.prof"))
                shutil.copy(os.path.join(d, "tomcat.jfr"), os.path.join(KEEP, f"tomcat-{r + 1}.jfr"))
            w, f = with_lines(prof)
            top, total = profile_top(prof)
            a, b, c = profile_inlined(prof)
            pjava, pinl, pbare, jinl = pjava + a, pinl + b, pbare + c, jinl + ji
        with_line, frames, lines, jframes = with_line + w, frames + f, lines + jl, jframes + jf
        ptop.update(top)
        jtop.update(jt)
        pn, jn = pn + total, jn + n
    print(f"lines: profile {share(with_line, frames)} of {frames} Java frames; "
          f"JFR {share(lines, jframes)} of {jframes}")
    print(f"inlined: profile {share(pinl, pjava)} of samples holding Java frames; "
          f"JFR {share(jinl, jn)} of its execution samples; bare Interpreter frames "
          f"in {pbare} of profile's samples")
    p10 = [m for m, _ in ptop.most_common(10)]
    j10 = [m for m, _ in jtop.most_common(10)]
    print("| # | profile (share of its samples running Java code) | JFR |")
    print("|---|---|---|")
    for i in range(10):
        p = f"{p10[i]} {100 * ptop[p10[i]] / pn:.1f}%" if i < len(p10) else ""
        j = f"{j10[i]} {100 * jtop[j10[i]] / jn:.1f}%" if i < len(j10) else ""
        print(f"| {i + 1} | {p} | {j} |")
    print(f"top-10 shared: {len(set(p10) & set(j10))} of 10 over {ROUNDS} round(s) "
          f"(profile {pn} samples running Java code, JFR {jn})")


if __name__ == "__main__":
    main()
