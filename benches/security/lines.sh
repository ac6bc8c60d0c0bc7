#!/usr/bin/env bash
# The line-table attack of issue 44 (tests/data/python/hostile_lines.py) run as nobody
# with Debian's /usr/bin/python3.11, recorded by PROFILE_BIN at -F 999 for SECONDS:
# prints the recorder's peak RSS (VmHWM) and CPU ticks just before it ends, and its
# summary lines about budgets. Run as root, from anywhere.
# usage: lines.sh PROFILE_BIN near|over SECONDS
set -u
here="$(cd "$(dirname "$0")" && pwd)"
WORK=$(mktemp -d); chmod 777 "$WORK"; trap 'rm -rf "$WORK"' EXIT
cp "$here/../../tests/data/python/hostile_lines.py" "$WORK/"
BIN=$1; MODE=$2; SECS=$3; cd "$WORK"; rm -f stop; 
setpriv --reuid 65534 --regid 65534 --clear-groups /usr/bin/python3.11 hostile_lines.py $MODE $WORK/stop > $WORK/out.txt 2>&1 &
sleep 1.5
P=$(pgrep -f "hostile_lines.py $MODE" | head -1)
$BIN record -p $P -F 999 -d $SECS -o $WORK/l-$MODE.prof 2> $WORK/lrec-$MODE.txt &
sleep 0.3
RP=$(pgrep -f "record -p $P" | head -1)
sleep $(($SECS - 1))
grep VmHWM /proc/$RP/status
awk '{print "recorder cpu ticks (10ms):", $14+$15}' /proc/$RP/stat
wait $!
touch stop; sleep 0.5; pkill -9 -f "hostile_lines.py $MODE"
grep -E "samples from|budget|refused" $WORK/lrec-$MODE.txt | cut -c1-250
