"""nodejs plugin, inspector mode, container-like targets: a Node process in its
own network and pid namespaces (it is pid 1 there, its inspector listens on
the namespace's loopback) is profiled next to a Node process of the host
namespace. The connection is made from inside the target's network
namespace and validated against its namespace pid.
"""
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "nodejs"))
import nodetest as n  # noqa: E402
import pputil as u  # noqa: E402

n.require_node()
if not shutil.which("unshare") or not shutil.which("ip"):
    u.skip("unshare (util-linux) or ip (iproute2) missing")
plugins = n.plugin_dir()
split = os.path.join(n.WORKLOADS, "split.js")
wrapper = subprocess.Popen(["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc", "sh", "-c",
                            "ip link set lo up && exec %s %s" % (n.NODE, split)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
host_node = n.spawn_node([split])
try:
    contained = None
    end = time.time() + 10
    while time.time() < end and contained is None:
        try:
            with open("/proc/%d/task/%d/children" % (wrapper.pid, wrapper.pid)) as f:
                kids = [int(x) for x in f.read().split()]
            for k in kids:
                if os.readlink("/proc/%d/exe" % k).endswith("node"):
                    contained = k
        except OSError:
            pass
        time.sleep(0.1)
    if contained is None:
        u.skip("could not start node in new namespaces (unshare not permitted here?)")
    time.sleep(0.5)
    with open("/proc/%d/status" % contained) as f:
        nspid = [ln.split()[-1] for ln in f if ln.startswith("NSpid:")][0]
    u.check(nspid == "1", "contained node is pid 1 in its namespace (%s)" % nspid)
    u.check(os.readlink("/proc/%d/ns/net" % contained) != os.readlink("/proc/self/ns/net"),
            "contained node has its own network namespace")
    out = u.tempdir("ppout-")
    agent = n.Agent(out, plugins, "--nodejs-mode", "inspector", "--pids",
                    "%d,%d" % (contained, host_node.pid), duration=2)
    got = agent.wait_sessions(3, 90)
    rc = agent.stop()
    u.check(rc == 0 and got >= 3, "agent ran 3 sessions (rc %s, %d)" % (rc, got))
    _, stacks = n.stacks_of(agent.profiles()[1:])
    log = agent.log_text()
    u.check("pid %d: Node.js" % contained in log, "contained node attached")
    u.check("pid %d: Node.js" % host_node.pid in log, "host node attached")
    heavy = n.frames_with(stacks, "heavyPath (")
    u.check(heavy > 0, "JS frames collected (%d heavyPath samples)" % heavy)
    # both run the same script and the .col has no pid column: the session
    # log lines count the processes with samples
    u.check("over 2 processes" in log, "sessions cover both processes")
    u.check(contained and os.path.exists("/proc/%d" % contained), "contained node still running")
    left = n.inspector_left(contained)
    u.check(not left, "contained node's inspector closed again (%s)" % left)
    u.check(not n.inspector_left(host_node.pid), "host node's inspector closed again")
finally:
    u.kill(host_node)
    u.kill(wrapper)
u.finish()
