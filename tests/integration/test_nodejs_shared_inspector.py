"""nodejs plugin: an inspector another client opened and uses is shared
safely: our agent installs its helper through it, never closes it, and the
target never stalls.

Closing a Node inspector makes the main thread join the inspector's I/O
thread, which waits until every connected client has answered Node's close
frame: closing one another client sits idle on would freeze the app until
that client reads. A loopback HTTP server is probed without pause (every
request must be answered within BOUND_S, throughout and after the detach);
another client (a user's debugger / another tool) opened its inspector with
SIGUSR1, evaluates, runs its own Profiler.start, then sits idle without
reading. Our agent profiles through its helper, the inspector stays open,
the other session still evaluates and its own profile has samples.
"""
import http.client
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "nodejs"))
import nodetest as n  # noqa: E402
import pputil as u  # noqa: E402

BOUND_S = 4.0  # fib(20) takes milliseconds; the defect froze the app for good
IDLE_S = 8.0  # how long the other client stays idle after our detach

n.require_node()
plugins = n.plugin_dir()


class Probe:
    """Sends requests back to back; records failures and the slowest one."""

    def __init__(self, port):
        self.port, self.ok, self.errors, self.worst, self.stop = port, 0, [], 0.0, False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        conn = None
        while not self.stop:
            t0 = time.time()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=BOUND_S)
                conn.request("GET", "/")
                r = conn.getresponse()
                body = r.read()
                if r.status != 200 or body != b"6765":
                    self.errors.append("status %d body %r" % (r.status, body[:40]))
                self.ok += 1
            except Exception as e:  # noqa: BLE001 - a timeout is the defect
                self.errors.append("%r at %.1f" % (e, time.time()))
                conn = None
            self.worst = max(self.worst, time.time() - t0)
            time.sleep(0.02)

    def finish(self):
        self.stop = True
        self.t.join(BOUND_S + 5)


def new_inspector(pid, known, timeout=15):
    """(port, ws path) of an inspector pid listens on besides known ports."""
    end = time.time() + timeout
    while time.time() < end:
        for p in sorted(n.listening_ports(pid) - set(known)):
            path = n.inspector_target(p)
            if path:
                return p, path
        time.sleep(0.2)
    return None, None


def wait_log(agent, needle, timeout=30):
    end = time.time() + timeout
    while time.time() < end and needle not in agent.log_text() and agent.p.poll() is None:
        time.sleep(0.2)
    if needle not in agent.log_text():
        print("agent log (nodejs):\n" + "\n".join(
            x for x in agent.log_text().splitlines() if "nodejs" in x)[-2000:])
    return needle in agent.log_text()


def other_still_works(label, other, pid):
    r = other.call("Runtime.evaluate", {"expression": "process.pid"})
    u.check(r.get("result", {}).get("result", {}).get("value") == pid,
            "%s: the other client's session still evaluates (%s)" % (label, str(r)[:120]))
    r = other.call("Profiler.stop")
    prof = r.get("result", {}).get("profile", {})
    u.check(len(prof.get("samples", [])) > 0,
            "%s: the other client's own profiler kept sampling (%d samples)"
            % (label, len(prof.get("samples", []))))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_server(label):
    # SIGUSR1 opens the inspector on a free port, not 9229: on a shared host
    # another Node process may hold 9229 (--inspect-port alone opens nothing).
    # Not port 0: the agent guards the port SIGUSR1 will use before the
    # signal, and signals no process whose port it cannot tell.
    server = n.spawn_node(["--inspect-port=127.0.0.1:%d" % free_port(),
                           os.path.join(n.WORKLOADS, "server.js")])
    port = int(server.stdout.readline().strip() or 0)
    u.check(port > 0, "%s: server listens on port %d" % (label, port))
    return server, port


def scenario_other_first():
    label = "other client first"
    server, port = start_server(label)
    probe = Probe(port)
    other = agent = None
    try:
        os.kill(server.pid, 10)  # as another agent would: SIGUSR1 opens the inspector
        ip, path = new_inspector(server.pid, [port])
        u.check(ip is not None, "%s: inspector opened by SIGUSR1" % label)
        if ip is None:
            return
        other = n.WsClient(ip, path)
        other.call("Profiler.enable")
        other.call("Profiler.start")
        agent = n.Agent(u.tempdir("ppout-"), plugins, "--nodejs-mode", "inspector", "--pids",
                        str(server.pid), duration=1)
        # SIGUSR1 opens no new socket: the agent takes the open inspector
        # after attach_timeout_s (5 s)
        u.check(wait_log(agent, "pid %d: Node.js" % server.pid), "%s: agent profiles" % label)
        u.check("(already open, left open)" in agent.log_text(),
                "%s: agent knows it is not its own" % label)
        got = agent.wait_sessions(len(agent.profiles()) + 3, 60)
        rc = agent.stop()
        u.check(got >= 3 and rc == 0, "%s: 3 sessions, agent exits 0 (%d, rc %s)" % (label, got, rc))
        _, stacks = n.stacks_of(agent.profiles())
        u.check(n.frames_with(stacks, "handleRequest (") > 0,
                "%s: our agent profiled through the shared inspector" % label)
        time.sleep(IDLE_S)
        u.check(not probe.errors and probe.worst < BOUND_S,
                "%s: every request answered within %.0fs (slowest %.2fs, errors %s)"
                % (label, BOUND_S, probe.worst, probe.errors[:3]))
        u.check(ip in n.listening_ports(server.pid),
                "%s: the inspector we did not open is still open" % label)
        other_still_works(label, other, server.pid)
    finally:
        if agent and agent.p.poll() is None:
            agent.stop()
        probe.finish()
        if other:
            other.close()
        u.kill(server)


scenario_other_first()
u.finish()
