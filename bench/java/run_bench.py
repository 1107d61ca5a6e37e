#!/usr/bin/env python3
"""bench/java: throughput of a CPU-bound Java workload (Bench.java) without
profiling, with polyprof's java plugin at 100 Hz, and with the JDK's own
Flight Recorder (jcmd JFR.start settings=profile: Java samples every 10 ms,
i.e. also 100 Hz), all in one JVM and one run.

The phases alternate (off, polyprof, JFR, off, ...) for several rounds so
slow drifts of a shared machine hit every mode alike; each mode's figure is
the median of its phases' mean ops/s, the first seconds after a switch
being ignored. polyprof runs as a separate process (continuous sessions, the
JVM's pid only) and its own CPU time is part of what the workload loses.

Usage: run_bench.py [--rounds N] [--phase-seconds S] [--threads T]
Prints one line per figure and the slowdowns relative to "off".
"""
import argparse
import os
import shutil
import signal
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
    total = warmup + a.rounds * 3 * a.phase_seconds + 10
    jvm = subprocess.Popen(["java", "-Xms256m", "-Xmx256m", "-cp", work, "Bench", str(a.threads), str(total)],
                           stdout=subprocess.PIPE, text=True)
    samples = []  # (epoch ms, ops)

    def reader():
        for line in jvm.stdout:
            parts = line.split()
            if len(parts) == 2:
                samples.append((int(parts[0]), int(parts[1])))
    threading.Thread(target=reader, daemon=True).start()
    time.sleep(warmup)

    phases = []  # (mode, start ms, end ms)
    for r in range(a.rounds):
        order = ["off", "polyprof", "jfr"] if r % 2 == 0 else ["jfr", "polyprof", "off"]
        for mode in order:
            proc = None
            if mode == "polyprof":
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
            elif mode == "jfr":
                subprocess.run(["jcmd", str(jvm.pid), "JFR.stop", "name=bench"], stdout=subprocess.DEVNULL, check=True)
            phases.append((mode, t0, t1))
            time.sleep(2)
    jvm.kill()
    jvm.wait()

    skip_ms = 4000  # attach, JIT settling, JFR start-up
    result = {}
    for mode in ("off", "polyprof", "jfr"):
        means = []
        for m, t0, t1 in phases:
            if m != mode:
                continue
            vals = [ops for ts, ops in samples if t0 + skip_ms <= ts <= t1]
            if vals:
                means.append(statistics.mean(vals))
        result[mode] = statistics.median(means)
        print("java_bench_%s_ops_per_s %.1f  (phases: %s)" % (mode, result[mode], ", ".join("%.0f" % x for x in means)))
    for mode in ("polyprof", "jfr"):
        print("java_bench_%s_slowdown_pct %.2f" % (mode, 100.0 * (1 - result[mode] / result["off"])))
    ratio = (1 - result["polyprof"] / result["off"]) - (1 - result["jfr"] / result["off"])
    print("java_bench_polyprof_minus_jfr_slowdown_pct %.2f" % (100.0 * ratio))
    return 0


if __name__ == "__main__":
    sys.exit(main())
