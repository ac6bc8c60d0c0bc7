#!/bin/sh
# Issue 26's "Done when": root's recorder against a process of another user that
# passes for a JVM and rewrites a large perf map with fresh names (and addresses) at
# every request (tests/data/fakejvm.c, mode grow). Records it for SECS seconds
# (default 600) and prints the recorder's peak RSS (VmHWM), its RSS every 30 s, and
# how many maps the fake JVM wrote. The bound stated in docs/reliability.md: 160 MiB.
#
#   sudo nice -n 10 benches/java/hostile_map.sh OUT [SECS] [LINES]
# PROFILE=path/to/profile picks the binary (default: target/release/profile).
set -eu
OUT=$1
SECS=${2:-600}
LINES=${3:-400000}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
P=${PROFILE:-$HERE/target/release/profile}
mkdir -p "$OUT"
chmod 777 "$OUT"
rm -f "$OUT/log"
gcc -O1 -o "$OUT/fakejvm" "$HERE/tests/data/fakejvm.c"
head -c 4096 /dev/zero > "$OUT/libjvm.so"
cd "$OUT"
setpriv --reuid 65534 --regid 65534 --clear-groups ./fakejvm "$OUT" grow "$LINES" > "$OUT/jvm.out" &
JVM=$!
sleep 1
/usr/bin/time -f "recorder: peak RSS %M KiB, %U s user + %S s sys, %e s" \
    "$P" record -p "$JVM" -d "$SECS" -F 49 -o "$OUT/hostile.prof" 2> "$OUT/record.err" &
REC=$!
sleep 2
n=0
while kill -0 "$REC" 2>/dev/null; do
    rp=$(pgrep -P "$REC" -x profile || true)
    [ -n "$rp" ] && echo "t=${n}s $(grep -E 'VmRSS|VmHWM' /proc/"$rp"/status 2>/dev/null | tr -s ' \n' ' ')"
    sleep 30
    n=$((n + 30))
done
wait "$REC" || true
kill -TERM "$JVM" 2>/dev/null || true
wait "$JVM" 2>/dev/null || true
echo "maps written by the fake JVM: $(grep -c answered "$OUT/log" || echo 0) of $LINES fresh names each"
grep -E "recorder:|perf map|abandoned" "$OUT/record.err" || true
