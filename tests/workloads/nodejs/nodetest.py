"""Helpers of the nodejs plugin's integration tests (standard library only).

Runs real node processes and the real agent; a tiny WebSocket client stands
in for a user's debugger.
"""
import base64
import glob
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time

import pputil as u  # noqa: E402  (tests/integration is on sys.path)

WORKLOADS = os.path.dirname(os.path.abspath(__file__))
NODE = shutil.which("node") or shutil.which("nodejs")


def foreign_node_profilers():
    """Other polyprof nodejs workers on this host (pid, agent command line).
    A system-wide agent with nodejs enabled (a soak benchmark, another
    checkout's test) attaches to this test's Node processes too."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/comm" % d) as f:
                if f.read().strip() != "pp-nodejs":
                    continue
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        found.append((int(d), cmd[:160]))
    return found


def require_node():
    if not NODE:
        u.skip("node not installed (Debian package nodejs)")
    if os.geteuid() != 0:
        u.skip("the nodejs plugin needs root (setns, signalling other users' processes)")
    plugin = os.path.join(u.PLUGIN_DIR, "nodejs.so")
    if not os.path.exists(plugin):
        u.skip("nodejs plugin not built: " + plugin)
    for pid, cmd in foreign_node_profilers():
        if not shares_safely(pid) and attaches_inspectors(pid):
            # a build that keeps an inspector session for the whole run
            # holds this test's targets' inspectors open: the results
            # would be about that agent, not this build
            u.skip("another polyprof agent whose nodejs plugin keeps inspector sessions open "
                   "runs on this host (worker pid %d: %s)" % (pid, cmd))
        print("note: another agent's nodejs worker runs (pid %d: %s); it may attach to this "
              "test's Node processes too" % (pid, cmd))
    return plugin


def attaches_inspectors(worker_pid):
    """Whether a foreign worker's agent runs a mode that opens inspectors
    (its command line names one, or names no mode and may use a config)."""
    try:
        with open("/proc/%d/stat" % worker_pid) as f:
            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        with open("/proc/%d/cmdline" % ppid, "rb") as f:
            args = f.read().split(b"\0")
    except (OSError, ValueError, IndexError):
        return True
    if b"--pids" in args or any(a.startswith(b"--pids=") for a in args):
        return False  # its own processes only: another test's
    for i, a in enumerate(args):
        mode = a.split(b"=", 1)[1] if a.startswith(b"--nodejs-mode=") else (
            args[i + 1] if a == b"--nodejs-mode" and i + 1 < len(args) else None)
        if mode is not None:
            return mode in (b"inspector", b"attach-maps")
    # no --nodejs-mode: the config's nodejs.mode, else the default (never
    # a mode that opens inspectors)
    for i, a in enumerate(args[:-1]):
        if a in (b"--config", b"-C"):
            try:
                with open(args[i + 1].decode(errors="replace"), errors="replace") as f:
                    text = f.read()
            except OSError:
                return True
            section = text.split("\nnodejs:", 1)[1] if "\nnodejs:" in text else ""
            for line in section.splitlines()[1:]:
                if line and not line.startswith((" ", "#")):
                    break
                if line.strip().startswith("mode:"):
                    return any(m in line for m in ("inspector", "attach-maps"))
    return False


def shares_safely(worker_pid):
    """Whether the nodejs.so a foreign worker loaded profiles through the
    in-process helper and closes the inspector right after the attach (it
    carries that log line); False if unknown."""
    try:
        with open("/proc/%d/maps" % worker_pid) as f:
            paths = {ln.split(None, 5)[5].strip() for ln in f if ln.rstrip().endswith("nodejs.so")}
        for path in paths:
            with open("/proc/%d/root%s" % (worker_pid, path), "rb") as f:
                if b"helper installed" in f.read():
                    return True
    except (OSError, IndexError):
        pass
    return False


def plugin_dir():
    """A plugin dir with nodejs.so and its perf-map addon only."""
    d = u.plugin_dir_with(os.path.join(u.PLUGIN_DIR, "nodejs.so"))
    addon = os.path.join(u.PLUGIN_DIR, "nodejs-perfmap.node")
    if os.path.exists(addon):
        os.symlink(addon, os.path.join(d, "nodejs-perfmap.node"))
    return d


def node_of(major):
    """The official Node.js build of that major scripts/install-deps.sh installs."""
    return "/opt/polyprof-test/node-%d/bin/node" % major


def spawn_node_own_netns(args, stderr_path=None, stdout=subprocess.PIPE):
    """Node in a network namespace of its own (loopback up): its SIGUSR1
    inspector gets port 9229 even while another Node on the host holds it.
    The returned process is node itself (sh execs it)."""
    err = open(stderr_path, "w") if stderr_path else subprocess.DEVNULL
    p = subprocess.Popen(["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$0" "$@"',
                          NODE] + args, stdout=stdout, stderr=err)
    end = time.time() + 15
    while time.time() < end:
        try:
            if os.path.basename(os.readlink("/proc/%d/exe" % p.pid)).startswith("node"):
                break
        except OSError:
            pass
        time.sleep(0.05)
    time.sleep(0.5)  # let node install its SIGUSR1 handler
    return p


def spawn_node(args, stderr_path=None, node=None, **kw):
    err = open(stderr_path, "w") if stderr_path else subprocess.DEVNULL
    p = subprocess.Popen([node or NODE] + args, stdout=subprocess.PIPE, stderr=err, **kw)
    time.sleep(0.5)  # let node install its SIGUSR1 handler
    return p


class Agent:
    """The agent in continuous mode, stopped once enough sessions are out."""

    def __init__(self, out, plugins, *extra, duration=2, freq=100):
        self.out = out
        cmd = u.agent_cmd(out, plugins, "-c", "-f", str(freq), *extra, duration=duration)
        self.log = cmd[cmd.index("--log-file") + 1]
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def profiles(self):
        return sorted(glob.glob(os.path.join(self.out, "profile_*.col")))

    def wait_sessions(self, n, timeout):
        end = time.time() + timeout
        while time.time() < end and len(self.profiles()) < n and self.p.poll() is None:
            time.sleep(0.2)
        return len(self.profiles())

    def stop(self, timeout=60):
        if self.p.poll() is None:
            self.p.terminate()
        try:
            _, err = self.p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            _, err = self.p.communicate()
        self.stderr = err
        return self.p.returncode

    def log_text(self):
        try:
            with open(self.log, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""


def stacks_of(paths, comm_pid_filter=None):
    """All (frames, count) of the given .col files, plus the last header."""
    out, header = [], None
    for p in paths:
        header, stacks = u.parse_col(p)
        out.extend(stacks)
    return header, out


def listening_ports(pid):
    """Loopback TCP ports pid listens on (inode match against its fds)."""
    inodes = set()
    for fd in glob.glob("/proc/%d/fd/*" % pid):
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    for name in ("tcp", "tcp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, name)) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[3] == "0A" and parts[9] in inodes:
                        ports.add(int(parts[1].split(":")[1], 16))
        except OSError:
            pass
    return ports


def listening_after(pid, timeout=10.0, keep=()):
    """Listening ports of pid once those not in keep are gone (or timeout):
    Node closes its inspector server asynchronously, on its I/O thread, which
    a loaded 2-core host may not schedule for seconds (a 3 s limit was seen
    too short at load 50); the wait ends as soon as the ports are gone."""
    end = time.time() + timeout
    while True:
        ports = listening_ports(pid)
        if not (ports - set(keep)) or time.time() >= end:
            return ports
        time.sleep(0.1)


def _socket_inodes(pid):
    inodes = set()
    for fd in glob.glob("/proc/%d/fd/*" % pid):
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    return inodes


def port_sessions(pid, port):
    """Established connections pid accepted on its local port (inspector
    sessions of any client)."""
    inodes, n = _socket_inodes(pid), 0
    for name in ("tcp", "tcp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, name)) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if (parts[3] == "01" and parts[9] in inodes
                            and int(parts[1].split(":")[1], 16) == port):
                        n += 1
        except OSError:
            pass
    return n


def inspector_left(pid, keep=(), timeout=10.0):
    """Ports pid still listens on after a detach, except keep and except an
    inspector another client (another agent on this host) is still
    connected to: the plugin leaves those open on purpose."""
    left = listening_after(pid, timeout=timeout, keep=keep) - set(keep)
    shared = {p for p in left if port_sessions(pid, p) > 0}
    if shared:
        print("note: inspector port(s) %s left open: another client is connected" % sorted(shared))
    return left - shared


class WsClient:
    """Just enough RFC 6455 to act as a user's debugger session."""

    def __init__(self, port, path):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
                        "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                        "Sec-WebSocket-Version: 13\r\n\r\n" % (path, port, key)).encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.s.recv(4096)
            if not chunk:
                raise ConnectionError("handshake EOF")
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        if not head.startswith(b"HTTP/1.1 101"):
            raise ConnectionError(head[:80])
        self.id = 0

    def send(self, obj):
        data = json.dumps(obj).encode()
        mask = os.urandom(4)
        n = len(data)
        hdr = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n))
        self.s.sendall(hdr + mask + bytes(b ^ mask[i & 3] for i, b in enumerate(data)))

    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("EOF")
            self.buf += chunk

    def recv(self):
        self._need(2)
        n = self.buf[1] & 0x7F
        off = 2
        if n == 126:
            self._need(4)
            n = struct.unpack(">H", self.buf[2:4])[0]
            off = 4
        elif n == 127:
            self._need(10)
            n = struct.unpack(">Q", self.buf[2:10])[0]
            off = 10
        self._need(off + n)
        op = self.buf[0] & 0x0F
        data, self.buf = self.buf[off:off + n], self.buf[off + n:]
        if op == 8:
            raise ConnectionError("closed")
        return json.loads(data)

    def call(self, method, params=None):
        self.id += 1
        self.send({"id": self.id, "method": method, "params": params or {}})
        while True:
            m = self.recv()
            if m.get("id") == self.id:
                return m

    def close(self):
        self.s.close()


def inspector_target(port):
    """(ws path) of the inspector listening on port, or None."""
    try:
        c = socket.create_connection(("127.0.0.1", port), timeout=3)
        c.sendall(b"GET /json/list HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        data = b""
        # Node keeps the connection open: read up to Content-Length
        while True:
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
            head, sep, rest = data.partition(b"\r\n\r\n")
            if sep:
                lens = [ln for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length:")]
                if lens and len(rest) >= int(lens[0].split(b":")[1]):
                    break
        c.close()
        body = json.loads(data.split(b"\r\n\r\n", 1)[1])
        url = body[0]["webSocketDebuggerUrl"]
        return "/" + url.split("/", 3)[3]
    except (OSError, ValueError, KeyError, IndexError):
        return None


def frames_with(stacks, needle):
    return sum(c for f, c in stacks if any(needle in x for x in f))
