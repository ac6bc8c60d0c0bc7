#!/bin/sh
# Figures of docs/measurements/dump-and-all-cpus.md: `profile dump` on 10 and 1,000 parked
# threads and on tests/data/offcpu.c (2 spinning threads), and `record -a` (attach
# time, recorder CPU, lost samples) on this machine with all its processes.
# Run as root from the repository: sudo benches/live/run.sh
set -eu
P=target/release/profile
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$W"' EXIT
cargo build --release --quiet
gcc -O2 -g -pthread tests/data/parked.c -o "$W/parked"
gcc -O2 -g -pthread tests/data/offcpu.c -o "$W/offcpu"

dump_times() { # NAME PID: 5 dumps, wall ms of each (its own figure) and CPU of each
    for i in 1 2 3 4 5; do
        /usr/bin/time -f "%U %S" -o "$W/t" $P dump --pid "$2" --json > "$W/d.json"
        python3 - "$1" "$W/d.json" "$W/t" <<'PY'
import json, sys
d = json.load(open(sys.argv[2])); u, s = map(float, open(sys.argv[3]).read().split()[-2:])
caps = {}
for t in d["threads"]: caps[t["capture"]] = caps.get(t["capture"], 0) + 1
print(f"{sys.argv[1]}: {len(d['threads'])} threads in {d['elapsed_ms']:.0f} ms "
      f"(CPU {1e3 * (u + s):.0f} ms), stopped {d['stopped_threads']}, {caps}")
PY
    done
}
for n in 10 1000; do
    "$W/parked" $n > "$W/ready" & pid=$!
    while ! grep -q ready "$W/ready" 2>/dev/null; do sleep 0.05; done
    dump_times "parked $n" $pid
    kill $pid
done
"$W/offcpu" > "$W/ready2" & pid=$!
while ! grep -q ready "$W/ready2" 2>/dev/null; do sleep 0.05; done
dump_times "offcpu.c" $pid
kill $pid

# record -a: attach time = start to the recording taking its place (it does once
# sampling has begun); CPU of the whole run and the naming time it prints.
for i in 1 2 3; do
    rm -f "$W/all.prof"
    start=$(date +%s.%N)
    /usr/bin/time -f "%U %S" -o "$W/t" $P record -a -d 10 -o "$W/all.prof" 2> "$W/summary" &
    rec=$!
    while [ ! -e "$W/all.prof" ]; do sleep 0.01; done
    attached=$(date +%s.%N)
    wait $rec
    python3 - "$start" "$attached" "$W/t" "$W/summary" <<'PY'
import re, sys
start, att = float(sys.argv[1]), float(sys.argv[2])
u, s = map(float, open(sys.argv[3]).read().split()[-2:])
summ = open(sys.argv[4]).read()
lost = re.search(r"(\d+) lost", summ).group(1)
samples = re.search(r"(\d+) samples from (\d+) threads", summ)
named = re.search(r"named .* in (\d+) ms", summ)
procs = len([p for p in __import__("os").listdir("/proc") if p.isdigit()])
print(f"record -a -d 10 ({procs} processes): attach {1e3 * (att - start):.0f} ms, "
      f"{samples.group(1)} samples from {samples.group(2)} threads, {lost} lost, "
      f"recorder CPU {u + s:.2f} s of which naming {named.group(1) if named else '?'} ms wall")
PY
done
