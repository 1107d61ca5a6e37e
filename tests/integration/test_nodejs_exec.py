"""nodejs plugin: a process that is a shell when the agent starts and then
execs node (same pid, same start time, a new image) is attached and
profiled once it runs Node, and its inspector is closed at the end."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "nodejs"))
import nodetest as n  # noqa: E402
import pputil as u  # noqa: E402

n.require_node()
plugins = n.plugin_dir()
split = os.path.join(n.WORKLOADS, "split.js")
shell = subprocess.Popen(["sh", "-c", 'sleep 4; exec "$0" "$1"', n.NODE, split],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    out = u.tempdir("ppout-")
    agent = n.Agent(out, plugins, "--nodejs-mode", "inspector", "--pids", str(shell.pid),
                    duration=2)
    got = agent.wait_sessions(7, 90)
    rc = agent.stop()
    u.check(got >= 7 and rc == 0, "7 sessions, agent exits 0 (%d, rc %s)" % (got, rc))
    _, last = n.stacks_of(agent.profiles()[-2:])
    u.check(n.frames_with(last, "heavyPath (") > 0,
            "after its exec into node, the same pid is profiled (%d heavyPath samples)"
            % n.frames_with(last, "heavyPath ("))
    u.check(shell.poll() is None and not n.inspector_left(shell.pid),
            "the target runs on with its inspector closed")
finally:
    u.kill(shell)
u.finish()
