#!/usr/bin/env python3
"""Node.js profiling overhead: requests per second (and server CPU per
request) of a loopback HTTP workload (tests/workloads/nodejs/server.js)
without profiling, under polyprof's `v8` mode (stacks read from outside the
process) and `inspector` mode, and under Node's own `--cpu-prof`, each at
11 and 100 Hz, measured in the same run. Rounds interleave the
configurations (rotating the order) and the median per configuration is
reported, since the host is shared. The agent's CPU (core and nodejs
worker, attach included) is reported per sample it wrote.

  bench/nodejs/bench.py [--rounds 5] [--seconds 10] [--fib 25] [--concurrency 4]
                        [--modes v8,inspector] [--hz 11,100] [--fixed-work]

--fixed-work measures instead the target's CPU time for a fixed computation
(bench/nodejs/fixedwork.js, started once the agent has written a session),
the figure least disturbed by a loaded host.

Needs root (the agent signals and setns's into the target) and a built tree
(build/polyprof, build/plugins, or PP_AGENT / PP_PLUGIN_DIR).
"""
import argparse
import json
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
AGENT = os.environ.get("PP_AGENT", os.path.join(BUILD, "polyprof"))
PLUGIN_DIR = os.environ.get("PP_PLUGIN_DIR", os.path.join(BUILD, "plugins"))
SERVER = os.path.join(SRC, "tests", "workloads", "nodejs", "server.js")
LOADGEN = os.path.join(HERE, "loadgen.js")
NODE = shutil.which("node") or shutil.which("nodejs")


def start_server(extra, fib, tmp):
    env = dict(os.environ, FIB_N=str(fib))
    p = subprocess.Popen([NODE] + extra + [SERVER], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env, cwd=tmp)
    port = int(p.stdout.readline())
    return p, port


def start_agent(pid, tmp, mode, hz):
    plugins = tempfile.mkdtemp(prefix="plugins-", dir=tmp)
    os.symlink(os.path.join(PLUGIN_DIR, "nodejs.so"), os.path.join(plugins, "nodejs.so"))
    log = os.path.join(tmp, "agent.log")
    cmd = [AGENT, "-c", "-d", "3", "-f", str(hz), "-o", os.path.join(tmp, "out"),
           "--plugin-dir", plugins, "--config", os.path.join(SRC, "tests", "integration", "empty.yaml"),
           "--pid-file", os.path.join(tmp, "agent.pid"), "--log-file", log,
           "--nodejs-mode", mode, "--pids", str(pid)]
    a = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # measure the steady state: after the attach and the first session's
    # output (which includes one-off work such as reading the node binary)
    end = time.time() + 60
    while time.time() < end:
        try:
            if any(f.endswith(".col") for f in os.listdir(os.path.join(tmp, "out"))):
                return a
        except OSError:
            pass
        time.sleep(0.1)
    a.kill()
    raise RuntimeError("agent did not attach; see " + log)


def cpu_seconds(pid, with_children=False):
    """utime + stime of pid (and of its child processes: the agent's
    plugin workers), from /proc."""
    total = 0.0
    pids = [pid]
    if with_children:
        try:
            with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                pids += [int(x) for x in f.read().split()]
        except OSError:
            pass
    for p in pids:
        try:
            with open("/proc/%d/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
    return total


def measure(port, seconds, concurrency, server_pid, agent_pid):
    subprocess.run([NODE, LOADGEN, str(port), "2", str(concurrency)], capture_output=True)  # warm up
    s0 = cpu_seconds(server_pid)
    a0 = cpu_seconds(agent_pid, True) if agent_pid else 0.0
    r = subprocess.run([NODE, LOADGEN, str(port), str(seconds), str(concurrency)],
                       capture_output=True, text=True, check=True)
    s1 = cpu_seconds(server_pid)
    a1 = cpu_seconds(agent_pid, True) if agent_pid else 0.0
    d = json.loads(r.stdout)
    ok = max(d["ok"], 1)
    # CPU per request does not depend on how much of the (shared) host the
    # server got, which requests per second do
    return d["ok"] / seconds, d["errors"], 1e6 * (s1 - s0) / ok, a1 - a0


def samples_written(out, skip=()):
    """Samples of the nodejs plugin in the .col files the agent wrote (but
    those in skip)."""
    n = 0
    for f in os.listdir(out):
        if f.startswith("profile_") and f.endswith(".col") and f not in skip:
            with open(os.path.join(out, f)) as fh:
                head = json.loads(fh.readline()[2:])
            n += head.get("polyprof", {}).get("nodejs", {}).get("samples", 0)
    return n


def one(config, args, tmp):
    """(req/s, errors, server us CPU per request, agent CPU s in the
    window, agent CPU s per sample in the window or None)."""
    kind, hz = config
    extra = []
    if kind == "cpu-prof":
        extra = ["--cpu-prof", "--cpu-prof-interval", str(1000000 // hz), "--cpu-prof-dir", tmp]
    server, port = start_server(extra, args.fib, tmp)
    agent = None
    per_sample = None
    try:
        if kind in ("v8", "inspector"):
            agent = start_agent(server.pid, tmp, kind, hz)
        out = os.path.join(tmp, "out")
        before = set(os.listdir(out)) if agent else set()
        res = measure(port, args.seconds, args.concurrency, server.pid,
                      agent.pid if agent else 0)
        if agent:
            # the sessions written during the window: about its length of sampling
            n = samples_written(out, before)
            per_sample = res[3] / n if n else None
        return res + (per_sample,)
    finally:
        if agent:
            agent.send_signal(signal.SIGTERM)
            agent.wait(60)
        server.send_signal(signal.SIGINT)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()


FIXED = os.path.join(HERE, "fixedwork.js")


def one_fixed(config, tmp):
    """(CPU microseconds of the fixed work, agent CPU s per sample or None)."""
    kind, hz = config
    extra = []
    if kind == "cpu-prof":
        extra = ["--cpu-prof", "--cpu-prof-interval", str(1000000 // hz), "--cpu-prof-dir", tmp]
    p = subprocess.Popen([NODE] + extra + [FIXED], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, cwd=tmp)
    agent = None
    try:
        if kind in ("v8", "inspector"):
            agent = start_agent(p.pid, tmp, kind, hz)
        a0 = cpu_seconds(agent.pid, True) if agent else 0.0
        before = set(os.listdir(os.path.join(tmp, "out"))) if agent else set()
        p.stdin.write(b"go\n")
        p.stdin.flush()
        us = int(p.stdout.readline())
        p.wait(60)
        per_sample = None
        if agent:
            time.sleep(3.5)  # the session holding the work is written
            a1 = cpu_seconds(agent.pid, True)
            n = samples_written(os.path.join(tmp, "out"), before)
            per_sample = (a1 - a0) / n if n else None
        return us, per_sample
    finally:
        if agent:
            agent.send_signal(signal.SIGTERM)
            agent.wait(60)
        if p.poll() is None:
            p.kill()


def main_fixed(args, configs, name):
    cpu = {c: [] for c in configs}
    per_sample = {c: [] for c in configs}
    for r in range(args.rounds):
        k = r % len(configs)
        for c in configs[k:] + configs[:k]:
            with tempfile.TemporaryDirectory(prefix="ppbench-") as tmp:
                us, ps = one_fixed(c, tmp)
            cpu[c].append(us)
            if ps is not None:
                per_sample[c].append(ps)
        print("round %d: %s" % (r + 1, ", ".join("%s %.0f ms" % (name[c], cpu[c][-1] / 1000)
                                                for c in configs)), flush=True)
    base = statistics.median(cpu[configs[0]])
    print("%-14s %12s %10s %14s" % ("configuration", "work CPU", "overhead", "agent/sample"))
    for c in configs:
        m = statistics.median(cpu[c])
        ps = ("%11.1f us" % (1e6 * statistics.median(per_sample[c]))) if per_sample[c] else ""
        print("%-14s %9.0f ms %+9.2f%% %14s" % (name[c], m / 1000, 100.0 * (m / base - 1), ps))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--fib", type=int, default=25)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--modes", default="v8,inspector", help="polyprof nodejs modes to measure")
    ap.add_argument("--hz", default="11,100", help="sampling frequencies")
    ap.add_argument("--fixed-work", action="store_true",
                    help="target CPU time of a fixed computation instead of HTTP throughput")
    args = ap.parse_args()
    if not NODE:
        sys.exit("node not found")
    if os.geteuid() != 0:
        sys.exit("needs root")
    ver = subprocess.run([NODE, "--version"], capture_output=True, text=True).stdout.strip()
    print("host: %d CPUs, %s, node %s, %d rounds x %d s, fib(%d), concurrency %d"
          % (os.cpu_count(), os.uname().release, ver, args.rounds, args.seconds, args.fib,
             args.concurrency))
    freqs = [int(x) for x in args.hz.split(",")]
    configs = [("baseline", 0)] + [(k, hz) for hz in freqs for k in args.modes.split(",") +
                                   ["cpu-prof"]]
    name = {c: c[0] if c[0] == "baseline" else "%s@%d" % c for c in configs}
    if args.fixed_work:
        main_fixed(args, configs, name)
        return
    rps = {c: [] for c in configs}
    cpu = {c: [] for c in configs}
    agent_cpu = {c: [] for c in configs}
    per_sample = {c: [] for c in configs}
    errors = 0
    for r in range(args.rounds):
        k = r % len(configs)
        order = configs[k:] + configs[:k]
        for c in order:
            with tempfile.TemporaryDirectory(prefix="ppbench-") as tmp:
                v, e, us, ac, ps = one(c, args, tmp)
            rps[c].append(v)
            cpu[c].append(us)
            if ps is not None:
                agent_cpu[c].append(ac / args.seconds)
                per_sample[c].append(ps)
            errors += e
        print("round %d: %s" % (r + 1, ", ".join("%s %.0f req/s %.0f us/req" % (
            name[c], rps[c][-1], cpu[c][-1]) for c in configs)), flush=True)
    med = {c: statistics.median(rps[c]) for c in configs}
    mcpu = {c: statistics.median(cpu[c]) for c in configs}
    base = configs[0]
    print("%-14s %9s %9s %12s %9s %11s %12s" % ("configuration", "req/s", "slowdown", "us CPU/req",
                                                "CPU/req", "agent CPU", "agent/sample"))
    for c in configs:
        agent = ("%10.2f%%" % (100.0 * statistics.median(agent_cpu[c]))) if agent_cpu[c] else ""
        ps = ("%10.1f us" % (1e6 * statistics.median(per_sample[c]))) if per_sample[c] else ""
        print("%-14s %9.1f %8.2f%% %12.1f %+8.2f%% %11s %12s"
              % (name[c], med[c], 100.0 * (1 - med[c] / med[base]), mcpu[c],
                 100.0 * (mcpu[c] / mcpu[base] - 1), agent, ps))
    for hz in freqs:
        if ("v8", hz) in med:
            print("v8 mode %d Hz slowdown: %.2f%% (goal < 1%% at 100 Hz); throughput vs "
                  "--cpu-prof: %.3f" % (hz, 100.0 * (1 - med[("v8", hz)] / med[base]),
                                        med[("v8", hz)] / med[("cpu-prof", hz)]))
    print("request errors: %d" % errors)

if __name__ == "__main__":
    main()
