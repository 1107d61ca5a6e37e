"""--mode cpu,offcpu with perf and python: a Python thread blocking 3:1 in
wait_long and wait_short shows in the off-CPU profile with its Python
frames (the python plugin's stacks of blocked threads, weighted by the
sampling interval, replace perf's native off-CPU stacks of the process),
wait_long holding 75 % (+-5 points) of the two functions' blocked time
(97 Hz: about 580 samples of the blocking thread)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modeutil  # noqa: E402
import perfutil  # noqa: E402
import pputil as u  # noqa: E402

perfutil.require_perf()
plugin = os.path.join(u.PLUGIN_DIR, "python.so")
if not os.path.exists(plugin):
    u.skip("python plugin not built: " + plugin)
script = os.path.join(modeutil.WORKLOADS, "block_3to1.py")
modeutil.check_offcpu_split(plugin, [sys.executable, script, "60"], "block_3to1.py", "_[p]", "Python")
u.finish()
