#!/usr/bin/env bash
# The SQLite case of `profile diff` (issue 32): a real before/after pair of a C
# program, recorded the way docs/ci.md recommends (BASE and NEW runs interleaved).
#
# A 200k-row table; the workload runs aggregates and LIKE scans (AGG rounds of three
# queries) plus LOOKUPS point lookups on column k, the whole of it REPS times.
#   base  the database has an index on k (point lookups are B-tree searches)
#   new   the index is dropped: each lookup scans the table (about 2x the CPU; the
#         rise is in sqlite3VdbeExec's self time)
#   aa    BASE again: an A/A check (no regression may be found)
#   slow  BASE with the whole workload run REPS*(1+SLOW/100) times: a uniform
#         slowdown that leaves every function's share as it was
# Each condition gets RUNS recordings at -F RATE, interleaved round by round.
#
# usage: benches/diff/sqlite.sh [DIR]   (default: a new temporary directory)
# environment: PROFILE (default target/release/profile), RUNS (3), RATE (999),
#   ROWS (200000), AGG (8), LOOKUPS (60), REPS (5), SLOW (20: a percentage;
#   REPS * (100 + SLOW) must be a multiple of 100), COMPARE (1; 0: record only)
# Then compare, e.g.:
#   profile diff --base DIR/base-1.prof ... --new DIR/new-1.prof ... --fail-on-regression 10
# benches/diff/sqlite.sh prints those commands and their results at the end.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
profile="${PROFILE:-$root/target/release/profile}"
runs="${RUNS:-3}" rate="${RATE:-999}" rows="${ROWS:-200000}"
agg="${AGG:-8}" lookups="${LOOKUPS:-60}" reps="${REPS:-5}" slow="${SLOW:-20}"
dir="${1:-$(mktemp -d /tmp/profile-sqlite-XXXXXX)}"
mkdir -p "$dir"
command -v sqlite3 >/dev/null || { echo "sqlite.sh: install sqlite3 (apt-get install sqlite3)" >&2; exit 2; }
[ -x "$profile" ] || { echo "sqlite.sh: build first (cargo build --release) or set PROFILE" >&2; exit 2; }
slow_reps=$(( reps * (100 + slow) / 100 ))
[ $(( reps * (100 + slow) % 100 )) -eq 0 ] ||
  { echo "sqlite.sh: REPS * (100 + SLOW) must be a multiple of 100" >&2; exit 2; }

# The databases: the same rows; BASE has the index.
rm -f "$dir/base.db" "$dir/new.db"
sqlite3 "$dir/new.db" <<SQL
CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, name TEXT, v REAL);
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < $rows)
INSERT INTO t SELECT i, (i * 7919) % 200003, 'name-' || (i * 31 % 100000) || '-x',
                     (i % 1000) / 7.0 FROM c;
SQL
cp "$dir/new.db" "$dir/base.db"
sqlite3 "$dir/base.db" "CREATE INDEX t_k ON t(k);"

# The workload: REPS (or slow_reps) times AGG rounds of aggregates and LIKE scans,
# then LOOKUPS point lookups of fixed keys.
workload() {
  local times=$1
  echo "PRAGMA cache_size = -200000;"
  for _ in $(seq "$times"); do
    for _ in $(seq "$agg"); do
      echo "SELECT k % 100, count(*), sum(v), avg(v) FROM t GROUP BY k % 100 ORDER BY 1 LIMIT 1;"
      echo "SELECT count(*) FROM t WHERE name LIKE '%99-x';"
      echo "SELECT count(*), max(v) FROM t WHERE name LIKE 'name-12%';"
    done
    for i in $(seq "$lookups"); do
      echo "SELECT id FROM t WHERE k = $(( (i * 104729) % 200003 ));"
    done
  done
}
workload "$reps" >"$dir/work.sql"
workload "$slow_reps" >"$dir/slow.sql"

record() { # NAME DB SQL
  "$profile" record -q -F "$rate" -o "$dir/$1.prof" -- \
    sqlite3 "$2" ".read $3" >/dev/null
}
for i in $(seq "$runs"); do
  record "base-$i" "$dir/base.db" "$dir/work.sql"
  record "new-$i" "$dir/new.db" "$dir/work.sql"
  record "aa-$i" "$dir/base.db" "$dir/work.sql"
  record "slow-$i" "$dir/base.db" "$dir/slow.sql"
done

[ "${COMPARE:-1}" = 1 ] || exit 0
side() { # FLAG NAME
  for i in $(seq "$runs"); do printf ' %s %s' "$1" "$dir/$2-$i.prof"; done
}
for pair in "base new" "base aa" "base slow"; do
  set -- $pair
  cmd="$profile diff$(side --base "$1")$(side --new "$2") --fail-on-regression 10"
  echo "\$ ${cmd//$dir/DIR}"
  status=0
  $cmd || status=$?
  echo "exit status $status"
  echo
done
echo "recordings in $dir"
