"""--mode wall for .NET (mapped onto dotnet.wall): the workload's split
thread burns while its main thread sleeps in Thread.Sleep; the wall profile
holds both, the cpu profile the burner and at most a sliver of the
sleeper. Sessions after the first (which includes the attach) are judged."""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads",
                                "dotnet"))
import pputil as u  # noqa: E402
from pputil import check  # noqa: E402
import build_workload  # noqa: E402

if os.geteuid() != 0:
    u.skip("attaching to another user's runtime needs root")
plugin = os.path.join(u.PLUGIN_DIR, "dotnet.so")
if not os.path.exists(plugin):
    u.skip("dotnet plugin not built: " + plugin)
try:
    out = build_workload.build(u.BUILD)
except FileNotFoundError as e:
    u.skip(str(e))


def sessions(mode, pid):
    outdir = u.tempdir("ppmode-dotnet-")
    cmd = u.agent_cmd(outdir, u.plugin_dir_with(plugin), "--dotnet-mode", "dotnet-trace", "--mode",
                      mode, "-c", "-f", "100", "--pids", str(pid), duration=3)
    agent = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and agent.poll() is None:
            cols = [f for f in os.listdir(outdir) if f.startswith("profile_") and f.endswith(".col")]
            if len(cols) >= 3:
                break
            time.sleep(0.5)
        agent.send_signal(signal.SIGINT)
        log, _ = agent.communicate(timeout=60)
    finally:
        u.kill(agent)
    cols = sorted(f for f in os.listdir(outdir) if f.startswith("profile_") and f.endswith(".col"))
    stacks = []
    for c in cols[1:]:
        header, st = u.parse_col(os.path.join(outdir, c))
        check(header.get("profile_type") == mode, "%s: header type %s" % (mode, mode))
        stacks += st
    if not stacks:
        print(log[-3000:])
    return stacks


def weight(stacks, pred):
    return sum(c for f, c in stacks if any(pred(x) for x in f))


def sleeping(x):
    return "Thread.Sleep" in x


def burning(x):
    return "SplitWorker" in x


p = subprocess.Popen([os.path.join(out, "PolyprofWorkload"), "120", "split"],
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                     env=build_workload.dotnet_env())
try:
    line = p.stdout.readline()
    check(line.startswith("ready"), "workload ready")
    wall = sessions("wall", p.pid)
    ws, wb = weight(wall, sleeping), weight(wall, burning)
    print("wall: Thread.Sleep %d, SplitWorker %d" % (ws, wb))
    check(ws > 0 and wb > 0, "wall: the sleeping main thread (%d) and the burner (%d)" % (ws, wb))
    cpu = sessions("cpu", p.pid)
    cs, cb = weight(cpu, sleeping), weight(cpu, burning)
    print("cpu: Thread.Sleep %d, SplitWorker %d" % (cs, cb))
    check(cb > 0, "cpu: the burner (%d)" % cb)
    check(cs <= 0.05 * max(cb, 1), "cpu: the sleeper at most a sliver (%d)" % cs)
finally:
    u.kill(p)
u.finish()
