#!/usr/bin/env python3
"""Ruby sampling cost: polyprof's ruby plugin against stackprof, same run.

N Ruby processes (default 10) each do the same fixed amount of CPU work
(workload.rb). Four phases, repeated --rounds times, interleaved:
  base         the work alone
  stackprof    the work under StackProf (cpu mode, 100 Hz, in-process)
  stackprof-hi the same handler at --hi-interval us (default 200: 5 kHz;
               wall mode, as cpu mode's timer is limited to the kernel HZ)
  polyprof     the work alone while the agent samples it at 100 Hz
                (continuous, 60 s sessions as gProfiler's default, ended
                by SIGTERM, which writes the last session)
  idle         the agent for as long on N sleeping Ruby processes: its
                fixed cost (100 wakeups a second, polls, sessions), so
                the cost per sample beyond it can be told apart
CPU times come from wait4() rusage: of every Ruby process, and of the agent
including its plugin worker. On a shared box the CPU time of a fixed
amount of work varies by several percent between runs, more than
stackprof adds at 100 Hz; so stackprof's cost per sample is measured where
it stands out (stackprof-hi: (CPU - base) / samples), and its added CPU at
100 Hz is that cost times its 100 Hz sample count. polyprof's cost is the
agent's own CPU, measured directly (targets are never stopped). Prints one
line per figure and the ratio. Standard library only.

  bench/ruby/run.py [--procs 10] [--iters 1500] [--rounds 3] [--hi-interval 200]
                    [--build DIR]
"""
import argparse
import glob
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
SRC = os.path.dirname(os.path.dirname(HERE))
WORKLOAD = os.path.join(HERE, "workload.rb")


def cpu_of(ru):
    return ru.ru_utime + ru.ru_stime


def run_procs(n, iters, extra=(), idle=0.0):
    cmd = ["ruby", "-e", "sleep %.2f" % idle] if idle else ["ruby", WORKLOAD, str(iters)] + list(extra)
    return [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(n)]


def reap(procs):
    cpu, samples = 0.0, 0
    for p in procs:
        out = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            sys.exit("workload failed: rc %d" % p.returncode)
        cpu += cpu_of(ru)
        for line in out.splitlines():
            if line.startswith("samples "):
                samples += int(line.split()[1])
    return cpu, samples


def phase_base(a):
    return reap(run_procs(a.procs, a.iters))


def phase_stackprof(a, interval=10000, mode="cpu"):
    return reap(run_procs(a.procs, a.iters, ["stackprof", str(interval), mode]))


def phase_polyprof(a, idle=0.0):
    """The agent on the workload; with idle > 0, on sleeping Ruby processes
    for that many seconds instead (its fixed cost: ticks, polls, sessions)."""
    tmp = tempfile.mkdtemp(prefix="ppbench-")
    plugdir = os.path.join(tmp, "plugins")
    os.mkdir(plugdir)
    os.symlink(os.path.join(a.build, "plugins", "ruby.so"), os.path.join(plugdir, "ruby.so"))
    procs = run_procs(a.procs, a.iters, idle=idle)
    t0 = time.monotonic()
    agent = subprocess.Popen(
        [os.path.join(a.build, "polyprof"), "-o", os.path.join(tmp, "out"), "-c", "-d", "60", "-f", "100",
         "--plugin-dir", plugdir, "--config", os.path.join(SRC, "tests", "integration", "empty.yaml"),
         "--pid-file", os.path.join(tmp, "pp.pid"), "--log-file", os.path.join(tmp, "pp.log"),
         "--pids", ",".join(str(p.pid) for p in procs)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cpu, _ = reap(procs)
    wall = time.monotonic() - t0
    os.kill(agent.pid, signal.SIGTERM)  # not Popen.send_signal: it would reap the agent
    _, status, ru = os.wait4(agent.pid, 0)
    agent.returncode = os.waitstatus_to_exitcode(status)
    agent_cpu = cpu_of(ru)  # includes its reaped plugin workers (RUSAGE_BOTH)
    samples = 0
    for col in glob.glob(os.path.join(tmp, "out", "profile_*.col")):
        with open(col, encoding="utf-8") as f:
            header = json.loads(f.readline()[2:])
        samples += header.get("polyprof", {}).get("ruby", {}).get("counters", {}).get("samples", 0)
    shutil.rmtree(tmp, ignore_errors=True)
    return cpu, samples, agent_cpu, wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=10)
    ap.add_argument("--iters", type=int, default=1500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hi-interval", type=int, default=200)
    ap.add_argument("--build", default=os.environ.get("PP_BUILD_DIR", os.path.join(SRC, "build")))
    a = ap.parse_args()
    if not shutil.which("ruby"):
        sys.exit("ruby not found (Debian: apt-get install ruby ruby-stackprof)")
    if subprocess.run(["ruby", "-e", "require 'stackprof'"], stderr=subprocess.DEVNULL).returncode:
        sys.exit("stackprof not found (Debian: apt-get install ruby-stackprof)")
    print("host: %d CPUs, load %.1f, %s, %s" % (os.cpu_count(), os.getloadavg()[0],
          subprocess.run(["ruby", "-v"], stdout=subprocess.PIPE, text=True).stdout.strip(),
          " ".join(sys.argv[1:]) or "(defaults)"))
    base, sp, hi, pp, idle = [], [], [], [], []
    for r in range(a.rounds):
        base.append(phase_base(a))
        sp.append(phase_stackprof(a))
        hi.append(phase_stackprof(a, a.hi_interval, "wall"))
        pp.append(phase_polyprof(a))
        idle.append(phase_polyprof(a, idle=pp[-1][3]))
        print("round %d: base %.2f s | stackprof %.2f s, %d samples | stackprof-hi %.2f s, %d samples"
              " | polyprof targets %.2f s + agent %.3f s, %d samples in %.1f s | agent on idle targets %.3f s"
              % (r + 1, base[-1][0], sp[-1][0], sp[-1][1], hi[-1][0], hi[-1][1], pp[-1][0], pp[-1][2],
                 pp[-1][1], pp[-1][3], idle[-1][2]), flush=True)
    med = statistics.median
    b = med(x[0] for x in base)
    sp_samples = med(x[1] for x in sp)
    sp_diff = med(x[0] for x in sp) - b
    hi_cost = med((x[0] - b) / max(x[1], 1) for x in hi)
    sp_added = hi_cost * sp_samples
    pp_agent = med(x[2] for x in pp)
    pp_samples = med(x[1] for x in pp)
    pp_diff = med(x[0] for x in pp) - b
    print("base CPU (median)                     %8.3f s for %d processes" % (b, a.procs))
    print("stackprof cost per sample (hi rate)   %8.1f us" % (1e6 * hi_cost))
    print("stackprof samples at 100 Hz           %8d" % sp_samples)
    print("stackprof added CPU at 100 Hz (est.)  %8.3f s  (measured difference %.3f s, within noise)"
          % (sp_added, sp_diff))
    print("polyprof samples at 100 Hz            %8d" % pp_samples)
    print("polyprof agent CPU per sample         %8.1f us  (all agent CPU / samples)"
          % (1e6 * pp_agent / max(pp_samples, 1)))
    print("polyprof added CPU at 100 Hz (agent)  %8.3f s  (target CPU difference %.3f s, noise)"
          % (pp_agent, pp_diff))
    pp_marginal = med((x[2] - y[2]) / max(x[1], 1) for x, y in zip(pp, idle))
    pp_fixed = med(y[2] / max(y[3], 0.1) for y in idle)
    print("polyprof fixed cost (idle targets)    %8.1f ms per second of wall time, %d targets"
          % (1e3 * pp_fixed, a.procs))
    print("polyprof cost per sample beyond that  %8.1f us" % (1e6 * pp_marginal))
    print("ratio stackprof/polyprof added CPU    %8.2f" % (sp_added / pp_agent if pp_agent > 0 else float("inf")))
    print("ratio stackprof/polyprof per sample   %8.2f  (stackprof per sample / polyprof marginal per sample)"
          % (hi_cost / pp_marginal if pp_marginal > 0 else float("inf")))

if __name__ == "__main__":
    main()
