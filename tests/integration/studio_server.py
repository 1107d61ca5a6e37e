"""A fake gProfiler Performance Studio (+ Pyroscope /ingest) on loopback HTTPS.

Standard library only: http.server + ssl with a self-signed certificate made
by `openssl` for 127.0.0.1. It checks every request the way the real studio
reads it and records what it accepted. Failure injection: a per-request
script of behaviours for POST /api/v2/profiles ("ok", 503, ("slow", s)),
and stop()/start() on the same port for "server down".

A profile counts as delivered ("committed") only when the server answered
2xx in time; a "slow" request sleeps past the client's timeout and is then
dropped without committing, as a studio that timed out would.
"""
import gzip
import json
import os
import ssl
import subprocess
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REQUIRED_BODY = ["start_time", "end_time", "hostname", "profile", "cpu_avg", "mem_avg",
                 "spawn_time", "gpid"]
REQUIRED_QUERY = ["service", "hostname", "timestamp", "version"]
# the token travels in the GPROFILER-API-KEY header only: a URL is logged by
# proxies and servers
FORBIDDEN_QUERY = ["key", "token"]


def make_cert(d):
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return cert, key


class Studio:
    def __init__(self, certdir, token="tok-123", service="svc", port=0):
        self.cert, self.key = make_cert(certdir)
        self.token, self.service = token, service
        self.lock = threading.Lock()
        self.script = []          # behaviours for the next profile POSTs
        self.committed = []       # dicts: id, headers, query, body
        self.late = []            # ids of requests that were too slow
        self.rejected = []        # ids answered with an injected error
        self.errors = []          # protocol violations found
        self.logs = []            # decoded log batches
        self.log_bytes = 0        # their size on the wire (gzipped bodies)
        self.pyroscope = []       # (query dict, body bytes, content type)
        self.health = 0
        self.next_gpid = 1
        self.port = port
        self.httpd = None
        self.start()

    @property
    def url(self):
        return "https://127.0.0.1:%d" % self.port

    def start(self):
        studio = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def reply(self, code, obj):
                data = json.dumps(obj).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return True
                except OSError:
                    return False

            def do_GET(self):
                u = urllib.parse.urlparse(self.path)
                if u.path == "/api/v1/health_check":
                    with studio.lock:
                        studio.health += 1
                    self.reply(200, {"message": "ok"})
                else:
                    self.reply(404, {"message": "no such endpoint"})

            def do_POST(self):
                u = urllib.parse.urlparse(self.path)
                q = urllib.parse.parse_qs(u.query)
                n = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(n)
                if u.path == "/api/v2/profiles":
                    self.profile(q, raw)
                elif u.path == "/api/v1/logs":
                    try:
                        body = json.loads(gzip.decompress(raw))
                    except Exception as e:  # noqa
                        studio.err("logs: bad body %r" % e)
                        body = None
                    if self.headers.get("X-Token") != studio.token:
                        studio.err("logs: X-Token missing")
                    if self.headers.get("X-Application-Name") != "gprofiler":
                        studio.err("logs: X-Application-Name")
                    with studio.lock:
                        studio.logs.append(body)
                        studio.log_bytes += len(raw)
                    self.reply(200, {})
                elif u.path in ("/ingest", "/pyroscope/ingest"):
                    with studio.lock:
                        studio.pyroscope.append((q, raw, self.headers.get("Content-Type")))
                    self.reply(200, {})
                else:
                    self.reply(404, {"message": "no such endpoint"})

            def profile(self, q, raw):
                uid = self.headers.get("X-Polyprof-Upload-Id", "")
                with studio.lock:
                    beh = studio.script.pop(0) if studio.script else "ok"
                if isinstance(beh, tuple) and beh[0] == "slow":
                    time.sleep(beh[1])
                    with studio.lock:
                        studio.late.append(uid)
                    self.reply(200, {"gpid": "late"})
                    return
                if isinstance(beh, int):
                    with studio.lock:
                        studio.rejected.append(uid)
                    self.reply(beh, {"message": "injected %d" % beh})
                    return
                # protocol checks, as the studio reads the request
                h = self.headers
                if h.get("GPROFILER-API-KEY") != studio.token:
                    studio.err("header GPROFILER-API-KEY %r" % h.get("GPROFILER-API-KEY"))
                if h.get("GPROFILER-SERVICE-NAME") != studio.service:
                    studio.err("header GPROFILER-SERVICE-NAME")
                if h.get("Content-Encoding") != "gzip":
                    studio.err("Content-Encoding %r" % h.get("Content-Encoding"))
                if not (h.get("Content-Type") or "").lower().startswith("application/json"):
                    studio.err("Content-Type %r" % h.get("Content-Type"))
                for k in REQUIRED_QUERY:
                    if k not in q:
                        studio.err("query parameter %s missing" % k)
                for k in FORBIDDEN_QUERY:
                    if k in q:
                        studio.err("query parameter %s carries the token" % k)
                if q.get("service", [""])[0] != studio.service:
                    studio.err("query service wrong")
                if studio.token in self.path:
                    studio.err("the token is in the URL")
                try:
                    body = json.loads(gzip.decompress(raw).decode("utf-8"))
                except Exception as e:  # noqa
                    studio.err("body not gzipped JSON: %r" % e)
                    self.reply(400, {"message": "bad body"})
                    return
                for k in REQUIRED_BODY:
                    if k not in body:
                        studio.err("body field %s missing" % k)
                prof = body.get("profile", "")
                if not prof.startswith("# {"):
                    studio.err("profile does not start with the .col header")
                if studio.token in prof:
                    studio.err("token leaked into the profile text")
                with studio.lock:
                    gpid = "gp-%d" % studio.next_gpid
                    studio.next_gpid += 1
                if self.reply(200, {"gpid": gpid}):
                    with studio.lock:
                        studio.committed.append({"id": uid, "headers": dict(h), "query": q,
                                                 "body": body, "gpid": gpid, "size": len(raw)})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), H)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert, self.key)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        """Server down: the port refuses connections until start()."""
        self.httpd.shutdown()
        self.httpd.server_close()

    def err(self, what):
        with self.lock:
            self.errors.append(what)

    def ids(self):
        with self.lock:
            return [c["id"] for c in self.committed]

    def wait(self, cond, timeout):
        end = time.time() + timeout
        while time.time() < end:
            with self.lock:
                if cond():
                    return True
            time.sleep(0.1)
        with self.lock:
            return cond()
