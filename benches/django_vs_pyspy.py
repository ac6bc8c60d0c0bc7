# profile's runtime-only view against py-spy's default view on a Django app served by
# gunicorn (two sync workers) under load: both tools record the same worker at the
# same time, and their top-10 Python functions by self time are put side by side.
# py-spy samples wall time while a thread is not idle by its own test; profile samples
# CPU time: the rows where they differ are told apart by `--off-cpu` (see
# docs/measurements/python.md).
#   python3 benches/django_vs_pyspy.py PROFILE_BIN [SECONDS] [ROUNDS]
# Installs Django and gunicorn from PyPI into ~/.cache/profile-bench/django-venv (on
# CPython 3.12 from ~/.pyenv); py-spy is $PYSPY (default: py-spy on PATH). A function is
# named `NAME (FILE)`, FILE the source file's name without its directory (py-spy
# shortens paths by sys.path, profile keeps them whole), in both tools. Prints
# one table per round and the number of py-spy's top-10 rows profile's view gives
# within 3 points (the bar of issue 50).
import http.client, json, os, subprocess, sys, tempfile, threading, time

PROFILE = sys.argv[1]
SECS = sys.argv[2] if len(sys.argv) > 2 else '20'
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 1
PYSPY = os.environ.get('PYSPY', 'py-spy')
VENV = os.path.expanduser('~/.cache/profile-bench/django-venv')
OUT = tempfile.mkdtemp()

APP = r'''
import os
from django.conf import settings
PAGE = """<html><body><h1>{{ title|title }}</h1><table>
{% for it in items %}<tr class="{% cycle 'odd' 'even' %}"><td>{{ it.name|upper }}</td>
<td>{{ it.price|floatformat:2 }}</td><td>{{ it.tags|join:", " }}</td></tr>{% endfor %}
</table><p>{{ total|floatformat:2 }}</p></body></html>"""
settings.configure(
    DEBUG=False, SECRET_KEY="bench", ALLOWED_HOSTS=["*"], ROOT_URLCONF=__name__,
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3",
                           "NAME": os.environ["DJANGO_DB"]}},
    INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth"],
    MIDDLEWARE=["django.middleware.common.CommonMiddleware"],
    TEMPLATES=[{"BACKEND": "django.template.backends.django.DjangoTemplates",
                "OPTIONS": {"loaders": [("django.template.loaders.locmem.Loader",
                                         {"page.html": PAGE})]}}],
)
import django
django.setup()
from django.db import connection, models
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import path


class Item(models.Model):
    name = models.CharField(max_length=40)
    price = models.FloatField()
    tags = models.CharField(max_length=80)

    class Meta:
        app_label = "auth"


def setup():
    with connection.schema_editor() as s:
        s.create_model(Item)
    Item.objects.bulk_create(
        Item(name=f"item {i}", price=i * 1.25, tags=f"a{i % 7} b{i % 5}")
        for i in range(400))


def page(request):
    items = [dict(name=i.name, price=i.price, tags=i.tags.split())
             for i in Item.objects.filter(price__gt=10).order_by("-price")[:80]]
    total = sum(i["price"] for i in items)
    return render(request, "page.html", dict(title="items", items=items, total=total))


def api(request):
    rows = list(Item.objects.values("id", "name", "price")[:150])
    return JsonResponse({"rows": rows, "n": len(rows)})


urlpatterns = [path("", page), path("api", api)]

from django.core.wsgi import get_wsgi_application
application = get_wsgi_application()
'''


def venv():
    py = os.path.join(VENV, 'bin', 'python')
    if not os.path.exists(py):
        base = os.path.expanduser('~/.pyenv/versions/3.12.1/bin/python3')
        subprocess.run([base, '-m', 'venv', VENV], check=True)
    subprocess.run([py, '-m', 'pip', 'install', '-q', 'django>=5,<7', 'gunicorn>=22'], check=True)
    return py


def load(stop, port):
    paths = ['/', '/api']
    n = 0
    while not stop.is_set():
        try:
            c = http.client.HTTPConnection('127.0.0.1', port, timeout=5)
            c.request('GET', paths[n % 2])
            c.getresponse().read()
            c.close()
        except OSError:
            time.sleep(0.05)
        n += 1


def pyspy_self(path):
    self_ = {}
    tot = 0
    for line in open(path):
        st, n = line.rstrip('\n').rsplit(' ', 1)
        n = int(n)
        leaf = st.split(';')[-1]
        name, _, rest = leaf.partition(' (')
        file = rest.rsplit(':', 1)[0].split('/')[-1]
        key = f'{name} ({file})'
        self_[key] = self_.get(key, 0) + n
        tot += n
    return {k: v * 100.0 / tot for k, v in self_.items()}, tot


def profile_self(prof):
    r = subprocess.run([PROFILE, 'report', '-i', prof, '--runtime-only', '--json', '--top', '100000'],
                       capture_output=True, text=True, check=True)
    data = json.loads(r.stdout)
    total = data['totals']['samples']
    out = {}
    for f in data['functions']:
        file = (f.get('file') or '').split('/')[-1]
        key = f"{f['name']} ({file})"
        out[key] = out.get(key, 0) + f['self_percent']
    return out, total


def round_(py, port, r):
    db = os.path.join(OUT, f'db{r}.sqlite3')
    env = dict(os.environ, DJANGO_DB=db, PYTHONPATH=OUT)
    subprocess.run([py, '-c', 'import djapp; djapp.setup()'], env=env, check=True)
    g = subprocess.Popen([os.path.join(VENV, 'bin', 'gunicorn'), '-w', '2', '-b', f'127.0.0.1:{port}',
                          '--log-level', 'warning', 'djapp:application'], env=env)
    try:
        for _ in range(100):
            try:
                c = http.client.HTTPConnection('127.0.0.1', port, timeout=2)
                c.request('GET', '/')
                c.getresponse().read()
                break
            except OSError:
                time.sleep(0.1)
        kids = open(f'/proc/{g.pid}/task/{g.pid}/children').read().split()
        worker = kids[0]
        stop = threading.Event()
        clients = [threading.Thread(target=load, args=(stop, port)) for _ in range(3)]
        for c in clients:
            c.start()
        time.sleep(1)
        prof = os.path.join(OUT, f'r{r}.prof')
        raw = os.path.join(OUT, f'r{r}.txt')
        ours = subprocess.Popen([PROFILE, 'record', '-p', worker, '-d', SECS, '-o', prof],
                                stderr=subprocess.PIPE, text=True)
        spy = subprocess.Popen([PYSPY, 'record', '-p', worker, '-d', SECS, '-r', '100', '--nonblocking',
                                '--format', 'raw', '-o', raw], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        err = ours.communicate()[1]
        spy.wait()
        stop.set()
        for c in clients:
            c.join()
    finally:
        g.terminate()
        g.wait()
    a, atot = profile_self(prof)
    b, btot = pyspy_self(raw)
    top = sorted(b.items(), key=lambda kv: -kv[1])[:10]
    within = 0
    print(f'## round {r}: worker {worker}, {SECS} s; profile {atot} samples, py-spy {btot}')
    print('| function | py-spy % | profile % | diff |')
    print('|---|---:|---:|---:|')
    for k, v in top:
        mine = a.get(k, 0.0)
        ok = abs(mine - v) <= 3.0
        within += ok
        print(f'| `{k}` | {v:.1f} | {mine:.1f} | {mine - v:+.1f}{"" if ok else " ✗"} |')
    ours_top = sorted(a.items(), key=lambda kv: -kv[1])[:10]
    print(f'\n{within} of 10 rows within 3 points. profile\'s own top 10: ' +
          ', '.join(f'`{k}` {v:.1f}' for k, v in ours_top))
    notes = [l for l in err.splitlines() if 'Python frames' in l]
    if notes:
        print('\n' + '\n'.join(notes))
    return within


def main():
    py = venv()
    open(os.path.join(OUT, 'djapp.py'), 'w').write(APP)
    res = [round_(py, 18000 + r, r) for r in range(ROUNDS)]
    print(f'\nrows within 3 points per round: {res}')


main()
