"""systemd readiness notifications (core/sd_notify.c) from the real agent.

The test plays systemd: it binds a datagram socket with SO_PASSCRED, starts
the agent with NOTIFY_SOCKET pointing at it (a path, then an abstract
@name), and asserts:
- READY=1 arrives once the plugins are loaded (the log already lists them),
  sent by the agent's main process (credentials; a worker's message would
  be dropped by NotifyAccess=main);
- after SIGHUP, RELOADING=1 then READY=1 at the session boundary, with the
  reload done in between (log line);
- SIGTERM gives STOPPING=1 and a clean exit.
"""
import os
import signal
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402

example = os.path.join(u.PLUGIN_DIR, "example.so")
if not os.path.exists(example):
    u.skip("example plugin not built: " + example)
plugins = u.plugin_dir_with(example)
UCRED = struct.Struct("3i")


def receive(sock, timeout):
    """(message text, sender pid) or (None, None) after timeout seconds."""
    sock.settimeout(timeout)
    try:
        data, anc, _, _ = sock.recvmsg(4096, socket.CMSG_SPACE(UCRED.size))
    except socket.timeout:
        return None, None
    pid = None
    for level, kind, payload in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid = UCRED.unpack(payload[:UCRED.size])[0]
    return data.decode("utf-8", "replace"), pid


def receive_until(sock, key, timeout):
    """Messages received until one has the line `key` (all of them, in order)."""
    got = []
    end = time.time() + timeout
    while time.time() < end:
        msg, pid = receive(sock, max(0.1, end - time.time()))
        if msg is None:
            break
        got.append((msg, pid))
        if key in msg.split("\n"):
            break
    return got


def has(got, key):
    return any(key in m.split("\n") for m, _ in got)


def run_case(address, bind_to, sleeper):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    sock.bind(bind_to)
    out = u.tempdir("ppout-")
    cmd = u.agent_cmd(out, plugins, "-c", "--example-mode", "states", "--pids", str(sleeper.pid),
                      duration=2)
    log = cmd[cmd.index("--log-file") + 1]
    env = dict(os.environ, NOTIFY_SOCKET=address)
    agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env=env)
    tag = "[%s] " % address
    try:
        got = receive_until(sock, "READY=1", 30)
        u.check(has(got, "READY=1"), tag + "READY=1 received: %r" % got)
        u.check(got and got[-1][1] == agent.pid,
                tag + "sent by the agent's main process (pid %d): %r" % (agent.pid, got))
        with open(log) as f:
            text = f.read()
        u.check("plugins: example" in text, tag + "plugins were loaded before READY=1")
        u.check(has(got, "READY=1") and any(l.startswith("STATUS=") for l in got[-1][0].split("\n")),
                tag + "READY=1 carries a STATUS= line: %r" % got)

        agent.send_signal(signal.SIGHUP)
        got = receive_until(sock, "RELOADING=1", 30)
        u.check(has(got, "RELOADING=1"), tag + "SIGHUP: RELOADING=1 received: %r" % got)
        got = receive_until(sock, "READY=1", 30)
        u.check(has(got, "READY=1"), tag + "SIGHUP: READY=1 after the reload: %r" % got)
        with open(log) as f:
            text = f.read()
        u.check("configuration and plugins reloaded" in text,
                tag + "the reload happened between RELOADING=1 and READY=1")

        agent.send_signal(signal.SIGTERM)
        got = receive_until(sock, "STOPPING=1", 30)
        u.check(has(got, "STOPPING=1"), tag + "SIGTERM: STOPPING=1 received: %r" % got)
        try:
            agent.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        u.check(agent.returncode == 0, tag + "exit 0 after SIGTERM (got %s)" % agent.returncode)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        sock.close()


sleeper = u.spawn(["sleep", "600"])
try:
    d = u.tempdir("ppnotify-")
    path = os.path.join(d, "notify")
    run_case(path, path, sleeper)
    name = "polyprof-test-notify-%d" % os.getpid()
    run_case("@" + name, "\0" + name, sleeper)
finally:
    u.kill(sleeper)
u.finish()
