# SPDX-License-Identifier: Apache-2.0
"""A fake npm registry for the phase tests, run inside the fake upstream
network namespace: serves DIR over HTTP on ADDR:PORT, a directory as its
index.json (a packument), and logs each request path to stdout.
Prints "ready" once listening. Usage: registry.py DIR ADDR PORT"""
import http.server
import sys
from pathlib import Path

ROOT = Path(sys.argv[1]).resolve()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        path = (ROOT / self.path.split("?")[0].lstrip("/")).resolve()
        if path.is_dir():
            path = path / "index.json"
        print(f"GET {self.path}", flush=True)
        if ROOT not in path.parents or not path.is_file():
            self.send_error(404)
            return
        body = path.read_bytes()
        self.send_response(200)
        ctype = "application/json" if path.suffix == ".json" else "application/octet-stream"
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer((sys.argv[2], int(sys.argv[3])), Handler)
print("ready", flush=True)
server.serve_forever()
