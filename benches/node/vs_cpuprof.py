#!/usr/bin/env python3
"""Issue 47: profile's split of a CPU-bound Node program among its JavaScript
functions, recorded without flags, against `node --cpu-prof` on the same program and
against the program's own CPU clock per function.

The program's `driver` calls, in turn and each timed with process.cpuUsage():
`mega` (megamorphic property loads: V8's frameless LoadIC_Megamorphic builtin),
`plain` (a numeric loop TurboFan optimizes), and `middle`, which builds a string from
`inner` (a large numeric loop V8 does not inline). Each function's share is the
share of the driver's samples that have it in their stack (its total time); the
clock's share is its microseconds over the driver's.

Usage: benches/node/vs_cpuprof.py [PROFILE_BINARY] [CPU_MS]   (as root or with
perf_event_paranoid <= 1; default ./target/debug/profile, 4000 ms)
"""
import json
import os
import subprocess
import sys
import tempfile

PROFILE = sys.argv[1] if len(sys.argv) > 1 else "./target/debug/profile"
CPU_MS = sys.argv[2] if len(sys.argv) > 2 else "4000"
FUNCS = ["mega", "plain", "middle", "inner"]


def program(path):
    loads = "".join(f"      s += objs[(i + {k}) & 63].x;\n" for k in range(90))
    body = "".join(f"    s = (s + (i ^ {k}) * 0.5) % 1000003;\n" for k in range(90))
    js = f"""'use strict';
function make(k) {{ const o = {{}}; o['p' + k] = k; o.x = k; return o; }}
const objs = [];
for (let k = 0; k < 64; k++) objs.push(make(k));
function mega(n) {{
  let s = 0;
  for (let i = 0; i < n; i++) {{
{loads}  }}
  return s;
}}
function plain(n) {{
  let s = 0;
  for (let i = 0; i < n; i++) s = (s + i * 7) % 1000003;
  return s;
}}
function inner(n) {{
  let s = 0;
  for (let i = 0; i < n; i++) {{
{body}  }}
  return s;
}}
function middle(n) {{
  let t = '';
  for (let k = 0; k < 4; k++) t += String(inner(n)).slice(0, 3);
  return t.length;
}}
const spent = {{ mega: 0, plain: 0, middle: 0, total: 0 }};
function timed(name, f, n) {{
  const t = process.cpuUsage();
  const r = f(n);
  const u = process.cpuUsage(t);
  spent[name] += u.user + u.system;
  return r;
}}
function driver(cpuMs) {{
  const start = process.cpuUsage();
  let t = 0;
  for (;;) {{
    t += timed('mega', mega, 2000);
    t += timed('plain', plain, 60000);
    t += timed('middle', middle, 100);
    const u = process.cpuUsage(start);
    spent.total = u.user + u.system;
    if (spent.total / 1000 >= cpuMs) return t;
  }}
}}
driver(Number(process.argv[2]));
require('fs').writeFileSync(process.argv[3], JSON.stringify(spent));
"""
    with open(path, "w") as f:
        f.write(js)


def clock_shares(spent):
    total = spent["total"]
    out = {k: 100.0 * spent[k] / total for k in ("mega", "plain", "middle")}
    out["inner"] = None  # timed only through middle
    return out


def cpuprof_shares(path):
    prof = json.load(open(path))
    nodes = {n["id"]: n for n in prof["nodes"]}
    parent = {}
    for n in prof["nodes"]:
        for c in n.get("children", []):
            parent[c] = n["id"]
    counts = {f: 0 for f in FUNCS}
    driver = 0
    for sid in prof["samples"]:
        names = set()
        at = sid
        while at is not None:
            names.add(nodes[at]["callFrame"]["functionName"])
            at = parent.get(at)
        if "driver" not in names:
            continue
        driver += 1
        for f in FUNCS:
            counts[f] += f in names
    return {f: 100.0 * counts[f] / driver for f in FUNCS}, driver


def profile_shares(prof):
    folded = subprocess.run(
        [PROFILE, "report", "-i", prof, "--folded", "-"],
        check=True, capture_output=True, text=True).stdout
    counts = {f: 0 for f in FUNCS}
    driver = 0
    for line in folded.splitlines():
        stack, n = line.rsplit(" ", 1)
        frames = set(stack.split(";"))
        if "driver_[j]" not in frames:
            continue
        driver += int(n)
        for f in FUNCS:
            counts[f] += int(n) * (f + "_[j]" in frames)
    return {f: 100.0 * counts[f] / driver for f in FUNCS}, driver


def main():
    d = tempfile.mkdtemp(prefix="node-vs-cpuprof-")
    js = os.path.join(d, "four.js")
    program(js)
    # node --cpu-prof
    cp_dir = os.path.join(d, "cpuprof")
    subprocess.run(["node", "--cpu-prof", "--cpu-prof-dir", cp_dir, js, CPU_MS,
                    os.path.join(d, "clock-cpuprof.json")], check=True)
    cp_file = os.path.join(cp_dir, os.listdir(cp_dir)[0])
    cp, cp_n = cpuprof_shares(cp_file)
    cp_clock = clock_shares(json.load(open(os.path.join(d, "clock-cpuprof.json"))))
    # profile record, no flag
    prof = os.path.join(d, "four.prof")
    subprocess.run([PROFILE, "record", "-F", "499", "-q", "-o", prof, "--", "node", js,
                    CPU_MS, os.path.join(d, "clock-profile.json")], check=True)
    pr, pr_n = profile_shares(prof)
    pr_clock = clock_shares(json.load(open(os.path.join(d, "clock-profile.json"))))
    fmt = lambda v: "   -  " if v is None else f"{v:5.1f}%"
    print(f"driver's samples: profile {pr_n}, --cpu-prof {cp_n}")
    print("function  profile  its clock  --cpu-prof  its clock  |profile - cpu-prof|")
    for f in FUNCS:
        print(f"{f:8}  {fmt(pr[f])}   {fmt(pr_clock[f])}     {fmt(cp[f])}     {fmt(cp_clock[f])}"
              f"     {abs(pr[f] - cp[f]):4.1f}")


if __name__ == "__main__":
    main()
