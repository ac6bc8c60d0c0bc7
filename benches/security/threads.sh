#!/usr/bin/env bash
# The looped thread list of issue 44 (tests/data/python/hostile_threads.py) run as
# nobody with Debian's /usr/bin/python3.11, recorded by PROFILE_BIN at -F 499 for 8 s:
# prints the recorder's CPU ticks (10 ms each) just before it ends and its sample
# count. Run as root, from anywhere.
# usage: threads.sh PROFILE_BIN plain|cyclic
set -u
here="$(cd "$(dirname "$0")" && pwd)"
WORK=$(mktemp -d); chmod 777 "$WORK"; trap 'rm -rf "$WORK"' EXIT
cp "$here/../../tests/data/python/hostile_threads.py" "$WORK/"
BIN=$1; MODE=$2; cd "$WORK"; rm -f stop
setpriv --reuid 65534 --regid 65534 --clear-groups /usr/bin/python3.11 hostile_threads.py $MODE $WORK/stop > $WORK/out.txt 2>&1 &
sleep 1
P=$(pgrep -f "hostile_threads.py $MODE" | head -1)
$BIN record -p $P -F 499 -d 8 -o $WORK/t-$MODE.prof 2> $WORK/rec-$MODE.txt &
sleep 0.3
RP=$(pgrep -f "record -p $P" | head -1)
sleep 7.5
awk '{print "recorder cpu ticks (10ms):", $14+$15}' /proc/$RP/stat
wait $!
touch stop; sleep 0.5; pkill -9 -f "hostile_threads.py $MODE"
grep -E "samples from|budget|lost" $WORK/rec-$MODE.txt
