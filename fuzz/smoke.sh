#!/usr/bin/env bash
# CI smoke run of every fuzz target: FUZZ_SECONDS (default 30) each, one job, niced.
# Installs cargo-fuzz from crates.io when missing; needs the nightly toolchain (it is on
# the project's machines; without it the run says SKIPPED and exits 0). A finding
# fails the run; the input that caused it is left in fuzz/artifacts/TARGET/ (copy it to
# fuzz/regressions/TARGET/ once fixed: the suite replays those).
# Usage: fuzz/smoke.sh [TARGET...]      (from anywhere)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
secs="${FUZZ_SECONDS:-30}"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(recording unwind symbolize parsers perfdata jvm python hotspot v8 ruby gopclntab)

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "fuzz smoke: SKIPPED: no nightly toolchain (cargo-fuzz needs one)"
    exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz smoke: installing cargo-fuzz"
    cargo install cargo-fuzz --locked --quiet
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$here/make-seeds.sh" "$work/seeds"
echo "fuzz smoke: building the targets"
nice -n 10 cargo +nightly fuzz build -O

failed=0
for t in "${targets[@]}"; do
    mkdir -p "$work/corpus/$t"
    start=$(date +%s)
    # A real Go table (a seed when go is installed) is some 360 KiB.
    max_len=65536
    [ "$t" = gopclntab ] && max_len=1048576
    if nice -n 10 cargo +nightly fuzz run -O "$t" "$work/corpus/$t" "$work/seeds/$t" -- \
        -max_total_time="$secs" -rss_limit_mb=2048 -timeout=20 \
        -max_len="$max_len" -print_final_stats=1 >"$work/$t.log" 2>&1; then
        runs=$(grep -m1 -oE 'stat::number_of_executed_units: *[0-9]+' "$work/$t.log" | grep -oE '[0-9]+$' || echo '?')
        echo "fuzz smoke: $t: ok, $runs executions in $(( $(date +%s) - start )) s"
    else
        failed=1
        echo "fuzz smoke: $t: FAILED; the log ends:"
        tail -40 "$work/$t.log"
        ls "$here/artifacts/$t/" 2>/dev/null | sed 's/^/  artifact: /'
    fi
done
exit $failed
