#!/usr/bin/env python3
"""Soak: the agent in continuous mode for a long time under process churn.

One long-running workload per runtime (bench/overhead/workloads.py) plus a
churn of short-lived processes of several runtimes (Python 2.7 and 3, Ruby,
Node, PHP, native C, Go, Java and .NET less often, bursts of /bin/true),
started and exiting continuously, while the agent runs with every plugin on
(shipped config + the modes of the plugins that are off by default).

Every minute: RSS (sum of VmRSS), PSS and open fds of the agent and all its
workers, printed as one line. At the end it asserts:
  - RSS growth under 5 % from the end of the warm-up (the first ten
    minutes, or half the run when it is shorter than 20 minutes) to the end,
    each side the mean of up to five one-minute samples (the last ones of
    the warm-up, the last ones of the run), so one session's transient
    does not decide;
  - no fd growth: for every process of the agent's tree, the fewest
    standing descriptors it had open over the last five minutes is not
    above the fewest over the last five minutes of the warm-up, counted
    every 5 s. Standing: all but two kinds, counted apart.
    Descriptors bound to a live target (target_fds.py): a worker holds a
    thread's stat file or a connection to a target while the target lives,
    and under churn some target is alive at every instant; each is tied to
    its process (the stat file still reads, the connection's other end is
    held by a live process), so a leaked one, whose target is gone, stays
    standing and raises the floor.
    The perf worker's ELF files: a symbol table reads its names from its
    file and holds the descriptor while a live process maps the file
    (perf.symbol_cache_mb's tables; at most 512, or a quarter of
    RLIMIT_NOFILE), so that count rises as samples reach more of the long-
    lived processes' libraries, then stays. It must stay under the cap, and
    the held files must be mapped by a process (a leaked descriptor names a
    file nobody maps).
    The per-minute line prints the tree's total and the three counts; what
    changed between the two windows is printed per process;
  - every session written: as many profile_*.col files as sessions the
    agent logged, each non-empty, and no stall: a session lasts the
    duration plus its snapshot and write (a few seconds), so at least
    elapsed / (1.25 x duration) - 1 sessions. The mean session length is
    printed; worker restarts, warnings and errors in the log are counted;
  - no target held: every short-lived process exits on its own within
    HELD_S (each runs about 3 s; a JVM or .NET start-up at nice 19 on a
    loaded host takes longer, never minutes). A profiler that keeps a
    finished process from exiting (Node waits at exit for an attached
    inspector session) fails here; the longest life per runtime is printed.

  bench/soak/soak.py [--minutes 60] [--duration 60] [--build DIR]

Exit status 0 when every assertion holds, 1 otherwise.
"""
import argparse
import glob
import itertools
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRC, "bench", "overhead"))
import procstat  # noqa: E402
import target_fds  # noqa: E402
import workloads  # noqa: E402

MODES = ["--nodejs-mode", "inspector", "--php-mode", "phpspy", "--dotnet-mode", "dotnet-trace"]

# short-lived processes: spin ~0.3 s (so they are sampled), then idle, exit
# after ~3 s
PY = "import time\ne=time.time()+0.3\nwhile time.time()<e: pass\ntime.sleep(2.7)"
CHURN = {
    "python3": lambda w: [shutil.which("python3"), "-c", PY],
    "python2.7": lambda w: [shutil.which("python2.7"), "-c", PY],
    "ruby": lambda w: ["ruby", "-e", "e=Time.now+0.3; while Time.now<e; end; sleep 2.7"],
    "nodejs": lambda w: [shutil.which("node"), "-e",
                         "const e=Date.now()+300; while(Date.now()<e){}; setTimeout(()=>{}, 2700)"],
    "php": lambda w: ["php", "-r", "$e=microtime(true)+0.3; while(microtime(true)<$e){} usleep(2700000);"],
    "native-c": lambda w: [w.native, "0.3"],
    "go": lambda w: [w.go, "1"] if w.go else None,
}
RARE = {  # heavy start-up: every 30th tick
    "java": lambda w: ["java", "-XX:CompileCommand=quiet", "-cp", w.java_classes, "HotCold", "3", "1"]
    if w.java_classes else None,
    "dotnet": lambda w: [w.dotnet, "3", "split"] if w.dotnet else None,
}


# a short-lived process alive this long has been kept from exiting
HELD_S = 300


class Churn(threading.Thread):
    def __init__(self, wl):
        super().__init__(daemon=True)
        self.stop = False
        self.started = {}
        self.live = []  # (runtime, Popen, start time)
        self.t0 = time.monotonic()
        self.longest = {}  # runtime -> (longest life seen (s), started at (s into the run))
        self.held = []  # (runtime, pid, seconds): alive past HELD_S
        w = wl
        w.native = workloads.build_native(w.work)
        try:
            w.go = workloads.build_go(w.work)
        except subprocess.CalledProcessError:
            w.go = None
        w.java_classes = os.path.join(w.work, "java") if os.path.isdir(os.path.join(w.work, "java")) else None
        w.dotnet = None
        if shutil.which("dotnet"):
            import build_workload
            try:
                w.dotnet = os.path.join(build_workload.build(w.build_dir), "PolyprofWorkload")
                self.dotnet_env = build_workload.dotnet_env()
            except (RuntimeError, OSError):
                pass
        self.w = w

    def _start(self, name, cmd, env=None):
        if not cmd or not cmd[0]:
            return
        try:
            self.live.append((name, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                                     preexec_fn=lambda: os.nice(19), env=env), time.monotonic()))
            self.started[name] = self.started.get(name, 0) + 1
        except OSError:
            pass

    def run(self):
        self.t0 = time.monotonic()
        names = itertools.cycle(sorted(CHURN))
        for tick in itertools.count():
            if self.stop:
                break
            n = next(names)
            self._start(n, CHURN[n](self.w))
            if tick % 30 == 10:
                self._start("java", RARE["java"](self.w))
            if tick % 30 == 25:
                self._start("dotnet", RARE["dotnet"](self.w), getattr(self, "dotnet_env", None))
            if tick % 10 == 0:
                for _ in range(20):
                    self._start("true", ["/bin/true"])
            self._reap()
            time.sleep(1)

    def _reap(self):
        now, live = time.monotonic(), []
        for name, p, t0 in self.live:
            age = now - t0
            if p.poll() is None and age <= HELD_S:
                live.append((name, p, t0))
                continue
            if p.poll() is None:
                self.held.append((name, p.pid, age))
                p.kill()
                p.wait()
            if age > self.longest.get(name, (0.0, 0.0))[0]:
                self.longest[name] = (age, t0 - self.t0)
        self.live = live

    def kill(self):
        self.stop = True
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout=10)
        self._reap()
        for name, p, t0 in self.live:
            if p.poll() is None:
                p.kill()
            p.wait()
        self.live = []


# perf plugin: descriptors held by symbol tables (plugins/perf/dso.c NAME_FILES_MAX)
PERF_NAME_FILES_MAX = 512


def is_elf(path):
    """True when the descriptor behind path (a /proc/PID/fd/N link) is an ELF file."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def mapped_files():
    """Inode numbers of every file mapped by a process we can see (the
    soak's pid namespace: its own processes)."""
    keys = set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/maps" % d) as f:
                for line in f:
                    parts = line.split(None, 5)
                    if len(parts) < 6 or not parts[5].startswith("/"):
                        continue
                    ino = int(parts[4])
                    if ino:
                        keys.add(ino)
        except (OSError, ValueError):
            continue
    return keys


class FdSample:
    """Descriptors of the agent's tree at one instant, each in one of three
    sets: the perf worker's symbol files (ELF files it holds), descriptors
    bound to a live target (target_fds: a thread's stat file, a connection
    whose other end a live process holds), and the standing rest.
    maps: check each symbol file is mapped by a process (the per-minute look;
    the 5-s looks skip it)."""

    def __init__(self, root, maps=False):
        pids = procstat.tree(root)
        binder = target_fds.Binder(pids)
        self.by_proc = {}  # comm -> {target: count}, every descriptor
        self.standing = {}  # comm -> descriptors neither symbol file nor bound
        self.bound = {}  # comm -> descriptors bound to a live target
        self.symfiles = 0
        self.symfiles_unmapped = []
        mapped = None
        for pid in pids:
            comm = procstat.comm(pid)
            c = self.by_proc.setdefault(comm, {})
            self.standing.setdefault(comm, 0)
            for fd, t, key, link in procstat.fd_targets(pid):
                c[t] = c.get(t, 0) + 1
                if comm == "pp-perf" and key and is_elf("/proc/%d/fd/%s" % (pid, fd)):
                    self.symfiles += 1
                    if maps:
                        if mapped is None:
                            mapped = mapped_files()
                        if key[1] not in mapped:
                            self.symfiles_unmapped.append(t)
                    continue
                if binder.bound(pid, fd, link):
                    self.bound[comm] = self.bound.get(comm, 0) + 1
                else:
                    self.standing[comm] += 1

    @property
    def other(self):
        return sum(self.standing.values())


class FdFloor(threading.Thread):
    """The standing descriptors (FdSample) of every process of the agent's
    tree, per process, every few seconds. Short-lived targets hold
    descriptors in the workers while they live, and about three of them are
    alive at any instant, so a look a minute at the total moved by one or two
    with which runtimes happened to be alive. Two things set them apart: the
    descriptors positively bound to a live target are not counted
    (target_fds), and each process's floor is taken over a look every 5 s
    (60 looks in five minutes), which also covers the bound descriptors
    target_fds cannot tie to a process (the ruby worker's perf_event alarms).
    A leak in any one process raises its floor."""

    def __init__(self, root, t0, every=5.0):
        super().__init__(daemon=True)
        self.root, self.t0, self.every = root, t0, every
        self.samples = []  # (minutes since t0, {comm: standing descriptors})
        self.bound_peak = {}  # comm -> most descriptors bound to live targets at one look
        self.stop = False

    def run(self):
        while not self.stop:
            s = FdSample(self.root)
            for comm, n in s.bound.items():
                self.bound_peak[comm] = max(n, self.bound_peak.get(comm, 0))
            self.samples.append(((time.monotonic() - self.t0) / 60.0, s.standing))
            time.sleep(self.every)

    def floors(self, lo, hi):
        """{comm: (fewest descriptors, looks)} over the looks in minutes (lo, hi]."""
        out = {}
        for m, counts in self.samples:
            if lo < m <= hi:
                for comm, n in counts.items():
                    f, k = out.get(comm, (n, 0))
                    out[comm] = (min(f, n), k + 1)
        return out


def fd_diff(a, b):
    """Lines naming the descriptors that differ between two FdSamples."""
    out = []
    for comm in sorted(set(a.by_proc) | set(b.by_proc)):
        ca, cb = a.by_proc.get(comm, {}), b.by_proc.get(comm, {})
        for t in sorted(set(ca) | set(cb)):
            d = cb.get(t, 0) - ca.get(t, 0)
            if d:
                out.append("  %s: %+d %s" % (comm, d, t))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--duration", type=int, default=60, help="session length (s)")
    ap.add_argument("--build", default=os.environ.get("PP_BUILD_DIR", os.path.join(SRC, "build")))
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIPPED: the agent needs root (perf_event, ptrace) for a system-wide run")
        return 77
    work = tempfile.mkdtemp(prefix="ppbench-soak-")
    out = os.path.join(work, "out")
    log = os.path.join(work, "agent.log")
    wl = workloads.Workloads(os.path.abspath(a.build))
    churn = agent = None
    ok = True
    try:
        wl.start()
        churn = Churn(wl)
        print("workloads: %s; churn: one short-lived process per second (%s), java and .NET every 30 s, "
              "20 x /bin/true every 10 s" % (", ".join(sorted(wl.pids())), ", ".join(sorted(CHURN))))
        cmd = [os.path.join(a.build, "polyprof"), "-c", "-d", str(a.duration), "-o", out,
               "--config", os.path.join(SRC, "config", "polyprof.yaml"),
               "--plugin-dir", os.path.join(a.build, "plugins"),
               "--pid-file", os.path.join(work, "agent.pid"), "--log-file", log] + MODES
        t0 = time.monotonic()
        agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        churn.start()
        fdfloor = FdFloor(agent.pid, t0)
        fdfloor.start()
        warm = 10.0 if a.minutes >= 20 else a.minutes / 2.0
        samples = []  # (minute, rss KiB, pss KiB, fds, nprocs, perf symbol files, other fds)
        fdsamples = {}  # minute -> FdSample
        with open("/proc/loadavg") as f:
            print("start: load average %s; %g minutes, sessions of %d s, warm-up %g minutes"
                  % (" ".join(f.read().split()[:3]), a.minutes, a.duration, warm))
        for minute in itertools.count(1):
            until = t0 + minute * 60
            while time.monotonic() < until and agent.poll() is None:
                time.sleep(1)
            if agent.poll() is not None:
                print("FAIL: the agent exited with status %s at minute %d" % (agent.returncode, minute))
                ok = False
                break
            s = procstat.Snapshot(agent.pid)
            ncol = len(glob.glob(os.path.join(out, "profile_*.col")))
            with open("/proc/loadavg") as f:
                la = f.read().split()[0]
            fs = FdSample(agent.pid, maps=True)
            fdsamples[minute] = fs
            samples.append((minute, s.rss, s.pss, s.fds, len(s.pids), fs.symfiles, fs.other))
            print("minute %3d: RSS %.1f MiB, PSS %.1f MiB, fds %d (perf symbol files %d, bound to live targets %d, "
                  "standing %d), processes %d, "
                  "sessions written %d, load %s"
                  % (minute, s.rss / 1024.0, s.pss / 1024.0, s.fds, fs.symfiles, sum(fs.bound.values()), fs.other,
                     len(s.pids), ncol, la),
                  flush=True)
            if minute >= a.minutes:
                break
        elapsed = time.monotonic() - t0
        fdfloor.stop = True
        churn.kill()
        if ok:
            ref = [x for x in samples if x[0] <= warm][-5:] or samples[:1]
            end = [x for x in samples if x[0] > warm][-5:] or samples[-1:]
            mean = lambda xs, i: sum(x[i] for x in xs) / float(len(xs))  # noqa: E731
            ref_rss, end_rss = mean(ref, 1), mean(end, 1)
            ref_pss, end_pss = mean(ref, 2), mean(end, 2)
            growth = 100.0 * (end_rss - ref_rss) / ref_rss
            print("RSS end of warm-up (minutes %d-%d) %.1f MiB, end of run (minutes %d-%d) %.1f MiB: growth %.2f %% "
                  "(PSS %.1f -> %.1f MiB, %.2f %%)"
                  % (ref[0][0], ref[-1][0], ref_rss / 1024.0, end[0][0], end[-1][0], end_rss / 1024.0, growth,
                     ref_pss / 1024.0, end_pss / 1024.0, 100.0 * (end_pss - ref_pss) / ref_pss))
            ok &= check(growth < 5.0, "RSS growth %.2f %% < 5 %%" % growth)
            ref_fds, end_fds = min(x[3] for x in ref), min(x[3] for x in end)
            print("fds: floor %d / peak %d at the end of warm-up, floor %d / peak %d at the end of the run"
                  % (ref_fds, max(x[3] for x in ref), end_fds, max(x[3] for x in end)))
            ref_oth, end_oth = min(x[6] for x in ref), min(x[6] for x in end)
            print("standing fds (all but the perf worker's symbol files and those bound to live targets): floor %d / "
                  "peak %d at the end of warm-up, floor %d / "
                  "peak %d at the end of the run"
                  % (ref_oth, max(x[6] for x in ref), end_oth, max(x[6] for x in end)))
            last_min = samples[-1][0]
            fl_ref = fdfloor.floors(max(0.0, warm - 5), warm)
            fl_end = fdfloor.floors(max(warm, last_min - 5), last_min)
            print("standing fds per process, floor over the looks every %g s "
                  "(minutes %g-%g -> %g-%g):" % (fdfloor.every, max(0.0, warm - 5), warm,
                                                  max(warm, last_min - 5), last_min))
            grew = []
            for comm in sorted(set(fl_ref) | set(fl_end)):
                (fr, kr), (fe, ke) = fl_ref.get(comm, (0, 0)), fl_end.get(comm, (0, 0))
                print("  %-10s %3d (%d looks) -> %3d (%d looks)" % (comm, fr, kr, fe, ke))
                if kr and ke and fe > fr:
                    grew.append("%s %d -> %d" % (comm, fr, fe))
            print("descriptors bound to live targets, most at one look over the run: %s" % (", ".join(
                "%s %d" % kv for kv in sorted(fdfloor.bound_peak.items())) or "none"))
            ok &= check(fl_ref and fl_end and not grew,
                        "no fd growth: no process's descriptor floor rose (sum %d -> %d)%s"
                        % (sum(f for f, _ in fl_ref.values()), sum(f for f, _ in fl_end.values()),
                           (": " + ", ".join(grew)) if grew else ""))
            sym_ref, sym_end = ref[-1][5], end[-1][5]
            last = fdsamples[end[-1][0]]
            print("perf worker's symbol files: %d at minute %d, %d at minute %d (max %d over the run); at the end "
                  "%d of them name a file no live process maps (an exited process's, dropped at the next "
                  "snapshot, or a separate debug file)%s"
                  % (sym_ref, ref[-1][0], sym_end, end[-1][0], max(x[5] for x in samples),
                     len(last.symfiles_unmapped),
                     (": " + ", ".join(sorted(last.symfiles_unmapped)[:10])) if last.symfiles_unmapped else ""))
            ok &= check(max(x[5] for x in samples) <= PERF_NAME_FILES_MAX,
                        "perf worker's symbol files bounded: at most %d <= %d"
                        % (max(x[5] for x in samples), PERF_NAME_FILES_MAX))
            diff = fd_diff(fdsamples[ref[-1][0]], last)
            print("descriptors that differ between minute %d and minute %d (per process, +: more at the end):%s"
                  % (ref[-1][0], end[-1][0], "\n" + "\n".join(diff) if diff else " none"))
            cols = sorted(glob.glob(os.path.join(out, "profile_*.col")))
            with open(log, errors="replace") as f:
                text = f.read()
            lengths = [float(x) for x in re.findall(r"polyprof: session \d+: ([0-9.]+) s", text)]
            sess = len(lengths)
            want = int(elapsed // (1.25 * a.duration)) - 1
            print("sessions: %d in %.1f minutes, mean length %.1f s (%d s + snapshot and write)"
                  % (sess, elapsed / 60, sum(lengths) / max(sess, 1), a.duration))
            ok &= check(sess == len(cols) and sess >= 1,
                        "every session written: %d .col files, %d sessions in the log" % (len(cols), sess))
            ok &= check(sess >= want, "no stall: %d sessions >= %d" % (sess, want))
            empty = [c for c in cols if os.path.getsize(c) < 100]
            ok &= check(not empty, "every .col holds stacks (%d empty)" % len(empty))
            restarts = len(re.findall(r"restart", text))
            print("log: %d lines mentioning a restart, %d warnings, %d errors" % (
                restarts, text.count("WARNING"), text.count("ERROR")))
            print("churn started: %s" % ", ".join("%s %d" % kv for kv in sorted(churn.started.items())))
            print("churn: longest life per runtime: %s" % ", ".join(
                "%s %.1f s (started at %.0f s)" % (k, a, t) for k, (a, t) in sorted(churn.longest.items())))
            ok &= check(not churn.held, "no target held: no short-lived process alive after %d s%s" % (
                HELD_S, (": " + ", ".join("%s pid %d (%.0f s)" % h for h in churn.held[:10])) if churn.held else ""))
    finally:
        if churn:
            churn.kill()
        if agent and agent.poll() is None:
            agent.terminate()
            try:
                agent.wait(timeout=60)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait()
        wl.stop()
        if a.keep:
            print("kept: %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print("soak: %s" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


def check(cond, what):
    print("%s: %s" % ("ok" if cond else "FAIL", what))
    return cond


if __name__ == "__main__":
    sys.exit(main())
