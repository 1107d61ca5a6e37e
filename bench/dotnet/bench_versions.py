"""Target slowdown under .NET profiling, per .NET major (standard library only).

For each self-contained build of the test workload (.NET 8, 9, 10 under
/opt/polyprof-test/dotnet-<major>, made by scripts/install-deps.sh test),
runs its `bench` mode (fixed work units on BENCH_THREADS threads, counted after a
warm-up so attach costs are excluded), one process per configuration, all
at the same time, in several rounds:
  baseline      no profiler
  unprofiled-2  a second process without profiler: its ratio to the
                baseline is the noise of the measure (the same work side by
                side on a shared host)
  auto-11       polyprof's default .NET mode (`--dotnet-mode auto`: perf
                samples, the runtime writes its perf map) at the default
                rate (11 Hz)
  auto-100      the same at 100 Hz
  bursts-11, bursts-100  `--dotnet-mode dotnet-trace --dotnet-sampling
                bursts --no-perf`: what auto falls back to without perf
  continuous-11, continuous-100  `--dotnet-mode dotnet-trace` (the
                sampler on throughout; only with BENCH_EXTRA=continuous)
  dotnet-trace  Microsoft's `dotnet-trace collect` (default profile), installed
                as a .NET tool from the NuGet feed into <build>/dotnet-tools
Each polyprof is an agent of its own with --pids; with perf, as root, it
samples every CPU and keeps that pid's samples, so its sampling interrupts
land on the baseline process too (a few microseconds each, at most
2 x rate a second per CPU here): what sets auto apart is what only its
target pays, the perf map the runtime writes.
The processes of a round run side by side, so the load of a shared
machine hits all of them alike (timed one after the other, the load
swings between runs moved the ratios by +-15 %). Printed per major
and configuration: the median units per CPU-second of the target (all its
threads) and, per round, its ratio to that round's baseline, with the
median and the spread (min..max) of those ratios.

Env: BENCH_SECONDS (20), BENCH_ROUNDS (3), BENCH_MAJORS ("8,9,10"),
BENCH_EXTRA ("bursts": the bursts rows; "continuous" adds those; "" only
the baseline, auto and dotnet-trace rows),
BENCH_THREADS (1: worker threads per target; with two, the
shared counter's cache line moves between cores or not depending on the
scheduling, which moved units/cpu-s by +-30 % between processes),
PP_BUILD_DIR (the build with polyprof and its plugins).
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
MAJORS = os.environ.get("BENCH_MAJORS", "8,9,10").split(",")
EXTRA = os.environ.get("BENCH_EXTRA", "bursts").split(",")
THREADS = int(os.environ.get("BENCH_THREADS", "1"))
WARMUP = 4
ROOT = "/opt/polyprof-test"


def run_together(exe, attaches):
    """Runs one target per configuration at the same time (same load, same
    moment: the ratios are not skewed by the shared machine's load changing
    between runs) and returns each one's units per CPU-second."""
    env = build_workload.dotnet_env()
    procs = [subprocess.Popen([exe, str(SECONDS), "bench", str(THREADS), str(WARMUP)],
                              stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, env=env) for _ in attaches]
    for p in procs:
        p.stdout.readline()  # ready
    profs = [a(p.pid) if a else None for a, p in zip(attaches, procs)]
    outs = [p.stdout.read() for p in procs]
    for p in procs:
        p.wait()
        # the perf map a perf-based mode had the runtime write outlives it
        try:
            os.unlink("/tmp/perf-%d.map" % p.pid)
        except FileNotFoundError:
            pass
    for prof in profs:
        if prof and prof.poll() is None:
            prof.send_signal(signal.SIGINT)
    for prof in profs:
        if not prof:
            continue
        try:
            prof.wait(timeout=60)
        except subprocess.TimeoutExpired:
            prof.kill()
            prof.wait()
    res = []
    for out in outs:
        line = [l for l in out.split("\n") if l.startswith("units_per_s")]
        if not line:
            raise RuntimeError("workload printed no result: %r" % out)
        res.append(float(line[0].split()[3]))
    return res


def polyprof(hz, mode, *extra):
    def attach(pid):
        d = tempfile.mkdtemp(prefix="ppbench-dotnet-")
        cmd = [os.path.join(BUILD, "polyprof"), "-o", d, "-f", str(hz),
               "--plugin-dir", os.path.join(BUILD, "plugins"), "--dotnet-mode", mode,
               "--no-python", "--no-ruby", "--no-java", "--pids", str(pid), "--config", os.path.join(SRC, "tests", "integration", "empty.yaml"),
               "--pid-file", os.path.join(d, "pp.pid"), "--log-file", os.path.join(d, "pp.log"),
               "--no-flamegraph"] + list(extra)
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return attach


def find_dotnet_trace():
    tools = os.path.join(BUILD, "dotnet-tools")
    exe = os.path.join(tools, "dotnet-trace")
    if not os.path.exists(exe):
        subprocess.run(["dotnet", "tool", "install", "--tool-path", tools, "dotnet-trace"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=build_workload.dotnet_env(), timeout=300)
    return exe if os.path.exists(exe) else None


def main():
    exes = {m: build_workload.published(ROOT, m) for m in MAJORS}
    missing = [m for m, e in exes.items() if not e]
    if missing:
        print("SKIPPED: no self-contained workload for .NET %s (scripts/install-deps.sh test)"
              % ", ".join(missing))
        return
    dt = find_dotnet_trace()
    tmp = tempfile.mkdtemp(prefix="ppbench-dt-")

    def dotnet_trace(pid):
        return subprocess.Popen([dt, "collect", "-p", str(pid), "--duration",
                                 "00:00:00:%02d" % SECONDS, "-o", os.path.join(tmp, "t.nettrace")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL, env=build_workload.dotnet_env())

    configs = [("baseline", None), ("unprofiled-2", None), ("auto-11", polyprof(11, "auto")),
               ("auto-100", polyprof(100, "auto"))]
    trace = ("dotnet-trace", "--no-perf")
    if "bursts" in EXTRA:
        configs += [("bursts-11", polyprof(11, *trace, "--dotnet-sampling", "bursts")),
                    ("bursts-100", polyprof(100, *trace, "--dotnet-sampling", "bursts"))]
    if "continuous" in EXTRA:
        configs += [("continuous-11", polyprof(11, *trace)),
                    ("continuous-100", polyprof(100, *trace))]
    if dt:
        configs.append(("dotnet-trace", dotnet_trace))
    res = {m: {k: [] for k, _ in configs} for m in MAJORS}
    load0 = open("/proc/loadavg").read().split()[0]
    t0 = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    loads = []
    for _ in range(ROUNDS):
        for m in MAJORS:
            loads.append(float(open("/proc/loadavg").read().split()[0]))
            for (k, _), v in zip(configs, run_together(exes[m], [a for _, a in configs])):
                res[m][k].append(v)
    loads.append(float(open("/proc/loadavg").read().split()[0]))
    print("dotnet bench per version: %d rounds x %d s (%d s warm-up), %d worker thread(s), %d CPUs, "
          "%s UTC, loadavg %s at the start, %.2f..%.2f during the run%s"
          % (ROUNDS, SECONDS, WARMUP, THREADS, os.cpu_count(), t0, load0, min(loads), max(loads),
             "" if dt else ", dotnet-trace not installable"))
    print("  units/cpu-s = work units per CPU-second of the target (all its threads); ratio per "
          "round against that round's baseline")
    for m in MAJORS:
        base = res[m]["baseline"]
        for k, _ in configs:
            runs = res[m][k]
            ratios = [r / b for r, b in zip(runs, base)]
            print(".NET %-3s %-14s units/cpu-s %8.3f  ratio median %.3f (cost %+.1f%%) spread "
                  "%.3f..%.3f  runs %s" % (m, k, statistics.median(runs), statistics.median(ratios),
                                           (1 - statistics.median(ratios)) * 100, min(ratios),
                                           max(ratios), " ".join("%.2f" % x for x in runs)))


if __name__ == "__main__":
    main()
