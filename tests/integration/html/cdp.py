"""Minimal Chrome DevTools Protocol client on the Python standard library.

Starts a headless Chromium with --remote-debugging-port=0, speaks the
WebSocket protocol (RFC 6455, client side: masked text frames, no
extensions) to its browser endpoint, and drives pages through flattened
target sessions. Enough for tests: commands, events, evaluate, input,
screenshots. No third-party modules, so it runs wherever python3 does.
"""

import base64
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import urllib.parse
import zlib

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")


def find_chromium():
    env = os.environ.get("PP_CHROMIUM")
    if env:
        return env if os.access(env, os.X_OK) else None
    for c in CHROMIUM_CANDIDATES:
        if os.access(c, os.X_OK):
            return c
    return shutil.which("chromium")


class WebSocket:
    def __init__(self, url, timeout=30):
        u = urllib.parse.urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        # No Origin header: Chromium only checks origins of clients that send one.
        req = (
            f"GET {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("websocket handshake: connection closed")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError("websocket handshake refused: " + head.decode(errors="replace"))

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("websocket closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _send_frame(self, opcode, payload):
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            hdr = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 65536:
            hdr = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            hdr = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        # XOR with the repeated 4-byte mask, done on big integers for speed
        reps = (n + 3) // 4
        m = int.from_bytes(mask * reps, "big")
        p = int.from_bytes(payload + b"\0" * (reps * 4 - n), "big")
        masked = (p ^ m).to_bytes(reps * 4, "big")[:n] if n else b""
        self.sock.sendall(hdr + mask + masked)

    def send(self, text):
        self._send_frame(0x1, text.encode())

    def recv(self, timeout):
        self.sock.settimeout(timeout)
        parts = []
        while True:
            b0, b1 = self._read(2)
            op, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", self._read(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", self._read(8))
            mask = self._read(4) if b1 & 0x80 else None
            data = self._read(n)
            if mask:
                data = bytes(c ^ mask[i % 4] for i, c in enumerate(data))
            if op == 0x9:
                self._send_frame(0xA, data)
                continue
            if op == 0x8:
                raise ConnectionError("websocket closed by peer")
            if op in (0x0, 0x1, 0x2):
                parts.append(data)
                if b0 & 0x80:
                    return b"".join(parts).decode()

    def close(self):
        try:
            self._send_frame(0x8, b"")
        except OSError:
            pass
        self.sock.close()


class CDPError(Exception):
    pass


class Browser:
    """A headless Chromium process and its DevTools connection."""

    def __init__(self, binary, width=1400, height=800):
        self.tmp = tempfile.mkdtemp(prefix="pp-chromium-")
        self.log_path = os.path.join(self.tmp, "chromium.log")
        args = [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            "--disable-extensions",
            "--no-first-run",
            "--no-default-browser-check",
            "--hide-scrollbars",
            "--mute-audio",
            f"--window-size={width},{height}",
            "--remote-debugging-port=0",
            "--remote-debugging-address=127.0.0.1",
            f"--user-data-dir={os.path.join(self.tmp, 'profile')}",
            "about:blank",
        ]
        self.log = open(self.log_path, "wb")
        # own process group: on teardown we end exactly the processes we started
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        self.width, self.height = width, height
        url = self._wait_endpoint(30)
        self.ws = WebSocket(url)
        self.next_id = 0
        self.events = []

    def _wait_endpoint(self, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("chromium exited early: " + self.log_text()[-2000:])
            for line in self.log_text().splitlines():
                if "DevTools listening on " in line:
                    return line.split("DevTools listening on ", 1)[1].strip()
            time.sleep(0.05)
        raise RuntimeError("chromium did not report a DevTools endpoint: " + self.log_text()[-2000:])

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def call(self, method, params=None, session=None, timeout=60):
        self.next_id += 1
        mid = self.next_id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        deadline = time.time() + timeout
        while True:
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError(f"{method}: no answer within {timeout}s")
            m = json.loads(self.ws.recv(left))
            if m.get("id") == mid:
                if "error" in m:
                    raise CDPError(f"{method}: {m['error']}")
                return m.get("result", {})
            if "method" in m:
                self.events.append(m)

    def pump(self, seconds):
        """Collect events for a while."""
        deadline = time.time() + seconds
        while True:
            left = deadline - time.time()
            if left <= 0:
                return
            try:
                self.events.append(json.loads(self.ws.recv(left)))
            except (socket.timeout, TimeoutError):
                return

    def wait_event(self, method, session=None, timeout=30, start=0):
        deadline = time.time() + timeout
        i = start
        while True:
            for ev in self.events[i:]:
                if ev.get("method") == method and (session is None or ev.get("sessionId") == session):
                    return ev
            i = len(self.events)
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError(f"no {method} within {timeout}s")
            try:
                self.events.append(json.loads(self.ws.recv(left)))
            except (socket.timeout, TimeoutError):
                pass

    def new_page(self):
        tid = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        sid = self.call("Target.attachToTarget", {"targetId": tid, "flatten": True})["sessionId"]
        return Page(self, tid, sid)

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.ws.close()
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class Page:
    def __init__(self, browser, target_id, session):
        self.b, self.target_id, self.sid = browser, target_id, session
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.call(domain + ".enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": browser.width, "height": browser.height, "deviceScaleFactor": 1,
                   "mobile": False})
        self.mark = len(self.b.events)

    def call(self, method, params=None, timeout=60):
        return self.b.call(method, params, self.sid, timeout)

    def navigate(self, url, timeout=60):
        self.mark = len(self.b.events)
        self.call("Page.navigate", {"url": url})
        self.b.wait_event("Page.loadEventFired", self.sid, timeout, self.mark)

    def events(self, method):
        return [e for e in self.b.events[self.mark:]
                if e.get("sessionId") == self.sid and e.get("method") == method]

    def eval(self, expr, timeout=60):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                           "awaitPromise": True}, timeout)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise CDPError(f"evaluate {expr[:80]!r}: "
                           + str(d.get("exception", {}).get("description") or d.get("text")))
        return r["result"].get("value")

    def wait_for(self, expr, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.eval(expr):
                return True
            time.sleep(0.02)
        return False

    def mouse(self, kind, x, y, buttons=0, clicks=0):
        p = {"type": kind, "x": x, "y": y, "button": "left" if kind != "mouseMoved" else "none",
             "buttons": buttons, "clickCount": clicks}
        self.call("Input.dispatchMouseEvent", p)

    def click(self, x, y):
        self.mouse("mouseMoved", x, y)
        self.mouse("mousePressed", x, y, 1, 1)
        self.mouse("mouseReleased", x, y, 0, 1)

    def key(self, key, code, vk, text=None):
        down = {"type": "keyDown" if text else "rawKeyDown", "key": key, "code": code,
                "windowsVirtualKeyCode": vk}
        if text:
            down["text"] = text
        self.call("Input.dispatchKeyEvent", down)
        self.call("Input.dispatchKeyEvent", {"type": "keyUp", "key": key, "code": code,
                                             "windowsVirtualKeyCode": vk})

    def type_text(self, text):
        self.call("Input.insertText", {"text": text})

    def screenshot(self, path=None, clip=None):
        p = {"format": "png"}
        if clip:
            p["clip"] = dict(clip, scale=1)
        data = base64.b64decode(self.call("Page.captureScreenshot", p)["data"])
        if path:
            with open(path, "wb") as f:
                f.write(data)
        return data


def png_pixels(data):
    """Decode an 8-bit RGB/RGBA PNG (what Chromium writes) -> (w, h, rows of (r,g,b))."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        (n,) = struct.unpack("!I", data[pos:pos + 4])
        typ, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if typ == b"IHDR":
            w, h, depth, ctype = struct.unpack("!IIBB", body[:10])
            if depth != 8 or ctype not in (2, 6):
                raise ValueError(f"unsupported PNG depth {depth} colour type {ctype}")
            bpp = 3 if ctype == 2 else 4
        elif typ == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + ((a + b) >> 1)) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                pr = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pr) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows
