#!/usr/bin/env python3
"""tests/support/reward_server.py [PORT]: a tiny remote reward server speaking OpenRLHF's schema, for the verifier
tests (services/verifier/remote.h). POST {"query": [...], "prompts": [...], "labels": [...]} to one of:
  /ok       {"rewards": r, "scores": r, "extra_logs": {"query_chars": [...]}} with r = 1.0 when the query ends in
            "Answer: <label>", else -1.0
  /slow     the same after sleeping 10 s (a client timeout)
  /fail     HTTP 500 every time
  /flaky    HTTP 500 for the first 2 POSTs, then /ok
  /garbage  HTTP 200 with a body that is not JSON
  /huge     rewards of 1e300 (no 32-bit float holds them)
GET /stats: {"<path>": POSTs received, "items": queries received over all paths}. Prints "port N" once listening
(PORT 0 or none: any free port on 127.0.0.1). Standard library only."""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

stats = {"items": 0}
lock = threading.Lock()


def score(query, label):
    tail = query.rsplit("Answer:", 1)[-1].strip() if "Answer:" in query else None
    return 1.0 if tail == label else -1.0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"             # each reply says Connection: close, so the socket closes after it

    def log_message(self, fmt, *args):
        pass

    def reply(self, code, body, ctype="application/json"):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def do_GET(self):
        with lock:
            self.reply(200, json.dumps(stats))

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        req = json.loads(self.rfile.read(n))
        path = self.path
        with lock:
            stats[path] = stats.get(path, 0) + 1
            stats["items"] += len(req["query"])
            count = stats[path]
        if path == "/fail" or (path == "/flaky" and count <= 2):
            return self.reply(500, "internal error", "text/plain")
        if path == "/garbage":
            return self.reply(200, "<html>not json</html>", "text/html")
        if path == "/slow":
            time.sleep(10)
        r = [score(q, l) for q, l in zip(req["query"], req["labels"])]
        if path == "/huge":
            r = [1e300 for _ in r]
        self.reply(200, json.dumps({"rewards": r, "scores": r,
                                    "extra_logs": {"query_chars": [len(q) for q in req["query"]]}}))


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    srv = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    srv.daemon_threads = True
    print("port %d" % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
