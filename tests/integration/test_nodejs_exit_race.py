"""nodejs plugin, inspector mode: a program that finishes while the agent
attaches is let go, exits cleanly, and the agent keeps no socket.

ends_at_attach.js ends its program on the agent's install request (the one
request the agent sends over the inspector, which also closes it), before
the helper thread has even started. Nothing of the agent's may hold the
process or crash it at exit: no inspector session is left attached (Node
would hold the process "waiting for the debugger to disconnect"), our end
of that session is never dropped while Node still writes its close frame
(that crashed Node 20 with SIGSEGV), and a helper that is still starting
is not waited for. Real node, real agent; checked: the process exits
within seconds with status 0 (never a signal) in a 60 s session, and the
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
    """Sockets the process holds that its own network namespace does not
    list (unix, netlink, tcp, udp): connections it made inside another
    namespace, as the worker's to the target's inspector."""
    inodes = n._socket_inodes(pid)
    for name in ("unix", "netlink", "tcp", "tcp6", "udp", "udp6", "raw", "packet"):
        try:
            with open("/proc/%d/net/%s" % (pid, name)) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    col = {"unix": 6, "packet": 8}.get(name, 9)
                    if len(parts) > col:
                        inodes.discard(parts[col])
        except (OSError, StopIteration):
            pass
    return sorted(inodes)


n.require_node()
plugins = n.plugin_dir()
script = os.path.join(n.WORKLOADS, "ends_at_attach.js")
out = u.tempdir("ppout-")
err_path = os.path.join(u.tempdir("ppnode-"), "stderr")
node = n.spawn_node_own_netns([script], stderr_path=err_path)
agent = None
try:
    t0 = time.time()
    agent = n.Agent(out, plugins, "--nodejs-mode", "inspector", "--pids", str(node.pid),
                    duration=60)
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
    u.check(node.returncode == 0, "its exit status is 0, no signal (%s)" % node.returncode)
    u.check("Waiting for the debugger" not in err, "nothing held it at exit")
    worker = (fu.children_of(agent.p.pid, "pp-nodejs") or [None])[0]
    u.check(worker is not None, "the nodejs worker runs (%s)" % worker)
    held = tcp_sockets(worker) if worker else ["no worker"]
    end = time.time() + 3
    while held and time.time() < end:  # the tick that closes it runs every 100 ms
        time.sleep(0.2)
        held = tcp_sockets(worker)
    u.check(not held, "the worker holds no socket into the target's namespace afterwards (%s)"
            % "; ".join(held))
    rc = agent.stop()
    u.check(rc == 0, "agent exits 0 (rc %s)" % rc)
finally:
    if agent:
        agent.stop()
    u.kill(node)
u.finish()
