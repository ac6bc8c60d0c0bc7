#!/bin/sh
# Per-window CPU of a starved target (docs/continuous.md, "Starved targets"): the
# soak's target (tests/data/chains.c worker qsort syscalls), SCHED_IDLE when IDLE=1
# (it then runs only in the slivers the machine leaves), beside SPIN busy loops at
# nice 19 (default 0), recorded for SECS seconds (default 300) with the default 10 s
# windows by this build's `profile`, and, when BEFORE names another build (one
# without per-window [unsampled] time), by that one too, at the same time on the same
# target; each pushes to its own stand-in ingest server, which keeps every body.
# Meanwhile every target thread's own clock (/proc/PID/task/TID/schedstat) is read
# every 10 ms, each reading logged with the Unix times just before and after it.
#
#   sudo nice -n 10 benches/push/starved.sh OUT [SECS] [BEFORE] [SPIN] [IDLE]
#
# Then: python3 benches/push/starved_report.py OUT
set -eu
OUT=$1
SECS=${2:-300}
BEFORE=${3:-}
SPIN=${4:-0}
IDLE=${5:-0}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$OUT"
mkdir -p "$OUT/after" "$OUT/before"
gcc -O2 -g -fomit-frame-pointer -pthread -o "$OUT/chains" "$HERE/tests/data/chains.c"
python3 "$HERE/benches/push/ingest_server.py" 14051 "$OUT/after.log" --keep "$OUT/after" &
S1=$!
python3 "$HERE/benches/push/ingest_server.py" 14052 "$OUT/before.log" --keep "$OUT/before" &
S2=$!
SPINNERS=""
i=0
while [ "$i" -lt "$SPIN" ]; do
    nice -n 19 sh -c 'while :; do :; done' &
    SPINNERS="$SPINNERS $!"
    i=$((i + 1))
done
if [ "$IDLE" = 1 ]; then
    chrt --idle 0 "$OUT/chains" worker qsort syscalls > /dev/null &
else
    nice -n 19 "$OUT/chains" worker qsort syscalls > /dev/null &
fi
TARGET=$!
python3 - "$TARGET" "$OUT/clocks.log" <<'PY' &
import os, sys, time
pid, log = sys.argv[1], open(sys.argv[2], "w")
while os.path.exists("/proc/%s/task" % pid):
    for tid in os.listdir("/proc/%s/task" % pid):
        t0 = time.time_ns()
        try:
            c = open("/proc/%s/task/%s/schedstat" % (pid, tid)).read().split()[0]
        except OSError:
            continue
        log.write("%d %d %s %s\n" % (t0, time.time_ns(), tid, c))
    time.sleep(0.01)
PY
POLL=$!
sleep 1
"$HERE/target/release/profile" record -p "$TARGET" -d "$SECS" -q \
    --push http://127.0.0.1:14051 2> "$OUT/after.err" &
P1=$!
if [ -n "$BEFORE" ]; then
    "$BEFORE" record -p "$TARGET" -d "$SECS" -q \
        --push http://127.0.0.1:14052 2> "$OUT/before.err" &
fi
wait "$P1" || true
sleep 2
kill "$TARGET" $SPINNERS 2>/dev/null || true
wait "$POLL" || true
kill "$S1" "$S2" 2>/dev/null || true
echo "done: $OUT"
