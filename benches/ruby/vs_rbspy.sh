#!/usr/bin/env bash
# Issue 49: profile's Ruby frames against rbspy's on the same program, the 3:1 split
# of tests/it/ruby.rs (`alpha`: three passes of a loop, each in a block given to
# Array#each; `beta`: one pass), ROUNDS rounds each (default 3), 2.5 s of CPU a run,
# 499 Hz. Prints each run's share of alpha among the samples in alpha or beta, and
# the share of samples that name a Ruby method.
# Usage: benches/ruby/vs_rbspy.sh [PROFILE] [RBSPY]
#   PROFILE defaults to target/release/profile, RBSPY to ~/.cache/profile-bench/bin/rbspy
#   (cargo install --locked --root ~/.cache/profile-bench rbspy).
set -euo pipefail
cd "$(dirname "$0")/../.."
profile="${1:-target/release/profile}"
rbspy="${2:-$HOME/.cache/profile-bench/bin/rbspy}"
rounds="${ROUNDS:-3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat > "$work/split.rb" <<'RB'
def alpha(n)
  [0, 1, 2].each do |_|
    i = 0
    x = 0
    while i < n
      x += i * i % 7
      i += 1
    end
  end
end

def beta(n)
  i = 0
  x = 0
  while i < n
    x += i * i % 7
    i += 1
  end
  x
end

cpu_ms = Integer(ARGV[0])
$stdout.puts 'ready'
$stdout.flush
loop do
  alpha(20_000)
  beta(20_000)
  break if Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID, :millisecond) >= cpu_ms
end
sleep(Integer(ARGV[1]) / 1000.0)
RB
share() {
    python3 -c '
import sys
a = b = named = total = 0
for line in open(sys.argv[1]):
    stack, n = line.rstrip("\n").rsplit(" ", 1)
    n = int(n); frames = stack.split(";")
    total += n
    ruby = [f for f in frames if f.endswith("_[j]") and not f.startswith("[")] if sys.argv[2] == "profile" else frames
    # profile names them as Ruby 3.4 does (Object#alpha), rbspy by 3.1's label.
    label = lambda f: f.split(" - ")[0].removesuffix("_[j]").removeprefix("Object#")
    if any(label(f) == "alpha" for f in ruby): a += n
    elif any(label(f) == "beta" for f in ruby): b += n
    if sys.argv[2] == "rbspy" or ruby: named += n
print(f"{sys.argv[2]:8} alpha {a:5} beta {b:5} alpha share {a / max(a + b, 1):.3f}  named {named / max(total, 1):.3f}")
' "$1" "$2"
}
for r in $(seq "$rounds"); do
    "$profile" record -F 499 -q -o "$work/p.prof" -- ruby "$work/split.rb" 2500 300 >/dev/null
    "$profile" report -i "$work/p.prof" --folded - | grep -v '^\[unsampled\]' > "$work/p.folded"
    share "$work/p.folded" profile
    "$rbspy" record --nonblocking -r 499 --format collapsed -f "$work/r.folded" --silent \
        -- ruby "$work/split.rb" 2500 0 >/dev/null 2>&1
    share "$work/r.folded" rbspy
done
