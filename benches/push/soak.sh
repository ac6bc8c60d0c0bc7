#!/bin/sh
# The one-hour soak of `record --push` (docs/continuous.md, "Cost"): a busy target
# (tests/data/chains.c: three busy threads, C stacks, qsort through libc, write(2)
# in the kernel; at nice 19 on a shared machine) recorded
# for SECS seconds (default 3600) with the default 10 s windows, pushed to the stand-in
# ingest server; every 10 s the recorder's RSS and CPU time go to OUT/usage.log.
#
#   sudo nice -n 10 benches/push/soak.sh OUT [SECS]
#
# Then: python3 benches/push/soak_report.py OUT
set -eu
OUT=$1
SECS=${2:-3600}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT"
gcc -O2 -g -fomit-frame-pointer -pthread -o "$OUT/chains" "$HERE/tests/data/chains.c"
python3 "$HERE/benches/push/ingest_server.py" 14041 "$OUT/ingest.log" &
SERVER=$!
nice -n 19 "$OUT/chains" worker qsort syscalls > /dev/null &
TARGET=$!
sleep 1
"$HERE/target/release/profile" record -p "$TARGET" -d "$SECS" -q \
    --push http://127.0.0.1:14041 --tag env=soak 2> "$OUT/profile.err" &
PROF=$!
TICK=$(getconf CLK_TCK)
: > "$OUT/usage.log"
while kill -0 "$PROF" 2>/dev/null; do
    # seconds since start, RSS KiB, recorder CPU ticks (user+system), target CPU ticks
    rss=$(awk '/VmRSS/ {print $2}' /proc/$PROF/status 2>/dev/null || echo 0)
    cpu=$(awk '{print $14 + $15}' /proc/$PROF/stat 2>/dev/null || echo 0)
    tcpu=$(awk '{print $14 + $15}' /proc/$TARGET/stat 2>/dev/null || echo 0)
    echo "$(date +%s.%N) $rss $cpu $tcpu $TICK" >> "$OUT/usage.log"
    sleep 10
done
wait "$PROF" || true
kill "$TARGET" "$SERVER" 2>/dev/null || true
echo "soak done: $OUT"
