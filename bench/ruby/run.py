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
                by SIGTERM, which writes the last session): a sample per
                10 ms of a thread's CPU time, as stackprof's cpu mode
  idle         the agent for as long on N sleeping Ruby processes: its
                fixed cost (housekeeping, sessions), so the cost per
                sample beyond it can be told apart. The window ends
                before the sleepers exit; their exits (the samples of
                Ruby's own teardown, dropping their alarms) are printed
                apart, as they are a per-process cost, not a per-second one
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


def task_cpu_ns(pid):
    """CPU time of every thread of a process, in ns (schedstat: exact, where
    /proc/PID/stat counts 10 ms ticks)."""
    total = 0
    for stat in glob.glob("/proc/%d/task/*/schedstat" % pid):
        try:
            with open(stat) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def agent_cpu_ns(agent_pid):
    """(core, plugin workers) CPU in ns: the agent and its child processes."""
    kids = []
    for ch in glob.glob("/proc/%d/task/*/children" % agent_pid):
        with open(ch) as f:
            kids += [int(x) for x in f.read().split()]
    return task_cpu_ns(agent_pid), sum(task_cpu_ns(k) for k in kids)


def wait_attached(log, n, timeout=30.0):
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


def proc_cpu_ticks(pid):
    """utime + stime of a process in clock ticks and its state letter."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return int(rest[11]) + int(rest[12]), rest[0]
    except (OSError, IndexError, ValueError):
        return None, "?"


def wait_quiet(pids, timeout=120.0):
    """Until every process sleeps at its gate with its CPU time still: on a
    loaded host Ruby's start-up (loading rubygems) can outlast the attach by
    seconds, and the agent would sample it inside the measured window (the
    idle phase then measured start-up, not idle targets)."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        now = [proc_cpu_ticks(p) for p in pids]
        if all(st == "S" for _, st in now) and now == last:
            return True
        last = now
        time.sleep(0.2)
    return False


def phase_polyprof(a, idle=0.0, hz=100, warmup=0):
    """The agent on the workload; with idle > 0, on sleeping Ruby processes
    for that many seconds instead (its fixed cost: housekeeping, sessions).
    The Ruby processes wait on a gate until the agent has attached to all of
    them; the agent's CPU (core + plugin worker, every thread) is read from
    schedstat at the gate and when the work is done, so its start-up (plugin
    load, attach, ELF symbols) and its final profile write, one-off costs of
    a continuous profiler, are not counted as sampling cost."""
    tmp = tempfile.mkdtemp(prefix="ppbench-")
    plugdir = os.path.join(tmp, "plugins")
    os.mkdir(plugdir)
    os.symlink(os.path.join(a.build, "plugins", "ruby.so"), os.path.join(plugdir, "ruby.so"))
    env = dict(os.environ, PP_BENCH_GATE="1", PP_BENCH_WARMUP=str(warmup if not idle else 0))
    # idle targets sleep past the window: it measures the agent beside
    # sleeping processes, not their exits (those are reported apart)
    cmd = ["ruby", "-e", "$stdin.gets; sleep %.2f" % (idle + 1.0)] if idle else ["ruby", WORKLOAD, str(a.iters)]
    procs = [subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
             for _ in range(a.procs)]
    log = os.path.join(tmp, "pp.log")
    agent = subprocess.Popen(
        [os.path.join(a.build, "polyprof"), "-o", os.path.join(tmp, "out"), "-c", "-d", "60", "-f", "100",
         "--plugin-dir", plugdir, "--config", os.path.join(SRC, "tests", "integration", "empty.yaml"),
         "--pid-file", os.path.join(tmp, "pp.pid"), "--log-file", log,
         "--ruby-frequency", str(hz), "--pids", ",".join(str(p.pid) for p in procs)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not wait_attached(log, a.procs):
        sys.exit("the agent did not attach to every Ruby process; see %s" % log)
    time.sleep(0.5)
    if not wait_quiet([p.pid for p in procs]):
        sys.exit("the Ruby processes did not settle at their gate")
    if warmup and not idle:
        # the agent samples the warm-up; the measured window starts after it
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            if p.stdout.readline().strip() != "warm":
                sys.exit("workload warm-up failed")
    core0, work0 = agent_cpu_ns(agent.pid)
    t0 = time.monotonic()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.close()
    exit_cost = 0.0
    if idle:
        time.sleep(idle)
        core1, work1 = agent_cpu_ns(agent.pid)
        wall = time.monotonic() - t0
        cpu, _ = reap(procs)
        core2, work2 = agent_cpu_ns(agent.pid)
        exit_cost = ((core2 - core1) + (work2 - work1)) / 1e9
    else:
        cpu, _ = reap(procs)
        wall = time.monotonic() - t0
        core1, work1 = agent_cpu_ns(agent.pid)
    os.kill(agent.pid, signal.SIGTERM)  # not Popen.send_signal: it would reap the agent
    os.wait4(agent.pid, 0)
    samples = periods = wakeups = 0
    for col in glob.glob(os.path.join(tmp, "out", "profile_*.col")):
        with open(col, encoding="utf-8") as f:
            header = json.loads(f.readline()[2:])
        counters = header.get("polyprof", {}).get("ruby", {}).get("counters", {})
        samples += counters.get("samples", 0)
        periods += counters.get("cpu_periods", 0)
        wakeups += counters.get("wakeups", 0)
    shutil.rmtree(tmp, ignore_errors=True)
    agent_cpu = ((core1 - core0) + (work1 - work0)) / 1e9
    return cpu, samples, agent_cpu, wall, periods, wakeups, (work1 - work0) / 1e9, exit_cost


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=10)
    ap.add_argument("--iters", type=int, default=1500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hi-interval", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=300,
                    help="iterations the agent samples before its steady-state window (0: no such phase)")
    ap.add_argument("--pp-hi-hz", type=int, default=1000,
                    help="polyprof's high rate, where its warm per-sample cost stands out")
    ap.add_argument("--build", default=os.environ.get("PP_BUILD_DIR", os.path.join(SRC, "build")))
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)  # the plugin is symlinked from a temp dir
    if not shutil.which("ruby"):
        sys.exit("ruby not found (Debian: apt-get install ruby ruby-stackprof)")
    if subprocess.run(["ruby", "-e", "require 'stackprof'"], stderr=subprocess.DEVNULL).returncode:
        sys.exit("stackprof not found (Debian: apt-get install ruby-stackprof)")
    print("host: %d CPUs, load %.1f, %s, %s" % (os.cpu_count(), os.getloadavg()[0],
          subprocess.run(["ruby", "-v"], stdout=subprocess.PIPE, text=True).stdout.strip(),
          " ".join(sys.argv[1:]) or "(defaults)"))
    base, sp, hi, pp, pphi, ppw, idle = [], [], [], [], [], [], []
    for r in range(a.rounds):
        base.append(phase_base(a))
        sp.append(phase_stackprof(a))
        hi.append(phase_stackprof(a, a.hi_interval, "wall"))
        pp.append(phase_polyprof(a))
        idle.append(phase_polyprof(a, idle=pp[-1][3]))
        pphi.append(phase_polyprof(a, hz=a.pp_hi_hz))
        if a.warmup:
            ppw.append(phase_polyprof(a, warmup=a.warmup))
            print("round %d: polyprof after a %d-iteration warm-up: agent %.4f s (worker %.4f s), %d samples"
                  " in %.1f s" % (r + 1, a.warmup, ppw[-1][2], ppw[-1][6], ppw[-1][1], ppw[-1][3]), flush=True)
        print("round %d: base %.2f s | stackprof %.2f s, %d samples | stackprof-hi %.2f s, %d samples"
              " | polyprof targets %.2f s + agent %.4f s (worker %.4f s), %d samples (%d CPU periods,"
              " %d wake-ups) in %.1f s | agent on idle targets %.4f s (worker %.4f s) in %.1f s"
              " (their exits: agent %.4f s) | polyprof at %d Hz: agent %.4f s, %d samples in %.1f s"
              % (r + 1, base[-1][0], sp[-1][0], sp[-1][1], hi[-1][0], hi[-1][1], pp[-1][0], pp[-1][2],
                 pp[-1][6], pp[-1][1], pp[-1][4], pp[-1][5], pp[-1][3], idle[-1][2], idle[-1][6],
                 idle[-1][3], idle[-1][7], a.pp_hi_hz, pphi[-1][2], pphi[-1][1], pphi[-1][3]), flush=True)
    print("host load at the end: %.1f %.1f %.1f (1, 5, 15 min)" % os.getloadavg(), flush=True)
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
    print("polyprof samples at 100 Hz            %8d  (stack reads; %d periods of 10 ms CPU, %d wake-ups)"
          % (pp_samples, med(x[4] for x in pp), med(x[5] for x in pp)))
    print("polyprof agent CPU per sample         %8.1f us  (all agent CPU during the work / samples;"
          " plugin worker alone %.1f us)"
          % (1e6 * pp_agent / max(pp_samples, 1), 1e6 * med(x[6] for x in pp) / max(pp_samples, 1)))
    print("polyprof added CPU at 100 Hz (agent)  %8.3f s  (target CPU difference %.3f s, noise)"
          % (pp_agent, pp_diff))
    # every polyprof window ends with its targets' exits: subtracted with
    # the idle fixed cost, as they are no cost per sample
    pp_marginal = med((x[2] - y[2] - y[7]) / max(x[1], 1) for x, y in zip(pp, idle))
    pp_fixed = med(y[2] / max(y[3], 0.1) for y in idle)
    pp_exits = med(y[7] for y in idle)
    print("polyprof fixed cost (idle targets)    %8.2f ms per second of wall time, %d targets"
          " (worker %.2f ms/s; their exits %.2f ms in all)"
          % (1e3 * pp_fixed, a.procs, 1e3 * med(y[6] / max(y[3], 0.1) for y in idle),
             1e3 * pp_exits))
    print("polyprof cost per sample beyond that  %8.1f us" % (1e6 * pp_marginal))
    print("ratio stackprof/polyprof added CPU    %8.2f  (target: less added CPU in total, i.e. > 1: %s)"
          % (sp_added / pp_agent if pp_agent > 0 else float("inf"), "met" if pp_agent < sp_added else "NOT met"))
    # the same method as stackprof's figure: the per-sample cost where it
    # stands out (high rate: warm caches, as stackprof's 5 kHz run has),
    # times the samples at 100 Hz, plus the agent's fixed cost over the
    # wall time of the 100 Hz run and the targets' exits
    pp_hi_cost = med((x[2] - pp_fixed * x[3] - pp_exits) / max(x[1], 1) for x in pphi)
    pp_est = pp_hi_cost * pp_samples + pp_fixed * med(x[3] for x in pp) + pp_exits
    print("polyprof cost per sample (hi rate)    %8.1f us  (%d Hz: %d samples; agent CPU less its fixed cost"
          " and exits)"
          % (1e6 * pp_hi_cost, a.pp_hi_hz, med(x[1] for x in pphi)))
    print("polyprof added CPU at 100 Hz (est.)   %8.3f s  (per sample (hi rate) x samples + fixed cost x wall"
          " + exits)"
          % pp_est)
    print("ratio stackprof/polyprof, estimated   %8.2f  (both estimated the same way; > 1: polyprof adds less)"
          % (sp_added / pp_est if pp_est > 0 else float("inf")))
    print("ratio per sample, both at high rate   %8.2f  (stackprof %.1f us / polyprof %.1f us)"
          % (hi_cost / pp_hi_cost if pp_hi_cost > 0 else float("inf"), 1e6 * hi_cost, 1e6 * pp_hi_cost))
    print("ratio stackprof/polyprof per sample   %8.2f  (stackprof per sample / polyprof marginal per sample)"
          % (hi_cost / pp_marginal if pp_marginal > 0 else float("inf")))
    if ppw:
        w_agent, w_samples = med(x[2] for x in ppw), med(x[1] for x in ppw)
        w_worker = med(x[6] for x in ppw)
        # stackprof's estimate for the same number of samples
        print("polyprof steady state (warm caches)   %8.3f s agent (worker %.3f s, core %.3f s), %d samples:"
              " %.1f us per sample" % (w_agent, w_worker, w_agent - w_worker, w_samples,
                                       1e6 * w_agent / max(w_samples, 1)))
        print("ratio stackprof/polyprof, steady      %8.2f  (stackprof's %.1f us x %d samples / polyprof agent;"
              " > 1: polyprof adds less: %s)"
              % (hi_cost * w_samples / w_agent if w_agent > 0 else float("inf"), 1e6 * hi_cost, w_samples,
                 "met" if w_agent < hi_cost * w_samples else "NOT met"))

if __name__ == "__main__":
    main()
