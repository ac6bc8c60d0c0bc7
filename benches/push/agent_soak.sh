#!/bin/sh
# A short soak of the host agent (`record -a --push`, docs/continuous.md, "One agent
# per host"): the whole machine recorded at -F HZ (default 19 per CPU, the agent's
# default) with the default 10 s windows, pushed to the stand-in ingest server,
# beside a fork-heavy job (a shell loop of short processes) and two long-running
# busy services (tests/data/chains.c), each in a service unit's cgroup
# (system.slice/soak-*.service); every 5 s the recorder's RSS and CPU time go
# to OUT/usage.log. The end prints the recorder's CPU as a share of one core, its
# RSS first and last, and the RSS at each minute's end with the CPU of the minute.
#
# PROFILE_BIN chooses the build (default: this tree's target/release/profile). With
# PROFILE_BIN2, a second build records the same host at the same time (pushing to
# a second server, OUT/2/): a paired round, both under the same load.
#
#   sudo nice -n 10 benches/push/agent_soak.sh OUT [SECS] [HZ]
set -eu
OUT=$1
SECS=${2:-120}
HZ=${3:-19}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${PROFILE_BIN:-$HERE/target/release/profile}
BIN2=${PROFILE_BIN2:-}
mkdir -p "$OUT"
gcc -O2 -g -fomit-frame-pointer -pthread -o "$OUT/chains" "$HERE/tests/data/chains.c"
# Each workload in a cgroup of its own, as systemd places a service unit's processes
# (cgroup v1's name=systemd hierarchy where mounted, else the unified one): the agent
# should push one series per unit, named after it.
CG=/sys/fs/cgroup/systemd
[ -e "$CG/cgroup.procs" ] || CG=/sys/fs/cgroup
CG=$CG/system.slice
# unit NAME CMD...: runs CMD (niced) in system.slice/NAME.service
unit() {
    name=$1; shift
    mkdir -p "$CG/$name.service"
    nice -n 19 sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$CG/$name.service" "$@" &
}
unit soak-worker "$OUT/chains" worker > /dev/null
S1=$!
unit soak-qsort "$OUT/chains" qsort > /dev/null
S2=$!
unit soak-storm sh -c 'while :; do sh -c "i=0; while [ \$i -lt 2000 ]; do i=\$((i+1)); done"; done'
STORM=$!
sleep 1

# agent DIR BIN PORT: starts a recorder pushing to its own server on PORT, logging
# into DIR; sets PROF and SERVER.
agent() {
    mkdir -p "$1"
    python3 "$HERE/benches/push/ingest_server.py" "$3" "$1/ingest.log" &
    SERVER=$!
    "$2" record -a -F "$HZ" -d "$SECS" -q \
        --push "http://127.0.0.1:$3" --tag env=soak 2> "$1/profile.err" &
    PROF=$!
}
agent "$OUT" "$BIN" 14042
PROF1=$PROF SERVER1=$SERVER PROF2= SERVER2=
if [ "$BIN2" ]; then
    agent "$OUT/2" "$BIN2" 14043
    PROF2=$PROF SERVER2=$SERVER
fi
TICK=$(getconf CLK_TCK)
: > "$OUT/usage.log"
[ "$PROF2" ] && : > "$OUT/2/usage.log"
# sample PID LOG: seconds since the epoch, RSS KiB, recorder CPU ticks (user+system)
sample() {
    rss=$(awk '/VmRSS/ {print $2}' /proc/$1/status 2>/dev/null || true)
    cpu=$(awk '{print $14 + $15}' /proc/$1/stat 2>/dev/null || true)
    if [ "$rss" ] && [ "$cpu" ]; then
        echo "$(date +%s.%N) $rss $cpu $TICK" >> "$2"
    fi
}
while kill -0 "$PROF1" 2>/dev/null || { [ "$PROF2" ] && kill -0 "$PROF2" 2>/dev/null; }; do
    sample "$PROF1" "$OUT/usage.log"
    [ "$PROF2" ] && sample "$PROF2" "$OUT/2/usage.log"
    sleep 5
done
wait "$PROF1" || true
[ "$PROF2" ] && { wait "$PROF2" || true; }
kill "$S1" "$S2" "$STORM" "$SERVER1" $SERVER2 2>/dev/null || true
sleep 1
for u in soak-worker soak-qsort soak-storm; do
    for p in $(cat "$CG/$u.service/cgroup.procs" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
done
sleep 1
rmdir "$CG"/soak-*.service 2>/dev/null || true

# summary LABEL DIR
summary() {
    echo "$1:"
    awk 'NR == 2 {t0 = $1; c0 = $3; r0 = $2} {t = $1; c = $3; r = $2; tick = $4}
         END {printf "recorder: %.2f%% of one core over %.0f s (after the first 5 s); RSS %d KiB then %d KiB\n",
              100 * (c - c0) / tick / (t - t0), t - t0, r0, r}' "$2/usage.log"
    awk 'NR == 1 {t0 = $1; c0 = $3}
         {m = int(($1 - t0) / 60) + 1; rss[m] = $2; cpu[m] = $3; tl[m] = $1; tick = $4}
         END {for (i = 1; i in rss; i++) {
                  prev = (i == 1) ? c0 : cpu[i - 1]; pt = (i == 1) ? t0 : tl[i - 1];
                  printf "minute %d: RSS %.1f MiB, CPU %.2f%% of one core\n", i, rss[i] / 1024,
                         (tl[i] > pt) ? 100 * (cpu[i] - prev) / tick / (tl[i] - pt) : 0}}' "$2/usage.log"
    echo "profiles received: $(grep -c . "$2/ingest.log" 2>/dev/null || echo 0)"
    # Each series (the pushed name, labels included): its windows, how many were
    # refused as malformed, and how many windows of the whole run it was absent from
    # (a service runs in every window: 0 for it). from and until are nanoseconds.
    awk '{n[$5]++; if ($6 != "ok") bad[$5]++; w[$2] = 1}
         END {for (x in w) all++;
              for (s in n) printf "series %s: %d windows of %d, %d bad\n",
                                  s, n[s], all, bad[s]}' "$2/ingest.log" 2>/dev/null | sort
}
summary "$BIN" "$OUT"
[ "$PROF2" ] && summary "$BIN2" "$OUT/2"
exit 0
