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
p = modeutil.start([sys.executable, script, "60"])
try:
    out = u.tempdir("ppmode-offpy-")
    r = u.run_agent(out, u.plugin_dir_with(perfutil.PLUGIN, plugin), "--mode", "cpu,offcpu",
                    "-f", "97",
                    duration=6, timeout=180)
    print(r.stderr[-2000:])
    u.check(r.returncode == 0, "agent exits 0")
    col = os.path.join(out, "last_profile.offcpu.col")
    u.check(os.path.exists(col), "offcpu profile written")
    header, stacks = u.parse_col(col)
    mine = [(f, c) for f, c in stacks if f[2:3] == ["block3to1"]]
    py_frames = sum(c for f, c in mine if any(x.endswith("_[p]") for x in f))
    total = sum(c for f, c in mine)
    print("block_3to1 off-CPU: %d us, %d us with Python frames" % (total, py_frames))
    u.check(total > 0 and py_frames == total,
            "every off-CPU stack of the process is Python's: perf's native ones replaced")
    lng = modeutil.weight(mine, "block_3to1.py", "wait_long")
    sht = modeutil.weight(mine, "block_3to1.py", "wait_short")
    share = 100.0 * lng / max(lng + sht, 1)
    print("wait_long %d us, wait_short %d us: %.1f %%" % (lng, sht, share))
    u.check(lng + sht > 0 and abs(share - 75) <= 5, "wait_long's share 75 +-5 (%.1f)" % share)
    header, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
    u.check(header["profile_type"] == "cpu", "the cpu profile is still written")
finally:
    u.kill(p)
u.finish()
