#!/usr/bin/env python3
"""Profile types: the agent's CPU per --mode, and off-CPU against perf.

Workloads (all running through every measurement): blocker (a thread
blocking 3:1 in two functions plus a burner, tests/workloads/perf), a
Python sleeper+burner (tests/workloads/modes), and optionally a
context-switch storm (pingpong.c: two processes bouncing a byte through
pipes, ~10^5 switches a second).

For each mode the agent runs one session of -d seconds with the perf and
python plugins at the default rate (11 Hz); its own session line gives the
agent CPU (core + workers). Off-CPU is then compared with `perf record -e
sched:sched_switch -g -a` over the same interval with the same workloads
(tracefs is mounted for it if needed and unmounted after): the perf record
process's CPU (record only, no perf script) and the size of what it wrote,
against the agent's CPU for offcpu alone and its drop counters.

Java allocation profiling: AllocRate (4 KiB arrays in a loop, rounds per
second printed each second) alone, under the agent's --mode cpu,alloc
(java plugin, default interval), and under JFR's allocation sampling
(-XX:StartFlightRecording, settings=profile); each run --java-seconds
long, its rate the median of the seconds after the first third.

Usage: sudo bench/modes/run.py [-d 20] [--storm] [--java] [--build build]
"""
import argparse
import glob
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def agent_run(build, plugdir, out, mode, dur):
    for f in glob.glob(os.path.join(out, "*")):
        os.unlink(f)
    r = subprocess.run([os.path.join(build, "polyprof"), "-o", out, "-d", str(dur), "--plugin-dir",
                        plugdir, "--config", os.path.join(SRC, "tests/integration/empty.yaml"),
                        "--mode", mode, "--pid-file", os.path.join(out, "..", "pid")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=dur + 120)
    m = re.search(r"agent CPU ([0-9.]+) s", r.stderr)
    if not m:
        print(r.stderr[-1500:])
    counters = {}
    for col in glob.glob(os.path.join(out, "profile_*.col")):
        with open(col) as f:
            h = json.loads(f.readline()[2:])
        perf = h.get("polyprof", {}).get("perf", {}).get("counters", {})
        counters.update({k: v for k, v in perf.items() if k.startswith("offcpu") or k == "lost_samples"})
    return (float(m.group(1)) if m else float("nan")), counters


def perf_record(dur, out):
    mounted = False
    if not os.path.exists("/sys/kernel/tracing/events/sched/sched_switch"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], check=False)
        mounted = True
    data = os.path.join(out, "perf.data")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(["perf", "record", "-q", "-e", "sched:sched_switch", "-g", "-a", "-o", data,
                        "--", "sleep", str(dur)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    size = os.path.getsize(data) if os.path.exists(data) else 0
    # what turns the records into stacks (symbols) costs as much again
    b2 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(["perf", "script", "-i", data], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    a2 = resource.getrusage(resource.RUSAGE_CHILDREN)
    script_cpu = (a2.ru_utime - b2.ru_utime) + (a2.ru_stime - b2.ru_stime)
    if mounted:
        subprocess.run(["umount", "/sys/kernel/tracing"], check=False)
    return cpu, script_cpu, size, r.returncode, r.stderr.strip()[-300:]


def java_rates(cmd_prefix, classes, secs, agent=None):
    p = subprocess.Popen(cmd_prefix + ["-cp", classes, "AllocRate", str(secs)],
                         stdout=subprocess.PIPE, text=True)
    ag = None
    if agent:
        time.sleep(1.5)
        ag = subprocess.Popen(agent + ["--pids", str(p.pid)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    rates = [int(l.split()[1]) for l in p.stdout if l.startswith("rate ")]
    p.wait()
    if ag:
        ag.terminate()
        ag.wait()
    tail = sorted(rates[len(rates) // 3:])
    return tail[len(tail) // 2] if tail else 0


def java_bench(a, tmp):
    classes = os.path.join(tmp, "java")
    os.mkdir(classes)
    sh(["javac", "-d", classes, os.path.join(SRC, "bench/modes/AllocRate.java")])
    os.chmod(classes, 0o755)
    os.chmod(tmp, 0o755)
    plug = tempfile.mkdtemp(prefix="ppbench-modes-java-")
    os.chmod(plug, 0o755)
    os.symlink(os.path.join(a.build, "plugins", "java.so"), os.path.join(plug, "java.so"))
    out = os.path.join(tmp, "jout")
    os.mkdir(out)
    secs = a.java_seconds
    agent = [os.path.join(a.build, "polyprof"), "-o", out, "-d", str(secs), "--plugin-dir", plug,
             "--config", os.path.join(SRC, "tests/integration/empty.yaml"), "--mode", "cpu,alloc",
             "--pid-file", os.path.join(tmp, "jpid")]
    base = java_rates(["java"], classes, secs)
    ours = java_rates(["java"], classes, secs, agent)
    jfr = java_rates(["java", "-XX:StartFlightRecording=settings=profile,filename=%s"
                      % os.path.join(tmp, "r.jfr")], classes, secs)
    shutil.rmtree(plug, ignore_errors=True)
    print("java alloc: rounds/s alone %d, under polyprof --mode cpu,alloc %d (%.1f %% slower), "
          "under JFR settings=profile %d (%.1f %% slower)" % (
              base, ours, 100.0 * (base - ours) / base if base else 0, jfr,
              100.0 * (base - jfr) / base if base else 0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-d", type=int, default=20)
    ap.add_argument("--storm", action="store_true")
    ap.add_argument("--java", action="store_true")
    ap.add_argument("--java-seconds", type=int, default=15)
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    tmp = tempfile.mkdtemp(prefix="ppbench-modes-")
    if a.java:
        java_bench(a, tmp)
        shutil.rmtree(tmp, ignore_errors=True)
        return
    plug = tempfile.mkdtemp(prefix="ppbench-modes-plugins-")
    os.chmod(plug, 0o755)
    for p in ("perf.so", "python.so"):
        os.symlink(os.path.join(a.build, "plugins", p), os.path.join(plug, p))
    out = os.path.join(tmp, "out")
    os.mkdir(out)
    blocker = os.path.join(tmp, "blocker")
    sh(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-o", blocker,
        os.path.join(SRC, "tests/workloads/perf/blocker.c")])
    procs = [subprocess.Popen([blocker, "100000"]),
             subprocess.Popen([sys.executable, os.path.join(SRC, "tests/workloads/modes/sleep_burn.py"),
                               "100000"], stdout=subprocess.DEVNULL)]
    if a.storm:
        pp = os.path.join(tmp, "pingpong")
        sh(["cc", "-O2", "-o", pp, os.path.join(SRC, "bench/modes/pingpong.c")])
        procs.append(subprocess.Popen([pp, "100000"]))
    time.sleep(2)
    print("date: %s, duration %d s, storm %s, load %s" % (
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), a.d, a.storm,
        open("/proc/loadavg").read().split()[0]))
    try:
        cs0 = int(re.search(r"ctxt (\d+)", open("/proc/stat").read()).group(1))
        t0 = time.time()
        res = {}
        for mode in ("cpu", "wall", "offcpu", "cpu,offcpu", "cpu,wall,offcpu"):
            cpu, counters = agent_run(a.build, plug, out, mode, a.d)
            res[mode] = cpu
            print("agent CPU --mode %-16s %.2f s (%.2f %% of a core) %s" % (
                mode, cpu, 100 * cpu / a.d,
                json.dumps(counters) if "offcpu" in mode else ""))
        cs1 = int(re.search(r"ctxt (\d+)", open("/proc/stat").read()).group(1))
        print("context switches on the host: %.0f /s" % ((cs1 - cs0) / (time.time() - t0)))
        pcpu, scpu, size, rc, err = perf_record(a.d, tmp)
        if rc != 0:
            print("perf record failed (%d): %s" % (rc, err))
        else:
            print("perf record -e sched:sched_switch -g -a: CPU %.2f s (%.2f %% of a core), "
                  "%.1f MiB written; perf script of it: %.2f s" % (pcpu, 100 * pcpu / a.d,
                                                                  size / 1048576.0, scpu))
            print("ratio agent offcpu / perf record: %.2f; / (record + script): %.2f" % (
                res["offcpu"] / pcpu if pcpu else float("nan"),
                res["offcpu"] / (pcpu + scpu) if pcpu + scpu else float("nan")))
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(plug, ignore_errors=True)


if __name__ == "__main__":
    main()
