# The repro loop of the 3.11+ misname (issue 29, session 12: "zlib" under `worker` on
# 3.12, about 1 sample in 1,500): attaches to tests/data/python/worker.py (the target of
# tests/it/python.rs) RUNS times at -F 499 and counts, in the worker thread's samples,
# those whose Python frames contradict the program's calls, known by construction:
#   - a C function the script calls from one Python function only, under another named
#     frame (zlib_compress under compress, os_stat under exists, time_thread_time under
#     worker);
#   - two named frames, caller and callee, that the script cannot chain (hot_a under
#     deep, worker under worker, ...).
# `[python: changed]` is never counted: it is the reader saying it does not know.
#   python3 benches/python_misname.py PROFILE_BIN RUNS [VERSIONS [SECONDS [HOGS]]]
# VERSIONS: pyenv versions, comma-separated (default 3.12.1); HOGS: CPU hogs run beside
# (default 0; the misname needs the read to come late, which load makes likelier).
# PIN=CPU (environment) runs the target and the recorder on that one CPU: the recorder
# waits for the worker's time slice, so reads come late without loading the machine.
# Prints one line per run with a misname (its stacks) and the totals, with the frames
# marked by cause as the recorder counts them (PROFILE_DEBUG_PYTHON=1).
import os, re, subprocess, sys, tempfile
PROFILE = os.path.realpath(sys.argv[1])
RUNS = int(sys.argv[2])
VERS = (sys.argv[3] if len(sys.argv) > 3 else '3.12.1').split(',')
SECS = sys.argv[4] if len(sys.argv) > 4 else '3'
HOGS = int(sys.argv[5]) if len(sys.argv) > 5 else 0
PIN = ['taskset', '-c', os.environ['PIN']] if os.environ.get('PIN') else []
HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, '..', 'tests', 'data', 'python', 'worker.py')
OUT = tempfile.mkdtemp()
CH = '[python: changed]'

# Each C entry the worker reaches, and the one Python function that calls it.
C_CALLER = {'zlib_compress': 'compress', 'os_stat': 'exists', 'time_thread_time': 'worker'}

def may_call(parent, child):
    """As tests/it/python.rs: None when `child` is not one of worker.py's functions."""
    if child == 'deep': return parent in ('deep', 'worker')
    if child in ('hot_a', 'hot_b', 'compress'): return parent == 'worker'
    if child == 'worker': return parent in ('Thread.run', 'run')
    return None

def misnamed(frames):
    """Why the stack `frames` (root first) is misnamed, or None."""
    py = []
    for f in frames:
        if f.endswith('_[j]'):
            py.append(f[:-4]); continue
        for entry, caller in C_CALLER.items():
            if f == entry or f.startswith(entry + '_'):
                last = py[-1] if py else None
                if last not in (caller, CH, None):
                    return f'{f} under {last}'
    for a, b in zip(py, py[1:]):
        if CH not in (a, b) and may_call(a, b) is False:
            return f'{b} under {a}'
    return None

hogs = [subprocess.Popen(['sh', '-c', 'while :; do :; done']) for _ in range(HOGS)]
try:
    for v in VERS:
        exe = os.path.expanduser(f'~/.pyenv/versions/{v}/bin/python{v.rsplit(".", 1)[0]}')
        total = bad = bad_runs = changed = 0
        causes = [0] * 7
        read = marked = 0
        for i in range(RUNS):
            stop = f'{OUT}/stop'
            if os.path.exists(stop): os.remove(stop)
            p = subprocess.Popen(PIN + [exe, SCRIPT, stop], stdout=subprocess.PIPE, text=True)
            assert p.stdout.readline().strip() == 'ready'
            out = f'{OUT}/run.prof'
            r = subprocess.run(PIN + [PROFILE, 'record', '-F', '499', '-p', str(p.pid), '-d', SECS, '-o', out],
                               capture_output=True, text=True, env=dict(os.environ, PROFILE_DEBUG_PYTHON='1'))
            for l in r.stderr.splitlines():
                if 'by cause' in l:
                    nums = [int(x) for x in re.findall(r'(\d+) (?:chains|running|held|callers|under|other|confirmed)', l)]
                    causes = [a + b for a, b in zip(causes, nums)]
                m = re.search(r'(\d+) read in .*?; (\d+) frames \(', l)
                if 'Python frames of process' in l and m:
                    read += int(m.group(1)); marked += int(m.group(2))
            open(stop, 'w').close(); p.stdout.read(); p.wait()
            folded = subprocess.run([PROFILE, 'report', '-i', out, '--per-thread', '--folded', '-'],
                                    capture_output=True, text=True).stdout
            wrong = []
            for line in folded.splitlines():
                st, n = line.rsplit(' ', 1); n = int(n); fr = st.split(';')
                if fr[0] != 'pyworker' or '[unsampled]' in st: continue
                total += n
                if any(f == CH + '_[j]' for f in fr): changed += n
                why = misnamed(fr)
                if why:
                    bad += n; wrong.append(f'{n} x {why}: {st}')
            if wrong:
                bad_runs += 1
                print(f'{v} run {i + 1}:', *wrong, sep='\n  ', flush=True)
        load = open('/proc/loadavg').read().split()[:3]
        print(f'{v}: {RUNS} runs, {total} worker samples, {bad} misnamed in {bad_runs} runs, '
              f'{changed} with a frame marked changed (load {" ".join(load)}, {HOGS} hogs, '
              f'pinned {os.environ.get("PIN") or "no"})', flush=True)
        print(f'{v}: {read} Python frames read, {marked} marked ({100 * marked / max(read, 1):.2f}%): '
              f'chain {causes[0]}, leaf not held {causes[1]}, leaf ambiguous {causes[2]}, '
              f'callers left {causes[3]}, under a leaf found from the sample {causes[4]}, '
              f'other {causes[5]}; confirmed beside pointers into other code {causes[6]}', flush=True)
finally:
    for h in hogs: h.kill()
