#!/usr/bin/env bash
# The side-by-side benchmark of issue 8, in one command:
#
#     sudo benches/compare/run.sh           # full run (~20 min), writes docs/benchmarks.md
#     sudo benches/compare/run.sh --quick   # a short smoke run (writes to $WORK only)
#
# This script owns the setup: it installs the peers (Debian's linux-perf, inferno's
# binaries and samply with `cargo install` into ~/.cache/profile-bench), builds profile
# (release, and a second copy with full debug info as the large-binary target), builds
# the workloads of benches/workloads/, then runs benches/compare/main.py, which takes
# the measurements and writes the report. It is idempotent (installs and builds are
# skipped when present) and leaves nothing running; the perf_event_paranoid value it
# may change for samply is restored on exit whatever happens.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${PROFILE_BENCH_CACHE:-$HOME/.cache/profile-bench}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=${PROFILE_BENCH_WORK:-$CARGO_TARGET_DIR/bench-compare}
PYTHON3_12=${PYTHON3_12:-$HOME/.pyenv/versions/3.12.1/bin/python3.12}
mkdir -p "$CACHE" "$WORK/bin"

[ "$(id -u)" = 0 ] || { echo "run.sh: run as root (perf events on other tools' targets, paranoid switch)" >&2; exit 2; }

PARANOID=/proc/sys/kernel/perf_event_paranoid
PARANOID_WAS=$(cat "$PARANOID")
restore() { echo "$PARANOID_WAS" > "$PARANOID"; }
trap restore EXIT

step() { echo "run.sh: $*" >&2; }

# --- Peers ---------------------------------------------------------------------
if ! command -v perf >/dev/null; then
    step "installing linux-perf"
    apt-get install -y linux-perf >&2
fi
for crate in inferno samply; do
    bin=$([ $crate = inferno ] && echo inferno-flamegraph || echo samply)
    if [ ! -x "$CACHE/bin/$bin" ]; then
        step "cargo install $crate (into $CACHE)"
        cargo install --locked --root "$CACHE" "$crate" >&2
    fi
done

# --- profile, twice ------------------------------------------------------------
step "building profile (release)"
(cd "$ROOT" && cargo build --release --quiet)
PROFILE_BIN=$CARGO_TARGET_DIR/release/profile
step "building profile with full debug info (the large-binary target)"
(cd "$ROOT" && CARGO_PROFILE_RELEASE_DEBUG=true CARGO_TARGET_DIR=$CARGO_TARGET_DIR/fulldebug \
    cargo build --release --quiet)
FULLDEBUG_BIN=$CARGO_TARGET_DIR/fulldebug/release/profile

# --- Workloads -------------------------------------------------------------------
W=$ROOT/benches/workloads
CFLAGS="-O2 -g -fomit-frame-pointer -pthread"   # no frame pointers, as distros build
for c in spin split threads; do
    if [ ! -x "$WORK/bin/$c" ] || [ "$W/$c.c" -nt "$WORK/bin/$c" ]; then
        gcc $CFLAGS -o "$WORK/bin/$c" "$W/$c.c"
    fi
done
if [ ! -x "$WORK/bin/deep" ] || [ "$W/deep.rs" -nt "$WORK/bin/deep" ]; then
    rustc -C opt-level=3 -C debuginfo=2 -o "$WORK/bin/deep" "$W/deep.rs"
fi

step "measuring"
# From the work directory: node --perf-basic-prof leaves isolate-*.log files in its cwd.
cd "$WORK"
PYTHONDONTWRITEBYTECODE=1 python3 "$ROOT/benches/compare/main.py" \
    --root "$ROOT" --work "$WORK" \
    --bin profile="$PROFILE_BIN" --bin profile-fulldebug="$FULLDEBUG_BIN" \
    --bin perf="$(command -v perf)" --bin samply="$CACHE/bin/samply" \
    --bin inferno-collapse-perf="$CACHE/bin/inferno-collapse-perf" \
    --bin inferno-flamegraph="$CACHE/bin/inferno-flamegraph" \
    --bin python3.12="$PYTHON3_12" --bin node="$(command -v node)" \
    "$@"

# Per-thread CPU accounting against each thread's own clock (issue 13), appended to the
# same report.
case " $* " in
    *" --quick "*|*" --only"*) ACCT_OUT="$WORK/benchmarks.md" ;;
    *) ACCT_OUT="$ROOT/docs/benchmarks.md" ;;
esac
step "accounting"
PYTHONDONTWRITEBYTECODE=1 python3 "$ROOT/benches/compare/accounting.py" "$PROFILE_BIN" --append "$ACCT_OUT"
