#!/usr/bin/env python3
"""Native allocation profiling (--mode alloc --pids): what the uprobes on
malloc cost the profiled program, and the agent's CPU.

Each workload waits 2 s (the agent places its probes meanwhile), then
works for --seconds and reports its own CPU time (user + system) per unit
of work, which the load of a shared machine disturbs less than its wall
time; it runs
alone and under the agent (`--mode alloc --pids PID`, perf plugin only),
alternately, --rounds times, and the medians are compared in the same run:
- malloc_loop (bench/modes): malloc calls of 16..4111 bytes, each freeing
  the block of 64 calls before: the time per call, so the cost per call of
  the probes reads directly; under the default duty cycle (probes in place
  20 % of every second), with the probes always in place (--perf-alloc-duty
  100: trap + sample), and always in place with --perf-alloc-period 10^9
  (practically never a sample: the trap alone);
- python3: json dumps/loads round trips of a list of dicts (a real
  interpreter's allocation mix: pymalloc serves small objects, malloc the
  rest), default duty and 100 %;
- the peer: `perf record -e probe_libc:malloc -c 1000 --call-graph fp -p
  PID` on the same malloc_loop (perf probe's uprobe on the same function,
  same period), if perf is installed.
The agent's CPU is its process tree's (wait4) over the whole run.

Usage: sudo bench/modes/native_alloc.py [--rounds 3] [--seconds 5] [--build build]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DELAY_MS = 2000

PY_WORK = r"""
import json, sys, time
time.sleep(%f)
obj = [{"id": i, "name": "item-%%d" %% i, "tags": ["t%%d" %% k for k in range(8)],
        "blob": "x" * (i %% 2000)} for i in range(2000)]
t0, c0 = time.perf_counter(), time.process_time()
n = 0
while time.perf_counter() - t0 < %f:
    obj = json.loads(json.dumps(obj))
    n += 1
print("cpu_ms_per_round %%.3f" %% ((time.process_time() - c0) * 1000 / n))
"""


def child_cpu(pid):
    _, status, ru = os.wait4(pid, 0)
    return ru.ru_utime + ru.ru_stime


def one(cmd, agent=None, perf=False):
    """Runs cmd (which prints '<key> <value>' last); returns (value, agent CPU s)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    ag, cpu = None, 0.0
    if agent:
        ag = subprocess.Popen(agent + ["--pids", str(p.pid)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    elif perf:
        ag = subprocess.Popen(["perf", "record", "-q", "-e", "probe_libc:malloc", "-c", "1000",
                               "--call-graph", "fp", "-o", os.path.join(tempfile.gettempdir(),
                                                                        "ppbench-alloc.data"),
                               "-p", str(p.pid)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    out = p.communicate()[0]
    if ag:
        ag.send_signal(2 if perf else 15)
        cpu = child_cpu(ag.pid)
    value = float(out.split()[-1]) if out.split() else float("nan")
    return value, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    tmp = tempfile.mkdtemp(prefix="ppbench-nalloc-")
    os.chmod(tmp, 0o755)
    plug = os.path.join(tmp, "plugins")
    os.mkdir(plug)
    os.symlink(os.path.join(build, "plugins", "perf.so"), os.path.join(plug, "perf.so"))
    loop = os.path.join(tmp, "malloc_loop")
    subprocess.run(["cc", "-O2", "-o", loop, os.path.join(SRC, "bench/modes/malloc_loop.c")],
                   check=True)
    out = os.path.join(tmp, "out")
    os.mkdir(out)

    def agent(*extra):
        return [os.path.join(build, "polyprof"), "-o", out, "-d", "3600", "--plugin-dir", plug,
                "--config", os.path.join(SRC, "tests/integration/empty.yaml"), "--mode", "alloc",
                "--pid-file", os.path.join(tmp, "pid")] + list(extra)

    print("date: %s, load %s, %s" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                     open("/proc/loadavg").read().split()[0], os.uname().release))
    loop_cmd = [loop, str(a.seconds), str(DELAY_MS)]
    py_cmd = [sys.executable, "-c", PY_WORK % (DELAY_MS / 1000.0, a.seconds)]
    have_probe = shutil.which("perf") and subprocess.run(
        ["perf", "probe", "-q", "-x", "/lib/x86_64-linux-gnu/libc.so.6", "malloc"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    keys = ("loop alone", "loop alloc 20 %", "loop alloc 100 %", "loop trap only",
            "loop perf record", "python alone", "python alloc 20 %", "python alloc 100 %")
    rows = {k: ([], []) for k in keys}
    try:
        for _ in range(a.rounds):
            full = ("--perf-alloc-duty", "100")
            for key, cmd, ag in (("loop alone", loop_cmd, None),
                                 ("loop alloc 20 %", loop_cmd, agent()),
                                 ("loop alloc 100 %", loop_cmd, agent(*full)),
                                 ("loop trap only", loop_cmd,
                                  agent(*full, "--perf-alloc-period", "1000000000")),
                                 ("python alone", py_cmd, None),
                                 ("python alloc 20 %", py_cmd, agent()),
                                 ("python alloc 100 %", py_cmd, agent(*full))):
                v, cpu = one(cmd, ag)
                rows[key][0].append(v)
                rows[key][1].append(cpu)
            if have_probe:
                v, cpu = one(loop_cmd, perf=True)
                rows["loop perf record"][0].append(v)
                rows["loop perf record"][1].append(cpu)
    finally:
        if have_probe:
            subprocess.run(["perf", "probe", "-q", "-d", "probe_libc:malloc"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: (statistics.median(v[0]) if v[0] else float("nan"),
               statistics.median(v[1]) if v[1] else float("nan")) for k, v in rows.items()}
    base = med["loop alone"][0]
    for k in keys[:5]:
        if rows[k][0]:
            print("%-18s %7.1f CPU ns per malloc (+%.1f ns, x%.2f)  profiler CPU %.2f s" % (
                k, med[k][0], med[k][0] - base, med[k][0] / base, med[k][1]))
    pb = med["python alone"][0]
    for k in keys[5:]:
        print("%-18s %7.2f CPU ms per json round trip (%+.1f %%)  agent CPU %.2f s" % (
            k, med[k][0], 100.0 * (med[k][0] - pb) / pb, med[k][1]))


if __name__ == "__main__":
    main()
