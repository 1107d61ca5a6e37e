"""Processes that exit before their session is written keep their name and
appid on every sample.

The agent (perf + python plugins, 49 Hz) runs one 8-second session. After it
samples, a 2-second Python script and a 1-second shell loop start and exit;
the session is written seconds later, when both are long gone. Their lines
must read `python3;appid: python: <script> (...)` and `sh`, never `:<pid>`
and never without the appid: the agent learnt them while they lived.
Real agent, real interpreter, real perf.
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402

PERF = os.path.join(u.PLUGIN_DIR, "perf.so")
PYTHON = os.path.join(u.PLUGIN_DIR, "python.so")
for so in (PERF, PYTHON):
    if not os.path.exists(so):
        u.skip("plugin not built: " + so)
if os.geteuid() != 0:
    u.skip("perf and reading another process need root")
PY = "/usr/bin/python3"
if not os.path.exists(PY):
    u.skip("no /usr/bin/python3")

SCRIPT = r"""
import time
def exited_hot_loop(deadline):
    n = 0
    while time.time() < deadline:
        n += 1
    return n
exited_hot_loop(time.time() + 2.0)
"""

work = u.tempdir()
script = os.path.join(work, "exits_early.py")
with open(script, "w") as f:
    f.write(SCRIPT)
out = u.tempdir()
cmd = u.agent_cmd(out, u.plugin_dir_with(PERF, PYTHON), "-f", "49", duration=8)
log = cmd[cmd.index("--log-file") + 1]
agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    deadline = time.time() + 60
    while time.time() < deadline and agent.poll() is None:
        if os.path.exists(log) and "polyprof.perf: sampling" in open(log, errors="replace").read():
            break
        time.sleep(0.05)
    py = subprocess.Popen([PY, script], cwd=work)
    sh = subprocess.Popen(["sh", "-c", "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done"])
    py.wait()
    sh.wait()
    exited_at = time.time()
    agent.wait(timeout=120)
    u.check(time.time() - exited_at > 1, "the session was written after both processes exited")
finally:
    if agent.poll() is None:
        agent.kill()
        agent.wait()

header, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
mine = [(f, c) for f, c in stacks if any("exited_hot_loop" in x for x in f)]
total = sum(c for _, c in mine)
print("%d samples in exited_hot_loop" % total)
u.check(total > 0, "the exited Python script's stacks are in the profile (%d samples)" % total)
expect = "appid: python: %s (%s)" % (script, script)
bad = [(f, c) for f, c in mine if f[2] != "python3" or len(f) < 4 or not f[3].startswith("appid: python: ")]
for f, c in bad[:3]:
    print("   %s" % ";".join(f[:5]))
u.check(not bad, "every sample of the exited script reads python3;appid: python: ... (%d do not)" % len(bad))
u.check(any(f[3] == expect for f, _ in mine), "its appid is '%s'" % expect)
lost = [f for f, _ in stacks if f[2].startswith(":") and f[2][1:].isdigit()
        and any("libpython" in x or "_PyEval" in x or "exited_hot_loop" in x for x in f)]
u.check(not lost, "no Python stack under ':<pid>' (%d)" % len(lost))
shs = sum(c for f, c in stacks if f[2] == "sh")
print("%d samples under sh" % shs)
u.check(shs > 0, "the exited shell loop's perf stacks are under 'sh' (%d)" % shs)
u.finish()
