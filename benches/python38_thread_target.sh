#!/bin/bash
# Attaches to tests/data/python/worker.py on CPython 3.8 at -F 499 for 3 s, RUNS times
# beside three CPU hogs, and counts the runs where the thread's target was named as its
# caller (`run;run` in the Python frames: docs/runtimes.md, "a call seen with its
# caller's frame object").
# usage: sudo benches/python38_thread_target.sh PROFILE_BIN RUNS [PYTHON]
set -u
BIN=$(realpath "$1"); N=${2:-48}; PY=${3:-$HOME/.pyenv/versions/3.8.18/bin/python3}
HERE=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$W"' EXIT
for _ in 1 2 3; do sh -c 'while :; do :; done' & done
bad=0
for i in $(seq 1 "$N"); do
  rm -f "$W/stop"
  "$PY" "$HERE/tests/data/python/worker.py" "$W/stop" > /dev/null & pid=$!
  "$BIN" record -q -F 499 -p $pid -d 3 -o "$W/py.prof" 2> /dev/null
  touch "$W/stop"; wait $pid
  n=$("$BIN" report -i "$W/py.prof" --folded - 2> /dev/null | grep -c 'run_\[j\];run_\[j\]')
  [ "$n" -gt 0 ] && bad=$((bad + 1))
done
echo "runs $N, thread target named run in $bad (load: $(cut -d' ' -f1-3 /proc/loadavg))"
