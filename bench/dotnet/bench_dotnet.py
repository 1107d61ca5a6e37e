"""Target slowdown under .NET profiling (standard library only).

Runs the test workload's bench mode (fixed work units on 2 threads, units/s
measured after a warm-up so attach costs are excluded) in interleaved rounds:
  baseline   - no profiler
  polyprof   - the agent, dotnet-trace mode, 100 Hz, 5 s sessions (rotating)
  polyprof-perfmap - the agent, perfmap mode (perf plugin at 100 Hz names
               managed frames from the map the runtime writes on request)
  dotnet-trace - Microsoft's dotnet-trace `collect` (default profile), if it can
               be found or installed from the NuGet feed; else says why
and prints one line per figure: median units/s and the ratio to the
baseline median of the same run.
Env: BENCH_SECONDS (default 20), BENCH_ROUNDS (default 3), BENCH_SESSION_S
(polyprof's -d, default 5: a session rotation every 5 s, harsher than the
default 60 s), BENCH_RATE_ENV=1 (one more row: polyprof on a target started
with DOTNET_EventPipeThreadSamplingRate=10, the runtime's own knob).
"""
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("PP_BUILD_DIR", os.path.join(SRC, "build"))
sys.path.insert(0, os.path.join(SRC, "tests", "workloads", "dotnet"))
import build_workload  # noqa: E402

SECONDS = int(os.environ.get("BENCH_SECONDS", "20"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
SESSION_S = int(os.environ.get("BENCH_SESSION_S", "5"))
RATE_ENV = os.environ.get("BENCH_RATE_ENV") == "1"
WARMUP = 4


def run_target(exe, attach=None, extra_env=None):
    env = build_workload.dotnet_env()
    env.update(extra_env or {})
    p = subprocess.Popen([exe, str(SECONDS), "bench", "2", str(WARMUP)], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, env=env)
    p.stdout.readline()  # ready
    prof = attach(p.pid) if attach else None
    out = p.stdout.read()
    p.wait()
    if prof:
        if prof.poll() is None:
            prof.send_signal(signal.SIGINT)
        try:
            prof.wait(timeout=60)
        except subprocess.TimeoutExpired:
            prof.kill()
            prof.wait()
    for line in out.split("\n"):
        if line.startswith("units_per_s"):
            f = line.split()
            return float(f[1]), float(f[3])
    raise RuntimeError("workload printed no result: %r" % out)


def polyprof(pid, mode="dotnet-trace"):
    d = tempfile.mkdtemp(prefix="ppbench-dotnet-")
    cmd = [os.path.join(BUILD, "polyprof"), "-o", d, "-d", str(SESSION_S), "-c", "-f", "100",
           "--plugin-dir", os.path.join(BUILD, "plugins"), "--dotnet-mode", mode,
           "--pids", str(pid), "--config", os.path.join(SRC, "tests", "integration", "empty.yaml"),
           "--pid-file", os.path.join(d, "pp.pid"), "--log-file", os.path.join(d, "pp.log"),
           "--no-flamegraph"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def find_dotnet_trace():
    for c in [shutil.which("dotnet-trace"), os.path.expanduser("~/.dotnet/tools/dotnet-trace"),
              os.path.join(BUILD, "dotnet-tools", "dotnet-trace")]:
        if c and os.path.exists(c):
            return c, None
    p = subprocess.run(["dotnet", "tool", "install", "--tool-path", os.path.join(BUILD, "dotnet-tools"),
                        "dotnet-trace"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=build_workload.dotnet_env(), timeout=300)
    exe = os.path.join(BUILD, "dotnet-tools", "dotnet-trace")
    if p.returncode == 0 and os.path.exists(exe):
        return exe, None
    last = [l for l in p.stdout.strip().split("\n") if l.strip()][-1:] or ["?"]
    return None, "cannot install from the NuGet feed: " + last[0][:160]


LOAD0 = open("/proc/loadavg").read().split()[0]


def main():
    out = build_workload.build(BUILD)
    exe = os.path.join(out, "PolyprofWorkload")
    dt, why = find_dotnet_trace()
    tmp = tempfile.mkdtemp(prefix="ppbench-dt-")

    def dotnet_trace(pid):
        # default profile (dotnet-common + sampled thread time), as a user
        # of the current tool gets; a fixed duration instead of a keypress
        return subprocess.Popen([dt, "collect", "-p", str(pid), "--duration",
                                 "00:00:00:%02d" % SECONDS, "-o", os.path.join(tmp, "t.nettrace")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL, env=build_workload.dotnet_env())

    # polyprof-perfmap: the runtime writes a perf map (EnablePerfMap over the
    # diagnostics IPC) and the perf plugin samples the target at 100 Hz; no
    # EventPipe sampler, so no runtime suspensions
    res = {"baseline": [], "polyprof": [], "polyprof-perfmap": [], "dotnet-trace": []}
    if RATE_ENV:
        res["polyprof+rate10"] = []
    for r in range(ROUNDS):
        res["baseline"].append(run_target(exe))
        res["polyprof"].append(run_target(exe, polyprof))
        res["polyprof-perfmap"].append(run_target(exe, lambda pid: polyprof(pid, "perfmap")))
        if dt:
            res["dotnet-trace"].append(run_target(exe, dotnet_trace))
        if RATE_ENV:
            res["polyprof+rate10"].append(
                run_target(exe, polyprof, {"DOTNET_EventPipeThreadSamplingRate": "10"}))
    base_w = statistics.median(x[0] for x in res["baseline"])
    base_c = statistics.median(x[1] for x in res["baseline"])
    print("dotnet bench: %d rounds x %d s (%d s warm-up), 2 worker threads, %d CPUs, polyprof -d %d, "
          "loadavg %s (start %s)" % (ROUNDS, SECONDS, WARMUP, os.cpu_count(), SESSION_S,
                                     open("/proc/loadavg").read().split()[0], LOAD0))
    print("  cpu = work units per CPU-second of the target process (all its threads): the cost")
    print("        profiling adds to the target, robust to other load; wall = units per second")
    if RATE_ENV:
        print("  polyprof+rate10: the target started with DOTNET_EventPipeThreadSamplingRate=10")
    for k in res:
        if not res[k]:
            print("%-16s n/a (%s)" % (k, why))
            continue
        c = statistics.median(x[1] for x in res[k])
        w = statistics.median(x[0] for x in res[k])
        print("%-16s cpu %8.3f units/cpu-s ratio %.3f (slowdown %+.1f%%) | wall %7.2f units/s ratio %.3f"
              "  runs cpu %s" % (k, c, c / base_c, (1 - c / base_c) * 100, w, w / base_w,
                                 ["%.2f" % x[1] for x in res[k]]))

if __name__ == "__main__":
    main()
