"""nodejs plugin: the inspector the agent closes does not come back.

One SIGUSR1 makes Node ask for its inspector twice: through a V8 interrupt,
which opens it while the main thread runs JS, and through an event-loop
handle, which opens a fresh one at the loop's next turn if none is open
then. The agent installs its helper and closes the inspector within
milliseconds, so in a process that returns to its loop only every 1.5 s
the second request comes after the close. For both modes that open an
inspector: nothing may listen in the target in the 4 s after the attach
(two loop turns or more), through the session and after the agent stops;
the target's stderr usually shows that Node did open the second inspector
(which the helper closed at once); a run in which it did not says so.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "nodejs"))
import nodetest as n  # noqa: E402
import pputil as u  # noqa: E402

n.require_node()
plugins = n.plugin_dir()
perf_so = os.path.join(u.PLUGIN_DIR, "perf.so")


def wait_log(agent, needle, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if needle in agent.log_text():
            return True
        time.sleep(0.05)
    return False


def run(mode):
    if mode == "attach-maps" and not os.path.exists(os.path.join(plugins, "perf.so")):
        os.symlink(perf_so, os.path.join(plugins, "perf.so"))
    err_path = os.path.join(u.tempdir("ppnode-"), "stderr")
    node = n.spawn_node([os.path.join(n.WORKLOADS, "slow_turns.js")], stderr_path=err_path)
    try:
        agent = n.Agent(u.tempdir("ppout-"), plugins, "--nodejs-mode", mode, "--pids", str(node.pid))
        u.check(wait_log(agent, "helper installed", 60), "%s: the helper was installed" % mode)
        seen = set()
        end = time.time() + 4.0  # two loop turns or more
        while time.time() < end:
            seen |= set(n.listening_ports(node.pid))
            time.sleep(0.01)
        left = n.listening_ports(node.pid)
        u.check(not left, "%s: nothing listens in the target after its loop turned (%s)"
                % (mode, left))
        agent.wait_sessions(2, 30)
        rc = agent.stop()
        u.check(rc == 0, "%s: agent exits 0 (rc %s)" % (mode, rc))
        u.check(not n.listening_ports(node.pid), "%s: nothing listens after the agent stopped"
                % mode)
        u.check(node.poll() is None, "%s: the target still runs (rc %s)" % (mode, node.returncode))
        with open(err_path, errors="replace") as f:
            opened = f.read().count("Debugger listening")
        print("%s: the target opened its inspector %d time(s); listening seen after the install: "
              "%s" % (mode, opened, sorted(seen)))
        return opened
    finally:
        u.kill(node)


opened = [run("inspector")]
if os.path.exists(perf_so):
    opened.append(run("attach-maps"))
else:
    u.check(False, "perf plugin not built: " + perf_so)
# The interrupt usually opens the first inspector, and the second request
# then reopens it (the case this test is about). On a loaded host the
# loop's turn sometimes comes first in both runs, and nothing is reopened:
# the run then proves less, which is said rather than failed.
if max(x or 0 for x in opened) < 2:
    print("note: Node did not reopen the inspector in this run (%s): the loop turned before "
          "the install" % opened)
u.finish()
