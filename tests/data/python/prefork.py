# A target for tests/it/top_runtimes.rs: a pre-fork server as gunicorn runs one. The
# master forks two workers and replaces each one every ~2 s (a worker exits after 2 s
# of wall time, the master forks another in its place); the master itself only waits.
# Each worker spins in two Python functions. Prints "ready" once the first workers
# run; stops after 10 minutes, or when killed (its workers then exit within 2 s).
import os
import sys
import time


def handle_request():
    x = 0
    for _ in range(20000):
        x = (x * 3 + 1) & 255
    return x


def render_page():
    x = 0
    for _ in range(10000):
        x = (x * 5 + 3) & 255
    return x


def work():
    master = os.getppid()
    end = time.monotonic() + 2.0
    while time.monotonic() < end and os.getppid() == master:
        handle_request()
        render_page()
    os._exit(0)


def spawn():
    pid = os.fork()
    if pid == 0:
        work()
    return pid


def main():
    workers = {spawn() for _ in range(2)}
    print("ready", flush=True)
    end = time.monotonic() + 600
    while time.monotonic() < end:
        pid, _ = os.wait()
        workers.discard(pid)
        workers.add(spawn())


main()
