"""The php plugin merged with perf: PHP pids show PHP frames.

With perf as the system-wide base, the core replaces perf's native stacks
of the pids the php plugin covers by the PHP stacks (scaled to perf's
counts). Skips when the perf plugin is not built (it lands on main later).
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import phputil as pu  # noqa: E402

php = pu.require_php()
perf = os.path.join(u.PLUGIN_DIR, "perf.so")
if not os.path.exists(perf):
    u.skip("perf plugin not built (%s): nothing to merge with" % perf)
plugins = u.plugin_dir_with(pu.PHP_SO, perf)
busy_php = os.path.join(pu.WORKLOADS, "busy.php")
proc = u.spawn([php, busy_php, "120"])
sleeper = u.spawn(["sleep", "120"])
try:
    time.sleep(0.5)
    out = u.tempdir("ppout-")
    r, log = pu.run_agent_logged(out, plugins, "--php-mode", "phpspy", "-f", "50", duration=5)
    u.check(r.returncode == 0, "agent exits 0 (got %d; stderr: %s)" % (r.returncode, r.stderr[-1500:]))
    _, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
    with open("/proc/%d/comm" % proc.pid) as f:
        comm = f.read().strip()
    mine = [(f, c) for f, c in stacks if len(f) > 2 and f[2] == comm]
    with_php = sum(c for f, c in mine if any(x.startswith("heavy_a ") and x.endswith("_[php]") for x in f))
    u.check(with_php > 0, "the php process shows PHP frames (heavy_a ..._[php]) in the merged profile: %d" % with_php)
    others = [f for f, _ in stacks if len(f) > 2 and f[2] != comm and any(x.endswith("_[php]") for x in f)]
    u.check(not others, "no PHP frames on non-PHP processes: %s" % others[:2])
finally:
    u.kill(proc)
    u.kill(sleeper)
u.finish()
