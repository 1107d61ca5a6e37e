#!/usr/bin/env python3
"""bench/java: throughput of a CPU-bound Java workload (Bench.java) without
profiling, with polyprof's java plugin at 100 Hz, and with the JDK's own
Flight Recorder (jcmd JFR.start settings=profile: Java samples every 10 ms,
i.e. also 100 Hz), all in one JVM and one run.

The phases alternate (off, polyprof, JFR, off, ...) for several rounds so
slow drifts of a shared machine hit every mode alike; the first seconds
after a switch are ignored. Two figures per mode:

- ops per JVM CPU-second: work done per unit of CPU the JVM consumed. This
  is what in-JVM profiling costs (signal handling, stack walks, the agent's
  or JFR's threads) and, unlike wall-clock throughput, it does not move when
  other processes steal the CPU. The headline slowdown uses it (median of
  the phases).
- ops per wall second, for reference (noisy on a shared machine).

polyprof runs as a separate process (continuous 10 s sessions, the JVM's
pid only); its own CPU (agent + workers, from getrusage of its process
tree) is reported separately as a share of one core.

Usage: run_bench.py [--rounds N] [--phase-seconds S] [--threads T]
Prints one line per figure and the slowdowns relative to "off".
"""
import argparse
import os
import re
import shutil
import signal
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("PP_BUILD_DIR", os.path.join(SRC, "build"))
AGENT = os.environ.get("PP_AGENT", os.path.join(BUILD, "polyprof"))
PLUGIN = os.path.join(os.environ.get("PP_PLUGIN_DIR", os.path.join(BUILD, "plugins")), "java.so")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--phase-seconds", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--frequency", type=int, default=100)
    a = ap.parse_args()
    for tool in ("java", "javac", "jcmd"):
        if not shutil.which(tool):
            print("SKIPPED: %s not found" % tool)
            return 77
    if os.geteuid() != 0:
        print("SKIPPED: needs root")
        return 77
    work = tempfile.mkdtemp(prefix="ppbench-java-")
    subprocess.run(["javac", "-d", work, os.path.join(HERE, "Bench.java")], check=True)
    plugdir = os.path.join(work, "plugins")
    os.makedirs(plugdir)
    os.symlink(PLUGIN, os.path.join(plugdir, "java.so"))
    warmup = 20
    # phases plus the 2 s pauses and the start/stop of polyprof and jcmd
    total = warmup + a.rounds * 3 * (a.phase_seconds + 12) + 30
    jvm = subprocess.Popen(["java", "-Xms256m", "-Xmx256m", "-cp", work, "Bench", str(a.threads), str(total)],
                           stdout=subprocess.PIPE, text=True)
    samples = []  # (epoch ms, ops)
    cpu = []  # (epoch ms, JVM utime+stime in clock ticks)
    hz = os.sysconf("SC_CLK_TCK")

    def cpu_now():
        with open("/proc/%d/stat" % jvm.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    def cpu_sampler():
        while jvm.poll() is None:
            try:
                cpu.append((time.time() * 1000, cpu_now()))
            except OSError:
                return
            time.sleep(0.25)

    def reader():
        for line in jvm.stdout:
            parts = line.split()
            if len(parts) == 2:
                samples.append((int(parts[0]), int(parts[1])))
    threading.Thread(target=reader, daemon=True).start()
    threading.Thread(target=cpu_sampler, daemon=True).start()
    time.sleep(warmup)

    phases = []  # (mode, start ms, end ms)
    pp_cpu = []  # polyprof's CPU per phase, share of one core
    for r in range(a.rounds):
        order = ["off", "polyprof", "jfr"] if r % 2 == 0 else ["jfr", "polyprof", "off"]
        for mode in order:
            proc = None
            if mode == "polyprof":
                ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                out = os.path.join(work, "out")
                proc = subprocess.Popen([AGENT, "-c", "-d", "10", "-f", str(a.frequency), "--pids", str(jvm.pid),
                                         "--plugin-dir", plugdir, "-o", out, "--java-min-age-ms", "0",
                                         "--config", os.path.join(SRC, "tests", "integration", "empty.yaml"),
                                         "--pid-file", os.path.join(work, "pp.pid"),
                                         "--log-file", os.path.join(work, "pp.log")],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            elif mode == "jfr":
                subprocess.run(["jcmd", str(jvm.pid), "JFR.start", "name=bench", "settings=profile",
                                "filename=%s/bench-%d.jfr" % (work, r)], stdout=subprocess.DEVNULL, check=True)
            t0 = time.time() * 1000
            time.sleep(a.phase_seconds)
            t1 = time.time() * 1000
            if proc:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=60)
                ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                pp_cpu.append((ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime) / ((t1 - t0) / 1000.0))
            elif mode == "jfr":
                subprocess.run(["jcmd", str(jvm.pid), "JFR.stop", "name=bench"], stdout=subprocess.DEVNULL, check=True)
            phases.append((mode, t0, t1))
            time.sleep(2)
    jvm.kill()
    jvm.wait()

    skip_ms = 4000  # attach, JIT settling, JFR start-up

    def cpu_at(t):
        best = min(cpu, key=lambda c: abs(c[0] - t))
        return best[1]

    per_cpu, per_wall = {}, {}
    for mode in ("off", "polyprof", "jfr"):
        eff, wall = [], []
        for m, t0, t1 in phases:
            if m != mode:
                continue
            win = [(ts, ops) for ts, ops in samples if t0 + skip_ms <= ts <= t1]
            if len(win) < 3:
                continue
            # ops lines cover the second before their timestamp
            start, end = win[0][0] - 1000, win[-1][0]
            ticks = cpu_at(end) - cpu_at(start)
            ops = sum(o for _, o in win)
            if ticks > 0:
                eff.append(ops / (ticks / hz))
            wall.append(ops / ((end - start) / 1000.0))
        per_cpu[mode] = statistics.median(eff)
        per_wall[mode] = statistics.median(wall)
        print("java_bench_%s_ops_per_cpu_s %.1f  (phases: %s)" % (mode, per_cpu[mode], ", ".join("%.0f" % x for x in eff)))
        print("java_bench_%s_ops_per_wall_s %.1f  (phases: %s)" % (mode, per_wall[mode], ", ".join("%.0f" % x for x in wall)))
    for mode in ("polyprof", "jfr"):
        print("java_bench_%s_slowdown_pct %.2f" % (mode, 100.0 * (1 - per_cpu[mode] / per_cpu["off"])))
        print("java_bench_%s_wall_slowdown_pct %.2f" % (mode, 100.0 * (1 - per_wall[mode] / per_wall["off"])))
    # a difference, not a ratio: either slowdown can be ~0 or negative in noise
    print("java_bench_polyprof_minus_jfr_slowdown_pct %.2f" % (
        100.0 * (per_cpu["jfr"] - per_cpu["polyprof"]) / per_cpu["off"]))
    # steady state: sessions after the first (which pays process start-up,
    # plugin probing and the attach) as the agent itself reports them
    steady = []
    try:
        with open(os.path.join(work, "pp.log")) as f:
            for line in f:
                m = re.search(r"session (\d+): .*agent CPU [0-9.]+ s \(([0-9.]+)% of a core", line)
                if m and int(m.group(1)) >= 2:
                    steady.append(float(m.group(2)))
    except OSError:
        pass
    if steady:
        print("java_bench_polyprof_steady_cpu_pct_of_core %.2f  (%d sessions after the first)" % (
            statistics.median(steady), len(steady)))
    print("java_bench_polyprof_process_cpu_pct_of_core %.2f  (phases, incl. start-up: %s)" % (
        100.0 * statistics.median(pp_cpu), ", ".join("%.1f" % (100 * x) for x in pp_cpu)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
