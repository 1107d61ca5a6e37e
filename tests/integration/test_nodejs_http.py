"""nodejs plugin: a Node HTTP server keeps serving a loopback client without
a single error through 20 inspector-mode sessions, and its request handler
shows up in the profile.
"""
import http.client
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "nodejs"))
import nodetest as n  # noqa: E402
import pputil as u  # noqa: E402

n.require_node()
plugins = n.plugin_dir()
server = n.spawn_node([os.path.join(n.WORKLOADS, "server.js")])
port = int(server.stdout.readline().strip() or 0)
stats = {"ok": 0, "errors": [], "stop": False}


def client():
    conn = None
    while not stats["stop"]:
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/")
            r = conn.getresponse()
            body = r.read()
            if r.status == 200 and body == b"6765":
                stats["ok"] += 1
            else:
                stats["errors"].append("status %d body %r" % (r.status, body[:40]))
        except Exception as e:  # noqa: BLE001 - every failure counts
            stats["errors"].append("%s at %.3f" % (repr(e), time.time()))
            conn = None
            time.sleep(0.05)


try:
    u.check(port > 0, "server listens on port %d" % port)
    t = threading.Thread(target=client, daemon=True)
    t.start()
    time.sleep(1)
    before = stats["ok"]
    out = u.tempdir("ppout-")
    print("agent start %.3f" % time.time())
    agent = n.Agent(out, plugins, "--nodejs-mode", "inspector", "--pids", str(server.pid), duration=1)
    got = agent.wait_sessions(20, 180)
    print("agent stop %.3f" % time.time())
    rc = agent.stop()
    print("agent stopped %.3f" % time.time())
    time.sleep(1)
    stats["stop"] = True
    t.join(15)
    u.check(got >= 20, "20 sessions written (%d)" % got)
    u.check(rc == 0, "agent exits 0 (rc %s)" % rc)
    u.check(not stats["errors"], "no request failed: %s" % stats["errors"][:5])
    u.check(stats["ok"] - before > 200, "requests kept being served (%d)" % (stats["ok"] - before))
    _, stacks = n.stacks_of(agent.profiles())
    u.check(n.frames_with(stacks, "handleRequest (") > 0, "handleRequest in the profile")
    u.check(n.frames_with(stacks, "fib (") > 0, "fib in the profile")
    u.check(server.poll() is None, "server still running")
    left = n.inspector_left(server.pid, keep=[port])
    u.check(not left, "only the app's own port is left listening (also: %s)" % left)
finally:
    stats["stop"] = True
    u.kill(server)
u.finish()
