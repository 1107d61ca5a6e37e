"""Fault: targets that exit in the middle of a session, or exec another program.

  exit  perf + python on two Python processes; one exits about 3 s into
        an 8 s session. Its samples up to the exit are kept, under its own comm
        (the core learnt it from the /proc scan while the process lived;
        it used to come out as ":PID" when only seen after the exit), and
        the other process is sampled all along.
  exec  a shell that sleeps, then execs Python in the same pid (same start
        time: only comm and exe change). A continuous agent with perf +
        python: a later session attributes the pid to Python — python
        frames, the interpreter's comm, a python appid — and no stack keeps the
        shell's name after the exec.
"""
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import faultutil as fu  # noqa: E402
import pputil as u  # noqa: E402
import pyutil as py  # noqa: E402

so = [os.path.join(u.PLUGIN_DIR, n + ".so") for n in ("perf", "python")]
for p in so:
    if not os.path.exists(p):
        u.skip("plugin not built: " + p)
if not os.path.exists("/usr/bin/python3"):
    u.skip("no /usr/bin/python3")
exe = os.path.realpath("/usr/bin/python3")
plugins = u.plugin_dir_with(*so)

# --- exit in the middle of a session ---
procs = []
try:
    stay, stay_script = py.start(exe, "nested", seconds=120)
    leave, leave_script = py.start(exe, "nested", seconds=4)
    procs += [stay, leave]
    comm = open("/proc/%d/comm" % leave.pid).read().strip()
    out = u.tempdir("ppout-")
    # 199 Hz: enough samples even when the shared host gives the workloads
    # only a slice of a core
    r = u.run_agent(out, plugins, "--pids", "%d,%d" % (stay.pid, leave.pid), "-f", "199",
                    duration=8, timeout=180)
    u.check(r.returncode == 0, "exit: agent exits 0")
    u.check(leave.poll() is not None, "exit: the target really exited during the session")
    _, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
    gone = [(f, c) for f, c in stacks if any("(" + leave_script + ":" in x for x in f)]
    kept = sum(c for _, c in gone)
    # how many depends on how much of its 4 s the loaded host left after
    # the agent's start; some must be there, under its name
    u.check(kept >= 5, "exit: its samples until the exit are kept (%d)" % kept)
    u.check(gone and all(f[2] == comm for f, _ in gone),
            "exit: under its own comm %r, not ':PID' (%s)" % (comm, sorted({f[2] for f, _ in gone})))
    u.check(not any(f[2].startswith(":") for f, _ in stacks), "exit: no stack lost its comm")
    stayed = sum(c for f, c in stacks if any("(" + stay_script + ":" in x for x in f))
    u.check(stayed > kept, "exit: the other target is sampled all along (%d vs %d)"
            % (stayed, kept))
finally:
    for p in procs:
        u.kill(p)

# --- exec into another runtime ---
d = u.tempdir("ppexec-")
script = os.path.join(d, "workload.py")
shutil.copy(py.WORKLOAD, script)
shell = subprocess.Popen(["/bin/sh", "-c", 'sleep 4; exec "$0" "$1" nested 120', exe, script],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
out = u.tempdir("ppout-")
agent = None
try:
    agent = fu.Agent(out, plugins, "", "--pids", str(shell.pid), "-f", "49", duration=3)
    u.check(agent.wait_sessions(5, timeout=120), "exec: five sessions ran")
    after = open("/proc/%d/comm" % shell.pid).read().strip()
    py_comm = os.path.basename(exe)[:15]
    rc = agent.stop()
    u.check(rc == 0, "exec: agent exit 0 (got %s)" % rc)
    u.check(after == py_comm, "exec: the shell became %s (%s)" % (py_comm, after))
    sessions = [u.parse_col(p)[1] for p in fu.cols(out)]
    first = sessions[0]
    u.check(not any(x.endswith("_[p]") for f, _ in first for x in f),
            "exec: session 1 (the shell) has no Python frames")
    last = sessions[-2]  # the final one is cut short by SIGTERM
    pyst = [(f, c) for f, c in last if any(x.endswith("_[p]") and script in x for x in f)]
    u.check(sum(c for _, c in pyst) >= 10, "exec: a later session has the pid's Python stacks (%d)"
            % sum(c for _, c in pyst))
    u.check(pyst and all(f[2] == py_comm for f, _ in pyst),
            "exec: under comm %s: %s" % (py_comm, sorted({f[2] for f, _ in pyst})))
    u.check(any(len(f) > 3 and f[3].startswith("appid: python") for f, _ in pyst),
            "exec: with a python appid")
    u.check(not any(f[2] == "sh" for f, _ in last), "exec: no stack keeps the shell's name")
finally:
    if agent:
        agent.kill()
    u.kill(shell)
u.finish()
