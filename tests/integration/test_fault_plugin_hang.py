"""Fault: a plugin that hangs in the middle of a session.

ta_tickhang covers a `tee` process and never returns from tick() half a
second into its worker's life, twice (then it behaves). Nothing is being
asked of it at that moment, so only the supervisor's idle PING can notice.
ta_ok covers a `cat` process and is healthy all along.

Expected: the supervisor's deadline kills the hung worker (log line naming
the plugin and the deadline), the sessions are still written with ta_ok's
data and an error stack for the tee pid, the worker is restarted with
growing backoff (1 s, then 2 s), and a later session has ta_tickhang's data
again; the agent never dies and exits 0 on SIGTERM.
"""
import glob
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import faultutil as fu  # noqa: E402
import pputil as u  # noqa: E402

needed = ["ta_ok.so", "ta_tickhang.so"]
for n in needed:
    if not os.path.exists(os.path.join(u.TEST_PLUGIN_DIR, n)):
        u.skip("test plugin not built: " + n)
plugins = u.plugin_dir_with(*[os.path.join(u.TEST_PLUGIN_DIR, n) for n in needed])

work = u.tempdir("pphang-")
config = ("plugins:\n  timeout_s: 2\n  restart_backoff_max_s: 4\n"
          "ta_tickhang:\n  fault_file: hung-%s\n" % os.path.basename(work))
teer = subprocess.Popen(["tee"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
catter = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
out = u.tempdir("ppout-")
agent = None
try:
    pids = "%d,%d" % (teer.pid, catter.pid)
    agent = fu.Agent(out, plugins, config, "--pids", pids, duration=4)
    # two hangs (~4 s to detect each) and backoffs of 1 s and 2 s: by the
    # sixth session the worker has been healthy for a whole session
    u.check(agent.wait_sessions(6, timeout=120), "six sessions ran")
    u.check(agent.alive(), "the agent survived a plugin hanging in tick() twice")
    rc = agent.stop()
    u.check(rc == 0, "agent exit 0 on SIGTERM (got %s)" % rc)
    log = agent.log()
    hung = [l for l in log.splitlines() if "plugin ta_tickhang: worker did not answer" in l]
    u.check(len(hung) == 2, "two log lines name the hung plugin and the deadline: %s" % hung)
    u.check(any("within 2 s; restarting in 1 s" in l for l in hung) and
            any("within 2 s; restarting in 2 s" in l for l in hung),
            "restarted with backoff growing from 1 s to 2 s")
    u.check(log.count("plugin ta_tickhang: restarting worker") >= 2, "the worker was restarted twice")

    files = fu.cols(out)
    u.check(len(files) == len(fu.session_totals(log)),
            "every session was written: %d files" % len(files))
    # the last file is the session SIGTERM cut short (maybe no tick at all)
    sessions = [u.parse_col(p)[1] for p in files][:-1]
    ok_every = all(["ta_main", "ta_ok_work"] in [f for f, _ in fu.stacks_of_pid(s, "cat")]
                   for s in sessions)
    u.check(ok_every, "the healthy plugin's data is in every full session")
    errors = [i for i, s in enumerate(sessions)
              if any(len(f) == 1 and f[0].startswith("[Profiling error: ta_tickhang ")
                     for f, _ in fu.stacks_of_pid(s, "tee"))]
    u.check(len(errors) >= 1, "a session hit by the hang has an error stack for the tee pid "
            "(sessions %s)" % errors)
    back = [i for i, s in enumerate(sessions)
            if ["ta_main", "ta_tickhang_work"] in [f for f, _ in fu.stacks_of_pid(s, "tee")]]
    u.check(back and back[-1] == len(sessions) - 1 and (not errors or back[-1] > errors[-1]),
            "the plugin's data is back after the restarts (sessions %s, errors %s)" % (back, errors))
    marker = "/run/polyprof/ta_tickhang/hung-" + os.path.basename(work)
    u.check(os.path.exists(marker + ".1") and os.path.exists(marker + ".2"),
            "the plugin really hung twice")
finally:
    if agent:
        agent.kill()
    u.kill(teer)
    u.kill(catter)
# the fault markers lie in the test plugins' runtime directories
for marker in glob.glob("/run/polyprof/ta_*/*-" + os.path.basename(work) + "*"):
    os.unlink(marker)
u.finish()
