#!/usr/bin/env python3
"""Benchmark of the python plugin, one line per figure, peer in the same run.

    python3 bench/python/run.py [--build build] [--seconds 5] [--parts 1,2,3]

1. CPU microseconds per sample, 50-deep stack, one target, 1000 Hz:
   polyprof's sampler (build/bench/pybench, wall mode, the plugin's own
   code) against austin (Debian package) on the same target at the same
   rate, for the newest CPython austin can read; polyprof alone on the
   other versions.
2. Highest sustained rate on one target: pybench back to back, and the
   real agent asked for 10 kHz (achieved rate from its session log, missed
   samples and efficiency from the plugin's per-process line), for 3.11,
   3.12, 3.13 and 3.9.
3. The agent's CPU at 100 Hz over 20 Python processes (one session, cpu
   and wall modes), from the agent's own session line.
"""
import argparse
import glob
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
WORKLOAD = os.path.join(SRC, "tests", "workloads", "python", "workload.py")

ap = argparse.ArgumentParser()
ap.add_argument("--build", default=os.path.join(SRC, "build"))
ap.add_argument("--seconds", type=float, default=5)
ap.add_argument("--parts", default="1,2,3,4",
                help="which figures: 1 cost, 2 max rate, 3 20 processes, 4 <GC> and thread "
                     "filters, 5 async-aware")
args = ap.parse_args()
PYBENCH = os.path.join(args.build, "bench", "pybench")
AGENT = os.path.join(args.build, "polyprof")
PLUGIN = os.path.join(args.build, "plugins", "python.so")
AUSTIN = shutil.which("austin")


def pythons():
    out = {}
    for exe in sorted(glob.glob("/root/.pyenv/versions/*/bin/python")):
        out[exe.split("/")[-3]] = exe
    if os.path.exists("/usr/bin/python3"):
        out["debian-" + os.path.basename(os.path.realpath("/usr/bin/python3"))] = "/usr/bin/python3"
    return out


def start(exe, case, idle=True):
    p = subprocess.Popen([exe, WORKLOAD, case, "600"] + (["idle"] if idle else []),
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    p.stdout.readline()
    time.sleep(0.3)
    return p


def stop(p):
    p.kill()
    p.wait()


def pybench(pid, hz, seconds, mode="wall"):
    r = subprocess.run([PYBENCH, str(pid), str(seconds), str(hz), mode], stdout=subprocess.PIPE,
                       text=True, timeout=seconds + 60)
    vals = {}
    for line in r.stdout.splitlines():
        k, _, v = line.partition(" ")
        vals[k] = v.split()[0] if v else ""
    return vals


def austin_cost(pid, hz, seconds):
    """CPU us per sample of austin attached to pid at hz."""
    out = tempfile.mktemp(prefix="austin-")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.Popen([AUSTIN, "-i", str(int(1e6 / hz)), "-p", str(pid), "-o", out],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(seconds)
    p.send_signal(2)
    _, err = p.communicate(timeout=30)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with open(out, errors="replace") as f:
        lines = [l for l in f if l.strip()]
    os.unlink(out)
    frames = sum(l.count(";") for l in lines) / max(len(lines), 1)
    return cpu * 1e6 / max(len(lines), 1), len(lines), frames, err.strip().splitlines()[-2:]


def agent_session(pids, freq, mode, seconds, extra=()):
    out = tempfile.mkdtemp(prefix="ppbench-")
    plugins = tempfile.mkdtemp(prefix="ppbench-plugins-")
    os.symlink(PLUGIN, os.path.join(plugins, "python.so"))
    log = os.path.join(out, "agent.log")
    cmd = [AGENT, "-o", out, "-d", str(int(seconds)), "--plugin-dir", plugins, "--pid-file",
           os.path.join(out, "pid"), "--log-file", log, "--config",
           os.path.join(SRC, "tests", "integration", "empty.yaml"), "--pids",
           ",".join(map(str, pids)), "-f", str(freq), "--python-mode", mode] + list(extra)
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=seconds + 120)
    with open(log, errors="replace") as f:
        text = f.read()
    m = re.search(r"session 1: ([\d.]+) s, (\d+) samples.*?\[python \d+ @ ([\d.]+) Hz.*?agent CPU "
                  r"([\d.]+) s \(([\d.]+)% of a core: core ([\d.]+) s, workers ([\d.]+) s", text)
    # the plugin's per-process line (debug level unless samples were lost)
    eff = re.findall(r"pid \d+: (\d+) samples, (\d+) failed, (\d+) missed \(efficiency ([\d.]+)%\)",
                     text)
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(plugins, ignore_errors=True)
    if not m:
        return None
    return {"wall": float(m.group(1)), "samples": int(m.group(2)), "hz": float(m.group(3)),
            "cpu": float(m.group(4)), "pct": float(m.group(5)),
            "missed": sum(int(e[2]) for e in eff), "failed": sum(int(e[1]) for e in eff),
            "efficiency": eff[-1][3] if len(eff) == 1 else None}


def main():
    for path in (PYBENCH, AGENT, PLUGIN):
        if not os.path.exists(path):
            sys.exit("not built: " + path)
    pys = pythons()
    print("# machine: %d CPUs, load %.1f; %s" % (os.cpu_count(), os.getloadavg()[0],
                                                 time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())))
    parts = set(args.parts.split(","))
    if "1" in parts:
        cost_per_sample(pys)
    if "2" in parts:
        max_rate(pys)
    if "3" in parts:
        agent_cpu(pys)
    if "4" in parts:
        gc_and_filters(pys)
    if "5" in parts:
        async_aware(pys)


# every CPython with a task reader (3.6-3.10: frame objects, 3.11+: frames
# inside the coroutines)
ASYNC_VERSIONS = ("3.6.15", "3.7.16", "3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0")


def async_aware(pys):
    # 5. --python-async-aware (and --python-opcodes): cost per sample on tests/workloads/python/
    # async_chain.py (three tasks, a running one with one awaiting it),
    # against plain wall mode and austin on the same target in one run
    hz = 1000
    script = os.path.join(SRC, "tests", "workloads", "python", "async_chain.py")
    for v in ASYNC_VERSIONS:
        if v not in pys:
            continue
        status = tempfile.mktemp(prefix="ppasync-")
        p = subprocess.Popen([pys[v], script, "600", status], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        p.stdout.readline()
        time.sleep(0.3)
        try:
            us = {}
            for mode in ("wall+gc", "wall+gc+async", "wall+gc+opcodes"):
                r = pybench(p.pid, hz, args.seconds, mode)
                us[mode] = float(r.get("cpu_us_per_sample", "nan"))
                print("cpu_us_per_sample polyprof python=%s mode=%s rate=%sHz depth=%s: %.2f us "
                      "(failed %s)" % (v, mode, r.get("rate_hz"), r.get("frames_per_sample"),
                                       us[mode], r.get("failed")))
            for extra in ("async", "opcodes"):
                print("ratio %s/plain per sample (python %s): %.2fx"
                      % (extra, v, us["wall+gc+" + extra] / us["wall+gc"] if us["wall+gc"]
                         else float("nan")))
            if AUSTIN:
                a_us, a_n, _, tail = austin_cost(p.pid, hz, args.seconds)
                print("cpu_us_per_sample austin python=%s samples=%d (%.0f Hz): %.2f us (%s)"
                      % (v, a_n, a_n / args.seconds, a_us, " / ".join(tail)))
        finally:
            stop(p)
            for f in (status, status + ".tmp"):
                if os.path.exists(f):
                    os.unlink(f)
    # the same for tasks no thread runs (wall mode reads them from the task
    # registry): tests/workloads/python/async_tree.py wait, four tasks
    # sleeping under a gather(), and a program without an event loop
    tree = os.path.join(SRC, "tests", "workloads", "python", "async_tree.py")
    for v in ASYNC_VERSIONS:
        if v not in pys:
            continue
        for what, argv in (("4 waiting tasks", [pys[v], tree, "wait", "600"]),
                           ("no event loop", [pys[v], WORKLOAD, "split", "600"])):
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            p.stdout.readline()
            time.sleep(0.3)
            try:
                us = {}
                for mode in ("wall+gc", "wall+gc+async"):
                    r = pybench(p.pid, hz, args.seconds, mode)
                    us[mode] = float(r.get("cpu_us_per_sample", "nan"))
                    print("cpu_us_per_sample polyprof python=%s %s mode=%s frames=%s: %.2f us "
                          "(failed %s)" % (v, what, mode, r.get("frames_per_sample"), us[mode],
                                           r.get("failed")))
                print("ratio async/plain per sample (python %s, %s): %.2fx"
                      % (v, what, us["wall+gc+async"] / us["wall+gc"] if us["wall+gc"]
                         else float("nan")))
            finally:
                stop(p)


def gc_and_filters(pys):
    # 4. what <GC> frames (on by default) and the exception filter cost per
    # sample, against the same sampler without them and against austin on
    # the same target in the same run (50-deep stack, 1000 Hz)
    hz = 1000
    for v in ("2.7.18", "3.9.18", "3.12.1", "3.13.0"):
        if v not in pys:
            continue
        p = start(pys[v], "deep50")
        try:
            us = {}
            for mode in ("wall", "wall+gc", "exception+gc"):
                r = pybench(p.pid, hz, args.seconds, mode)
                us[mode] = float(r.get("cpu_us_per_sample", "nan"))
                print("cpu_us_per_sample polyprof python=%s mode=%s rate=%sHz: %.2f us (failed %s)"
                      % (v, mode, r.get("rate_hz"), us[mode], r.get("failed")))
            print("ratio wall+gc/wall per sample (python %s): %.2fx"
                  % (v, us["wall+gc"] / us["wall"] if us["wall"] else float("nan")))
            if AUSTIN and v in ("3.9.18", "3.8.18"):
                a_us, a_n, _, _ = austin_cost(p.pid, hz, args.seconds)
                print("cpu_us_per_sample austin python=%s samples=%d (%.0f Hz): %.2f us"
                      % (v, a_n, a_n / args.seconds, a_us))
                print("ratio austin/polyprof wall+gc per sample (python %s): %.2fx"
                      % (v, a_us / us["wall+gc"] if us["wall+gc"] else float("nan")))
        finally:
            stop(p)


def cost_per_sample(pys):
    # 1. cost per sample, 50-deep stack, 1000 Hz
    hz = 1000
    peer_ver = None
    if AUSTIN:
        # austin 1.0.1 (Debian bookworm) reads CPython <= 3.10 (3.10 lines are wrong)
        for v in ("3.9.18", "3.8.18"):
            if v in pys:
                peer_ver = v
                break
    for v, exe in sorted(pys.items()):
        p = start(exe, "deep50")
        try:
            r = pybench(p.pid, hz, args.seconds)
            print("cpu_us_per_sample polyprof python=%s depth=%s rate=%sHz: %s us (failed %s)"
                  % (v, r.get("frames_per_sample"), r.get("rate_hz"), r.get("cpu_us_per_sample"),
                     r.get("failed")))
            for peer_hz in ((hz, 100) if v == peer_ver else ()):
                if peer_hz != hz:
                    r = pybench(p.pid, peer_hz, args.seconds)
                    print("cpu_us_per_sample polyprof python=%s depth=%s rate=%sHz: %s us"
                          % (v, r.get("frames_per_sample"), r.get("rate_hz"),
                             r.get("cpu_us_per_sample")))
                a_us, a_n, a_frames, tail = austin_cost(p.pid, peer_hz, args.seconds)
                ours = float(r.get("cpu_us_per_sample", "nan"))
                # austin 1.0 lines are "Thread x;func (file);L12;..." : 2 fields a frame
                print("cpu_us_per_sample austin python=%s depth=%.0f samples=%d (%.0f Hz): %.2f us "
                      "(%s)" % (v, a_frames / 2, a_n, a_n / args.seconds, a_us, " / ".join(tail)))
                print("ratio austin/polyprof per sample (python %s, 50 frames, %d Hz): %.2fx"
                      % (v, peer_hz, a_us / ours if ours else float("nan")))
        finally:
            stop(p)
    if not peer_ver:
        print("peer: austin not installed or no CPython <= 3.9 found: no ratio")


def max_rate(pys):
    # 2. highest sustained rate on one target (3.11+ must hold 10 kHz)
    for v in ("3.11.7", "3.12.1", "3.13.0", "3.9.18"):
        if v not in pys:
            continue
        p = start(pys[v], "deep50")
        try:
            r = pybench(p.pid, 0, args.seconds)
            print("max_rate pybench python=%s depth=50 back-to-back: %s Hz (%s us/sample)"
                  % (v, r.get("rate_hz"), r.get("cpu_us_per_sample")))
            s = agent_session([p.pid], 100, "wall", args.seconds,
                              ["--python-frequency", "10000", "-v"])
            if s:
                print("max_rate agent python=%s asked 10000 Hz: %.0f Hz achieved (%d missed, %d "
                      "failed, efficiency %s%%), agent CPU %.1f%% of a core, %.1f us per sample, "
                      "load %.1f" % (v, s["hz"], s["missed"], s["failed"], s["efficiency"],
                                     s["pct"], s["cpu"] * 1e6 / max(s["samples"], 1),
                                     os.getloadavg()[0]))
        finally:
            stop(p)


def agent_cpu(pys):
    # 3. agent CPU at 100 Hz over 20 Python processes
    exes = list(pys.values())
    procs = [start(exes[i % len(exes)], "nested") for i in range(20)]
    try:
        for mode in ("cpu", "wall"):
            s = agent_session([p.pid for p in procs], 100, mode, 10)
            if s:
                # per process-sample: every tick visits every process (in cpu
                # mode idle threads are checked, not walked, and emit nothing)
                visits = s["wall"] * 100 * len(procs)
                print("agent_cpu 20 processes 100 Hz mode=%s: %.2f s CPU in %.1f s = %.2f%% of a "
                      "core (%d stacks; %.1f us per process per tick)"
                      % (mode, s["cpu"], s["wall"], s["pct"], s["samples"], s["cpu"] * 1e6 / visits))
    finally:
        for p in procs:
            stop(p)


main()
