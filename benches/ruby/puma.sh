#!/usr/bin/env bash
# Issue 49: a Puma server from Debian's packages (2 forked workers, 4 threads each)
# under load from wrk, recorded by `profile record --pid MASTER --children=all` and
# by rbspy (`--subprocesses`) one after the other, ROUNDS rounds (default 2) of
# SECS seconds each (default 10) at 499 Hz. Prints, per round, the workers whose
# samples name Ruby code, the share of samples with a `[ruby: moved on]` frame (left
# out of the ranking: their innermost Ruby code is not known), and each tool's ten
# Ruby methods with the most on-CPU samples as the innermost Ruby code (C methods
# left out: rbspy names none; rbspy with --on-cpu), compared by Ruby 3.1's labels
# (profile's `block in Greeter#work` is `block in work`): how many of the ten agree.
# Installs puma, ruby-rack and wrk with apt-get if missing. Needs root (or
# CAP_PERFMON and ptrace rights) and rbspy (RBSPY, default
# ~/.cache/profile-bench/bin/rbspy; `cargo install rbspy`).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${ROUNDS:-2}
secs=${SECS:-10}
port=${PORT:-9393}
rbspy=${RBSPY:-$HOME/.cache/profile-bench/bin/rbspy}
for pkg in puma ruby-rack wrk; do
    dpkg -s "$pkg" >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg" >/dev/null
done
[ -x "$rbspy" ] || { echo "rbspy not found at $rbspy (cargo install rbspy)" >&2; exit 1; }
cargo build --release --locked -q
profile=target/release/profile
work=$(mktemp -d)
cleanup() {
    [ -n "${wrk_pid:-}" ] && kill "$wrk_pid" 2>/dev/null || true
    [ -n "${puma_pid:-}" ] && kill "$puma_pid" 2>/dev/null && wait "$puma_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
cat > "$work/config.ru" <<'RB'
class Catalog
  def initialize
    @items = (1..300).map { |i| { id: i, name: "item#{i}", price: i * 1.5 } }
  end

  def search(q)
    @items.select { |it| it[:name].include?(q) }
  end

  def render(items)
    items.map { |it| "#{it[:id]}:#{it[:name]}:#{format('%.2f', it[:price])}" }.join(",")
  end
end

module Pricing
  def self.total(items)
    items.sum { |it| it[:price] * tax(it) }
  end

  def self.tax(it)
    it[:id].even? ? 1.2 : 1.1
  end
end

def fib(n)
  n < 2 ? n : fib(n - 1) + fib(n - 2)
end

CATALOG = Catalog.new
run lambda { |env|
  items = CATALOG.search(env['QUERY_STRING'].to_s[-1] || '1')
  body = case env['PATH_INFO']
         when '/fib' then fib(20).to_s
         when '/total' then Pricing.total(items).to_s
         else CATALOG.render(CATALOG.search('1') + items)
         end
  [200, { 'content-type' => 'text/plain' }, [body]]
}
RB
cat > "$work/paths.lua" <<'LUA'
local paths = {"/render?q=7", "/fib", "/total?q=3", "/render?q=1"}
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", paths[(i % #paths) + 1])
end
LUA
puma -w 2 -t 4:4 -e production -b "tcp://127.0.0.1:$port" "$work/config.ru" >"$work/puma.log" 2>&1 &
puma_pid=$!
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/fib" >/dev/null 2>&1 && break
    sleep 0.1
done
total=$(( rounds * (2 * secs + 4) + 5 ))
wrk -t2 -c8 -d"${total}s" -s "$work/paths.lua" "http://127.0.0.1:$port/" >"$work/wrk.out" 2>&1 &
wrk_pid=$!
sleep 2
compare() {
    python3 - "$1" "$2" <<'PY'
import re, sys
from collections import Counter
qual = re.compile(r"^((?:block(?: \(\d+ levels\))?|rescue|ensure) in )?(?:[A-Z][\w:]*[#.])?(.+)$")
def plain(label):
    m = qual.match(label)
    return (m.group(1) or "") + m.group(2)
def stacks(path):
    for line in open(path):
        stack, n = line.rstrip("\n").rsplit(" ", 1)
        yield stack.split(";"), int(n)
ours, theirs = Counter(), Counter()
moved = total = 0
workers = Counter()
for frames, n in stacks(sys.argv[1]):
    total += n
    pid = next((f for f in frames if f.startswith("pid ")), "?")
    if any(f == "[ruby: moved on]_[j]" for f in frames):
        # Its innermost Ruby code is not known: left out of the ranking.
        moved += n
        continue
    code = [f for f in frames if re.search(r":\d+_\[j\]$", f)]
    if code:
        workers[pid] += n
        ours[plain(re.sub(r":\d+_\[j\]$", "", code[-1]))] += n
for frames, n in stacks(sys.argv[2]):
    code = [f for f in frames if not f.startswith("(unknown) [c function]")]
    if code:
        theirs[code[-1].split(" - ")[0]] += n
top_ours = [m for m, _ in ours.most_common(10)]
top_theirs = [m for m, _ in theirs.most_common(10)]
agree = len(set(top_ours) & set(top_theirs))
named = ", ".join(f"{w} {c}" for w, c in sorted(workers.items()))
print(f"samples naming Ruby code, by process: {named}")
print(f"samples with a [ruby: moved on] frame: {moved} of {total} ({100 * moved / max(total, 1):.1f}%)")
print(f"{'profile':44} {'rbspy':44}")
so, st = sum(ours.values()) or 1, sum(theirs.values()) or 1
for i in range(10):
    a = f"{top_ours[i]} {100 * ours[top_ours[i]] / so:.1f}%" if i < len(top_ours) else ""
    b = f"{top_theirs[i]} {100 * theirs[top_theirs[i]] / st:.1f}%" if i < len(top_theirs) else ""
    print(f"{a:44} {b:44}")
print(f"top-10 agreement: {agree} of 10")
PY
}
for r in $(seq "$rounds"); do
    echo "round $r"
    "$profile" record --pid "$puma_pid" --children=all -F 499 -d "$secs" -q -o "$work/p.prof" >/dev/null
    "$profile" report -i "$work/p.prof" --per-process --lines --folded - >"$work/p.folded"
    "$rbspy" record --pid "$puma_pid" --subprocesses --on-cpu --nonblocking -r 499 -d "$secs" \
        --format collapsed -f "$work/r.folded" --silent >/dev/null 2>&1 || true
    compare "$work/p.folded" "$work/r.folded"
done
