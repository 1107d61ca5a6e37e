"""nodejs plugin: a local unprivileged user never gets to run code in a
profiled Node process through an inspector the agent opened.

Node's SIGUSR1 inspector has no authentication: whoever can connect to its
loopback port can evaluate JavaScript with the process's rights (a root
Node: root). The agent opens it only for the one request that installs its
helper, and closes it in that same request. Here a root Node runs in a
network namespace of its own, and a scanner running as nobody in that
namespace (tests/workloads/nodejs/inspector_scanner.py) looks for listening
sockets all the time and tries each with GET /json/list and a WebSocket
Runtime.evaluate, through every phase of both modes: before the attach,
during it, during the session, after the detach, and after the agent (and
its workers) are killed with SIGKILL. Outside the attach window it must
never get an answer; after the kill nothing of ours may be listening or
running in the target.

The attach window itself (SIGUSR1 until the install request closes the
inspector, a few milliseconds, and the moment Node's second request
reopens it) is Node's unauthenticated inspector, so the agent arms its
attach guard before the signal: the kernel refuses the scanner's
connections to the inspector's port (EPERM) while the agent's own go
through. The scanner may see the socket listening then; it must never get
an answer from it, in any phase.
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "nodejs"))
import faultutil as fu  # noqa: E402
import nodetest as n  # noqa: E402
import pputil as u  # noqa: E402

n.require_node()
for tool in ("unshare", "ip", "nsenter", "setpriv"):
    if not shutil.which(tool):
        u.skip("%s (util-linux / iproute2) missing" % tool)
plugins = n.plugin_dir()
perf_so = os.path.join(u.PLUGIN_DIR, "perf.so")


def start_target(work):
    """split.js as root in a network namespace of its own (loopback up)."""
    return n.spawn_node_own_netns([os.path.join(n.WORKLOADS, "split.js")],
                                  os.path.join(work, "node.err"), stdout=subprocess.DEVNULL)


def start_scanner(work, pid):
    shutil.copy(os.path.join(n.WORKLOADS, "inspector_scanner.py"), work)
    os.chmod(work, 0o755)
    phase, stop = os.path.join(work, "phase"), os.path.join(work, "stop")
    with open(phase, "w") as f:
        f.write("before")
    os.chmod(phase, 0o644)
    out = open(os.path.join(work, "scanner.out"), "w")
    s = subprocess.Popen(["nsenter", "--net=/proc/%d/ns/net" % pid, "setpriv", "--reuid=65534",
                          "--regid=65534", "--clear-groups", sys.executable,
                          os.path.join(work, "inspector_scanner.py"), phase, stop],
                         stdout=out, stderr=subprocess.STDOUT)
    return s, phase, stop


def set_phase(path, name):
    with open(path + ".new", "w") as f:
        f.write(name)
    os.chmod(path + ".new", 0o644)
    os.rename(path + ".new", path)


def wait_log(agent, needle, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if needle in agent.log_text():
            return True
        time.sleep(0.05)
    return False


def kill_agent(agent):
    """SIGKILL to the agent and its workers, as an OOM killer would."""
    workers = fu.children_of(agent.p.pid, "pp-nodejs") + fu.children_of(agent.p.pid, "pp-perf")
    for pid in [agent.p.pid] + workers:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    agent.p.wait()


def helper_traces(pid):
    """What of our helper is still in the target: its directory, V8's
    profiler thread."""
    left = glob.glob("/proc/%d/root/tmp/polyprof-nodejs-%d-*" % (pid, pid))
    for t in glob.glob("/proc/%d/task/*/comm" % pid):
        try:
            with open(t) as f:
                if f.read().strip() == "v8:ProfEvntProc":
                    left.append("V8 profiler thread")
        except OSError:
            pass
    return left


def run_mode(mode):
    work = u.tempdir("ppexpose-")
    if mode == "attach-maps" and not os.path.exists(os.path.join(plugins, "perf.so")):
        os.symlink(perf_so, os.path.join(plugins, "perf.so"))
    node = start_target(work)
    scanner, phase, stop = start_scanner(work, node.pid)
    agent = None
    try:
        time.sleep(1.0)
        for rnd in ("1", "2"):
            set_phase(phase, "attach" + rnd)
            agent = n.Agent(u.tempdir("ppout-"), plugins, "--nodejs-mode", mode, "--pids",
                            str(node.pid), duration=2)
            u.check(wait_log(agent, "helper installed", 60),
                    "%s round %s: the agent installed its helper" % (mode, rnd))
            set_phase(phase, "session" + rnd)
            agent.wait_sessions(2, 30)
            if rnd == "1":
                rc = agent.stop()
                u.check(rc == 0, "%s: agent exits 0 (rc %s)" % (mode, rc))
                set_phase(phase, "after-detach")
                time.sleep(2.0)
            else:
                kill_agent(agent)
                set_phase(phase, "after-sigkill")
                end = time.time() + 10
                while helper_traces(node.pid) and time.time() < end:
                    time.sleep(0.2)
                time.sleep(1.0)
        agent = None
        alive = node.poll() is None
        u.check(not n.listening_ports(node.pid),
                "%s: nothing listens in the target after the SIGKILL (%s)"
                % (mode, n.listening_ports(node.pid)))
        u.check(not helper_traces(node.pid),
                "%s: the helper undid its work after the SIGKILL (%s)" % (mode, helper_traces(node.pid)))
        if mode == "attach-maps":
            u.check(not os.path.exists("/proc/%d/root/tmp/perf-%d.map" % (node.pid, node.pid)),
                    "attach-maps: the helper removed the perf map after the SIGKILL")
    finally:
        alive = node.poll() is None
        open(stop, "w").close()
        try:
            scanner.wait(timeout=20)
        except subprocess.TimeoutExpired:
            scanner.kill()
        if agent:
            kill_agent(agent)
        u.kill(node)
    with open(os.path.join(work, "scanner.out")) as f:
        lines = [json.loads(ln) for ln in f if ln.startswith("{")]
    summary = next((x for x in lines if x.get("summary")), None)
    u.check(summary is not None, "%s: the scanner ran (%s)" % (mode, lines[-3:]))
    if summary:
        print("%s: scanner saw listening sockets %s, tried inspectors %s"
              % (mode, summary["seen"], summary["tried"]))
        u.check(not summary["exposed"], "%s: the unprivileged scanner never ran code, in any "
                "phase: %s" % (mode, summary["exposed"]))
        u.check(summary["seen"].get("before", 0) == 0 and summary["seen"].get("session1", 0) == 0
                and summary["seen"].get("after-detach", 0) == 0
                and summary["seen"].get("after-sigkill", 0) == 0,
                "%s: nothing listened before the attach, in the session, after the detach or "
                "after the SIGKILL (%s)" % (mode, summary["seen"]))
        refused = sum(1 for x in lines if "refused" in x and "not permitted" in x["refused"])
        print("%s: the guard refused the scanner %d time(s)" % (mode, refused))
        u.check(alive, "%s: the target still runs (rc %s)" % (mode, node.returncode))
    with open(os.path.join(work, "node.err"), errors="replace") as f:
        err = f.read()
    u.check("Debugger listening" in err, "%s: the target did open its inspector" % mode)


run_mode("inspector")
if os.path.exists(perf_so):
    run_mode("attach-maps")
else:
    u.check(False, "perf plugin not built: " + perf_so)
u.finish()
