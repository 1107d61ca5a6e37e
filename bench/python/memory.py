#!/usr/bin/env python3
"""Memory of the python plugin's worker, one line per figure.

    python3 bench/python/memory.py [--build build] [--processes 20] [--seconds 40]
                                   [--rate 100] [--mode wall]

Starts N Python processes (every CPython found, round robin, running
tests/workloads/python/workload.py nested, idle leaf), runs the agent with
only the python plugin on them in continuous 5 s sessions for SECONDS, and
reads the python worker's /proc status and smaps_rollup at the end:
VmHWM (its peak RSS), VmRSS, Pss and RssAnon. Run it with --build of two
trees (before / after) on the same machine, one after the other.
"""
import argparse
import glob
import os
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
ap.add_argument("--processes", type=int, default=20)
ap.add_argument("--seconds", type=float, default=40)
ap.add_argument("--rate", type=int, default=100)
ap.add_argument("--mode", default="wall")
args = ap.parse_args()
AGENT = os.path.join(args.build, "polyprof")
PLUGIN = os.path.join(args.build, "plugins", "python.so")


def status_kb(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def rollup_kb(pid, key):
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid):
    out = []
    for task in glob.glob("/proc/%d/task/*/children" % pid):
        with open(task) as f:
            out += [int(x) for x in f.read().split()]
    return out


def comm(pid):
    with open("/proc/%d/comm" % pid) as f:
        return f.read().strip()


def main():
    for path in (AGENT, PLUGIN):
        if not os.path.exists(path):
            sys.exit("not built: " + path)
    exes = sorted(glob.glob("/root/.pyenv/versions/*/bin/python"))
    if os.path.exists("/usr/bin/python3"):
        exes.append("/usr/bin/python3")
    procs = []
    for i in range(args.processes):
        p = subprocess.Popen([exes[i % len(exes)], WORKLOAD, "nested", "600", "idle"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        p.stdout.readline()
        procs.append(p)
    out = tempfile.mkdtemp(prefix="ppmem-")
    plugins = tempfile.mkdtemp(prefix="ppmem-plugins-")
    os.symlink(PLUGIN, os.path.join(plugins, "python.so"))
    cmd = [AGENT, "-c", "-d", "5", "-o", out, "--plugin-dir", plugins, "--pid-file",
           os.path.join(out, "pid"), "--log-file", os.path.join(out, "agent.log"), "--config",
           os.path.join(SRC, "tests", "integration", "empty.yaml"), "--pids",
           ",".join(str(p.pid) for p in procs), "-f", str(args.rate), "--python-mode", args.mode]
    agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(args.seconds)
        workers = [c for c in children(agent.pid) if "python" in comm(c)]
        print("# %s; %d processes, %d Hz, mode %s, %.0f s; load %.1f; %s"
              % (args.build, args.processes, args.rate, args.mode, args.seconds,
                 os.getloadavg()[0], time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())))
        for w in workers:
            print("python worker %s[%d]: VmHWM %.1f MiB, VmRSS %.1f MiB, Pss %.1f MiB, "
                  "RssAnon %.1f MiB" % (comm(w), w, status_kb(w, "VmHWM") / 1024.0,
                                        status_kb(w, "VmRSS") / 1024.0,
                                        rollup_kb(w, "Pss") / 1024.0,
                                        status_kb(w, "RssAnon") / 1024.0))
        if not workers:
            print("no python worker found among %s" % [(c, comm(c)) for c in children(agent.pid)])
    finally:
        agent.terminate()
        agent.wait(timeout=60)
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(plugins, ignore_errors=True)


main()
