#!/usr/bin/env python3
"""A stand-in for Pyroscope's ingest endpoint, for the soak run (docs/continuous.md).

Listens on 127.0.0.1:PORT, answers POST /ingest with 200, and appends one line per
request to LOG: arrival time, from, until, body bytes, name. With --keep DIR it also
keeps every body (gzipped pprof) as DIR/N.pb.gz for `go tool pprof`.

    python3 benches/push/ingest_server.py 4040 /tmp/ingest.log [--keep DIR]
"""
import gzip
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

PORT = int(sys.argv[1])
LOG = sys.argv[2]
KEEP = sys.argv[sys.argv.index("--keep") + 1] if "--keep" in sys.argv else None
count = 0


class Ingest(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        global count
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        u = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(u.query).items()}
        ok = u.path == "/ingest" and q.get("format") == "pprof"
        try:
            gzip.decompress(body)
        except OSError:
            ok = False
        with open(LOG, "a") as f:
            f.write("%.3f %s %s %d %s %s\n" % (time.time(), q.get("from"), q.get("until"),
                                               len(body), q.get("name"), "ok" if ok else "bad"))
        if KEEP:
            with open(os.path.join(KEEP, "%d.pb.gz" % count), "wb") as f:
                f.write(body)
        count += 1
        code = 200 if ok else 400
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", PORT), Ingest).serve_forever()
