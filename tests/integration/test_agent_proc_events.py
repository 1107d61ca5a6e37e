"""Target discovery from the kernel's process events connector.

A process started after the agent, first a shell that becomes Python by
exec() a moment later, must reach the python plugin within the session:
- with the connector (the agent is root in the initial namespaces) and the
  /proc safety-net listing pushed out of the session, so only the fork and
  exec events can have announced it;
- with the connector turned off (--no-proc-events), by the per-second
  /proc listing instead;
- after events were lost: a storm of short-lived threads overflows the
  socket's queue while the agent is stopped (SIGSTOP: it drains the socket
  within milliseconds when it runs), the agent says so and lists /proc at
  once, and a Python process started during the storm is still profiled.
Real agent, real interpreter, real python plugin.
"""
import os
import signal
import sys
import subprocess
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import pyutil as py  # noqa: E402

if not os.path.exists(py.PLUGIN):
    u.skip("python plugin not built: " + py.PLUGIN)
if os.geteuid() != 0:
    u.skip("the connector and reading another process's memory need root")
found = py.interpreters()
if not found:
    u.skip("no CPython found")
exe = found[-1][1]
plugins = u.plugin_dir_with(py.PLUGIN)

# a shell that execs the interpreter once the agent has seen it as a shell
LATE_EXEC = ("sh", "-c", 'sleep 1.5; exec "$0" "$@"')

STORM = r"""
import threading, time
for _ in range(30000):
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()
print("storm over", flush=True)
time.sleep(60)
"""


def run(label, *extra, storm=False, duration=8):
    out = u.tempdir()
    cmd = u.agent_cmd(out, plugins, "--python-mode", "wall", *extra, duration=duration)
    log = cmd[cmd.index("--log-file") + 1]
    agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    procs = []
    script = None
    try:
        deadline = time.time() + 60
        while time.time() < deadline and agent.poll() is None:
            if os.path.exists(log) and "sampling Python processes" in open(log, errors="replace").read():
                break
            time.sleep(0.05)
        if storm:
            os.kill(agent.pid, signal.SIGSTOP)
            try:
                s = subprocess.Popen([exe, "-c", STORM], stdout=subprocess.PIPE, text=True)
                procs.append(s)
                target, script = py.start(exe, "nested", seconds=30, idle=True, wait=False)
                procs.append(target)
                s.stdout.readline()
                py.wait_ready([target])
            finally:
                os.kill(agent.pid, signal.SIGCONT)
        else:
            target, script = py.start(exe, "nested", seconds=30, idle=True, prefix=LATE_EXEC)
            procs.append(target)
        _, err = agent.communicate(timeout=120)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        for p in procs:
            u.kill(p)
    text = open(log, errors="replace").read() if os.path.exists(log) else ""
    u.check(agent.returncode == 0, "%s: agent exits 0%s" % (label, "" if agent.returncode == 0 else " (%s)" % err[-300:]))
    col = os.path.join(out, "last_profile.col")
    n = 0
    if os.path.exists(col):
        _, stacks = u.parse_col(col)
        n = sum(c for frames, c in stacks if any(script in f and f.endswith("_[p]") for f in frames))
    return text, n


text, n = run("connector", "--proc-rescan-interval-s", "86400")
u.check("following the kernel's process events" in text, "connector: the agent follows process events")
u.check(n > 0, "connector: a process started and exec'd into Python after the agent is profiled within the session (%d samples)" % n)

text, n = run("fallback", "--no-proc-events")
u.check("process events off: listing /proc" in text, "fallback: the switch turns the connector off and says so")
u.check(n > 0, "fallback: the per-second listing finds the late exec'd process too (%d samples)" % n)

text, n = run("lost events", "--proc-rescan-interval-s", "86400", "--proc-scan-interval-ms", "3000",
              storm=True, duration=10)
u.check("process events were lost: listing /proc now" in text,
        "lost events: a thread storm overflows the queue and the agent lists /proc at once")
u.check(n > 0, "lost events: the process started during the storm is profiled (%d samples)" % n)
u.finish()
