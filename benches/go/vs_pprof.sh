#!/usr/bin/env bash
# Go programs built as they ship (-ldflags="-s -w"), recorded by profile and by Go's
# own CPU profiler (runtime/pprof) in the same run, each read with `go tool pprof
# -top` (profile's recording through `profile report --pprof`):
#   1. tests/data/go/twowork.go: alphaWork and betaWork on two goroutines, 6 s;
#   2. benches/go/httpserver.go under wrk (two endpoints), 8 s.
# Usage: benches/go/vs_pprof.sh [GO]   (GO: the go binary, default `go` on PATH)
# Needs: go, wrk, a built profile (PROFILE_BIN, default target/release/profile).
# Kernel frames and [unsampled] are hidden from profile's tables (their time goes
# to the Go function below them, as runtime/pprof's SIGPROF counts it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../.."
go="${1:-go}"
profile="${PROFILE_BIN:-$root/target/release/profile}"
work="$(mktemp -d)"
# KEEP=DIR keeps the four profiles (.pprof) there.
trap '[ -n "${KEEP:-}" ] && cp "$work"/*.pprof "$KEEP"/; rm -rf "$work"' EXIT
export GOCACHE="$work/gocache" GOPATH="$work/gopath" GO111MODULE=off GOTOOLCHAIN=local
echo "== $("$go" version)"

kernel='^([A-Za-z_0-9]+(\.(isra|constprop|part|cold)(\.[0-9]+)?)*|\[unsampled\])$'
top() { # FILE: the top 10 by self time, as `go tool pprof -top` prints them
    "$go" tool pprof -top -nodecount=10 -hide="$kernel" "$1" 2>/dev/null | sed -n '/flat%/,$p'
}
cum() { # FILE FUNCTION: the function's cum% in `go tool pprof -top`
    "$go" tool pprof -top -nodecount=400 -hide="$kernel" "$1" 2>/dev/null |
        awk -v f="$2" '$NF == f { print $5; exit }'
}

"$go" build -ldflags="-s -w" -o "$work/twowork" "$root/tests/data/go/twowork.go"
TWOWORK_CPUPROFILE="$work/two.pprof" "$profile" record -F 999 -q -o "$work/two.prof" \
    -- "$work/twowork" 6
"$profile" report -i "$work/two.prof" --pprof "$work/two-profile.pprof" 2>/dev/null
echo "-- twowork: alphaWork / betaWork cum%: profile $(cum "$work/two-profile.pprof" main.alphaWork) / $(cum "$work/two-profile.pprof" main.betaWork), runtime/pprof $(cum "$work/two.pprof" main.alphaWork) / $(cum "$work/two.pprof" main.betaWork)"
echo "-- twowork, profile:"; top "$work/two-profile.pprof"
echo "-- twowork, runtime/pprof:"; top "$work/two.pprof"

"$go" build -ldflags="-s -w" -o "$work/httpserver" "$here/httpserver.go"
HTTPSERVER_CPUPROFILE="$work/http.pprof" "$work/httpserver" 8089 8 &
server=$!
sleep 0.5
"$profile" record -F 999 -q -d 6.5 -p "$server" -o "$work/http.prof" &
recorder=$!
cat > "$work/mix.lua" <<'LUA'
local n = 0
request = function()
  n = n + 1
  if n % 2 == 0 then return wrk.format("GET", "/sort") end
  return wrk.format("GET", "/work?q=" .. n)
end
LUA
wrk -t2 -c16 -d7s -s "$work/mix.lua" http://127.0.0.1:8089/ | grep -E "Requests/sec"
wait "$recorder"
wait "$server"
"$profile" report -i "$work/http.prof" --pprof "$work/http-profile.pprof" 2>/dev/null
echo "-- httpserver, profile:"; top "$work/http-profile.pprof"
echo "-- httpserver, runtime/pprof:"; top "$work/http.pprof"
