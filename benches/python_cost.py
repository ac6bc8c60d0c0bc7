# Recorder CPU per 1,000 samples (issue 29): a C target (tests/data/chains.c, its
# worker thread) against the Python worker (tests/data/python/worker.py), each one
# busy thread, attached by pid at -F 99 for SECS; paired rounds, the order reversed
# every other round. The recorder's CPU is its whole rusage (start, symbolisation
# and writing included) over every sample of the recording.
#   python3 benches/python_cost.py before=BIN1,after=BIN2 3.12.1 ROUNDS SECS
import os, resource, subprocess, sys, tempfile, time
BINS = [s.split('=', 1) for s in sys.argv[1].split(',')]
VER = sys.argv[2]; ROUNDS = int(sys.argv[3]); SECS = sys.argv[4]
OUT = tempfile.mkdtemp()
HERE = os.path.dirname(os.path.abspath(__file__))
CHAINS = f'{OUT}/chains'
subprocess.run(['cc', '-O2', '-g', '-pthread', f'{HERE}/../tests/data/chains.c', '-o', CHAINS], check=True)
py = os.path.expanduser(f'~/.pyenv/versions/{VER}/bin/python{VER.rsplit(".", 1)[0]}')
def target(kind):
    if kind == 'C':
        p = subprocess.Popen([CHAINS, 'worker'], stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == 'ready'
        return p, None
    stop = f'{OUT}/stop'
    if os.path.exists(stop): os.remove(stop)
    p = subprocess.Popen([py, f'{HERE}/../tests/data/python/worker.py', stop], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == 'ready'
    return p, stop
tot = {}
for r in range(ROUNDS):
    runs = [(n, b, k) for n, b in BINS for k in ('C', 'Python')]
    for n, b, k in (runs if r % 2 == 0 else runs[::-1]):
        p, stop = target(k)
        time.sleep(0.3)
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([b, 'record', '-F', '99', '-p', str(p.pid), '-d', SECS, '-o', f'{OUT}/x.prof'], capture_output=True)
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)
        if stop: open(stop, 'w').close(); p.stdout.read(); p.wait()
        else: p.kill(); p.wait()
        folded = subprocess.run([b, 'report', '-i', f'{OUT}/x.prof', '--folded', '-'], capture_output=True, text=True).stdout
        n_s = sum(int(l.rsplit(' ', 1)[1]) for l in folded.splitlines() if '[unsampled]' not in l)
        t = tot.setdefault((n, k), [0.0, 0]); t[0] += cpu; t[1] += n_s
        print(f'round {r + 1} {n} {k}: {n_s} samples, {cpu:.3f} s, {cpu * 1e6 / max(n_s, 1):.0f} ms per 1k', flush=True)
for (n, k), (c, s) in tot.items():
    print(f'{n} {k}: {s} samples, {c:.2f} s, {c * 1e6 / max(s, 1):.0f} ms per 1k (load {" ".join(open("/proc/loadavg").read().split()[:3])})')
for n, _ in BINS:
    (cc, cs), (pc, ps) = tot[(n, 'C')], tot[(n, 'Python')]
    print(f'{n}: Python / C per 1k samples = {(pc / max(ps, 1)) / (cc / max(cs, 1)):.2f}')
