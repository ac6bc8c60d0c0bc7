#!/usr/bin/env bash
# The tables attack of issue 46: six large binaries of nobody (FUNCS generated C
# functions with long names each, default 300,000, and a BLOB_MB blob, default 80:
# some 127 MB per file, each its own build-id) run beside a host agent
# (`record -a --push-dry-run`, PUSH_S-second windows, default 6, and the default
# --tables-memory unless TABLES_MIB is set). Prints the agent's peak RSS (VmHWM)
# after BASE_S seconds without them and after RUN_S seconds with them, the growth
# (issue 46: at most 256 MiB), its CPU ticks, and how late the windows were written
# (issue 46: none later than one window after its end). Run as root, from anywhere;
# the binaries are built once into $CACHE (default /var/tmp/profile-tables-bench).
# usage: tables.sh PROFILE_BIN   (smoke run: FUNCS=3000 BLOB_MB=1 BASE_S=8 RUN_S=12)
set -eu
BIN=$(realpath "$1")
FUNCS=${FUNCS:-300000}; BLOB_MB=${BLOB_MB:-80}; PUSH_S=${PUSH_S:-6}
BASE_S=${BASE_S:-60}; RUN_S=${RUN_S:-120}
CACHE=${CACHE:-/var/tmp/profile-tables-bench}/f$FUNCS-b$BLOB_MB
mkdir -p "$CACHE"; chmod 755 "$CACHE" "$(dirname "$CACHE")"
WORK=$(mktemp -d); chmod 755 "$WORK"
AGENT=; PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    [ -n "$AGENT" ] && kill -9 "$AGENT" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# Build: the functions in objects of 30,000 (gcc's memory stays modest), then six
# programs, each with its own seed (its own build-id).
if [ ! -x "$CACHE/big6" ]; then
    python3 - "$CACHE" "$FUNCS" <<'PY'
import sys
out, n = sys.argv[1], int(sys.argv[2])
per = 30000
name = lambda i: f"agent_tables_generated_function_with_a_long_name_to_fill_the_strtab_{i:07d}"
for part, lo in enumerate(range(0, n, per)):
    with open(f"{out}/part{part}.c", "w") as f:
        for i in range(lo, min(n, lo + per)):
            f.write(f"unsigned long {name(i)}(unsigned long x) {{ return x * {2*i+3}UL + {i}UL; }}\n")
with open(f"{out}/table.c", "w") as f:
    f.write("typedef unsigned long (*fn_t)(unsigned long);\n")
    for i in range(n):
        f.write(f"unsigned long {name(i)}(unsigned long);\n")
    f.write(f"const fn_t agent_tables_table[{n}] = {{\n")
    for i in range(n):
        f.write(f"{name(i)},\n")
    f.write("};\n")
PY
    for c in "$CACHE"/part*.c "$CACHE/table.c"; do gcc -O0 -c "$c" -o "${c%.c}.o"; done
    for s in 1 2 3 4 5 6; do
        cat > "$CACHE/main$s.c" <<C
#include <stdio.h>
typedef unsigned long (*fn_t)(unsigned long);
extern const fn_t agent_tables_table[];
__attribute__((used)) static const char blob[$BLOB_MB << 20] = {$s};
int main(void) {
    printf("ready\n");
    fflush(stdout);
    unsigned long s = $s;
    for (;;)
        for (int i = 0; i < $FUNCS; i++)
            s = agent_tables_table[i](s);
}
C
        gcc -O0 "$CACHE/main$s.c" "$CACHE"/part*.o "$CACHE/table.o" -o "$CACHE/big$s"
    done
fi
ls -l "$CACHE"/big? | awk '{print $5, $9}'

TABLES=(); [ -n "${TABLES_MIB:-}" ] && TABLES=(--tables-memory "$TABLES_MIB")
mkdir "$WORK/sent"
"$BIN" record -a -q -d $((BASE_S + RUN_S + 30)) --no-jvm-perfmap --push-interval "$PUSH_S" \
    "${TABLES[@]}" --push http://127.0.0.1:9 --push-dry-run "$WORK/sent" 2> "$WORK/agent.txt" &
AGENT=$!
sleep "$BASE_S"
BASE=$(awk '/VmHWM/ {print $2}' /proc/$AGENT/status)
START_NS=$(date +%s%N)
for s in 1 2 3 4 5 6; do
    setpriv --reuid 65534 --regid 65534 --clear-groups "$CACHE/big$s" > /dev/null &
    PIDS+=($!); disown
done
sleep "$RUN_S"
AFTER=$(awk '/VmHWM/ {print $2}' /proc/$AGENT/status)
TICKS=$(awk '{print $14+$15}' /proc/$AGENT/stat)
echo "agent peak without them: $((BASE / 1024)) MiB; with them: $((AFTER / 1024)) MiB;" \
     "growth $(((AFTER - BASE) / 1024)) MiB (issue 46: <= 256)"
echo "agent cpu ticks (10 ms) over $((BASE_S + RUN_S)) s: $TICKS"
# Lateness: each request's window end (until=, Unix ns) against the file's mtime.
python3 - "$WORK/sent" "$PUSH_S" "$START_NS" <<'PY'
import os, re, sys
d, window, start = sys.argv[1], int(sys.argv[2]) * 10**9, int(sys.argv[3])
late = []
for f in os.listdir(d):
    if not f.endswith(".query"):
        continue
    p = os.path.join(d, f)
    until = int(re.search(r"until=(\d+)", open(p).read()).group(1))
    if until > start:
        late.append(os.stat(p).st_mtime_ns - until)
if late:
    print(f"requests with the binaries: {len(late)}; written after their window's end:"
          f" median {sorted(late)[len(late)//2] // 10**6} ms, max {max(late) // 10**6} ms;"
          f" later than one window: {sum(l > window for l in late)}")
import gzip
pending = sum(b"[name pending" in gzip.open(os.path.join(d, f)).read()
              for f in os.listdir(d) if f.endswith(".pprof"))
print(f"profiles holding [name pending: ...] frames: {pending}")
PY
