"""--mode wall for PHP (mapped onto php.wall): sleep_burn.php burns 100 ms
in burner() and sleeps 100 ms in sleeper() in turn; the wall profile shows
both, the sleeper with about half the samples (35-65 %); --mode cpu (only
a process on a CPU is read) shows the burner only; with perf, --mode
cpu,offcpu gives the sleeper's PHP stack as the process's off-CPU time."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modeutil  # noqa: E402
import phputil as pu  # noqa: E402
import pputil as u  # noqa: E402

php = pu.require_php()
script = os.path.join(modeutil.WORKLOADS, "sleep_burn.php")
extra = ("--php-mode", "phpspy", "-f", "50")
modeutil.check_wall_and_cpu(pu.PHP_SO, [php, script, "60"], "sleep_burn.php", "sleeper",
                            "burner", *extra, pids=True)
p = modeutil.start([php, script, "30"])
try:
    rc, err, header, stacks = modeutil.profile(pu.PHP_SO, "wall", *extra, "--pids", str(p.pid))
    ws = modeutil.weight(stacks, "sleep_burn.php", "sleeper")
    wb = modeutil.weight(stacks, "sleep_burn.php", "burner")
    share = 100.0 * ws / max(ws + wb, 1)
    print("wall: sleeper %d, burner %d: %.1f %%" % (ws, wb, share))
    u.check(35 <= share <= 65, "wall: the sleeper's share about half (%.1f %%)" % share)
finally:
    u.kill(p)
# --mode cpu,offcpu: the waiting process's PHP stack as off-CPU time
modeutil.check_offcpu_runtime(pu.PHP_SO, [php, script, "30"], "php", "sleeper", "burner",
                              "_[php]", *extra)
u.finish()
