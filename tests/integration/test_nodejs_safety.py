"""nodejs plugin: who gets signalled, and targets that go away.

1. Processes whose executable is named `node` but are not Node.js are never
   sent SIGUSR1 (which would kill them): a copy of bash named node that
   traps SIGUSR1 and records it, and a copy of sleep named node (which
   would die of it). Both are alive afterwards, the trap never fired, and
   the log says why they were left alone.
2. A Node target that exits in the middle of a session: the agent keeps
   running its sessions, logs no failure for it and exits cleanly.
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
plugins = n.plugin_dir()

# --- 1. fake node processes
d = u.tempdir("ppfake-")
fake_bash = os.path.join(d, "bash-as", "node")
fake_sleep = os.path.join(d, "sleep-as", "node")
os.makedirs(os.path.dirname(fake_bash))
os.makedirs(os.path.dirname(fake_sleep))
shutil.copy(shutil.which("bash"), fake_bash)
shutil.copy(shutil.which("sleep"), fake_sleep)
trap_file = os.path.join(d, "got-usr1")
trapper = subprocess.Popen([fake_bash, "-c", "trap 'echo usr1 >> %s' USR1; while :; do sleep 0.1; done"
                            % trap_file])
sleeper = subprocess.Popen([fake_sleep, "300"])
time.sleep(0.5)
try:
    out = u.tempdir("ppout-")
    agent = n.Agent(out, plugins, "--nodejs-mode", "inspector",
                    "--pids", "%d,%d" % (trapper.pid, sleeper.pid), duration=1)
    got = agent.wait_sessions(3, 60)
    rc = agent.stop()
    u.check(rc == 0 and got >= 3, "agent ran 3 sessions over the fake nodes (rc %s, %d)" % (rc, got))
    u.check(trapper.poll() is None, "bash named node still alive")
    u.check(sleeper.poll() is None, "sleep named node still alive (SIGUSR1 would have killed it)")
    u.check(not os.path.exists(trap_file), "bash named node never received SIGUSR1")
    log = agent.log_text()
    u.check("pid %d: not profiled" % trapper.pid in log and "not Node.js" in log,
            "log says the bash copy is not Node.js")
    u.check("pid %d: not profiled" % sleeper.pid in log, "log says the sleep copy is not profiled")
    _, stacks = n.stacks_of(agent.profiles())
    u.check(any("[Profiling skipped:" in x for f, _ in stacks for x in f) or not stacks,
            "fake nodes are reported as skipped, not as errors")
finally:
    u.kill(trapper)
    u.kill(sleeper)

# --- 2. a target that exits mid-session
out = u.tempdir("ppout-")
node = n.spawn_node([os.path.join(n.WORKLOADS, "split.js")])
other = n.spawn_node([os.path.join(n.WORKLOADS, "split.js")])
try:
    agent = n.Agent(out, plugins, "--nodejs-mode", "inspector", "--pids",
                    "%d,%d" % (node.pid, other.pid), duration=2)
    got = agent.wait_sessions(1, 60)
    # the first may not have attached both yet: wait one more session
    got = agent.wait_sessions(2, 60)
    time.sleep(0.7)  # well inside session 3
    node.kill()
    node.wait()
    got = agent.wait_sessions(5, 60)
    alive = agent.p.poll() is None
    rc = agent.stop()
    u.check(alive and got >= 5, "agent kept running sessions after the target exited (%d)" % got)
    u.check(rc == 0, "agent exits 0 (rc %s)" % rc)
    log = agent.log_text()
    u.check("WARNING: polyprof.nodejs" not in log and "ERROR" not in log,
            "no warning or error logged for an exited target")
    last_header, last = n.stacks_of(agent.profiles()[-1:])
    u.check(n.frames_with(last, "heavyPath (") > 0, "the other Node process is still profiled")
    u.check(not any("[Profiling error" in x for f, _ in last for x in f),
            "no profiling error frames in the last session")
    u.check(other.poll() is None and not n.inspector_left(other.pid),
            "the surviving target runs on with its inspector closed")
finally:
    u.kill(node)
    u.kill(other)
u.finish()
