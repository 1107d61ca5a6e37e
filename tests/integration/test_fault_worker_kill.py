"""Fault: plugin workers killed with SIGKILL in the middle of a session.

perf, python and example run together on a real Python workload and a
`sleep`; during the second session the python and example workers are
killed with SIGKILL (as the OOM killer or an operator would).

Expected: a log line names each plugin and the signal; the session is still
written with perf's data for both processes (nothing the agent already had
is lost); the workers are restarted by themselves and a later session has
Python frames (_[p]) and example's thread-state frames again; the agent
never dies and exits 0 on SIGTERM.
"""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import faultutil as fu  # noqa: E402
import pputil as u  # noqa: E402
import pyutil as py  # noqa: E402

so = {n: os.path.join(u.PLUGIN_DIR, n + ".so") for n in ("perf", "python", "example")}
for n, p in so.items():
    if not os.path.exists(p):
        u.skip("%s plugin not built: %s" % (n, p))
found = py.interpreters()
if not found:
    u.skip("no CPython found")
exe = ([f for f in found if f[0].startswith("debian")] or found)[-1][1]
plugins = u.plugin_dir_with(*so.values())

# example matches every process; counting only sleeping threads keeps it off
# the (running) python process, whose stacks belong to the python plugin
config = ("plugins:\n  timeout_s: 3\n  restart_backoff_max_s: 2\n"
          "example:\n  only_states: [S]\n")
work, script = py.start(exe, "nested", seconds=300)
sleeper = u.spawn(["sleep", "600"])
py_comm = open("/proc/%d/comm" % work.pid).read().strip()
out = u.tempdir("ppout-")
agent = None
try:
    agent = fu.Agent(out, plugins, config, "--pids", "%d,%d" % (work.pid, sleeper.pid),
                     "-f", "49", "--example-mode", "states", duration=4)
    u.check(agent.wait_sessions(1, timeout=60), "first session ran")
    time.sleep(1.5)  # well inside session 2
    victims = {n: agent.children("pp-" + n) for n in ("python", "example")}
    u.check(all(len(v) == 1 for v in victims.values()), "found the workers: %s" % victims)
    for pids in victims.values():
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
    u.check(agent.wait_sessions(4, timeout=90), "four sessions ran")
    u.check(agent.alive(), "the agent survived its workers being killed")
    again = {n: agent.children("pp-" + n) for n in ("python", "example")}
    rc = agent.stop()
    u.check(rc == 0, "agent exit 0 on SIGTERM (got %s)" % rc)
    log = agent.log()
    for n in ("python", "example"):
        u.check("plugin %s: worker crashed with SIGKILL" % n in log,
                "a log line names %s and SIGKILL" % n)
        u.check(len(again[n]) == 1 and again[n] != victims[n],
                "%s worker restarted by itself (%s -> %s)" % (n, victims[n], again[n]))

    files = fu.cols(out)
    u.check(len(files) == len(fu.session_totals(log)) and len(files) >= 4,
            "every session was written: %d files" % len(files))
    parsed = [u.parse_col(p) for p in files]
    sessions = [st for _, st in parsed]
    hit, hit_stats = sessions[1], parsed[1][0]["polyprof"]
    perf_n = hit_stats["perf"]["samples"]
    py_n = sum(c for _, c in fu.stacks_of_pid(hit, py_comm))
    u.check(hit_stats["perf"]["status"] == "ok" and perf_n > 0,
            "the session of the kill has perf's data (%d samples)" % perf_n)
    u.check(py_n == perf_n, "all of perf's samples of the python process are in it (%d of %d): "
            "the restarted python worker's stacks are scaled to them" % (py_n, perf_n))
    u.check(hit_stats["python"]["restarts"] == 1 and hit_stats["example"]["restarts"] == 1,
            "the header counts one restart per killed plugin")
    # example's ticks before the kill died with its worker; whether its
    # restart (1 s later) still ticked in this session depends on the load,
    # so the sleep pid is checked in the next session
    u.check(len(fu.stacks_of_pid(sessions[2], "sleep")) > 0,
            "the session after the kill has example's data for the sleep process")

    def has_python(s):
        return any(any(f.endswith("_[p]") and script in f for f in fr)
                   for fr, _ in fu.stacks_of_pid(s, py_comm))

    def has_state(s):
        return any(any(f.startswith("[thread-state") for f in fr)
                   for fr, _ in fu.stacks_of_pid(s, "sleep"))

    u.check(has_python(sessions[0]) and has_state(sessions[0]), "session 1 had both plugins' data")
    # sessions[-1] is the one SIGTERM cut short
    u.check(has_python(sessions[-2]), "the last full session has Python frames again")
    u.check(has_state(sessions[-2]), "the last full session has example's thread states again")
finally:
    if agent:
        agent.kill()
    u.kill(work)
    u.kill(sleeper)
u.finish()
