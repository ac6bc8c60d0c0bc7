# Paired rounds for issue 29 (docs/measurements/python.md): for each variant
# NAME=BIN[@ENV=V+ENV=V], attach to tests/data/python/worker.py for SECS at -F 99 and
# report the worker's samples, the share whose Python chain is whole, the frames
# marked [python: changed], the recorder's CPU (rusage) per 1,000 samples, and
# (PROFILE_DEBUG_PYTHON) the marked frames by cause and how late samples were read.
# Variants alternate in order from round to round.
#   python3 benches/python_whole.py before=BIN1,after=BIN2 3.12.1 ROUNDS SECS
import os, re, resource, subprocess, sys, tempfile, time
VARS = []
for spec in sys.argv[1].split(','):
    name, rest = spec.split('=', 1)
    b, _, env = rest.partition('@')
    VARS.append((name, b, dict(kv.split('=', 1) for kv in env.split('+') if kv)))
VER = sys.argv[2]; ROUNDS = int(sys.argv[3]); SECS = sys.argv[4]
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'data', 'python', 'worker.py')
OUT = tempfile.mkdtemp(); CH = '[python: changed]'
exe = os.path.expanduser(f'~/.pyenv/versions/{VER}/bin/python{VER.rsplit(".", 1)[0]}')
tot = {n: [0, 0, 0, 0.0, 0, 0] for n, _, _ in VARS}
for r in range(ROUNDS):
    for name, b, env in (VARS if r % 2 == 0 else VARS[::-1]):
        stop = f'{OUT}/stop'
        if os.path.exists(stop): os.remove(stop)
        p = subprocess.Popen([exe, SCRIPT, stop], stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == 'ready'
        time.sleep(0.3)
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        rr = subprocess.run([b, 'record', '-F', '99', '-p', str(p.pid), '-d', SECS, '-o', f'{OUT}/x.prof'],
                            capture_output=True, text=True, env=dict(os.environ, PROFILE_DEBUG_PYTHON='1', **env))
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)
        open(stop, 'w').close(); p.stdout.read(); p.wait()
        folded = subprocess.run([b, 'report', '-i', f'{OUT}/x.prof', '--per-thread', '--folded', '-'],
                                capture_output=True, text=True).stdout
        n_all = whole = every = 0
        for line in folded.splitlines():
            st, n = line.rsplit(' ', 1); n = int(n); fr = st.split(';')
            if '[unsampled]' in st: continue
            every += n
            if fr[0] != 'pyworker': continue
            py = [f[:-4] for f in fr if f.endswith('_[j]')]
            n_all += n
            if py and CH not in py and py[0].endswith('_bootstrap'): whole += n
        read = marked = 0
        causes = ''
        for l in rr.stderr.splitlines():
            m = re.search(r'(\d+) read in .*?; (\d+) frames \(', l)
            if 'Python frames of process' in l and m: read, marked = int(m.group(1)), int(m.group(2))
            if 'by cause' in l: causes += re.sub(r'[a-z ]+', ' ', l.split('):', 1)[1])
            if 'read ahead (' in l: causes += ' late ' + ' '.join(re.findall(r'(\d+) (?:within|later|caught)', l))
        t = tot[name]; t[0] += n_all; t[1] += whole; t[2] += marked; t[3] += cpu; t[4] += read; t[5] += every
        print(f'round {r + 1} {name}: {n_all} samples, whole {100 * whole / max(n_all, 1):.1f}%, '
              f'marked {100 * marked / max(read, 1):.2f}%, recorder CPU {cpu:.2f} s ({1000 * cpu * 1000 / max(every, 1):.0f} ms/1k)'
              f' |{causes}', flush=True)
for name, t in tot.items():
    print(f'{VER} {name}: {t[0]} samples, whole {100 * t[1] / max(t[0], 1):.1f}%, '
          f'marked {100 * t[2] / max(t[4], 1):.2f}%, recorder CPU {t[3]:.2f} s over {ROUNDS} x {SECS} s, '
          f'{1000 * t[3] * 1000 / max(t[5], 1):.0f} ms per 1k samples '
          f'(load {" ".join(open("/proc/loadavg").read().split()[:3])})', flush=True)
