#!/usr/bin/env python3
"""Issue 47: an express-style Node service (plain `http`: a router, JSON bodies, an
HTML template, a sort, a hash, a regex) under load from a client process, recorded
by pid without flags, against `node --cpu-prof` on the same server under the same
load. Each side's top-10 self functions among the server's JavaScript functions
(a sample counts for the innermost JavaScript function of its main-thread stack,
as `--cpu-prof` charges builtins and the runtime to their JavaScript caller), and
how many of `--cpu-prof`'s 10 are among profile's 10.

Usage: benches/node/server.py [PROFILE_BINARY] [SECS]   (root, or
perf_event_paranoid <= 1 and ptrace allowed; default ./target/release/profile, 10)
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter

PROFILE = sys.argv[1] if len(sys.argv) > 1 else "./target/release/profile"
SECS = int(sys.argv[2]) if len(sys.argv) > 2 else 10
PORT = 18347

SERVER = r"""'use strict';
const http = require('http');
const users = [];
for (let i = 0; i < 300; i++) users.push({ id: i, name: 'user' + i, score: (i * 7919) % 1000, tags: ['a' + (i % 7), 'b' + (i % 11)] });
function escapeHtml(s) { return s.replace(/[&<>"']/g, (c) => '&#' + c.charCodeAt(0) + ';'); }
function renderRow(u) { return '<tr><td>' + u.id + '</td><td>' + escapeHtml(u.name) + '</td><td>' + u.tags.join(',') + '</td></tr>'; }
function renderUsers(list) { let html = '<table>'; for (const u of list) html += renderRow(u); return html + '</table>'; }
function byScore(a, b) { return a.score - b.score || a.id - b.id; }
function sortRecords(list) { return list.slice().sort(byScore); }
function fnvHash(s) { let h = 2166136261; for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619) >>> 0; } return h; }
function hashPayload(body) { let h = 0; for (let r = 0; r < 4; r++) h ^= fnvHash(body + r); return h; }
function validateOrder(o) { let total = 0; for (const line of o.lines) { if (typeof line.qty !== 'number' || line.qty < 0) throw new Error('bad'); total += line.qty * line.price; } return total; }
function parseOrder(body) { return JSON.parse(body); }
const routeTable = [[/^\/users\/(\d+)$/, 'user'], [/^\/users$/, 'users'], [/^\/sorted$/, 'sorted'], [/^\/orders$/, 'orders'], [/^\/hash$/, 'hash']];
function matchRoute(url) { for (const [re, name] of routeTable) { const m = re.exec(url); if (m) return [name, m]; } return ['none', null]; }
function serialize(v) { return JSON.stringify(v); }
function handle(req, body) {
  const [route, m] = matchRoute(req.url);
  switch (route) {
    case 'users': return renderUsers(users);
    case 'user': return serialize(users[Number(m[1]) % users.length]);
    case 'sorted': return serialize(sortRecords(users).slice(0, 50));
    case 'orders': { const o = parseOrder(body); return serialize({ total: validateOrder(o), n: o.lines.length }); }
    case 'hash': return String(hashPayload(body));
    default: return 'not found';
  }
}
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => { const out = handle(req, Buffer.concat(chunks).toString()); res.writeHead(200); res.end(out); });
});
process.on('SIGINT', () => { server.close(); process.exit(0); });
server.listen(Number(process.argv[2]), () => console.log('ready'));
"""

CLIENT = r"""'use strict';
const http = require('http');
const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
const port = Number(process.argv[2]), until = Date.now() + 1000 * Number(process.argv[3]);
const lines = []; for (let i = 0; i < 200; i++) lines.push({ sku: 'sku' + i, qty: i % 5, price: i * 1.5 });
const order = JSON.stringify({ customer: 'c', lines });
const paths = [['GET', '/users'], ['GET', '/users/42'], ['GET', '/sorted'], ['POST', '/orders'], ['POST', '/hash']];
let k = 0;
function one() {
  if (Date.now() > until) return;
  const [method, path] = paths[k++ % paths.length];
  const req = http.request({ port, path, method, agent }, (res) => { res.resume(); res.on('end', one); });
  req.on('error', () => setTimeout(one, 10));
  req.end(method === 'POST' ? order : undefined);
}
for (let i = 0; i < 8; i++) one();
"""

PSEUDO = re.compile(r"^\(.*\)$")


def start_server(d, extra):
    p = subprocess.Popen(["node", *extra, f"{d}/server.js", str(PORT)],
                         stdout=subprocess.PIPE, text=True, cwd=d)
    assert p.stdout.readline().strip() == "ready"
    return p


def load(d, secs):
    return subprocess.Popen(["node", f"{d}/client.js", str(PORT), str(secs)])


def cpuprof_top(d):
    cp_dir = f"{d}/cpuprof"
    p = start_server(d, ["--cpu-prof", "--cpu-prof-dir", cp_dir])
    time.sleep(1)
    c = load(d, SECS + 2)
    time.sleep(1)  # past the client's start
    time.sleep(SECS)
    p.send_signal(signal.SIGINT)
    p.wait()
    c.wait()
    prof = json.load(open(os.path.join(cp_dir, os.listdir(cp_dir)[0])))
    counts = Counter()
    hits = Counter(prof["samples"])
    for n in prof["nodes"]:
        name = n["callFrame"]["functionName"] or "(anonymous)"
        url = n["callFrame"]["url"]
        if hits[n["id"]] and url.endswith("server.js"):
            counts[name] += hits[n["id"]]
        elif hits[n["id"]]:
            counts["(other: " + (name if PSEUDO.match(name) else "node") + ")"] += hits[n["id"]]
    return counts


def profile_top(d):
    p = start_server(d, [])
    time.sleep(1)
    c = load(d, SECS + 2)
    time.sleep(1)
    rec = f"{d}/server.prof"
    subprocess.run([PROFILE, "record", "-q", "-F", "499", "-p", str(p.pid), "-d", str(SECS),
                    "-o", rec], check=True)
    p.send_signal(signal.SIGINT)
    p.wait()
    c.wait()
    folded = subprocess.run([PROFILE, "report", "-i", rec, "--folded", "-", "--per-thread"],
                            check=True, capture_output=True, text=True).stdout
    counts = Counter()
    for line in folded.splitlines():
        stack, n = line.rsplit(" ", 1)
        frames = stack.split(";")
        if frames[1] != f"tid {p.pid}" or frames[2] == "[unsampled]":  # the main thread
            continue
        js = [f for f in frames if f.endswith("_[j]")]
        counts[js[-1][:-4] if js else "(other)"] += int(n)
    return counts


def top(counts, own):
    return [k for k, _ in counts.most_common() if own(k)][:10]


def main():
    d = tempfile.mkdtemp(prefix="node-server-")
    open(f"{d}/server.js", "w").write(SERVER)
    open(f"{d}/client.js", "w").write(CLIENT)
    funcs = set(re.findall(r"function (\w+)\(", SERVER)) | {"(anonymous)"}
    cp = cpuprof_top(d)
    pr = profile_top(d)
    cp_top = top(cp, lambda k: k in funcs)
    pr_top = top(pr, lambda k: k in funcs)
    cp_n, pr_n = sum(cp.values()), sum(pr.values())
    print(f"--cpu-prof: {cp_n} samples; profile: {pr_n} main-thread samples")
    print(f"{'#':>2}  {'--cpu-prof':24} {'self':>6}   {'profile':24} {'self':>6}")
    for i in range(10):
        a = cp_top[i] if i < len(cp_top) else ""
        b = pr_top[i] if i < len(pr_top) else ""
        sa = f"{100 * cp[a] / cp_n:5.1f}%" if a else ""
        sb = f"{100 * pr[b] / pr_n:5.1f}%" if b else ""
        print(f"{i + 1:>2}  {a:24} {sa:>6}   {b:24} {sb:>6}")
    rest = lambda c, n: ", ".join(f"{k} {100 * v / n:.1f}%" for k, v in c.most_common()
                                  if k not in funcs and v / n >= 0.01)
    print(f"the rest, --cpu-prof: {rest(cp, cp_n)}")
    print(f"the rest, profile: {rest(pr, pr_n)}")
    both = len(set(cp_top) & set(pr_top))
    print(f"of --cpu-prof's top 10, {both} are in profile's top 10")
    if os.environ.get("KEEP"):
        print(f"kept in {d}")
    else:
        shutil.rmtree(d)


if __name__ == "__main__":
    main()
