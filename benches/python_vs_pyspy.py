# Side-by-side figures for docs/measurements/python.md: profile vs py-spy (default
# and --nonblocking) on tests/data/python/worker.py, each tool on its own run of the
# target, for each pyenv CPython named.
#   python3 benches/python_vs_pyspy.py PROFILE_BIN 3.8.18,3.12.1 SECONDS
# py-spy is $PYSPY (default: py-spy on PATH). Prints one dict per (version, tool);
# cpu_ms_per_1k: the tool's own CPU time (user + system, from its rusage) per 1,000
# samples of the worker thread.
import os, resource, subprocess, sys, tempfile, time
PROFILE = sys.argv[1]
VERS = sys.argv[2].split(',')
SECS = sys.argv[3] if len(sys.argv) > 3 else '8'
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'data', 'python', 'worker.py')
PYSPY = os.environ.get('PYSPY', 'py-spy')
OUT = tempfile.mkdtemp()
CH = '[python: changed]'

def start(v):
    stop = f'{OUT}/stop-{v}'
    if os.path.exists(stop): os.remove(stop)
    exe = os.path.expanduser(f'~/.pyenv/versions/{v}/bin/python{v.rsplit(".",1)[0]}')
    p = subprocess.Popen([exe, SCRIPT, stop], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == 'ready'
    return p, stop

def finish(p, stop):
    open(stop, 'w').close()
    out = p.stdout.read(); p.wait()
    a, b = [float(x) for x in out.split('split ')[1].split()]
    return a / (a + b)

def cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime

def ours(v):
    p, stop = start(v)
    time.sleep(0.5)
    out = f'{OUT}/{v}.prof'
    c0 = cpu()
    r = subprocess.run([PROFILE, 'record', '-p', str(p.pid), '-d', SECS, '-F', '99', '-o', out], capture_output=True, text=True)
    used = cpu() - c0
    note = [l for l in r.stderr.splitlines() if 'Python frames' in l or 'CPU' in l]
    clock = finish(p, stop)
    folded = subprocess.run([PROFILE, 'report', '-i', out, '--per-thread', '--folded', '-'], capture_output=True, text=True).stdout
    tot = named = whole = a = b = 0
    for line in folded.splitlines():
        st, n = line.rsplit(' ', 1); n = int(n); fr = st.split(';')
        if fr[0] != 'pyworker' or '[unsampled]' in st: continue
        py = [f[:-4] for f in fr if f.endswith('_[j]')]
        tot += n
        if py and py[-1] != CH: named += n
        if py and CH not in py and py[0].endswith('_bootstrap'): whole += n
        if py and py[-1] == 'hot_a': a += n
        if py and py[-1] == 'hot_b': b += n
    return dict(samples=tot, named=named / max(tot, 1), whole=whole / max(tot, 1), split=a / max(a + b, 1), clock=clock, cpu_ms_per_1k=used * 1e6 / max(tot, 1), notes=note)

def pyspy(v, extra):
    p, stop = start(v)
    time.sleep(0.5)
    out = f'{OUT}/{v}{"".join(extra)}.txt'
    c0 = cpu()
    subprocess.run([PYSPY, 'record', '-p', str(p.pid), '-d', SECS, '-r', '99', '-f', 'raw', '-o', out] + extra, capture_output=True, text=True)
    used = cpu() - c0
    clock = finish(p, stop)
    tot = a = b = whole = 0
    for line in open(out):
        st, n = line.rsplit(' ', 1); n = int(n); fr = st.split(';')
        if not any(f.startswith('worker ') for f in fr): continue
        tot += n
        leaf = fr[-1].split(' (')[0]
        if fr[0].startswith('_bootstrap ') or fr[0].startswith('Thread._bootstrap'): whole += n
        if leaf == 'hot_a': a += n
        if leaf == 'hot_b': b += n
    return dict(samples=tot, named=1.0 if tot else 0, whole=whole / max(tot, 1), split=a / max(a + b, 1), clock=clock, cpu_ms_per_1k=used * 1e6 / max(tot, 1))

for v in VERS:
    print(v, 'profile', ours(v), flush=True)
    print(v, 'py-spy', pyspy(v, []), flush=True)
    print(v, 'py-spy --nonblocking', pyspy(v, ['--nonblocking']), flush=True)
