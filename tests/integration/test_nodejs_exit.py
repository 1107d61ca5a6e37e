"""nodejs plugin, inspector mode: a profiled Node program that finishes
exits on time, and its samples are kept.

No inspector session is attached while the program runs (the helper thread
profiles it), so nothing holds it at exit; the helper hands the profile so
far to the agent from the process's exit, which waits for it a bounded
time. Checked with a real node process (finishing.js, 8 s of work) inside a
30 s session: it exits well before the session ends, with status 0, and
the session's .col holds its frames.
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
script = os.path.join(n.WORKLOADS, "finishing.js")
out = u.tempdir("ppout-")
err_path = os.path.join(u.tempdir("ppnode-"), "stderr")
node = n.spawn_node_own_netns([script], stderr_path=err_path)
agent = None
try:
    t0 = time.time()
    agent = n.Agent(out, plugins, "--nodejs-mode", "inspector", "--pids", str(node.pid),
                    duration=30)
    while node.poll() is None and time.time() - t0 < 29:
        time.sleep(0.1)
    lived = time.time() - t0
    exited = node.poll() is not None
    got = agent.wait_sessions(1, 90)
    # read it before stopping: the early last session may end in the same
    # second and reuse the file name
    _, stacks = n.stacks_of(agent.profiles())
    rc = agent.stop()
    u.check(rc == 0, "agent exits 0 (rc %s)" % rc)
    u.check(exited and lived < 20,
            "the finished program exits during the session (after %.1f s of a 30 s session)" % lived)
    u.check(node.returncode == 0, "its exit status is 0 (%s)" % node.returncode)
    with open(err_path, errors="replace") as f:
        err = f.read()
    print("node stderr: " + err.replace("\n", " | "))
    u.check(got >= 1, "the session is written (%d)" % got)
    # its own functions (finishingWork, burn): V8 sometimes inlines
    # finishingWork into burn, and its profile then names burn alone (seen
    # once: 688 samples under burn, none under finishingWork)
    mine = sum(c for f, c in stacks if any(x.startswith(("finishingWork (", "burn (")) and "/finishing.js:" in x
                                          for x in f))
    u.check(mine > 0, "its frames (finishingWork, burn) are in the profile (%d samples)" % mine)
    u.check("exiting; its last profile is kept" in agent.log_text(),
            "the log says its last profile was kept")
    u.check("Waiting for the debugger" not in err, "nothing held it at exit")
finally:
    if agent:
        agent.stop()
    u.kill(node)
u.finish()
