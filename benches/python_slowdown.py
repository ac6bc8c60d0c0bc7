# The target's slowdown while a tool samples it at 99 Hz (issue 29): a CPython
# process running Python functions (a recursion 30 deep, arithmetic, a dict) counts
# its iterations over a window of SECS wall seconds that starts 1 s after the tool
# attached (attaching is left out); each tool's count is divided by the count of a
# run with no tool in the same round. Rounds are paired and the order of the tools
# turns every round. Tools: profile (`record -p`), py-spy (ptrace stops the target
# at each sample) and py-spy --nonblocking.
#   PYSPY=/path/to/py-spy python3 benches/python_slowdown.py PROFILE_BIN 3.12.1 ROUNDS SECS
# Prints each round's ratios and, per tool, the median ratio (1.000 = no slowdown)
# and the target's CPU per iteration against the no-tool run's.
import os, statistics, subprocess, sys, tempfile, time
PROFILE = sys.argv[1]; VER = sys.argv[2]; ROUNDS = int(sys.argv[3]); SECS = float(sys.argv[4])
PYSPY = os.environ.get('PYSPY', 'py-spy')
OUT = tempfile.mkdtemp()
TARGET = f'{OUT}/target.py'
with open(TARGET, 'w') as f:
    f.write('''import sys, time, os
def leaf(n):
    d = {}
    for i in range(n):
        d[i & 7] = d.get(i & 7, 0) + i * i
    return d
def down(k):
    return leaf(20) if k == 0 else down(k - 1)
SECS = float(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
start = time.monotonic() + 1.0
while time.monotonic() < start:
    down(30)
n = 0
c0 = time.process_time()
end = start + SECS
while time.monotonic() < end:
    down(30)
    n += 1
print(n, time.process_time() - c0, flush=True)
''')
exe = os.path.expanduser(f'~/.pyenv/versions/{VER}/bin/python{VER.rsplit(".", 1)[0]}')

def run(tool):
    t = subprocess.Popen([exe, TARGET, str(SECS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert t.stdout.readline().strip() == 'ready'
    d = str(int(SECS + 3))
    cmd = {
        'none': None,
        'profile': [PROFILE, 'record', '-q', '-p', str(t.pid), '-F', '99', '-d', d, '-o', f'{OUT}/x.prof'],
        'py-spy': [PYSPY, 'record', '-p', str(t.pid), '-r', '99', '-d', d, '-f', 'raw', '-o', f'{OUT}/x.txt'],
        'py-spy --nonblocking': [PYSPY, 'record', '--nonblocking', '-p', str(t.pid), '-r', '99', '-d', d, '-f', 'raw', '-o', f'{OUT}/x.txt'],
    }[tool]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) if cmd else None
    # The tool attaches (py-spy and profile both take well under a second), then the
    # target's window starts 1 s after it is told to go.
    time.sleep(0.5)
    t.stdin.write('go\n'); t.stdin.flush()
    n, cpu = t.stdout.readline().split()
    t.wait()
    if p:
        p.wait()
    return int(n), float(cpu)

TOOLS = ['profile', 'py-spy --nonblocking', 'py-spy']
ratios = {k: [] for k in TOOLS}
cpu_ratios = {k: [] for k in TOOLS}
for r in range(ROUNDS):
    order = TOOLS[r % len(TOOLS):] + TOOLS[:r % len(TOOLS)]
    base, base_cpu = run('none')
    line = []
    for k in order:
        n, cpu = run(k)
        ratios[k].append(n / base)
        cpu_ratios[k].append((cpu / n) / (base_cpu / base))
        line.append(f'{k} {n / base:.3f}')
    print(f'round {r + 1}: none {base} iterations; ' + ', '.join(line), flush=True)
load = ' '.join(open('/proc/loadavg').read().split()[:3])
for k in TOOLS:
    print(f'{k}: throughput {statistics.median(ratios[k]):.3f} of no tool (median of {ROUNDS}; '
          f'min {min(ratios[k]):.3f}), CPU per iteration {statistics.median(cpu_ratios[k]):.3f}x (load {load})')
