#!/usr/bin/env python3
"""Agent overhead with every runtime running and every plugin on.

Starts one workload per runtime (bench/overhead/workloads.py), then for each
rate (default 11 Hz, the shipped default, and 100 Hz) runs the agent with
the shipped config (config/polyprof.yaml: all plugins on) in continuous
mode for N sessions, and measures it from /proc:

  - CPU of the agent + all its workers (utime+stime, reaped children
    included) per session; the first session (plugin start-up, first
    symbol loads) is reported apart from the steady sessions;
  - peak RSS: sum of VmHWM over the agent and its workers; PSS sum (shared
    pages counted once) and RSS sum, peak of the samples taken every 2 s.

In the same run, side by side, perf's own pipeline as gProfiler runs it:
`perf record -F <rate> -a -g -m 129 -o FILE -- sleep <duration>` then
`perf script -F +pid -i FILE`, once per session; its CPU comes from wait4,
its peak RSS from its own VmHWM polled until it exits (wait4's ru_maxrss
would carry this Python harness's RSS). Prints one line per figure with the ratio.

  bench/overhead/run.py [--sessions 4] [--duration 60] [--rates 11,100] [--build DIR]

Budget: at 11 Hz, <= 1 % of one core averaged over a session and
<= 64 MiB peak RSS (agent + workers). Exit status 1 when it is not met.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import procstat  # noqa: E402
import workloads  # noqa: E402

# plugins off by default in the shipped config (as in gProfiler), on here
DEFAULT_MODES = ["--nodejs-mode", "inspector", "--php-mode", "phpspy", "--dotnet-mode", "dotnet-trace"]
BUDGET_CPU_PCT = 1.0
BUDGET_RSS_MIB = 64.0


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class PerfPeer(threading.Thread):
    """gProfiler's pipeline, one record + script per session, back to back."""

    def __init__(self, perf, rate, duration, sessions, work):
        super().__init__(daemon=True)
        self.perf, self.rate, self.duration, self.sessions, self.work = perf, rate, duration, sessions, work
        self.results = []  # (record cpu, script cpu, peak rss KiB, samples-bytes of script output)
        self.stop = False
        self.procs = []

    def _run(self, cmd, stdout):
        p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        status, cpu, peak_kib = procstat.wait_with_peak(p.pid)
        p.returncode = status
        return cpu, peak_kib

    def run(self):
        data = os.path.join(self.work, "perf.data")
        text = os.path.join(self.work, "perf.txt")
        for _ in range(self.sessions):
            if self.stop:
                break
            rcpu, rrss = self._run([self.perf, "record", "-q", "-F", str(self.rate), "-a", "-g", "-m", "129",
                                    "-o", data, "--", "sleep", str(self.duration)], subprocess.DEVNULL)
            if self.stop:
                break
            with open(text, "wb") as out:
                scpu, srss = self._run([self.perf, "script", "-F", "+pid", "-i", data], out)
            self.results.append((rcpu, scpu, max(rrss, srss), os.path.getsize(text)))

    def kill(self):
        self.stop = True
        for p in self.procs:
            if p.poll() is None:
                p.kill()


def run_agent(a, rate, work):
    out = os.path.join(work, "out-%d" % rate)
    os.makedirs(out)
    cmd = [os.path.join(a.build, "polyprof"), "-c", "-f", str(rate), "-d", str(a.duration), "-o", out,
           "--config", os.path.join(SRC, "config", "polyprof.yaml"),
           "--plugin-dir", os.path.join(a.build, "plugins"),
           "--pid-file", os.path.join(work, "agent-%d.pid" % rate),
           "--log-file", os.path.join(work, "agent-%d.log" % rate),
           # run under `unshare --pid` (docs/performance.md), so it sees only
           # the benchmark's processes: not the init pid namespace
           "--disable-pidns-check"] + a.agent_args
    return cmd, out


def measure(a, rate, perf, work):
    cmd, out = run_agent(a, rate, work)
    peer = PerfPeer(perf, rate, a.duration, a.sessions, tempfile.mkdtemp(dir=work)) if perf else None
    la0 = loadavg()
    t0 = time.monotonic()
    agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if peer:
        peer.start()
    marks = [(t0, 0.0, {})]  # (time, tree cpu, per-process cpu) at start and after each session
    seen = set()
    peak = {"pss": 0, "rss": 0, "hwm": 0, "anon": 0}
    last_snap = None
    next_mem = t0
    deadline = t0 + a.sessions * (a.duration + 30) + 60
    try:
        while len(marks) <= a.sessions and time.monotonic() < deadline and agent.poll() is None:
            time.sleep(0.2)
            cols = set(glob.glob(os.path.join(out, "profile_*.col")))
            if cols - seen:
                seen |= cols
                pids = procstat.tree(agent.pid)
                per = {"%s[%d]" % (procstat.comm(p), p): procstat.cpu_seconds([p]) for p in pids}
                marks.append((time.monotonic(), procstat.cpu_seconds(pids), per))
            if time.monotonic() >= next_mem:
                snap = procstat.Snapshot(agent.pid)
                for k in peak:
                    peak[k] = max(peak[k], getattr(snap, k))
                last_snap = snap
                next_mem = time.monotonic() + 2
        last_snap = procstat.Snapshot(agent.pid)
        for k in peak:
            peak[k] = max(peak[k], getattr(last_snap, k))
    finally:
        agent.terminate()
        try:
            agent.wait(timeout=60)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()
        if peer:
            peer.join(timeout=a.duration + 120)
            peer.kill()
    la1 = loadavg()
    ok = True
    nsess = len(marks) - 1
    print("--- %d Hz: %d sessions of %d s, all plugins (config/polyprof.yaml + %s); load average %s at start, %s at end"
          % (rate, nsess, a.duration, " ".join(a.agent_args), la0, la1))
    if nsess < 2:
        print("FAIL %d Hz: only %d session(s) written (agent exit status %s); log: %s"
              % (rate, nsess, agent.returncode, os.path.join(work, "agent-%d.log" % rate)))
        return False
    first_cpu = marks[1][1] - marks[0][1]
    first_wall = marks[1][0] - marks[0][0]
    steady = [(marks[i][1] - marks[i - 1][1], marks[i][0] - marks[i - 1][0]) for i in range(2, len(marks))]
    s_cpu = sum(c for c, _ in steady) / len(steady)
    s_pct = 100.0 * sum(c for c, _ in steady) / sum(w for _, w in steady)
    worst = max(100.0 * c / w for c, w in steady)
    print("%d Hz agent CPU, first session (start-up included): %.2f s in %.0f s = %.2f %% of one core"
          % (rate, first_cpu, first_wall, 100.0 * first_cpu / first_wall))
    print("%d Hz agent CPU, steady sessions: %.2f s per session, %.3f %% of one core (worst session %.3f %%; "
          "per session: %s)" % (rate, s_cpu, s_pct, worst, ", ".join("%.2f" % c for c, _ in steady)))
    # where the CPU goes: per process over the steady sessions
    first, last = marks[1][2], marks[-1][2]
    parts = ["%s %.2f" % (k, (last.get(k, 0) - first.get(k, 0)) / len(steady)) for k in sorted(last)]
    print("%d Hz agent CPU per process per steady session (s): %s" % (rate, ", ".join(parts)))
    hwm_mib, pss_mib, rss_mib = peak["hwm"] / 1024.0, peak["pss"] / 1024.0, peak["rss"] / 1024.0
    print("%d Hz agent memory: peak RSS (sum of VmHWM) %.1f MiB, peak PSS sum %.1f MiB, peak RSS sum %.1f MiB, "
          "peak anonymous RSS sum %.1f MiB, %d processes"
          % (rate, hwm_mib, pss_mib, rss_mib, peak["anon"] / 1024.0, len(last_snap.per)))
    print("%d Hz agent memory per process at the end (VmHWM / PSS / RssAnon MiB): %s" % (rate, ", ".join(
        "%s %.1f/%.1f/%.1f" % (v["comm"], v["hwm"] / 1024.0, v["pss"] / 1024.0, v["anon"] / 1024.0)
        for p, v in sorted(last_snap.per.items()))))
    if rate == 11:
        ok &= s_pct <= BUDGET_CPU_PCT and hwm_mib <= BUDGET_RSS_MIB
        print("11 Hz budget: CPU %.3f %% <= %.1f %%: %s; peak RSS %.1f MiB <= %.0f MiB: %s"
              % (s_pct, BUDGET_CPU_PCT, "met" if s_pct <= BUDGET_CPU_PCT else "NOT MET", hwm_mib,
                 BUDGET_RSS_MIB, "met" if hwm_mib <= BUDGET_RSS_MIB else "NOT MET"))
    if peer and peer.results:
        r = peer.results
        pcpu = sum(x[0] + x[1] for x in r) / len(r)
        prec = sum(x[0] for x in r) / len(r)
        pscr = sum(x[1] for x in r) / len(r)
        prss = max(x[2] for x in r) / 1024.0
        print("%d Hz perf record + perf script: %.2f s per session (record %.2f + script %.2f), %.3f %% of one core,"
              " peak RSS %.1f MiB, %d sessions; perf script text %.1f MiB per session"
              % (rate, pcpu, prec, pscr, 100.0 * pcpu / a.duration, prss, len(r),
                 sum(x[3] for x in r) / len(r) / 2**20))
        print("%d Hz ratio polyprof / perf pipeline: CPU per steady session %.2f, peak RSS %.2f (PSS %.2f)"
              % (rate, s_cpu / pcpu if pcpu else float("nan"), hwm_mib / prss, pss_mib / prss))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--duration", type=int, default=60)
    ap.add_argument("--rates", default="11,100")
    ap.add_argument("--build", default=os.environ.get("PP_BUILD_DIR", os.path.join(SRC, "build")))
    ap.add_argument("--no-perf", action="store_true", help="skip the perf record + perf script peer")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, profiles)")
    ap.add_argument("agent_args", nargs="*", help="extra agent flags (after --)")
    a = ap.parse_args()
    if not a.agent_args:
        # the plugins that are off by default (as in gProfiler) turned on
        a.agent_args = DEFAULT_MODES
    a.build = os.path.abspath(a.build)
    if os.geteuid() != 0:
        print("SKIPPED: the agent needs root (perf_event, ptrace) for a system-wide run")
        return 77
    perf = None if a.no_perf else shutil.which("perf")
    if not a.no_perf and not perf:
        print("SKIPPED: perf not installed (Debian: linux-perf), it is the peer of this benchmark")
        return 77
    work = tempfile.mkdtemp(prefix="ppbench-overhead-")
    wl = workloads.Workloads(a.build)
    ok = True
    try:
        wl.start()
        print("workloads: %s" % ", ".join("%s[%d]" % kv for kv in sorted(wl.pids().items())))
        for name, why in sorted(wl.missing.items()):
            print("workload not running: %s (%s)" % (name, why))
        print("host: %d CPUs, kernel %s, load average %s" % (os.cpu_count(), os.uname().release, loadavg()))
        for rate in (int(r) for r in a.rates.split(",")):
            ok &= measure(a, rate, perf, work)
    finally:
        wl.stop()
        if a.keep:
            print("kept: %s (agent logs and profiles)" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
