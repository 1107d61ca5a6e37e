"""--mode wall for Node.js in v8 mode (nodejs.include_idle: a context-switch
event per thread takes the stack as it leaves its CPU, its time off counted
in sampling periods): sleep_burn_sync.js burns 100 ms in burner() and
blocks 100 ms in sleeper() (Atomics.wait) in turn; the wall profile shows
both, the sleeper with about half the samples (35-65 %); --mode cpu shows
the burner only; with perf, --mode cpu,offcpu gives the time blocked in
sleeper() as JS stacks."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads",
                                "nodejs"))
import modeutil  # noqa: E402
import nodetest as n  # noqa: E402
import pputil as u  # noqa: E402

n.require_node()
plugin = os.path.join(u.PLUGIN_DIR, "nodejs.so")
script = os.path.join(modeutil.WORKLOADS, "sleep_burn_sync.js")
extra = ("--nodejs-mode", "v8", "-f", "50")
cmd = [n.NODE, script, "60"]
# frames read "sleeper (<file>:<line>)"
modeutil.check_wall_and_cpu(plugin, cmd, None, "sleeper (", "burner (", *extra, comm="node",
                            pids=True)
p = modeutil.start(cmd)
try:
    rc, err, header, stacks = modeutil.profile(plugin, "wall", *extra, "--pids", str(p.pid))
    ws = modeutil.weight_in(stacks, "node", "sleeper (")
    wb = modeutil.weight_in(stacks, "node", "burner (")
    share = 100.0 * ws / max(ws + wb, 1)
    print("wall: sleeper %d, burner %d: %.1f %%" % (ws, wb, share))
    u.check(35 <= share <= 65, "wall: the sleeper's share about half (%.1f %%)" % share)
finally:
    u.kill(p)
# --mode cpu,offcpu: the blocked time (not preemptions) as JS stacks
modeutil.check_offcpu_runtime(plugin, cmd, "node", "sleeper (", "burner (",
                              "sleep_burn_sync.js", *extra)
u.finish()
