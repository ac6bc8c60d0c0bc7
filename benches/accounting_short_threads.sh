#!/bin/bash
# Runs of 200 threads of 2 ms (tests/data/accounting.c short:200:2) recorded at -F 99
# beside a competing process and five CPU hogs; counts the runs where a thread's CPU
# in the profile is off its own clock by more than 1% or 0.3 ms, and the runs whose
# summary left a sample out as another thread's count (docs/accounting.md, "A count
# that is not its thread's").
# usage: sudo benches/accounting_short_threads.sh PROFILE_BIN RUNS
set -u
BIN=$(realpath "$1"); N=${2:-100}
HERE=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$W"' EXIT
gcc -O2 -g -o "$W/acct" "$HERE/tests/data/accounting.c"
for _ in 1 2 3 4 5; do sh -c 'while :; do :; done' & done
bad=0; foreign=0
for i in $(seq 1 "$N"); do
  "$W/acct" busy:1:120000 & comp=$!
  "$BIN" record -F 99 -o "$W/r.prof" -- "$W/acct" short:200:2 > "$W/out.txt" 2> "$W/err.txt"
  kill $comp; wait $comp 2>/dev/null
  grep -q "not their thread" "$W/err.txt" && foreign=$((foreign + 1))
  "$BIN" report -i "$W/r.prof" --json="$W/r.json" > /dev/null 2>&1
  python3 - "$W/out.txt" "$W/r.json" <<'PY' || bad=$((bad + 1))
import json, sys
truth = {}
for l in open(sys.argv[1]):
    p = l.split()
    if len(p) == 4 and p[0] == "cpu":
        truth[int(p[1])] = (p[3], int(p[2]))
got = {t["tid"]: t["cpu_ns"] for t in json.load(open(sys.argv[2]))["threads"]}
bad = [f"{n} {tid}: {got.get(tid, 0) / 1e6:.3f} ms, clock {w / 1e6:.3f} ms"
       for tid, (n, w) in truth.items() if abs(got.get(tid, 0) - w) > max(w // 100, 300000)]
print(*bad, sep="\n") if bad else None
sys.exit(1 if bad else 0)
PY
done
echo "runs $N, off the clock $bad, with samples left out $foreign (load: $(cut -d' ' -f1-3 /proc/loadavg))"
