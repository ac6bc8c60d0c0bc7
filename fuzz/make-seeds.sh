#!/usr/bin/env bash
# Builds the ELF-based seed corpora (unwind, symbolize) from the test fixtures' C
# sources into DIR/unwind and DIR/symbolize, and copies the checked-in seeds
# (recordings, parser texts, perf.data files, JVM replies and perf maps, and the
# process memory inputs made from tests/data's snapshots by fuzz/src/seeds.rs) into
# DIR/recording, DIR/parsers, DIR/perfdata, DIR/jvm, DIR/python, DIR/hotspot and
# DIR/v8 and DIR/ruby, and the gopclntab seeds (plus, when go is installed, the
# table of tests/data/go/twowork.go built stripped) into DIR/gopclntab.
# Usage: fuzz/make-seeds.sh DIR
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data="$here/../tests/data"
out="${1:?usage: make-seeds.sh DIR}"
mkdir -p "$out"/{recording,unwind,symbolize,parsers,perfdata,jvm,python,hotspot,v8,ruby,gopclntab}
cp "$here"/seeds/recording/* "$out/recording/"
cp "$here"/seeds/perfdata/* "$out/perfdata/"
cp "$here"/seeds/parsers/* "$out/parsers/"
cp "$here"/seeds/jvm/* "$out/jvm/"
cp "$here"/seeds/python/* "$out/python/"
cp "$here"/seeds/hotspot/* "$out/hotspot/"
cp "$here"/seeds/v8/* "$out/v8/"
cp "$here"/seeds/ruby/* "$out/ruby/"
cp "$here"/seeds/gopclntab/* "$out/gopclntab/"
# The minimized corpora of the long runs (docs/reliability.md), where kept.
for t in python hotspot; do
    if [ -f "$here/corpus-min/$t.tar.gz" ]; then
        tar -xzf "$here/corpus-min/$t.tar.gz" -C "$out/$t"
    fi
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if command -v go >/dev/null; then
    GOCACHE="$tmp/gocache" GOPATH="$tmp/gopath" GO111MODULE=off GOTOOLCHAIN=local \
        go build -ldflags="-s -w" -o "$tmp/twowork" "$data/go/twowork.go"
    objcopy -O binary --only-section=.gopclntab "$tmp/twowork" "$out/gopclntab/twowork-go"
fi
gcc -O2 -g -shared -fPIC "$data/faultlib.c" -o "$out/symbolize/faultlib-g.so"
gcc -O1 -g -fno-omit-frame-pointer -pthread "$data/chains.c" -o "$out/symbolize/chains-g"
gcc -O2 -shared -fPIC -s "$data/faultlib.c" -o "$tmp/lib.so"
# unwind input: [u32 elf_len][elf][ip sp bp][stack bytes]
python3 - "$tmp/lib.so" "$out/unwind" <<'PY'
import struct, subprocess, sys
lib, out = sys.argv[1], sys.argv[2]
elf = open(lib, 'rb').read()
nm = subprocess.check_output(['nm', '-D', lib]).decode()
hot = int(next(l for l in nm.splitlines() if 'lib_hot' in l).split()[0], 16)
sp = 0x7ffd1000
cases = [
    (hot + 4, struct.pack('<QQQQ', hot + 0x20, 0, sp + 0x40, hot + 8) + bytes(224)),
    (hot, struct.pack('<Q', hot + 0x10) * 32),
    (0x1000, bytes(64)),
]
for i, (ip, stack) in enumerate(cases):
    data = struct.pack('<I', len(elf)) + elf + struct.pack('<QQQ', ip, sp, sp + 0x10) + stack
    open(f'{out}/lib-{i}', 'wb').write(data)
PY
