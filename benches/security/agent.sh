#!/usr/bin/env bash
# The host agent (`record -a --push`, requests written by --push-dry-run, nothing
# sent) for SECONDS, with or without the line-table attack of issue 44
# (tests/data/python/hostile_lines.py, `near`, run as nobody with Debian's
# /usr/bin/python3.11): prints the agent's peak RSS (VmHWM) just before it ends, the
# largest share its runtime readers kept (`runtime_kib` of PROFILE_DEBUG_TABLES), the
# load average, and its summary lines about budgets. Run as root, from anywhere.
# usage: agent.sh PROFILE_BIN with|without SECONDS
set -u
here="$(cd "$(dirname "$0")" && pwd)"
WORK=$(mktemp -d); chmod 777 "$WORK"; trap 'rm -rf "$WORK"' EXIT
cp "$here/../../tests/data/python/hostile_lines.py" "$WORK/"
BIN=$1; MODE=$2; SECS=$3; cd "$WORK"; rm -f stop
ATT=
if [ "$MODE" = with ]; then
  setpriv --reuid 65534 --regid 65534 --clear-groups /usr/bin/python3.11 \
    hostile_lines.py near "$WORK/stop" > "$WORK/out.txt" 2>&1 &
  ATT=$!
  sleep 1.5
fi
PROFILE_DEBUG_TABLES=1 "$BIN" record -a -d "$SECS" --push http://127.0.0.1:9 \
  --push-dry-run "$WORK/dry" 2> "$WORK/agent.txt" &
RP=$!
sleep $((SECS - 1))
grep VmHWM "/proc/$RP/status"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
wait "$RP"
touch stop; sleep 0.5
[ -n "$ATT" ] && kill -9 "$ATT" 2>/dev/null
grep -o "runtime_kib [0-9]*" "$WORK/agent.txt" | sort -k2 -n | tail -1 \
  | sed 's/^/largest /'
grep -vE "^profile: tables: " "$WORK/agent.txt" | grep -E "samples from|budget|lost|Python" | cut -c1-300
