#!/usr/bin/env python3
"""php plugin benchmark: added CPU of profiling 10 busy PHP workers at 100 Hz,
polyprof's php plugin (out of process) against excimer (in process), same run.

Phases, each 10 php workers doing the same fixed work (work.php):
  base     no profiler: the workers' CPU is the reference
  excimer  excimer at 100 Hz inside each worker: added = workers - base
  polyprof the agent (--php-mode phpspy, -f 100, --pids the workers):
           added = agent CPU (core + plugin workers, from /proc) + workers - base
CPU per sample = the profiler's added CPU / its samples. Standard library only.
Usage: bench/php/bench.py [--workers 10] [--iters 30000] [--hz 100] [--reps 1]
"""
import argparse
import glob
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("PP_BUILD_DIR", os.path.join(SRC, "build"))
AGENT = os.path.join(BUILD, "polyprof")
PLUGIN = os.path.join(BUILD, "plugins", "php.so")
WORK = os.path.join(HERE, "work.php")
TICK = os.sysconf("SC_CLK_TCK")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def tree_cpu(root):
    """CPU seconds of root and its live descendants (+ their reaped children)."""
    total, todo, seen = 0.0, [root], set()
    kids = {}
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % e) as f:
                st = f.read()
            ppid = int(st[st.rindex(")") + 2:].split()[1])
            kids.setdefault(ppid, []).append(int(e))
        except (OSError, ValueError):
            pass
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open("/proc/%d/stat" % p) as f:
                st = f.read()
            v = st[st.rindex(")") + 2:].split()
            total += (int(v[11]) + int(v[12]) + int(v[13]) + int(v[14])) / TICK
        except (OSError, ValueError):
            pass
        todo.extend(kids.get(p, []))
    return total


def run_workers(php, n, iters, env=None):
    before = children_cpu()
    t0 = time.time()
    procs = [subprocess.Popen([php, WORK, str(iters)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env) for _ in range(n)]
    return procs, before, t0


def finish_workers(procs, before):
    samples = 0
    for p in procs:
        out, _ = p.communicate()
        m = re.search(r"samples (\d+)", out or "")
        samples += int(m.group(1)) if m else 0
    return children_cpu() - before, samples


def phase_base(php, a):
    procs, before, t0 = run_workers(php, a.workers, a.iters)
    cpu, _ = finish_workers(procs, before)
    return cpu, time.time() - t0


def phase_excimer(php, a):
    env = dict(os.environ, EXCIMER_HZ=str(a.hz))
    procs, before, t0 = run_workers(php, a.workers, a.iters, env)
    cpu, samples = finish_workers(procs, before)
    return cpu, samples, time.time() - t0


def phase_polyprof(php, a):
    d = tempfile.mkdtemp(prefix="ppbench-php-")
    plugins = os.path.join(d, "plugins")
    os.mkdir(plugins)
    os.symlink(PLUGIN, os.path.join(plugins, "php.so"))
    # start the workers first (their pids go on the agent's command line);
    # the time they run before the agent attaches is unprofiled on both sides
    procs, before, t0 = run_workers(php, a.workers, a.iters)
    log = os.path.join(d, "agent.log")
    # one long session, ended by SIGTERM once the work is done (the agent
    # then writes that session and logs its samples and CPU)
    cmd = [AGENT, "-o", os.path.join(d, "out"), "-d", "3600", "--plugin-dir", plugins,
           "--config", os.path.join(SRC, "tests", "integration", "empty.yaml"),
           "--pid-file", os.path.join(d, "pp.pid"), "--log-file", log, "--php-mode", "phpspy",
           "-f", str(a.hz), "--pids", ",".join(str(p.pid) for p in procs)]
    agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while any(p.poll() is None for p in procs):
        time.sleep(0.2)
    wall = time.time() - t0
    cpu, _ = finish_workers(procs, before)  # before the agent: wait4 below must see only it
    agent.send_signal(signal.SIGTERM)
    # rusage of the agent and the plugin workers it reaped, including writing the profile
    _, _, ru = os.wait4(agent.pid, 0)
    agent.returncode = 0
    agent_cpu_total = ru.ru_utime + ru.ru_stime
    with open(log, errors="replace") as f:
        text = f.read()
    samples = sum(int(x) for x in re.findall(r"\[php (\d+) @", text))
    m = re.search(r"workers ([0-9.]+) s\)", text)
    plugin_cpu = float(m.group(1)) if m else float("nan")
    shutil.rmtree(d, ignore_errors=True)
    return cpu, agent_cpu_total, samples, wall, plugin_cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=10)
    ap.add_argument("--iters", type=int, default=30000)
    ap.add_argument("--hz", type=int, default=100)
    ap.add_argument("--reps", type=int, default=1)
    a = ap.parse_args()
    php = shutil.which("php") or shutil.which("php8.2")
    if not php:
        print("SKIPPED: php not installed (Debian: php-cli)")
        return 0
    if not os.path.exists(AGENT) or not os.path.exists(PLUGIN):
        print("SKIPPED: build the agent and the php plugin first (%s)" % BUILD)
        return 0
    ex = subprocess.run([php, "-r", "echo class_exists('ExcimerProfiler') ? 1 : 0;"], stdout=subprocess.PIPE,
                        text=True).stdout.strip()
    if ex != "1":
        print("SKIPPED: excimer not installed (Debian: php-excimer)")
        return 0
    print("host: %d CPUs, load %.1f, php %s, %d workers x %d iterations, %d Hz, %d rep(s)" % (
        os.cpu_count(), os.getloadavg()[0], subprocess.run([php, "-r", "echo PHP_VERSION;"], stdout=subprocess.PIPE,
                                                          text=True).stdout, a.workers, a.iters, a.hz, a.reps))
    base = exc = exc_s = pp_w = pp_a = pp_s = pp_p = 0.0
    for rep in range(a.reps):
        b, bw = phase_base(php, a)
        e, es, ew = phase_excimer(php, a)
        w, ag, s, pw, pc = phase_polyprof(php, a)
        print("rep %d: base workers %.2f s CPU (%.1f s wall); excimer workers %.2f s, %d samples (%.1f s wall); "
              "polyprof workers %.2f s + agent %.2f s, %d samples (%.1f s wall)" % (rep + 1, b, bw, e, es, ew, w, ag, s, pw))
        base += b
        exc += e
        exc_s += es
        pp_w += w
        pp_a += ag
        pp_s += s
        pp_p += pc
    ex_added = exc - base
    pp_added = pp_a + (pp_w - base)
    print("excimer added CPU: %.3f s (workers %.2f s vs base %.2f s), %.1f us per sample over %d samples" % (
        ex_added, exc, base, 1e6 * ex_added / max(exc_s, 1), exc_s))
    print("polyprof agent CPU: %.3f s for %d samples = %.1f us per sample (php plugin worker alone: %.3f s = %.1f us)"
          % (pp_a, pp_s, 1e6 * pp_a / max(pp_s, 1), pp_p, 1e6 * pp_p / max(pp_s, 1)))
    print("polyprof added CPU: %.3f s (agent %.3f s + workers %.2f s vs base %.2f s)" % (pp_added, pp_a, pp_w, base))
    print("ratio agent CPU / excimer added CPU: %.2f (worker-side differences are within run-to-run noise: %.2f s)" % (
        pp_a / ex_added if ex_added > 0 else float("nan"), abs(pp_w - base)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
