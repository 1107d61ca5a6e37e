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
p = modeutil.start([ruby, script, "60"])
try:
    out = u.tempdir("ppmode-offrb-")
    r = u.run_agent(out, u.plugin_dir_with(perfutil.PLUGIN, plugin), "--mode", "cpu,offcpu",
                    "-f", "97",
                    duration=6, timeout=180)
    print(r.stderr[-2000:])
    u.check(r.returncode == 0, "agent exits 0")
    col = os.path.join(out, "last_profile.offcpu.col")
    u.check(os.path.exists(col), "offcpu profile written")
    header, stacks = u.parse_col(col)
    mine = [(f, c) for f, c in stacks if f[2:3] == ["block3to1"]]
    rb_frames = sum(c for f, c in mine if any(x.endswith("_[rb]") for x in f))
    total = sum(c for f, c in mine)
    print("block_3to1 off-CPU: %d us, %d us with Ruby frames" % (total, rb_frames))
    u.check(total > 0 and rb_frames == total,
            "every off-CPU stack of the process is Ruby's: perf's native ones replaced")
    lng = modeutil.weight(mine, "block_3to1.rb", "wait_long")
    sht = modeutil.weight(mine, "block_3to1.rb", "wait_short")
    share = 100.0 * lng / max(lng + sht, 1)
    print("wait_long %d us, wait_short %d us: %.1f %%" % (lng, sht, share))
    u.check(lng + sht > 0 and abs(share - 75) <= 5, "wait_long's share 75 +-5 (%.1f)" % share)
    header, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
    u.check(header["profile_type"] == "cpu", "the cpu profile is still written")
finally:
    u.kill(p)
u.finish()
