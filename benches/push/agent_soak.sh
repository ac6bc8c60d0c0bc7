#!/bin/sh
# A short soak of the host agent (`record -a --push`, docs/continuous.md, "One agent
# per host"): the whole machine recorded at -F HZ (default 99 per CPU) with the
# default 10 s windows, pushed to the stand-in ingest server, beside a fork-heavy
# job (a shell loop of short processes) and two long-running busy services
# (tests/data/chains.c); every 5 s the recorder's RSS and CPU time go to
# OUT/usage.log, and the end prints the recorder's CPU as a share of one core and
# its RSS first and last.
#
#   sudo nice -n 10 benches/push/agent_soak.sh OUT [SECS] [HZ]
set -eu
OUT=$1
SECS=${2:-120}
HZ=${3:-99}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT"
gcc -O2 -g -fomit-frame-pointer -pthread -o "$OUT/chains" "$HERE/tests/data/chains.c"
python3 "$HERE/benches/push/ingest_server.py" 14042 "$OUT/ingest.log" &
SERVER=$!
nice -n 19 "$OUT/chains" worker > /dev/null &
S1=$!
nice -n 19 "$OUT/chains" qsort > /dev/null &
S2=$!
nice -n 19 sh -c 'while :; do sh -c "i=0; while [ \$i -lt 2000 ]; do i=\$((i+1)); done"; done' &
STORM=$!
sleep 1
"$HERE/target/release/profile" record -a -F "$HZ" -d "$SECS" -q \
    --push http://127.0.0.1:14042 --tag env=soak 2> "$OUT/profile.err" &
PROF=$!
TICK=$(getconf CLK_TCK)
: > "$OUT/usage.log"
while kill -0 "$PROF" 2>/dev/null; do
    # seconds since the epoch, RSS KiB, recorder CPU ticks (user+system)
    rss=$(awk '/VmRSS/ {print $2}' /proc/$PROF/status 2>/dev/null || echo 0)
    cpu=$(awk '{print $14 + $15}' /proc/$PROF/stat 2>/dev/null || echo 0)
    [ "$rss" ] && echo "$(date +%s.%N) $rss $cpu $TICK" >> "$OUT/usage.log"
    sleep 5
done
wait "$PROF" || true
kill "$S1" "$S2" "$STORM" "$SERVER" 2>/dev/null || true
awk 'NR == 2 {t0 = $1; c0 = $3; r0 = $2} {t = $1; c = $3; r = $2; tick = $4}
     END {printf "recorder: %.2f%% of one core over %.0f s (after the first 5 s); RSS %d KiB then %d KiB\n",
          100 * (c - c0) / tick / (t - t0), t - t0, r0, r}' "$OUT/usage.log"
echo "profiles received: $(grep -c . "$OUT/ingest.log" 2>/dev/null || echo 0)"
