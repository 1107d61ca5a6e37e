"""--mode wall for Python (mapped onto python.mode wall): a sleeping and a
burning thread both show; --mode cpu shows the burner only."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modeutil  # noqa: E402
import pputil as u  # noqa: E402
import pyutil  # noqa: E402

plugin = os.path.join(u.PLUGIN_DIR, "python.so")
if not os.path.exists(plugin):
    u.skip("python plugin not built: " + plugin)
if os.geteuid() != 0:
    u.skip("reading another process's memory needs root (CAP_SYS_PTRACE)")
script = os.path.join(modeutil.WORKLOADS, "sleep_burn.py")
modeutil.check_wall_and_cpu(plugin, [sys.executable, script, "60"], "sleep_burn.py", "sleeper",
                            "burner")
u.finish()
