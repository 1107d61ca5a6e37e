#!/usr/bin/env python3
"""Node.js inspector-mode overhead: requests per second of a loopback HTTP
workload (tests/workloads/nodejs/server.js) without profiling, under polyprof
`--nodejs-mode inspector` at 100 Hz, and under Node's own `--cpu-prof` at the
same interval, measured in the same run. Rounds interleave the three
configurations (rotating the order) and the median per configuration is
reported, since the host is shared.

  bench/nodejs/bench.py [--rounds 5] [--seconds 10] [--fib 25] [--concurrency 4]

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


def start_agent(pid, tmp):
    plugins = tempfile.mkdtemp(prefix="plugins-", dir=tmp)
    os.symlink(os.path.join(PLUGIN_DIR, "nodejs.so"), os.path.join(plugins, "nodejs.so"))
    log = os.path.join(tmp, "agent.log")
    cmd = [AGENT, "-c", "-d", "3", "-f", "100", "-o", os.path.join(tmp, "out"),
           "--plugin-dir", plugins, "--config", os.path.join(SRC, "tests", "integration", "empty.yaml"),
           "--pid-file", os.path.join(tmp, "agent.pid"), "--log-file", log,
           "--nodejs-mode", "inspector", "--pids", str(pid)]
    a = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # measure the steady state: after the attach and the first session's
    # output (which includes one-off work such as reading the node binary)
    end = time.time() + 60
    while time.time() < end:
        try:
            if "profiling" in open(log).read() and any(
                    f.endswith(".col") for f in os.listdir(os.path.join(tmp, "out"))):
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


def one(config, args, tmp):
    extra = []
    if config == "cpu-prof":
        # 10000 us = 100 Hz, the rate polyprof is run at
        extra = ["--cpu-prof", "--cpu-prof-interval", "10000", "--cpu-prof-dir", tmp]
    server, port = start_server(extra, args.fib, tmp)
    agent = None
    try:
        if config == "polyprof":
            agent = start_agent(server.pid, tmp)
        return measure(port, args.seconds, args.concurrency, server.pid,
                       agent.pid if agent else 0)
    finally:
        if agent:
            agent.send_signal(signal.SIGTERM)
            agent.wait(60)
        server.send_signal(signal.SIGINT)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--fib", type=int, default=25)
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()
    if not NODE:
        sys.exit("node not found")
    if os.geteuid() != 0:
        sys.exit("needs root")
    ver = subprocess.run([NODE, "--version"], capture_output=True, text=True).stdout.strip()
    print("host: %d CPUs, %s, node %s, %d rounds x %d s, fib(%d), concurrency %d"
          % (os.cpu_count(), os.uname().release, ver, args.rounds, args.seconds, args.fib,
             args.concurrency))
    configs = ["baseline", "polyprof", "cpu-prof"]
    rps = {c: [] for c in configs}
    cpu = {c: [] for c in configs}
    agent_cpu = []
    errors = 0
    for r in range(args.rounds):
        order = configs[r % 3:] + configs[:r % 3]
        for c in order:
            with tempfile.TemporaryDirectory(prefix="ppbench-") as tmp:
                v, e, us, ac = one(c, args, tmp)
            rps[c].append(v)
            cpu[c].append(us)
            if c == "polyprof":
                agent_cpu.append(ac / args.seconds)
            errors += e
        print("round %d: %s" % (r + 1, ", ".join("%s %.0f req/s %.0f us/req" % (c, rps[c][-1], cpu[c][-1])
                                                for c in configs)), flush=True)
    med = {c: statistics.median(rps[c]) for c in configs}
    mcpu = {c: statistics.median(cpu[c]) for c in configs}
    for c in configs:
        print("%-9s %8.1f req/s, %7.1f us server CPU per request (medians of %d)"
              % (c, med[c], mcpu[c], len(rps[c])))
    print("polyprof inspector 100 Hz CPU per request: %+.2f%% vs baseline; --cpu-prof: %+.2f%%"
          % (100.0 * (mcpu["polyprof"] / mcpu["baseline"] - 1),
             100.0 * (mcpu["cpu-prof"] / mcpu["baseline"] - 1)))
    print("agent (core + nodejs worker) CPU while profiling: %.2f%% of one core (median)"
          % (100.0 * statistics.median(agent_cpu)))
    print("polyprof inspector 100 Hz slowdown: %.2f%% (target <= 3%%)"
          % (100.0 * (1 - med["polyprof"] / med["baseline"])))
    print("node --cpu-prof 100 Hz slowdown:    %.2f%%" % (100.0 * (1 - med["cpu-prof"] / med["baseline"])))
    print("polyprof / --cpu-prof throughput ratio: %.3f (>= 1 means no worse)"
          % (med["polyprof"] / med["cpu-prof"]))
    print("request errors: %d" % errors)


if __name__ == "__main__":
    main()
