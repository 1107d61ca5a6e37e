"""python plugin: a target that exits gives its descriptors back at once.

In cpu mode the worker keeps one /proc/PID/task/TID/stat open per thread of
a target (its running test). A target that exits is kept until the session
ends, so its last stacks are emitted; its stat files are of no use after the
exit and used to be kept with it, up to a minute under a continuous agent
(the one-hour soak saw eight or more such files in the python worker before
each snapshot under churn). Checked with a real two-thread Python that
exits 4 s into a 20 s session: the exit is logged, the worker holds no
descriptor of that process within 3 s of it, and its stacks are still in the
session's profile.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import faultutil as fu  # noqa: E402
import pputil as u  # noqa: E402
import pyutil as py  # noqa: E402

if not os.path.exists(py.PLUGIN):
    u.skip("python plugin not built: " + py.PLUGIN)
if not os.path.exists("/usr/bin/python3"):
    u.skip("no /usr/bin/python3")
exe = os.path.realpath("/usr/bin/python3")
plugins = u.plugin_dir_with(py.PLUGIN)


def files_of(worker, pid):
    """The worker's descriptors naming /proc/pid/..."""
    out = []
    for fd in os.listdir("/proc/%d/fd" % worker):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (worker, fd))
        except OSError:
            continue
        if link.startswith("/proc/%d/" % pid):
            out.append(link)
    return out


out = u.tempdir("ppout-")
target, script = py.start(exe, "threads", seconds=4)
agent = None
try:
    agent = fu.Agent(out, plugins, "", "--pids", str(target.pid), "--python-mode", "cpu", "-f", "49",
                     duration=20)
    u.check(agent.wait_log("pid %d: Python" % target.pid, 30), "the target is attached")
    workers = agent.children("pp-python")
    u.check(len(workers) == 1, "one python worker (%s)" % workers)
    worker = workers[0] if workers else 0
    held = []
    deadline = time.time() + 3
    while worker and not held and time.time() < deadline:
        held = files_of(worker, target.pid)
        time.sleep(0.05)
    u.check(held, "while it runs the worker keeps its threads' stat files open (%s)" % held)
    target.wait(timeout=30)
    exited = time.time()
    u.check(agent.wait_log("pid %d: exited" % target.pid, 10), "its exit is logged")
    left = held
    while worker and left and time.time() < exited + 3:
        left = files_of(worker, target.pid)
        time.sleep(0.05)
    u.check(not left, "no descriptor of it left in the worker %.1f s after the exit, mid-session: %s"
            % (time.time() - exited, left))
    u.check(len(agent.session_lines()) == 0, "still the first session (the check was mid-session)")
    u.check(agent.wait_sessions(1, 90), "the session is written")
    rc = agent.stop()
    u.check(rc == 0, "agent exits 0 (%s)" % rc)
    stacks = [s for p in fu.cols(out) for s in u.parse_col(p)[1]]
    mine = sum(c for _, c, _ in py.stacks_in(stacks, script))
    u.check(mine > 0, "its stacks from before the exit are in the profile (%d samples)" % mine)
finally:
    if agent:
        agent.stop()
    u.kill(target)
u.finish()
