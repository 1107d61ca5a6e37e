"""A loopback OTLP/HTTP profiles receiver for the tests: it keeps every
request body (gunzipped), can answer with failures first, and decodes a
request with protoc and the vendored opentelemetry-proto files into nested
dicts (repeated fields become lists)."""
import codecs
import gzip
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO_DIR = os.path.join(SRC, "third_party", "opentelemetry-proto")
REQUEST = "opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest"
SERVICE_PROTO = "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto"
PATH = "/v1development/profiles"


def pb_varint(v):
    out = b""
    while v >= 0x80:
        out += bytes([v & 0x7F | 0x80])
        v >>= 7
    return out + bytes([v])


def partial_success(rejected, message):
    """An ExportProfilesServiceResponse with partial_success set."""
    m = message.encode()
    inner = b"\x08" + pb_varint(rejected) + b"\x12" + pb_varint(len(m)) + m
    return b"\x0a" + pb_varint(len(inner)) + inner


class Receiver:
    def __init__(self):
        self.requests = []  # (path, headers dict, raw protobuf)
        self.fail_next = 0  # answer this many requests with 503
        self.reply = b""    # body of a 200
        self.errors = []
        self.lock = threading.Lock()
        rx = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                with rx.lock:
                    if rx.fail_next > 0:
                        rx.fail_next -= 1
                        code = 503
                    else:
                        code = 200
                        try:
                            raw = gzip.decompress(body) if self.headers.get("Content-Encoding") == "gzip" else body
                            rx.requests.append((self.path, dict(self.headers), raw))
                        except Exception as e:  # noqa: BLE001
                            rx.errors.append("gunzip: %s" % e)
                            code = 400
                reply = rx.reply if code == 200 else b""
                self.send_response(code)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.httpd.server_address[1]

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def protoc_decode(raw):
    """protoc's text form of a request; raises on a message it cannot parse."""
    p = subprocess.run(["protoc", "-I", PROTO_DIR, "--decode", REQUEST, SERVICE_PROTO],
                       input=raw, capture_output=True, timeout=60)
    if p.returncode != 0:
        raise ValueError("protoc --decode failed: %s" % p.stderr.decode(errors="replace")[:500])
    return p.stdout.decode()


def parse_text(text):
    """protoc text format -> nested dicts of lists. Field names that are
    numbers mean fields the .proto files do not know."""
    root = {}
    stack = [root]
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line == "}":
            stack.pop()
            continue
        if line.endswith("{"):
            name = line[:-1].strip()
            child = {}
            stack[-1].setdefault(name, []).append(child)
            stack.append(child)
            continue
        name, _, value = line.partition(": ")
        if value.startswith('"'):
            value = codecs.escape_decode(value[1:-1].encode())[0]
            try:
                value = value.decode()
            except UnicodeDecodeError:
                pass
        else:
            try:
                value = int(value)
            except ValueError:
                pass
        stack[-1].setdefault(name, []).append(value)
    return root


def decode(raw):
    return parse_text(protoc_decode(raw))
