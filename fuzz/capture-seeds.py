#!/usr/bin/env python3
"""Captures fuzz seeds from real runtimes (run by hand; the results are
committed under fuzz/seeds/<target>/, docs/fuzzing.md):

  capture-seeds.py node            Node: /json/list reply, WebSocket handshake
                                   and frames, CDP messages, a cpuprofile
  capture-seeds.py node-list       Node: /json/list of a script run from a file
  capture-seeds.py java AGENT.so   OpenJDK: attach replies, an agent dump
  capture-seeds.py dotnet APP.dll  .NET: diagnostic IPC replies

Everything is what the runtime itself sent, byte for byte.
"""
import glob
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WS_KEY = "dGhlIHNhbXBsZSBub25jZQ=="  # fuzz_ws.c checks handshakes against it


def save(target, name, data):
    d = os.path.join(HERE, "seeds", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)
    print(f"seeds/{target}/{name}: {len(data)} bytes")


def recv_all(s, timeout=2.0):
    s.settimeout(timeout)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except socket.timeout:
        pass
    return out


# ---- node ----

def ws_frames(buf):
    """Splits server frames; returns (messages, bytes consumed)."""
    msgs, o = [], 0
    while len(buf) - o >= 2:
        n, h = buf[o + 1] & 0x7F, 2
        if n == 126:
            n, h = struct.unpack(">H", buf[o + 2:o + 4])[0], 4
        elif n == 127:
            n, h = struct.unpack(">Q", buf[o + 2:o + 10])[0], 10
        if len(buf) - o < h + n:
            break
        msgs.append(buf[o + h:o + h + n])
        o += h + n
    return msgs, o


def node():
    prog = ("let x=0; function spin(){for(let i=0;i<1e5;i++)x+=Math.sqrt(i)}"
            "const t=setInterval(spin,1); setTimeout(()=>clearInterval(t),8000)")
    p = subprocess.Popen(["node", "--inspect=127.0.0.1:0", "-e", prog], stderr=subprocess.PIPE)
    try:
        line = p.stderr.readline().decode()
        m = re.search(r"ws://127.0.0.1:(\d+)/([0-9a-f-]+)", line)
        port, uuid = int(m.group(1)), m.group(2)
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(f"GET /json/list HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        save("nodejs_http", "node20-json-list.http", recv_all(s))
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(f"GET /json/version HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        save("nodejs_http", "node20-json-version.http", recv_all(s))
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(f"GET /nothing HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        save("nodejs_http", "node20-not-found.http", recv_all(s))

        s = socket.create_connection(("127.0.0.1", port))
        s.sendall((f"GET /{uuid} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                   f"Connection: Upgrade\r\nSec-WebSocket-Key: {WS_KEY}\r\n"
                   "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        raw = b""
        while b"\r\n\r\n" not in raw:
            raw += s.recv(4096)
        head_len = raw.index(b"\r\n\r\n") + 4
        stream = raw
        next_id = [1]

        def call(method, params=None, wait=0.3):
            nonlocal stream
            msg = {"id": next_id[0], "method": method}
            if params is not None:
                msg["params"] = params
            next_id[0] += 1
            data = json.dumps(msg, separators=(",", ":")).encode()
            mask = os.urandom(4)
            hdr = bytes([0x81])
            hdr += bytes([0x80 | len(data)]) if len(data) < 126 else bytes([0x80 | 126]) + struct.pack(">H", len(data))
            s.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
            stream += recv_all(s, wait)

        call("Runtime.evaluate", {"expression": "JSON.stringify([process.pid, process.version])",
                                  "returnByValue": True, "includeCommandLineAPI": True, "silent": True})
        call("Runtime.evaluate", {"expression": "nosuchvariable", "returnByValue": True, "silent": True})
        call("Profiler.enable")
        call("Profiler.setSamplingInterval", {"interval": 10000})
        call("Profiler.start")
        call("NodeRuntime.notifyWhenWaitingForDisconnect", {"enabled": True})
        call("No.suchMethod")
        time.sleep(0.3)
        call("Profiler.stop", wait=1.0)
        frames = stream[head_len:]
        msgs, used = ws_frames(frames)
        save("ws", "node20-handshake-and-session.bin", stream[:head_len + used])
        save("cdp", "node20-session.jsonl", b"\n".join(msgs))
        prof = [m for m in msgs if b'"profile"' in m]
        if prof:
            save("cpuprofile", "node20-profiler-stop.json", json.loads(prof[-1])["result"] and
                 json.dumps(json.loads(prof[-1])["result"], separators=(",", ":")).encode())
    finally:
        p.kill()
        p.wait()
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["node", "--cpu-prof", "--cpu-prof-dir", d, "--cpu-prof-interval", "2000", "-e",
                        "let x=0; const e=Date.now()+150; while(Date.now()<e) x+=Math.sqrt(x+1)"], check=True)
        for f in glob.glob(os.path.join(d, "*.cpuprofile")):
            save("cpuprofile", "node20-cpu-prof.cpuprofile", open(f, "rb").read())


# ---- java ----

def node_list():
    """The target list of a script run from a file (a file:// url, the
    script as title), as the plugin meets most servers."""
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "server.js")
        with open(script, "w") as f:
            f.write("setTimeout(()=>{}, 8000)\n")
        p = subprocess.Popen(["node", "--inspect=127.0.0.1:0", script], stderr=subprocess.PIPE)
        try:
            line = p.stderr.readline().decode()
            port = int(re.search(r"ws://127.0.0.1:(\d+)/", line).group(1))
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(f"GET /json/list HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                      "Connection: close\r\n\r\n".encode())
            save("nodejs_http", "node20-json-list-script.http", recv_all(s))
        finally:
            p.kill()
            p.wait()


def java(agent):
    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, "Spin.java"), "w").write(
            "public class Spin { static double x; public static void main(String[] a) throws Exception {"
            " long end = System.currentTimeMillis() + 15000; while (System.currentTimeMillis() < end)"
            " { for (int i = 0; i < 100000; i++) x += Math.sqrt(i); Thread.sleep(1); } } }")
        subprocess.run(["javac", "-d", d, os.path.join(d, "Spin.java")], check=True)
        p = subprocess.Popen(["java", "-cp", d, "Spin"])
        try:
            time.sleep(1.5)
            trig = f"/tmp/.attach_pid{p.pid}"
            open(trig, "w").close()
            os.kill(p.pid, signal.SIGQUIT)
            sock = f"/tmp/.java_pid{p.pid}"
            for _ in range(100):
                if os.path.exists(sock):
                    break
                time.sleep(0.05)
            os.unlink(trig)

            def attach(*args):
                s = socket.socket(socket.AF_UNIX)
                s.connect(sock)
                a = list(args) + [""] * (4 - len(args))
                s.sendall(b"1\0" + b"".join(x.encode() + b"\0" for x in a))
                return recv_all(s, 5)

            save("java_attach", "jdk17-load-ok.txt", attach("load", agent, "true", "start,interval=10000000"))
            time.sleep(0.5)
            dump = os.path.join(d, "dump")
            save("java_attach", "jdk17-load-dump.txt", attach("load", agent, "true", f"dump,file={dump}"))
            save("java_dump", "jdk17-agent-dump.txt", open(dump, "rb").read())
            save("java_attach", "jdk17-load-missing-lib.txt", attach("load", "/nonexistent/lib.so", "true", ""))
            save("java_attach", "jdk17-load-bad-option.txt", attach("load", agent, "true", "bogus"))
            save("java_attach", "jdk17-version.txt", attach("jcmd", "VM.version"))
            save("java_attach", "jdk17-unknown-op.txt", attach("nosuchop"))
            attach("load", agent, "true", "stop")
        finally:
            p.kill()
            p.wait()


# ---- dotnet ----

def dotnet(dll):
    p = subprocess.Popen(["dotnet", dll, "20"], stdout=subprocess.DEVNULL)
    try:
        sock = None
        for _ in range(100):
            g = glob.glob(f"/tmp/dotnet-diagnostic-{p.pid}-*-socket")
            if g:
                sock = g[0]
                break
            time.sleep(0.1)
        magic = b"DOTNET_IPC_V1\0"

        def call(cmdset, cmdid, payload=b""):
            s = socket.socket(socket.AF_UNIX)
            s.connect(sock)
            s.sendall(magic + struct.pack("<HBBH", 20 + len(payload), cmdset, cmdid, 0) + payload)
            return recv_all(s, 3)

        save("dotnet_ipc", "net10-process-info2.bin", call(0x04, 0x04))
        save("dotnet_ipc", "net10-process-info.bin", call(0x04, 0x00))
        save("dotnet_ipc", "net10-unknown-command.bin", call(0x04, 0x7f))
        save("dotnet_ipc", "net10-bad-collect.bin", call(0x02, 0x03, b"\1\0\0\0"))
    finally:
        p.kill()
        p.wait()


if __name__ == "__main__":
    {"node": lambda: node(), "node-list": lambda: node_list(), "java": lambda: java(sys.argv[2]),
     "dotnet": lambda: dotnet(sys.argv[2])}[sys.argv[1]]()
