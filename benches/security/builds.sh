#!/usr/bin/env bash
# A host that builds large programs all day (issue 46: the agent <= 1% of a core):
# a C program of CUS units of FUNCS generated functions each (defaults 1000 and 60:
# 60,000 functions, some 100 MB with its DWARF, -O1 -g, inlined helpers, every
# unit carrying 400 struct types as a large program's units carry their headers')
# is built once into $CACHE (default /var/tmp/profile-builds-bench); then every
# PERIOD seconds (default 5) for SECS seconds (default 300) a new build of it (a
# new file with a fresh build-id: its note rewritten with random bytes, or relinked
# by gcc with LINK=1) runs, one run in four for 3 s and the others for 0.2 s,
# while host agents (`record -a --push`, default 10 s windows, -F 19 per CPU, the
# default --tables-memory unless TABLES_MIB is set) push to the stand-in ingest
# server (benches/push/ingest_server.py). Two builds of profile given are run side
# by side over the same builds (a paired round under the same load), or with
# ALTERNATE=1 one after the other, the order turned each round (A B, B A, ...;
# neither samples the other); ROUNDS repeats it (default 1). For each agent and
# round, one markdown row: its CPU (utime+stime from /proc/PID/stat, from 5 s
# after its start to the end of the builds, as % of one core and in seconds), peak
# RSS (VmHWM), windows pushed late (arriving more than one window after its end)
# and lost (the end summary), and the shares of the built programs' samples whose
# innermost frame in the program was left `[name pending: bbprog]`, unnamed
# (`bbprog+0x...`: on a busy machine, mostly a window whose tables budget other
# programs had filled), or has an inlined frame (what deferring DWARF gives up).
# NOBUILD=1 runs no build (the agent's own baseline on this host, to subtract).
# OUT=DIR keeps the agents' stderr, the ingest logs and the pushed profiles there.
# Run as root, from anywhere.
#
#   benches/security/builds.sh PROFILE_BIN [PROFILE_BIN2]
#   (smoke run: CUS=40 SECS=40 benches/security/builds.sh target/release/profile)
set -eu
HERE=$(cd "$(dirname "$0")/../.." && pwd)
BINS=("$(realpath "$1")")
[ -n "${2:-}" ] && BINS+=("$(realpath "$2")")
CUS=${CUS:-1000}; FUNCS=${FUNCS:-60}; PERIOD=${PERIOD:-5}; SECS=${SECS:-300}
ROUNDS=${ROUNDS:-1}; LINK=${LINK:-0}; INTERVAL=${INTERVAL:-10}
CACHE=${CACHE:-/var/tmp/profile-builds-bench}/c$CUS-f$FUNCS
mkdir -p "$CACHE"
WORK=${OUT:-$(mktemp -d)}
mkdir -p "$WORK"
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    [ -n "${OUT:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

# The program: one header of struct types every unit includes (kept in each unit's
# DWARF, as C and C++ headers are), and in each unit FUNCS functions calling an
# inlined helper (DW_TAG_inlined_subroutine, lines) over a struct; main calls them
# all round, through a table, for the milliseconds it is given.
MARK=0123456789abcdef0123456789abcdef01234567
if [ ! -s "$CACHE/offset" ]; then
    python3 - "$CACHE" "$CUS" "$FUNCS" <<'PY'
import sys
out, cus, funcs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
types = 400
with open(f"{out}/types.h", "w") as f:
    for t in range(types):
        fields = "".join(f"  unsigned long field_{k}_of_type_{t};\n" for k in range(10))
        f.write(f"struct bb_type_{t} {{\n{fields}}};\n")
names = []
for u in range(cus):
    with open(f"{out}/u{u}.c", "w") as f:
        f.write('#include "types.h"\n')
        f.write(f"static inline __attribute__((always_inline)) unsigned long "
                f"bb_mix_{u}(unsigned long x, unsigned long y) {{\n"
                f"  for (int i = 0; i < 8; i++) x = x * 6364136223846793005UL + y + i;\n"
                f"  return x;\n}}\n")
        for i in range(funcs):
            t = (u * funcs + i) % types
            name = f"bb_unit{u}_function_{i}"
            names.append(name)
            a, b = f"s.field_0_of_type_{t}", f"s.field_1_of_type_{t}"
            f.write(f"unsigned long {name}(unsigned long x) {{\n"
                    f"  struct bb_type_{t} s = {{x}};\n"
                    f"  for (int k = 0; k < 200; k++) {{\n"
                    f"    {b} += bb_mix_{u}({a} + k, {i});\n"
                    f"    {a} ^= {b} >> 7;\n  }}\n  return {a};\n}}\n")
with open(f"{out}/main.c", "w") as f:
    f.write("#include <stdlib.h>\n#include <time.h>\n")
    for n in names:
        f.write(f"unsigned long {n}(unsigned long);\n")
    f.write("static unsigned long (*const table[])(unsigned long) = {\n")
    f.write("".join(f"  {n},\n" for n in names))
    f.write("};\n")
    f.write("""static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}
int main(int argc, char **argv) {
  double end = now() + (argc > 1 ? atof(argv[1]) : 1.0);
  unsigned long s = 1;
  size_t n = sizeof table / sizeof table[0];
  for (size_t i = 0; now() < end; i = (i + 7919) % n)
    s = table[i](s);
  return (int)(s & 1);
}
""")
PY
    ls "$CACHE"/u*.c "$CACHE/main.c" | xargs -P 2 -I{} sh -c \
        'nice -n 10 gcc -O1 -g -fno-eliminate-unused-debug-types -c "$1" -o "${1%.c}.o"' _ {}
    ls "$CACHE"/u*.o > "$CACHE/objects"
    nice -n 10 gcc -o "$CACHE/bbprog" "$CACHE/main.o" @"$CACHE/objects" \
        -Wl,--build-id=0x$MARK
    # Where the build-id's bytes are, to give each build its own.
    python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); m = bytes.fromhex(sys.argv[2]);
assert d.count(m) == 1; print(d.index(m))' "$CACHE/bbprog" "$MARK" > "$CACHE/offset"
fi
OFFSET=$(cat "$CACHE/offset")

# build N: a new build of the program at $WORK/bN/bbprog (a new file, a new build-id).
build() {
    mkdir -p "$WORK/b$1"
    local new=$WORK/b$1/bbprog
    # Never the file of an earlier build rewritten: a new inode, as a linker makes.
    rm -f "$new"
    if [ "$LINK" = 1 ]; then
        gcc -o "$new" "$CACHE/main.o" @"$CACHE/objects" \
            -Wl,--build-id=0x"$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    else
        cp "$CACHE/bbprog" "$new"
        head -c 20 /dev/urandom | dd of="$new" bs=1 seek="$OFFSET" conv=notrunc status=none
    fi
}

TABLES=(); [ -n "${TABLES_MIB:-}" ] && TABLES=(--tables-memory "$TABLES_MIB")
TICK=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# round ROUND I...: one round of the builds beside the agents of BINS[I...].
run_round() {
    round=$1; shift
    AGENTS=(); SERVERS=()
    for i in "$@"; do
        d=$WORK/r$round/a$i
        mkdir -p "$d/kept"
        python3 "$HERE/benches/push/ingest_server.py" $((14150 + i)) "$d/ingest.log" \
            --keep "$d/kept" &
        SERVERS+=($!); PIDS+=($!)
        "${BINS[$i]}" record -a --push-interval "$INTERVAL" --no-jvm-perfmap "${TABLES[@]}" \
            --push "http://127.0.0.1:$((14150 + i))" 2> "$d/agent.txt" &
        AGENTS+=($!); PIDS+=($!)
    done
    sleep 5
    START=(); for a in "${AGENTS[@]}"; do START+=("$(ticks "$a")"); done
    T0=$(date +%s.%N)
    n=0
    while [ "$(echo "$(date +%s.%N) - $T0 < $SECS" | bc)" = 1 ]; do
        next=$(echo "$(date +%s.%N) + $PERIOD" | bc)
        build $n
        secs=0.2; [ $((n % 4)) = 0 ] && secs=3
        if [ "${NOBUILD:-0}" = 1 ]; then
            sleep "$secs"
        else
            "$WORK/b$n/bbprog" "$secs" || true
        fi
        # A build stays until the next is run, as a build directory's file stays
        # until it is linked again: an agent behind its samples can still read it.
        rm -rf "$WORK/b$((n - 1))"
        n=$((n + 1))
        left=$(echo "$next - $(date +%s.%N)" | bc)
        [ "$(echo "$left > 0" | bc)" = 1 ] && sleep "$left"
    done
    T1=$(date +%s.%N)
    k=0
    for i in "$@"; do
        a=${AGENTS[$k]}
        cpu=$(( $(ticks "$a") - ${START[$k]} ))
        awk '/VmHWM/ {print $2}' "/proc/$a/status" > "$WORK/r$round/a$i/hwm"
        echo "$cpu" > "$WORK/r$round/a$i/cpu"
        kill -INT "$a"
        k=$((k + 1))
    done
    for a in "${AGENTS[@]}"; do wait "$a" || true; done
    sleep 1
    for s in "${SERVERS[@]}"; do kill "$s" 2>/dev/null || true; done
    for i in "$@"; do
        d=$WORK/r$round/a$i
        python3 "$HERE/benches/security/builds_report.py" "$d" "${BINS[$i]}" "$round" "$n" \
            "$(cat "$d/cpu")" "$TICK" "$(echo "$T1 - $T0" | bc)" "$(cat "$d/hwm")" "$INTERVAL"
    done
}
echo "| build | round | builds run | agent CPU | CPU s | peak RSS | windows late / lost |" \
     "samples of the builds | pending | unnamed | with inlined frames |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
    if [ "${ALTERNATE:-0}" = 1 ] && [ "${#BINS[@]}" = 2 ]; then
        # One agent at a time, the order turned each round: A B, B A, ...
        if [ $((round % 2)) = 1 ]; then order=(0 1); else order=(1 0); fi
        run_round "$round.${order[0]}" "${order[0]}"
        run_round "$round.${order[1]}" "${order[1]}"
    else
        run_round "$round" "${!BINS[@]}"
    fi
done
