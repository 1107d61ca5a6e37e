"""nodejs plugin, v8 mode: a process named like Node that is not Node (a
copy of sleep named `node`) has no V8 metadata: it is skipped with a status
that says so, never profiled as a silent nothing."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "nodejs"))
import nodetest as n  # noqa: E402
import pputil as u  # noqa: E402
import v8cases  # noqa: E402

v8cases.require_plugin()
plugins = n.plugin_dir()
fake = os.path.join(u.tempdir("ppv8fake-"), "node")
shutil.copy(shutil.which("sleep"), fake)
p = subprocess.Popen([fake, "60"])
try:
    out = u.tempdir("ppout-")
    res = u.run_agent(out, plugins, "--nodejs-mode", "v8", "--pids", str(p.pid), duration=2)
    u.check(res.returncode == 0, "agent exits 0 (rc %d)" % res.returncode)
    _, stacks = n.stacks_of(sorted(f for f in (os.path.join(out, x) for x in os.listdir(out))
                                   if f.endswith(".col") and "profile_" in f))
    text = [";".join(f) for f, _ in stacks]
    want = "[Profiling skipped: nodejs: no V8 post-mortem metadata"
    u.check(any(want in t for t in text), "status %s...] (%s)" % (want, text[:3]))
    u.check(p.poll() is None, "the fake node still runs")
finally:
    u.kill(p)
u.finish()
