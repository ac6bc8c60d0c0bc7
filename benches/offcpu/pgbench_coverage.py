#!/usr/bin/env python3
"""Coverage by stacks on PostgreSQL backends under pgbench, CPU-only against
`--off-cpu`, for two `profile` binaries (issue 28).

Sets up one throwaway cluster as benches/offcpu/pgbench_runnable.py does (`pgbench -c
4 -j 2`, scale 2, fsync off), then records the four backends for SECONDS at a time
with each binary, with and without `--off-cpu`, the four variants alternated (the
order reversed every other round), and prints the share of their CPU time with a stack
(`record`'s "stacks cover"), the records lost and the load, one line per recording.

usage: sudo benches/offcpu/pgbench_coverage.py ROUNDS SECONDS BIN_A BIN_B [record args...]
"""

import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pgbench_runnable as pr  # noqa: E402


def main():
    rounds, secs, bin_a, bin_b = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    extra = sys.argv[5:]
    bindir = pr.pg_bin()
    tmp = tempfile.mkdtemp(prefix="pgcov-")
    os.chmod(tmp, 0o755)
    pg = pwd.getpwnam("postgres")
    data, sock = os.path.join(tmp, "data"), os.path.join(tmp, "sock")
    os.makedirs(sock)
    os.chown(tmp, pg.pw_uid, pg.pw_gid)
    os.chown(sock, pg.pw_uid, pg.pw_gid)
    port = str(5400 + os.getpid() % 500)
    bench = None
    try:
        pr.as_postgres([f"{bindir}/initdb", "-D", data, "-A", "trust"], check=True, capture_output=True)
        pr.as_postgres([f"{bindir}/pg_ctl", "-D", data, "-w", "-l", os.path.join(tmp, "pg.log"), "-o",
                        f"-p {port} -k {sock} -c listen_addresses= -c fsync=off", "start"],
                       check=True, capture_output=True)
        pgbench = shutil.which("pgbench") or f"{bindir}/pgbench"
        pr.as_postgres([pgbench, "-h", sock, "-p", port, "-i", "-s", "2", "-q", "postgres"],
                       check=True, capture_output=True)
        bench = subprocess.Popen(["runuser", "-u", "postgres", "--", pgbench, "-h", sock, "-p", port,
                                  "-c", "4", "-j", "2", "-T", "600", "postgres"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(os.path.join(data, "postmaster.pid")) as f:
            pm = int(f.readline())
        backends = []
        for _ in range(100):
            time.sleep(0.1)
            out = subprocess.run(["ps", "--ppid", str(pm), "-o", "pid=,args="],
                                 capture_output=True, text=True).stdout
            backends = [l.split()[0] for l in out.splitlines() if "[local]" in l]
            if len(backends) == 4:
                break
        if len(backends) != 4:
            sys.exit(f"found {len(backends)} backends, not 4")
        time.sleep(1)
        variants = [("A CPU-only", bin_a, []), ("A --off-cpu", bin_a, ["--off-cpu"]),
                    ("B --off-cpu", bin_b, ["--off-cpu"]), ("B CPU-only", bin_b, [])]
        for r in range(rounds):
            for name, binary, args in variants if r % 2 == 0 else variants[::-1]:
                rec = subprocess.run([binary, "record", "-p", ",".join(backends), "-d", secs,
                                      "-o", os.path.join(tmp, "x.prof"), *args, *extra],
                                     capture_output=True, text=True)
                cover = re.search(r"stacks cover ([\d.]+)%", rec.stderr)
                lost = re.search(r"(\d+) lost", rec.stderr)
                print(f"round {r} {name}: stacks cover {cover.group(1) if cover else '?'}%, "
                      f"{lost.group(1) if lost else '?'} lost, load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        pr.as_postgres([f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"], capture_output=True)
        if bench:
            try:
                bench.wait(timeout=10)
            except subprocess.TimeoutExpired:
                bench.kill()
                bench.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
