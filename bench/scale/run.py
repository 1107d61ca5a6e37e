#!/usr/bin/env python3
"""How the agent's cost grows with the number of target processes.

Starts a mix of target processes a host would have (mostly Python, idle
and a few busy; idle Ruby; idle Node; two idle JVMs from 100 targets on),
at 10, 100 and 1,000 targets, and runs the agent on them at 11 Hz with
the shipped config (config/polyprof.yaml) plus the nodejs plugin in its
`perf` mode (nothing is attached to node; inspector mode would open every
node's inspector). For each size it prints the agent's CPU (the core and
every plugin worker: utime + stime, reaped children included, from
/proc/PID/stat) over a measured window after a warm-up, its summed RSS,
and the cost per target: microseconds of agent CPU per wall second per
target, KiB per target.

Then the goal check: 1,000 idle Python processes and nothing else, PASS
when the agent costs under 1 % of one core.

Peer, in the same run: austin (the CPython frame stack sampler Debian
packages; like py-spy it reads one process per instance), so one austin
per target at 10 and 100 Python targets, at the
same 11 Hz; the agent runs on the same targets first (measured alone),
then the austins; per-target ratio agent / austin. austin 1.0.1 reads
CPython up to 3.10, so these Python targets are the newest interpreter
austin can read (found by trying; --peer-python to choose).

By default the benchmark re-executes itself in a PID namespace of its own
(unshare --pid --fork --mount-proc --kill-child): the agent then sees only
the benchmark's processes, not whatever else the host runs, and when the
benchmark ends, however it ends, the kernel kills every process it
started. To stop it early, press Ctrl-C or signal the benchmark's own
python process (unshare itself ignores SIGTERM while it waits).

  bench/scale/run.py [--build DIR] [--sizes 10,100,1000] [--warmup 20]
                     [--window 60] [--no-goal] [--no-peer] [--keep] [-- agent flags]
"""
import argparse
import atexit
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "overhead"))
import procstat  # noqa: E402

RATE = 11
GOAL_PCT = 1.0
NS_ENV = "PP_BENCH_SCALE_IN_PIDNS"

IDLE_PY = "import time\nwhile True:\n    time.sleep(1)\n"
# a small CPU loop: busy 25 ms, asleep 75 ms (a quarter of a core each, so
# two of them leave the 2-core build machine room for the agent)
BUSY_PY = """import time
def leaf(n):
    s = 0
    for i in range(n):
        s += i * i
    return s
def work():
    t = time.perf_counter()
    while time.perf_counter() - t < 0.025:
        leaf(2000)
while True:
    work()
    time.sleep(0.075)
"""
SLEEP_JAVA = """public class Sleep {
    public static void main(String[] args) throws Exception {
        while (true) Thread.sleep(1000);
    }
}
"""
KINDS = ("python-idle", "python-busy", "ruby-idle", "node-idle", "java-idle")


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def machine_cpu():
    """(busy, total) jiffies of the whole machine, every CPU summed."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return sum(v) - v[3] - v[4], sum(v)


def mix(size, have):
    """The targets of one size: mostly idle Python, 2 busy Python, ~5 %
    idle Ruby, ~4.6 % idle Node, 2 idle JVMs from 100 targets on. A runtime
    that is not installed leaves its share to idle Python."""
    m = {"python-busy": 2,
         "ruby-idle": max(1, size * 5 // 100) if have["ruby"] else 0,
         "node-idle": max(1, int(round(size * 0.046))) if have["node"] else 0,
         "java-idle": 2 if size >= 100 and have["java"] else 0}
    m["python-idle"] = size - sum(m.values())
    return m


def describe(m):
    return ", ".join("%s %d" % (k, m.get(k, 0)) for k in KINDS if m.get(k, 0))


class Targets:
    """Target processes by kind, all in one process group; grown and shrunk
    between sizes so the 1,000 targets are started once."""

    def __init__(self, cmds):
        self.cmds = cmds  # kind -> argv
        self.procs = {k: [] for k in cmds}
        self.pgid = 0

    def _spawn(self, kind):
        kw = {}
        if sys.version_info >= (3, 11):
            kw["process_group"] = self.pgid
        else:
            pg = self.pgid
            kw["preexec_fn"] = lambda: os.setpgid(0, pg)
        p = subprocess.Popen(self.cmds[kind], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, **kw)
        if not self.pgid:
            self.pgid = p.pid
        self.procs[kind].append(p)

    def set(self, want):
        """Starts or kills targets until each kind has want[kind]; returns
        the seconds it took until the new ones settled (idle)."""
        t0 = time.monotonic()
        for kind, procs in self.procs.items():
            n = want.get(kind, 0)
            while len(procs) > n:
                p = procs.pop()
                p.kill()
                p.wait()
        # idle Python first: the group leader must outlive the others
        for kind in sorted(self.procs, key=lambda k: k != "python-idle"):
            while len(self.procs[kind]) < want.get(kind, 0):
                self._spawn(kind)
        self.settle()
        dead = [(k, p.pid, p.returncode) for k, ps in self.procs.items() for p in ps if p.poll() is not None]
        if dead:
            raise RuntimeError("targets exited: %s" % dead[:10])
        return time.monotonic() - t0

    def pids(self, kinds=None):
        return [p.pid for k, ps in self.procs.items() if kinds is None or k in kinds for p in ps]

    def settle(self, timeout=240):
        """Waits until the idle targets have finished starting: their summed
        CPU grows by less than 5 % of a core over 2 s."""
        idle = self.pids([k for k in self.procs if k.endswith("-idle")])
        end = time.monotonic() + timeout
        last = procstat.cpu_seconds(idle)
        while time.monotonic() < end:
            time.sleep(2)
            now = procstat.cpu_seconds(idle)
            if now - last < 0.1:
                return
            last = now
        print("note: targets still starting after %d s (CPU %.2f s in the last 2 s)" % (timeout, now - last))

    def kill_all(self):
        if self.pgid:
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except OSError:
                pass
        for procs in self.procs.values():
            for p in procs:
                if p.poll() is None:
                    p.kill()
            for p in procs:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    pass
            procs.clear()
        self.pgid = 0


def agent_cmd(a, work, label):
    label = re.sub(r"[^\w.-]+", "-", label)
    out = os.path.join(work, "out-" + label)
    os.makedirs(out)
    cmd = [os.path.join(a.build, "polyprof"), "-c", "-f", str(RATE), "-d", str(a.session), "-o", out,
           "--config", os.path.join(SRC, "config", "polyprof.yaml"),
           "--plugin-dir", os.path.join(a.build, "plugins"),
           "--pid-file", os.path.join(work, "agent-%s.pid" % label),
           "--log-file", os.path.join(work, "agent-%s.log" % label)]
    if a.in_pidns:
        cmd.append("--disable-pidns-check")
    return cmd + a.agent_args


def log_targets(path):
    """Targets the core handed to each plugin (its debug lines "python: 3
    new target(s)") and the Python processes the python plugin located."""
    handed, located = {}, 0
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = re.search(r"polyprof: (\w+): (\d+) new target\(s\)", line)
                if m:
                    handed[m.group(1)] = handed.get(m.group(1), 0) + int(m.group(2))
                elif re.search(r"polyprof\.python: pid \d+: Python ", line):
                    located += 1
    except OSError:
        pass
    return handed, located


def python_sampled(root):
    """Target pids the python worker checks the thread state of (it keeps
    /proc/PID/task/TID/stat open for every thread it samples): how many
    Python processes it has located and samples, seen from outside, since
    its log lines of a burst of attaches are rate-limited."""
    pids = set()
    for p in procstat.tree(root):
        if procstat.comm(p) != "pp-python":
            continue
        for _, _, _, link in procstat.fd_targets(p):
            m = re.match(r"/proc/(\d+)/task/\d+/stat$", link)
            if m:
                pids.add(int(m.group(1)))
    return len(pids)


def tree_cpu(root):
    pids = procstat.tree(root)
    return {p: ("%s[%d]" % (procstat.comm(p), p), procstat.cpu_seconds([p])) for p in pids}


def measure_agent(a, work, label, targets, what):
    """Runs the agent, waits the warm-up (and until the python plugin has
    located every Python target), measures CPU over the window and memory
    at its end. Returns a dict of figures, or None."""
    cmd = agent_cmd(a, work, label)
    log = os.path.join(work, "agent-%s.log" % re.sub(r"[^\w.-]+", "-", label))
    ntargets = len(targets.pids())
    npython = len(targets.pids([k for k in targets.procs if k.startswith("python")]))
    la0 = loadavg()
    agent = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        t_start = time.monotonic()
        time.sleep(a.warmup)
        end = time.monotonic() + 120
        while (log_targets(log)[1] < npython and python_sampled(agent.pid) < npython
               and time.monotonic() < end and agent.poll() is None):
            time.sleep(1)
        if agent.poll() is not None:
            print("FAIL %s: agent exited with status %s during the warm-up" % (label, agent.returncode))
            return None
        c0 = tree_cpu(agent.pid)
        t0 = time.monotonic()
        m0, tg0 = machine_cpu(), procstat.cpu_seconds(targets.pids())
        warm_cpu = sum(c for _, c in c0.values())
        time.sleep(a.window)
        c1 = tree_cpu(agent.pid)
        t1 = time.monotonic()
        m1, tg1 = machine_cpu(), procstat.cpu_seconds(targets.pids())
        snap = procstat.Snapshot(agent.pid)
        sampled = python_sampled(agent.pid)
        alive = agent.poll() is None
    finally:
        agent.terminate()
        try:
            agent.wait(timeout=60)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()
    la1 = loadavg()
    if not alive:
        print("FAIL %s: agent exited with status %s during the window" % (label, agent.returncode))
        return None
    wall = t1 - t0
    # a worker that exits and is reaped moves all its time into the core's
    # cutime/cstime, so the difference of the sums is the tree's CPU even
    # when a worker restarted in the window
    cpu = sum(c for _, c in c1.values()) - sum(c for _, c in c0.values())
    per = []
    for p, (name, c) in sorted(c1.items(), key=lambda kv: kv[1][0]):
        per.append((name, c - c0.get(p, (name, 0.0))[1]))
    handed, located = log_targets(log)
    r = {"label": label, "n": ntargets, "what": what, "cpu": cpu, "wall": wall, "warm_cpu": warm_cpu,
         "warm_wall": t0 - t_start, "pct": 100.0 * cpu / wall, "us_per_target": 1e6 * cpu / wall / ntargets,
         "rss": snap.rss, "pss": snap.pss, "hwm": snap.hwm, "anon": snap.anon, "fds": snap.fds,
         "snap": snap, "per": per, "la0": la0, "la1": la1,
         "machine": (os.cpu_count() or 1) * (m1[0] - m0[0]) / max(1, m1[1] - m0[1]), "tcpu": (tg1 - tg0) / wall,
         "handed": handed, "located": located, "sampled": sampled}
    print_agent(r)
    return r


def print_agent(r):
    lab = r["label"]
    print("--- %s: %d targets (%s); load average %s at start, %s at end"
          % (lab, r["n"], r["what"], r["la0"], r["la1"]))
    print("%s targets handed to plugins: %s; Python processes the python worker samples (a thread's stat "
          "file open): %d, located in its log: %d (rate-limited); this benchmark's own interpreter is one of them"
          % (lab, ", ".join("%s %d" % kv for kv in sorted(r["handed"].items())) or "none", r["sampled"],
             r["located"]))
    print("%s machine during the window: %.2f of %d CPUs busy (every process on the host), of which the "
          "targets %.2f" % (lab, r["machine"], os.cpu_count(), r["tcpu"]))
    print("%s agent CPU, warm-up (start-up, attaches): %.2f s in %.0f s"
          % (lab, r["warm_cpu"], r["warm_wall"]))
    print("%s agent CPU: %.2f s in %.1f s = %.3f %% of one core" % (lab, r["cpu"], r["wall"], r["pct"]))
    print("%s agent CPU per target: %.2f us per wall second per target" % (lab, r["us_per_target"]))
    print("%s agent RSS sum: %.1f MiB (PSS sum %.1f MiB, RssAnon sum %.1f MiB, VmHWM sum %.1f MiB, %d processes)"
          % (lab, r["rss"] / 1024.0, r["pss"] / 1024.0, r["anon"] / 1024.0, r["hwm"] / 1024.0,
             len(r["snap"].per)))
    print("%s agent RSS per target: %.1f KiB (PSS %.1f KiB)" % (lab, r["rss"] / r["n"], r["pss"] / r["n"]))
    print("%s agent CPU per process in the window (s): %s"
          % (lab, ", ".join("%s %.2f" % (n.split("[")[0], c) for n, c in r["per"])))
    print("%s agent memory per process at the end (VmRSS / PSS / RssAnon MiB, fds): %s" % (lab, ", ".join(
        "%s %.1f/%.1f/%.1f %d" % (v["comm"], v["rss"] / 1024.0, v["pss"] / 1024.0, v["anon"] / 1024.0,
                                  v["fds"]) for _, v in sorted(r["snap"].per.items()))))
    sys.stdout.flush()


def measure_austin(a, targets, label):
    """One austin per target at 11 Hz; CPU and RSS of all of them over the
    window after a warm-up."""
    austin = shutil.which("austin")
    interval_us = str(int(round(1e6 / RATE)))
    procs = []
    la0 = loadavg()
    try:
        for pid in targets:
            procs.append(subprocess.Popen([austin, "-t", "2000", "-i", interval_us, "-p", str(pid),
                                           "-o", os.devnull], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(a.peer_warmup)
        pids = [p.pid for p in procs if p.poll() is None]
        c0 = procstat.cpu_seconds(pids)
        t0 = time.monotonic()
        time.sleep(a.peer_window)
        c1 = procstat.cpu_seconds(pids)
        wall = time.monotonic() - t0
        rss = sum(procstat.status_kib(p, "VmRSS") for p in pids)
        pss = sum(procstat.pss_kib(p) for p in pids)
        alive = sum(1 for p in procs if p.poll() is None)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in procs:
            p.wait()
    n = len(targets)
    cpu = c1 - c0
    r = {"n": n, "cpu": cpu, "wall": wall, "pct": 100.0 * cpu / wall, "us_per_target": 1e6 * cpu / wall / n,
         "rss": rss, "pss": pss, "alive": alive}
    print("%s austin: %d instances, %d still attached at the end; load average %s at start, %s at end"
          % (label, n, alive, la0, loadavg()))
    print("%s austin CPU: %.2f s in %.1f s = %.3f %% of one core; %.2f us per wall second per target"
          % (label, cpu, wall, r["pct"], r["us_per_target"]))
    print("%s austin RSS sum: %.1f MiB (PSS sum %.1f MiB); %.1f KiB per target (PSS %.1f KiB)"
          % (label, rss / 1024.0, pss / 1024.0, rss / n, pss / n))
    return r


def austin_reads(austin, python):
    """True when this austin samples this interpreter (austin 1.0.1 stops at
    CPython 3.10)."""
    p = subprocess.Popen([python, "-c", IDLE_PY], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = tempfile.NamedTemporaryFile(prefix="ppbench-scale-austin-", delete=False)
    out.close()
    try:
        time.sleep(0.5)
        q = subprocess.Popen([austin, "-t", "2000", "-i", "10000", "-p", str(p.pid), "-o", out.name],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.5)
        q.send_signal(signal.SIGINT)
        try:
            q.wait(timeout=5)
        except subprocess.TimeoutExpired:
            q.kill()
            q.wait()
        with open(out.name, errors="replace") as f:
            return any(line.startswith("Thread ") for line in f)
    finally:
        p.kill()
        p.wait()
        os.unlink(out.name)


def version_of(python):
    return subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                          capture_output=True, text=True).stdout.strip()


def find_peer_python(a):
    austin = shutil.which("austin")
    if not austin:
        return None, "austin not installed (Debian: apt-get install austin)"
    cands = [a.peer_python] if a.peer_python else (
        [a.python] + sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3")) +
                            glob.glob("/usr/bin/python3.*[0-9]") + glob.glob("/usr/local/bin/python3.*[0-9]"),
                            key=lambda p: [int(x) for x in re.findall(r"\d+", version_of(p) or "0")],
                            reverse=True))
    for py in cands:
        if os.access(py, os.X_OK) and austin_reads(austin, py):
            return py, None
    return None, "austin reads none of: %s" % " ".join(cands)


def default_python():
    # the distribution's interpreter (what a host's services run), else the
    # one on PATH resolved past any pyenv shim
    if os.access("/usr/bin/python3", os.X_OK):
        return "/usr/bin/python3"
    return subprocess.run(["python3", "-c", "import sys; print(sys.executable)"], capture_output=True,
                          text=True).stdout.strip()


def build_java(work):
    javac, java = shutil.which("javac"), shutil.which("java")
    if not javac or not java:
        return None
    d = os.path.join(work, "java")
    os.makedirs(d)
    with open(os.path.join(d, "Sleep.java"), "w") as f:
        f.write(SLEEP_JAVA)
    subprocess.run([javac, "-d", d, os.path.join(d, "Sleep.java")], check=True)
    return [java, "-cp", d, "Sleep"]


def reexec_in_pidns():
    """Runs this script again as PID 1 of a new PID namespace."""
    unshare = shutil.which("unshare")
    if not unshare:
        print("note: unshare not found; running in the host's PID namespace (the agent sees every process)")
        return
    env = dict(os.environ, **{NS_ENV: "1"})
    argv = [unshare, "--pid", "--fork", "--mount-proc", "--kill-child", sys.executable,
            os.path.abspath(__file__)] + sys.argv[1:]
    sys.stdout.flush()
    os.execve(unshare, argv, env)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("PP_BUILD_DIR", os.path.join(SRC, "build")))
    ap.add_argument("--sizes", default="10,100,1000", help="target counts of the mixed runs")
    ap.add_argument("--goal-size", type=int, default=1000, help="idle Python processes of the goal check")
    ap.add_argument("--no-goal", action="store_true", help="skip the idle-Python goal check")
    ap.add_argument("--peer-sizes", default="10,100", help="Python targets of the austin comparison")
    ap.add_argument("--no-peer", action="store_true", help="skip the austin comparison")
    ap.add_argument("--python", default=None, help="interpreter of the Python targets (default /usr/bin/python3)")
    ap.add_argument("--peer-python", default=None, help="interpreter of the austin comparison's targets")
    ap.add_argument("--session", type=int, default=60, help="agent session length (-d), default 60 as shipped")
    ap.add_argument("--warmup", type=float, default=20, help="seconds after the agent starts before measuring")
    ap.add_argument("--window", type=float, default=60,
                    help="measured seconds (default 60: one session end falls inside)")
    ap.add_argument("--peer-warmup", type=float, default=5)
    ap.add_argument("--peer-window", type=float, default=30)
    ap.add_argument("--no-unshare", action="store_true", help="stay in the host's PID namespace")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (agent logs, profiles)")
    ap.add_argument("agent_args", nargs="*", help="extra agent flags (after --)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIPPED: the agent needs root (perf_event, ptrace) for a system-wide run")
        return 77
    if not a.no_unshare and os.environ.get(NS_ENV) != "1":
        reexec_in_pidns()
    a.in_pidns = os.environ.get(NS_ENV) == "1" and os.getpid() == 1
    if not a.agent_args:
        a.agent_args = ["--nodejs-mode", "perf"]
    a.build = os.path.abspath(a.build)
    a.python = a.python or default_python()
    if not os.access(os.path.join(a.build, "polyprof"), os.X_OK):
        print("SKIPPED: no agent at %s (build it first)" % os.path.join(a.build, "polyprof"))
        return 77

    work = tempfile.mkdtemp(prefix="ppbench-scale-")
    live = []  # every Targets ever made: killed at the end however it ends

    def cleanup():
        for t in live:
            t.kill_all()

    atexit.register(cleanup)
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, lambda sig, frame: sys.exit(128 + sig))

    ok = True
    try:
        have = {"ruby": shutil.which("ruby"), "node": shutil.which("node")}
        jcmd = build_java(work)
        have["java"] = bool(jcmd)
        cmds = {"python-idle": [a.python, "-c", IDLE_PY], "python-busy": [a.python, "-c", BUSY_PY]}
        if have["ruby"]:
            cmds["ruby-idle"] = [have["ruby"], "-e", "sleep"]
        if have["node"]:
            cmds["node-idle"] = [have["node"], "-e", "setInterval(() => {}, 1000)"]
        if jcmd:
            cmds["java-idle"] = jcmd
        print("host: %d CPUs, kernel %s, %.1f GiB RAM, load average %s; %s"
              % (os.cpu_count(), os.uname().release,
                 os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, loadavg(),
                 "own PID namespace (the agent sees only this benchmark's processes)" if a.in_pidns
                 else "host PID namespace (the agent also profiles every other process)"))
        print("agent: %s, %d Hz, sessions of %d s, config/polyprof.yaml + %s; warm-up %.0f s (and until every "
              "Python target is located), window %.0f s; CPU = utime + stime from /proc/PID/stat (%d ticks a "
              "second), RSS = VmRSS at the end of the window"
              % (os.path.join(a.build, "polyprof"), RATE, a.session, " ".join(a.agent_args), a.warmup, a.window,
                 procstat.TICK))
        print("targets: Python %s (%s), %s" % (version_of(a.python), a.python, ", ".join(
            "%s %s" % (k, "yes" if v else "not installed") for k, v in sorted(have.items()))))
        sys.stdout.flush()

        if not a.no_peer:
            py, why = find_peer_python(a)
            if not py:
                print("peer: SKIPPED: %s" % why)
            else:
                ver = version_of(py)
                print("peer: austin %s, one instance per target, -i %d us (%d Hz); targets Python %s (%s)"
                      % (subprocess.run(["austin", "-V"], capture_output=True, text=True).stdout.split()[-1],
                         round(1e6 / RATE), RATE, ver, py))
                ptargets = Targets({"python-idle": [py, "-c", IDLE_PY], "python-busy": [py, "-c", BUSY_PY]})
                live.append(ptargets)
                for n in (int(s) for s in a.peer_sizes.split(",") if s):
                    m = {"python-busy": 2, "python-idle": n - 2}
                    took = ptargets.set(m)
                    lab = "peer %d Python %s" % (n, ver)
                    print("%s: targets started and idle in %.1f s" % (lab, took))
                    r = measure_agent(a, work, lab, ptargets, describe(m))
                    if not r:
                        ok = False
                        continue
                    p = measure_austin(a, ptargets.pids(), lab)
                    print("%s ratio polyprof / austin per target: CPU %.3f (%.2f / %.2f us per wall second), "
                          "RSS %.3f (%.1f / %.1f KiB), PSS %.3f"
                          % (lab, r["us_per_target"] / p["us_per_target"] if p["cpu"] else float("nan"),
                             r["us_per_target"], p["us_per_target"], r["rss"] / p["rss"], r["rss"] / n,
                             p["rss"] / n, r["pss"] / p["pss"]))
                    sys.stdout.flush()
                ptargets.kill_all()

        results = {}
        targets = Targets(cmds)
        live.append(targets)
        for size in (int(s) for s in a.sizes.split(",") if s):
            m = mix(size, have)
            took = targets.set(m)
            print("size %d: targets started and idle in %.1f s" % (size, took))
            r = measure_agent(a, work, "size %d" % size, targets, describe(m))
            ok &= r is not None
            results[size] = r

        if not a.no_goal:
            took = targets.set({"python-idle": a.goal_size})
            print("goal: %d idle Python targets started and idle in %.1f s" % (a.goal_size, took))
            r = measure_agent(a, work, "goal %d idle Python" % a.goal_size, targets,
                              "python-idle %d" % a.goal_size)
            if r:
                passed = r["pct"] < GOAL_PCT
                print("goal: %d idle Python processes cost the agent %.3f %% of one core, under %.0f %%: %s"
                      % (a.goal_size, r["pct"], GOAL_PCT, "PASS" if passed else "FAIL"))
                ok &= passed
            else:
                print("goal: FAIL (the agent did not run through the window)")
                ok = False
        targets.kill_all()

        sizes = sorted(k for k, v in results.items() if v)
        for lo, hi in zip(sizes, sizes[1:]):
            rl, rh = results[lo], results[hi]
            cpu_rate_l, cpu_rate_h = rl["cpu"] / rl["wall"], rh["cpu"] / rh["wall"]
            print("scale %d -> %d targets (x%.1f): agent CPU x%.2f, RSS sum x%.2f; marginal cost per added "
                  "target %.2f us per wall second, %.1f KiB RSS (%.1f KiB PSS)"
                  % (lo, hi, hi / lo, cpu_rate_h / cpu_rate_l, rh["rss"] / rl["rss"],
                     1e6 * (cpu_rate_h - cpu_rate_l) / (hi - lo), (rh["rss"] - rl["rss"]) / (hi - lo),
                     (rh["pss"] - rl["pss"]) / (hi - lo)))

        names = sorted({n.split("[")[0] for k in sizes for n, _ in results[k]["per"]})
        for name in names:
            print("scale %s CPU over the window (s): %s" % (name, ", ".join(
                "%d targets %.2f" % (k, sum(c for n, c in results[k]["per"] if n.split("[")[0] == name))
                for k in sizes)))
        print("load average at the end: %s" % loadavg())
    finally:
        cleanup()
        if a.keep:
            print("kept: %s (agent logs and profiles)" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
