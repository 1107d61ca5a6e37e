"""nodejs plugin, inspector mode: a program that finishes while the agent
is still setting up its session is let go, and the agent keeps no socket.

Node holds a finished process at exit while an inspector session is
attached, and announces it (NodeRuntime.waitingForDisconnect) only to a
session that asked beforehand. ends_at_attach.js ends its program on the
agent's first evaluation, before the agent asks, so the announcement never
comes: the agent must notice by itself (the target's JS context is gone)
and disconnect. This reproduces what the one-hour soak showed as a slow
socket leak in the nodejs worker: short-lived Node processes that finished
during an attach stayed alive, each holding one of the worker's sockets,
until the agent stopped. Real node, real agent; checked: the process exits
within seconds with status 0 in a 60 s session, the log says why, and the
worker then holds no TCP socket.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "nodejs"))
import faultutil as fu  # noqa: E402
import nodetest as n  # noqa: E402
import pputil as u  # noqa: E402


def tcp_sockets(pid):
    """TCP connections (any state) the process holds a descriptor of."""
    inodes = n._socket_inodes(pid)
    held = []
    for name in ("tcp", "tcp6"):
        with open("/proc/%d/net/%s" % (pid, name)) as f:
            next(f)
            for line in f:
                parts = line.split()
                if parts[9] in inodes:
                    held.append("%s -> %s state %s" % (parts[1], parts[2], parts[3]))
    return held


n.require_node()
plugins = n.plugin_dir()
script = os.path.join(n.WORKLOADS, "ends_at_attach.js")
out = u.tempdir("ppout-")
err_path = os.path.join(u.tempdir("ppnode-"), "stderr")
node = n.spawn_node([script], stderr_path=err_path)
agent = None
try:
    t0 = time.time()
    # port 9229 kept: the agent's first evaluation is then the validation
    # on the inspector it opened, the moment the program ends
    agent = n.Agent(out, plugins, "--nodejs-mode", "inspector", "--nodejs-move-port=false",
                    "--pids", str(node.pid), duration=60)
    while node.poll() is None and time.time() - t0 < 40:
        time.sleep(0.1)
    lived = time.time() - t0
    with open(err_path, errors="replace") as f:
        err = f.read()
    print("node stderr: " + err.replace("\n", " | "))
    stdout = node.stdout.read().decode(errors="replace") if node.poll() is not None else ""
    u.check("ended at attach" in stdout,
            "the program ended on the agent's first evaluation (stdout %r)" % stdout[:80])
    u.check(node.poll() is not None and lived < 20,
            "the process is let go and exits (%.1f s after start, session of 60 s)" % lived)
    u.check(node.returncode == 0, "its exit status is 0 (%s)" % node.returncode)
    log = agent.log_text()
    u.check("exiting; session closed" in log, "the log says the session was closed for it")
    worker = (fu.children_of(agent.p.pid, "pp-nodejs") or [None])[0]
    u.check(worker is not None, "the nodejs worker runs (%s)" % worker)
    held = tcp_sockets(worker) if worker else ["no worker"]
    end = time.time() + 3
    while held and time.time() < end:  # the tick that closes it runs every 100 ms
        time.sleep(0.2)
        held = tcp_sockets(worker)
    u.check(not held, "the worker holds no TCP socket afterwards (%s)" % "; ".join(held))
    rc = agent.stop()
    u.check(rc == 0, "agent exits 0 (rc %s)" % rc)
finally:
    if agent:
        agent.stop()
    u.kill(node)
u.finish()
