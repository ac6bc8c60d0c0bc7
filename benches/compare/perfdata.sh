#!/usr/bin/env bash
# Reading perf's own recordings: CPU time and peak memory of `profile report` on a
# perf.data file against perf's own readers of the same file (`perf report`, and
# `perf script`, the first step of every perf.data -> flame graph pipeline).
# Prints the markdown of docs/measurements/perf-data.md.
# Usage: sudo benches/compare/perfdata.sh [SECONDS]   (after cargo build --release)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../.."
profile="$root/target/release/profile"
secs="${1:-4}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
gcc -O2 -g -fno-omit-frame-pointer -pthread "$root/tests/data/threads.c" -o "$work/threads"

# CPU seconds (user + sys) and peak RSS (MiB) of a command, its output discarded.
measure() {
    /usr/bin/time -f "%U %S %M" -o "$work/t" "$@" >/dev/null 2>&1
    awk '{ printf "%.2f s | %d MiB", $1 + $2, $3 / 1024 }' "$work/t"
}

echo "## Reading perf.data (issue 15)"
echo
echo "Written by \`sudo benches/compare/perfdata.sh $secs\` on $(date -u '+%Y-%m-%d %H:%M') UTC; 1-minute load average $(cut -d' ' -f1 /proc/loadavg) at the start."
echo "The target: tests/data/threads.c, two threads burning CPU for $secs s, recorded by"
echo "\`perf record -e task-clock -c 100000\` (a sample per 0.1 ms of CPU) with each call graph; then each reader on the same file"
echo "(perf's build-id cache warm, profile's names from the same binaries)."
echo
echo "| call graph | samples | file | profile report --flamegraph: CPU | peak RSS | perf report --stdio: CPU | peak RSS | perf script: CPU | peak RSS |"
echo "|---|---|---|---|---|---|---|---|---|"
for mode in "dwarf" "fp"; do
    data="$work/$mode.data"
    perf record -q -e task-clock -c 100000 --call-graph "$mode" -o "$data" -- \
        "$work/threads" --exit-after "$secs" a:50:0 b:50:0 >/dev/null 2>&1
    samples=$(perf script -F tid -i "$data" 2>/dev/null | wc -l)
    size=$(du -m "$data" | cut -f1)
    ours=$(measure "$profile" report -i "$data" --flamegraph /dev/null)
    report=$(measure perf report -i "$data" --stdio)
    script=$(measure perf script -i "$data")
    echo "| $mode | $samples | $size MiB | $ours | $report | $script |"
done
