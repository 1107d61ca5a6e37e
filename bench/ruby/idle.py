#!/usr/bin/env python3
"""The agent's fixed cost on sleeping Ruby processes, core and plugin
worker apart, per thread.

N Ruby processes (default 10) sleep; the agent (-c -d 60 -f 100 --pids
...) attaches to them; once every attach is logged and the targets are
still, the CPU time of every thread of the agent and of its plugin worker
is read from schedstat (ns) at the start and end of a --seconds window
(default 30). Prints one line per thread and the totals in ms per second
of wall time. With --strace, `strace -c -f` runs on the worker for the
window and its summary is printed (strace's own overhead then inflates
the worker's figure: read the CPU lines from a run without it).

  bench/ruby/idle.py [--procs 10] [--seconds 30] [--strace] [--build DIR]
"""
import argparse
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))


def threads_ns(pid):
    """{(tid, comm): ns on CPU} of every thread of pid (schedstat)."""
    out = {}
    for task in glob.glob("/proc/%d/task/*" % pid):
        try:
            with open(task + "/schedstat") as f:
                ns = int(f.read().split()[0])
            with open(task + "/comm") as f:
                comm = f.read().strip()
        except (OSError, ValueError, IndexError):
            continue
        out[(int(os.path.basename(task)), comm)] = ns
    return out


def children(pid):
    kids = []
    for ch in glob.glob("/proc/%d/task/*/children" % pid):
        with open(ch) as f:
            kids += [int(x) for x in f.read().split()]
    return kids


def wait_attached(log, n, timeout=60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open(log, encoding="utf-8", errors="replace") as f:
                if sum(1 for line in f if "polyprof.ruby: pid " in line and ": Ruby " in line) >= n:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--settle", type=float, default=3.0, help="seconds after the attach before the window")
    ap.add_argument("--strace", action="store_true")
    ap.add_argument("--build", default=os.environ.get("PP_BUILD_DIR", os.path.join(SRC, "build")))
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    if not shutil.which("ruby"):
        sys.exit("ruby not found (Debian: apt-get install ruby)")
    tmp = tempfile.mkdtemp(prefix="ppidle-")
    plugdir = os.path.join(tmp, "plugins")
    os.mkdir(plugdir)
    os.symlink(os.path.join(a.build, "plugins", "ruby.so"), os.path.join(plugdir, "ruby.so"))
    procs = [subprocess.Popen(["ruby", "-e", "sleep"]) for _ in range(a.procs)]
    log = os.path.join(tmp, "pp.log")
    agent = subprocess.Popen(
        [os.path.join(a.build, "polyprof"), "-o", os.path.join(tmp, "out"), "-c", "-d", "60", "-f", "100",
         "--plugin-dir", plugdir, "--config", os.path.join(SRC, "tests", "integration", "empty.yaml"),
         "--log-file", log, "--pids", ",".join(str(p.pid) for p in procs)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_attached(log, a.procs):
            with open(log, encoding="utf-8", errors="replace") as f:
                sys.stderr.write(f.read())
            sys.exit("the agent did not attach to every Ruby process (its log above)")
        time.sleep(a.settle)
        workers = children(agent.pid)
        if len(workers) != 1:
            sys.exit("expected one plugin worker, found %r" % workers)
        worker = workers[0]
        tracer = None
        if a.strace:
            tracer = subprocess.Popen(["strace", "-c", "-f", "-p", str(worker), "-o", os.path.join(tmp, "strace")],
                                      stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        c0, w0 = threads_ns(agent.pid), threads_ns(worker)
        t0 = time.monotonic()
        time.sleep(a.seconds)
        c1, w1 = threads_ns(agent.pid), threads_ns(worker)
        wall = time.monotonic() - t0
        if tracer:
            tracer.send_signal(signal.SIGINT)
            tracer.wait()
        print("host: %d CPUs, load %.1f %.1f %.1f; %d sleeping Ruby processes, %.1f s window"
              % ((os.cpu_count(),) + os.getloadavg() + (a.procs, wall)))
        total = {}
        for who, t0s, t1s in (("core", c0, c1), ("worker", w0, w1)):
            s = 0
            for key in sorted(t1s):
                d = t1s[key] - t0s.get(key, 0)
                s += d
                print("  %-6s tid %-7d %-16s %8.3f ms  (%.3f ms/s)" % (who, key[0], key[1], d / 1e6, d / 1e6 / wall))
            total[who] = s
        print("core   %.3f ms per second of wall time" % (total["core"] / 1e6 / wall))
        print("worker %.3f ms per second of wall time" % (total["worker"] / 1e6 / wall))
        print("agent  %.3f ms per second of wall time" % ((total["core"] + total["worker"]) / 1e6 / wall))
        if tracer:
            with open(os.path.join(tmp, "strace")) as f:
                print(f.read())
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait()
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
