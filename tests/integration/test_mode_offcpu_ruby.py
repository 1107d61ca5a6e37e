"""--mode cpu,offcpu with perf and ruby: a Ruby thread blocking 3:1 in
wait_long and wait_short shows in the off-CPU profile with its Ruby frames
(the ruby plugin samples every thread on ticks in offcpu sessions; its
stacks of blocked threads, weighted by the sampling interval, replace
perf's native off-CPU stacks of the process),
wait_long holding 75 % (+-5 points) of the two functions' blocked time
(97 Hz: about 580 samples of the blocking thread)."""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modeutil  # noqa: E402
import perfutil  # noqa: E402
import pputil as u  # noqa: E402

perfutil.require_perf()
plugin = os.path.join(u.PLUGIN_DIR, "ruby.so")
if not os.path.exists(plugin):
    u.skip("ruby plugin not built: " + plugin)
ruby = shutil.which("ruby")
if not ruby:
    u.skip("ruby not installed")
script = os.path.join(modeutil.WORKLOADS, "block_3to1.rb")
modeutil.check_offcpu_split(plugin, [ruby, script, "60"], "block_3to1.rb", "_[rb]", "Ruby")
u.finish()
