"""profiling.proc_scan_interval_ms: how soon a new process reaches its plugin.

A Python process started after the agent's first /proc scan is handed to
the python plugin by the next periodic scan. With the default interval
(1 s) that happens within the 6 s session, so the session's .col holds its
Python frames; with an interval longer than the session the process is
first seen at the scan between sessions, so a single session has none of
its frames (and is still written). The kernel's process events would
announce it within milliseconds of its exec whatever the interval, so the
long interval is measured with them off (--no-proc-events). Real agent, real interpreter, real
python plugin.
"""
import os
import sys
import subprocess
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import pyutil as py  # noqa: E402

if not os.path.exists(py.PLUGIN):
    u.skip("python plugin not built: " + py.PLUGIN)
if os.geteuid() != 0:
    u.skip("reading another process's memory needs root (CAP_SYS_PTRACE)")
found = py.interpreters()
if not found:
    u.skip("no CPython found")
exe = found[-1][1]
plugins = u.plugin_dir_with(py.PLUGIN)


def late_process_frames(interval_ms):
    out = u.tempdir()
    cmd = u.agent_cmd(out, plugins, "--python-mode", "wall", duration=6)
    log = cmd[cmd.index("--log-file") + 1]
    if interval_ms:
        cmd += ["--proc-scan-interval-ms", str(interval_ms), "--no-proc-events"]
    agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    target = None
    try:
        # the plugin starts right after the agent's first scan
        deadline = time.time() + 60
        while time.time() < deadline and agent.poll() is None:
            if os.path.exists(log) and "sampling Python processes" in open(log, errors="replace").read():
                break
            time.sleep(0.05)
        target, script = py.start(exe, "nested", seconds=30, idle=True)
        _, err = agent.communicate(timeout=120)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        if target:
            u.kill(target)
    u.check(agent.returncode == 0, "interval %s: agent exits 0%s" % (interval_ms or "default", "" if agent.returncode == 0 else " (%s)" % err[-300:]))
    col = os.path.join(out, "last_profile.col")
    u.check(os.path.exists(col), "interval %s: the session is written" % (interval_ms or "default"))
    if not os.path.exists(col):
        return 0
    _, stacks = u.parse_col(col)
    return sum(c for frames, c in stacks if any(script in f for f in frames))


n = late_process_frames(None)
u.check(n > 0, "default interval (1 s): the process started mid-session is profiled (%d samples with its frames)" % n)
n = late_process_frames(600000)
u.check(n == 0, "interval 600 s: the process started mid-session waits for the next session (%d samples)" % n)
u.finish()
