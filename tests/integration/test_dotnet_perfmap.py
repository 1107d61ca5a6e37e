"""perfmap mode: the agent sends EnablePerfMap to a running .NET process (no
restart, no environment variable), which then writes /tmp/perf-<pid>.map
with its JIT-compiled methods, already-compiled code included; the perf
plugin names managed frames from that file. At stop the agent sends
DisablePerfMap and removes the map, which the runtime wrote at its request."""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil  # noqa: E402
from pputil import check, finish, skip  # noqa: E402

sys.path.insert(0, os.path.join(pputil.SRC, "tests", "workloads", "dotnet"))
import build_workload  # noqa: E402


def main():
    try:
        out = build_workload.build(pputil.BUILD)
    except FileNotFoundError as e:
        skip(str(e))
    env = build_workload.dotnet_env()
    env.pop("DOTNET_PerfMapEnabled", None)
    target = subprocess.Popen([os.path.join(out, "PolyprofWorkload"), "120", "all"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    target.stdout.readline()
    time.sleep(1)  # let the workload methods be JIT-compiled before the agent comes
    mapfile = "/tmp/perf-%d.map" % target.pid
    if os.path.exists(mapfile):
        os.unlink(mapfile)
    outdir = pputil.tempdir("ppdotnet-perfmap-")
    cmd = pputil.agent_cmd(outdir, pputil.PLUGIN_DIR, "--dotnet-mode", "perfmap", "-c",
                           "--pids", str(target.pid), duration=2)
    agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        while time.time() < deadline and agent.poll() is None and not os.path.exists(
                os.path.join(outdir, "last_profile.col")):
            time.sleep(0.1)
        # read while the agent runs: the map it caused goes when it stops
        check(os.path.exists(mapfile), "runtime wrote %s" % mapfile)
        text = open(mapfile, errors="replace").read() if os.path.exists(mapfile) else ""
        lines = [l for l in text.split("\n") if l]
        well_formed = all(len(l.split(" ", 2)) == 3 for l in lines[:200])
        check(len(lines) > 50 and well_formed, "map has '<addr> <size> <name>' lines (%d)" % len(lines))
        # methods compiled before EnablePerfMap are listed too (sendExisting)
        check(any("SplitWorker::SpinA" in l or "SplitWorker.SpinA" in l for l in lines),
              "already-compiled managed method listed (SplitWorker::SpinA)")
        check(any("GenericCompute" in l for l in lines), "generic method listed")
        agent.send_signal(signal.SIGINT)
        agent.wait(timeout=60)
        check(agent.returncode == 0, "agent exits 0")
        log = open(os.path.join(os.path.dirname(cmd[cmd.index("--log-file") + 1]), "polyprof.log")).read()
        check("perf map enabled" in log, "EnablePerfMap accepted")
        # after stop (DisablePerfMap) the map the agent caused is removed
        check(not os.path.lexists(mapfile), "perf map removed after the agent stopped")
        check(target.poll() is None, "target unaffected")
    finally:
        pputil.kill(agent)
        pputil.kill(target)
        if os.path.exists(mapfile):
            os.unlink(mapfile)
    finish()


if __name__ == "__main__":
    main()
