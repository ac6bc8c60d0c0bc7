#!/bin/bash
# `--call-graph fp` before and after the leaf fix-up: the recorder's CPU (user+sys,
# /usr/bin/time) for 10 s of `record -p` at -F 999 beside `perf record --call-graph fp`,
# in paired rounds, on tests/data/chains.c built with frame pointers (three busy
# threads: a leaf without a frame, a syscall loop through libc's `write`, qsort);
# then how many of each recording's stacks are whole.
#
#   benches/compare/fp_leaf.sh OLD_PROFILE NEW_PROFILE [ROUNDS]
set -euo pipefail
old=$1 new=$2 rounds=${3:-3}
dir=$(mktemp -d)
gcc -O2 -g -fno-omit-frame-pointer -pthread tests/data/chains.c -o "$dir/chains"
"$dir/chains" worker qsort syscalls >/dev/null &
t=$!
trap 'kill $t; rm -rf "$dir"' EXIT
sleep 1
for r in $(seq "$rounds"); do
  for who in old new perf; do
    case $who in
      old) cmd=("$old" record -p $t -d 10 -F 999 --call-graph fp -q -o "$dir/old.prof") ;;
      new) cmd=("$new" record -p $t -d 10 -F 999 --call-graph fp -q -o "$dir/new.prof") ;;
      perf) cmd=(timeout -s INT 10 perf record -q -e task-clock -F 999 --call-graph fp -p $t -o "$dir/p.data") ;;
    esac
    /usr/bin/time -f "$r $who %U %S" -a -o "$dir/times" "${cmd[@]}" 2>/dev/null || true
  done
done
echo "round who user_s sys_s"
cat "$dir/times"
for who in old new; do
  "$new" report -i "$dir/$who.prof" --folded - 2>/dev/null | awk -v who=$who '
    { n = $NF; t += n }
    /worker_main/ { wa += n }
    /^start_thread;worker_main;level_a;level_b;level_c( |;)/ { w += n }
    /__GI___libc_write/ { sa += n }
    /sys_loop;__GI___libc_write/ { s += n }
    END { printf "%s: worker stacks whole %d of %d; write under sys_loop %d of %d; samples %d\n", who, w, wa, s, sa, t }'
done
