"""A hostile .NET diagnostic endpoint never crashes the plugin.

This test process poses as a .NET runtime: it maps libcoreclr.so (so the
agent matches it), listens on its own diagnostic socket and answers the
plugin's IPC with, session after session, a valid recorded nettrace stream,
truncated and bit-flipped copies, garbage, absurd block sizes, a stream that
hangs, malformed IPC replies and error replies. The real agent must keep
running with the plugin never restarted, and still emit the valid sessions.
"""
import glob
import mmap
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil  # noqa: E402
from pputil import check, finish, skip  # noqa: E402

MAGIC = b"DOTNET_IPC_V1\0"
STREAM = open(os.path.join(pputil.SRC, "tests", "data", "dotnet", "net10-sampleprofiler.nettrace"), "rb").read()


def reply(code_id=0x00, payload=b""):
    return MAGIC + struct.pack("<HBBH", 20 + len(payload), 0xFF, code_id, 0) + payload


def ipc_string(s):
    b = (s + "\0").encode("utf-16-le")
    return struct.pack("<I", len(b) // 2) + b


class FakeRuntime:
    def __init__(self):
        self.sessions = 0
        self.kinds = []
        self.rng = random.Random(1234)
        self.stop = threading.Event()
        self.stream_socks = {}

    def variant(self, i):
        kinds = ["valid", "truncated", "flipped", "garbage", "huge_block", "hang", "bad_magic",
                 "error_reply", "valid", "flipped", "truncated", "short_reply"]
        return kinds[i % len(kinds)]

    def stream_bytes(self, kind):
        d = bytearray(STREAM)
        if kind == "truncated":
            return bytes(d[: self.rng.randrange(1, len(d))])
        if kind == "flipped":
            for _ in range(self.rng.randrange(1, 40)):
                d[self.rng.randrange(len(d))] = self.rng.randrange(256)
            return bytes(d)
        if kind == "garbage":
            return bytes(d[:32]) + os.urandom(200000)
        if kind == "huge_block":
            off = 0x66 + 1 + 1 + 1 + 8 + 4 + 13 + 1
            d[off:off + 4] = b"\xff\xff\xff\x7f"
            return bytes(d)
        return bytes(d)

    def handle(self, conn):
        try:
            conn.settimeout(10)
            hdr = b""
            while len(hdr) < 20:
                b = conn.recv(20 - len(hdr))
                if not b:
                    return
                hdr += b
            size, cset, cid = struct.unpack("<HBB", hdr[14:18])
            payload = b""
            while len(payload) < size - 20:
                b = conn.recv(size - 20 - len(payload))
                if not b:
                    return
                payload += b
            if (cset, cid) == (4, 4):  # ProcessInfo2
                p = struct.pack("<Q", os.getpid()) + b"\0" * 16
                for s in ("fake --runtime", "Linux", "x64", "Fake", "10.0.0-fake+abc"):
                    p += ipc_string(s)
                conn.sendall(reply(0, p))
            elif (cset, cid) == (2, 3):  # CollectTracing2
                i = self.sessions
                self.sessions += 1
                kind = self.variant(i)
                self.kinds.append(kind)
                if kind == "bad_magic":
                    conn.sendall(b"NOT_THE_MAGIC!" + os.urandom(40))
                    return
                if kind == "error_reply":
                    conn.sendall(reply(0xFF, struct.pack("<I", 0x80131384)))
                    return
                if kind == "short_reply":
                    conn.sendall(reply(0, b"\x01\x02"))  # session id cut short
                    return
                conn.sendall(reply(0, struct.pack("<Q", 0x1000 + i)))
                if kind == "hang":
                    self.stop.wait(30)
                    return
                data = self.stream_bytes(kind)
                pos = 0
                while pos < len(data) and not self.stop.is_set():
                    n = self.rng.randrange(1, 9000)
                    conn.sendall(data[pos:pos + n])
                    pos += n
                # keep the connection until the plugin closes it or stops us
                conn.settimeout(15)
                try:
                    while conn.recv(4096):
                        pass
                except OSError:
                    pass
            elif (cset, cid) == (2, 1):  # StopTracing
                conn.sendall(reply(0, payload[:8]))
            else:
                conn.sendall(reply(0xFF, struct.pack("<I", 0x80131385)))
        except OSError:
            pass
        finally:
            conn.close()

    def serve(self, path):
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(path)
        srv.listen(16)
        srv.settimeout(0.5)
        while not self.stop.is_set():
            try:
                c, _ = srv.accept()
            except socket.timeout:
                continue
            threading.Thread(target=self.handle, args=(c,), daemon=True).start()
        srv.close()


def main():
    libs = glob.glob("/usr/share/dotnet/shared/Microsoft.NETCore.App/*/libcoreclr.so") + \
        glob.glob("/usr/lib/dotnet/shared/Microsoft.NETCore.App/*/libcoreclr.so")
    if not libs:
        skip("no libcoreclr.so to map (is the .NET runtime installed?)")
    f = open(libs[0], "rb")
    mapping = mmap.mmap(f.fileno(), 4096, prot=mmap.PROT_READ)  # makes us match libcoreclr.so
    start = open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]
    path = "/tmp/dotnet-diagnostic-%d-%s-socket" % (os.getpid(), start)
    if os.path.exists(path):
        os.unlink(path)
    fake = FakeRuntime()
    server = threading.Thread(target=fake.serve, args=(path,), daemon=True)
    server.start()
    outdir = pputil.tempdir("ppdotnet-malformed-")
    cmd = pputil.agent_cmd(outdir, pputil.PLUGIN_DIR, "--dotnet-mode", "dotnet-trace", "-c",
                           "--dotnet-stop-timeout-ms", "500", "--dotnet-attach-timeout-s", "0",
                           "--pids", str(os.getpid()), duration=1)
    agent = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and agent.poll() is None and fake.sessions < 14:
            time.sleep(0.3)
        time.sleep(1.5)
        agent.send_signal(signal.SIGINT)
        log, _ = agent.communicate(timeout=60)
    finally:
        pputil.kill(agent)
        fake.stop.set()
        os.unlink(path)
        mapping.close()
    print("sessions served:", fake.kinds)
    check(agent.returncode == 0, "agent exits 0 (rc=%s)" % agent.returncode)
    check(fake.sessions >= 12, "plugin kept opening sessions through the hostile ones (%d)" % fake.sessions)
    cols = sorted(c for c in os.listdir(outdir) if c.startswith("profile_") and c.endswith(".col"))
    restarts = 0
    named = 0
    for c in cols:
        header, stacks = pputil.parse_col(os.path.join(outdir, c))
        dn = header.get("polyprof", {}).get("dotnet", {})
        restarts = max(restarts, dn.get("restarts", 0))
        named += sum(n for fr, n in stacks if any(x.endswith("_[net]") for x in fr))
    check(restarts == 0, "the plugin worker never crashed or hung (restarts=%d)" % restarts)
    check("crash" not in log.lower() and "killed" not in log.lower(), "no worker crash in the agent output")
    check(named > 0, "valid sessions still produced .NET stacks (%d samples)" % named)
    plog = open(os.path.join(os.path.dirname(cmd[cmd.index("--log-file") + 1]), "polyprof.log")).read()
    check("malformed event stream" in plog or "EventPipe session refused" in plog,
          "malformed input was reported in the log")
    finish()


if __name__ == "__main__":
    main()
