#!/bin/sh
# Bytes per window and recorder CPU for a busier target than the soak's:
# tests/data/chains.c with every mode (six threads: C chains, qsort through libc,
# 3000-frame recursion, write(2) in the kernel, inlined code) for SECS seconds
# (default 60), recorded three ways one after the other: `record -o` (a file, no
# push), `record --push` (no file), `record --push -o`. Prints the recorder's CPU
# (user+sys s), peak RSS, the target's CPU time meanwhile and, for the pushes,
# windows and bytes per window.
#
#   sudo nice -n 10 benches/push/rich.sh OUT [SECS]
set -eu
OUT=$1
SECS=${2:-60}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
P="$HERE/target/release/profile"
mkdir -p "$OUT"
gcc -O2 -g -fomit-frame-pointer -pthread -o "$OUT/chains" "$HERE/tests/data/chains.c"
"$OUT/chains" worker main qsort deep syscalls inline > /dev/null &
TARGET=$!
python3 "$HERE/benches/push/ingest_server.py" 14043 "$OUT/ingest.log" --keep "$OUT" &
SERVER=$!
sleep 1
TICK=$(getconf CLK_TCK)
run() {
    name=$1; shift
    t0=$(awk '{print $14 + $15}' /proc/$TARGET/stat)
    /usr/bin/time -f "$name: recorder %U s user + %S s sys, peak RSS %M KiB, %e s" \
        "$P" record -p "$TARGET" -d "$SECS" -q "$@" 2>&1 | grep recorder
    t1=$(awk '{print $14 + $15}' /proc/$TARGET/stat)
    echo "  the target used $(( (t1 - t0) / TICK )) s of CPU meanwhile"
}
run "record -o" -o "$OUT/file.prof"
: > "$OUT/ingest.log"
run "record --push" --push http://127.0.0.1:14043
awk '{n++; b+=$4; if ($4>m) m=$4} END {printf "  %d windows, %.1f KiB per window (max %.1f), %.1f MiB per hour\n", n, b/n/1024, m/1024, b/n*360/1024/1024}' "$OUT/ingest.log"
: > "$OUT/ingest.log"
run "record --push -o" --push http://127.0.0.1:14043 -o "$OUT/both.prof"
awk '{n++; b+=$4} END {printf "  %d windows, %.1f KiB per window\n", n, b/n/1024}' "$OUT/ingest.log"
kill "$TARGET" "$SERVER"
