"""Python chains deeper than the kernel's copy (128 frames) and the native stack copy,
beside py-spy (issue 44): tests/data/python/deep.py recursing 130 and 200 calls deep on
each CPython version given, recorded by PROFILE_BIN at -F 99 for 5 s, then by py-spy
(--nonblocking, 99 Hz) for 5 s: the share of `hot`'s samples with the whole chain,
<module> then level x (depth + 1) then hot.

Usage (as root): python3 benches/python_deep.py PROFILE_BIN 3.8.18,3.11.7,3.12.1,3.13.0
"""
import os
import subprocess
import sys
import tempfile
import time

tmp = tempfile.mkdtemp()
DEEP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "python", "deep.py")
BIN = sys.argv[1]
for ver in sys.argv[2].split(","):
    for depth in (130, 200):
        py = os.path.expanduser(f"~/.pyenv/versions/{ver}/bin/python3")
        stop = os.path.join(tmp, "stop")
        if os.path.exists(stop): os.remove(stop)
        p = subprocess.Popen([py, DEEP, stop, str(depth)], stdout=subprocess.PIPE)
        p.stdout.readline(); time.sleep(0.5)
        out = os.path.join(tmp, "deep.prof")
        subprocess.run([BIN, "record", "-p", str(p.pid), "-d", "5", "-F", "99", "-q", "-o", out], check=True)
        folded = subprocess.run([BIN, "report", "-i", out, "--folded", "-"], capture_output=True, text=True).stdout
        tot = whole = 0
        for l in folded.splitlines():
            s, n = l.rsplit(" ", 1); n = int(n)
            fr = s.split(";")
            py_fr = [f[:-4] for f in fr if f.endswith("_[j]")]
            if not py_fr or py_fr[-1] != "hot": continue
            tot += n
            if py_fr == ["<module>"] + ["level"] * (depth + 1) + ["hot"]: whole += n
        r = subprocess.run(["py-spy", "record", "-p", str(p.pid), "-d", "5", "-r", "99", "-f", "raw", "-o", os.path.join(tmp, "pyspy.txt"), "--nonblocking"], capture_output=True, text=True)
        ptot = pwhole = 0
        for l in open(os.path.join(tmp, "pyspy.txt")):
            s, n = l.rsplit(" ", 1); n = int(n)
            fr = [f.split(" (")[0] for f in s.split(";")]
            if fr[-1] != "hot": continue
            ptot += n
            if fr == ["<module>"] + ["level"] * (depth + 1) + ["hot"]: pwhole += n
        open(stop, "w").close(); p.wait()
        print(f"{ver} depth {depth}: profile {whole}/{tot} whole ({100*whole/max(tot,1):.1f}%), py-spy {pwhole}/{ptot} ({100*pwhole/max(ptot,1):.1f}%)", flush=True)
