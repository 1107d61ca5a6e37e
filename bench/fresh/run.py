#!/usr/bin/env python3
"""How soon a short-lived process reaches its plugin, and what looking at
young processes often costs the agent.

Latency: the agent runs with the java, python and dotnet plugins (dotnet in
dotnet-trace mode); the benchmark starts, one at a time, a short JVM
(`java -version`), a JVM of ~1.3 s (HotCold, 1 s of work, from
tests/workloads/java), `python3 -c` of ~1 s and a .NET program of ~1 s
(PolyprofWorkload from tests/workloads/dotnet, built by the SDK), and
while each runs reads its /proc/PID/maps every 2 ms to see when its
runtime library (libjvm.so, libcoreclr.so) appears. From the agent's log
(millisecond timestamps) it takes when the core handed the pid to its
plugin ("<plugin>: N new target(s)") and when the plugin attached ("pid
N: agent armed", "pid N: Python ...", "pid N: EventPipe session ...").
It prints, per run, the times from the start (fork + exec) of the process
to its library being mapped, to the hand-off and to the attach.

Cost: the agent's CPU (the core and its workers: utime + stime, from
/proc/PID/stat) over a window with nothing started, then over a window in
which /bin/true is spawned 50 times a second (posix_spawn from this
script, which is not counted), as a percentage of one core; and the
core process alone, where the scan and the young processes' rechecks run.

  bench/fresh/run.py [--build DIR] [--runs 5] [--window 20] [--rate 50]
                     [--spawn CMD] [--no-latency] [--no-cost] [--only LABEL]
                     [-- agent flags]

Needs root (the agent's plugins attach as the target's user).
"""
import argparse
import atexit
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "overhead"))
sys.path.insert(0, os.path.join(SRC, "tests", "workloads", "java"))
sys.path.insert(0, os.path.join(SRC, "tests", "workloads", "dotnet"))
import procstat  # noqa: E402

PY_BUSY = "import time\nt = time.time() + 1.0\nn = 0\nwhile time.time() < t:\n    n += 1\n"
LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] \w+: ([\w.-]+): (.*)$")


def log_lines(path):
    out = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = LINE.match(line.rstrip("\n"))
                if m:
                    t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                    out.append((t, m.group(2), m.group(3)))
    except OSError:
        pass
    return out


def watch_maps(pid, lib, result):
    """Polls the process's maps until lib shows up (or it is gone)."""
    while True:
        try:
            with open("/proc/%d/maps" % pid) as f:
                if lib in f.read():
                    result.append(time.time())
                    return
        except OSError:
            return
        time.sleep(0.002)


def start_agent(build, extra):
    build = os.path.abspath(build)  # the plugins are linked from a temporary directory
    out = tempfile.mkdtemp(prefix="ppfresh-out-")
    run = tempfile.mkdtemp(prefix="ppfresh-run-")
    plugins = tempfile.mkdtemp(prefix="ppfresh-plugins-")
    for d in (out, run, plugins):
        atexit.register(shutil.rmtree, d, True)
    os.chmod(plugins, 0o755)
    for name in ("java", "python", "dotnet"):
        so = os.path.join(build, "plugins", name + ".so")
        if os.path.exists(so):
            os.symlink(so, os.path.join(plugins, name + ".so"))
    log = os.path.join(run, "polyprof.log")
    cmd = [os.path.join(build, "polyprof"), "-o", out, "-d", "3600", "--plugin-dir", plugins,
           "--pid-file", os.path.join(run, "polyprof.pid"), "--log-file", log,
           "--config", os.path.join(SRC, "tests", "integration", "empty.yaml"),
           "--dotnet-mode", "dotnet-trace"] + extra
    agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.time() + 30
    while time.time() < end and not any("plugins:" in m for _, _, m in log_lines(log)):
        time.sleep(0.1)
    if agent.poll() is not None:
        sys.exit("the agent exited (%s): %s" % (agent.returncode, "".join(m + "\n" for _, _, m in log_lines(log))[-800:]))
    time.sleep(3)  # the workers start
    return agent, log, (out, run, plugins)


def one_run(log, cmd, plugin, lib, attach_re):
    t0 = time.time()
    # close_fds=False: posix_spawn (vfork), so the child is never a copy of
    # this Python process (which the python plugin would be handed)
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=False)
    mapped = []
    w = threading.Thread(target=watch_maps, args=(p.pid, lib, mapped)) if lib else None
    if w:
        w.start()
    p.wait()
    if w:
        w.join()
    time.sleep(1.5)  # the log lines of its end
    handoff = attach = None
    pat = re.compile(r"^%s: \d+ new target\(s\)(: pid ([\d ]+))?" % plugin)
    for t, tag, msg in log_lines(log):
        if t < t0 - 0.01:
            continue
        m = pat.match(msg)
        if handoff is None and tag == "polyprof" and m and (not m.group(2) or str(p.pid) in m.group(2).split()):
            handoff = t
        if attach is None and re.search(attach_re % p.pid, msg):
            attach = t
    end = time.time() - 1.5

    def ms(t):
        return "%5.0f ms" % ((t - t0) * 1000) if t else "   never"
    return ms(mapped[0] if mapped else None), ms(handoff), ms(attach), "%.2f s (pid %d)" % (end - t0, p.pid)


def latency(build, runs, only, extra):
    java = shutil.which("java")
    cases = []
    if java:
        import javawork
        classes = javawork.compile_workloads()
        cases.append(("java -version", [java, "-version"], "java", "libjvm.so", r"pid %d: agent armed"))
        cases.append(("java HotCold 1 s", [java, "-cp", classes, "HotCold", "1", "1"], "java", "libjvm.so",
                      r"pid %d: agent armed"))
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else shutil.which("python3")
    cases.append(("python3 -c (1 s)", [py, "-c", PY_BUSY], "python", None, r"pid %d: Python "))
    if shutil.which("dotnet"):
        import build_workload
        out = build_workload.build(os.path.join(tempfile.gettempdir(), "ppfresh-dotnet"))
        cases.append((".NET (1 s)", [os.path.join(out, "PolyprofWorkload"), "1", "split"], "dotnet",
                       "libcoreclr.so", r"pid %d: EventPipe session"))
    agent, log, _ = start_agent(build, extra)
    try:
        for label, cmd, plugin, lib, attach_re in cases:
            if only not in label:
                continue
            for k in range(runs):
                mapped, handoff, attach, life = one_run(log, cmd, plugin, lib, attach_re)
                print("FIGURE fresh %-18s run %d: lived %s, library mapped %s, handed to %s %s, attached %s"
                      % (label, k, life, mapped, plugin, handoff, attach), flush=True)
    finally:
        agent.terminate()
        agent.wait(timeout=60)


def spawner(argv, rate, stop, count):
    period = 1.0 / rate
    nxt = time.time()
    while not stop.is_set():
        os.posix_spawn(argv[0], argv, os.environ)
        count[0] += 1
        try:  # reaped without waiting for each: the rate holds on a loaded host
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        nxt += period
        d = nxt - time.time()
        if d > 0:
            time.sleep(d)


def core_seconds(pid):
    """utime + stime of the core process alone (the scan's cost is there)."""
    f = procstat._stat_fields(pid)
    return (int(f[11]) + int(f[12])) / procstat.TICK if f else 0.0


def cost(build, window, rate, spawn_cmd, extra):
    agent, log, _ = start_agent(build, extra)
    try:
        time.sleep(5)
        argv = spawn_cmd.split()
        for label, spawn in (("idle", False), ("%d/s %s" % (rate, spawn_cmd), True)):
            stop, count = threading.Event(), [0]
            th = threading.Thread(target=spawner, args=(argv, rate, stop, count)) if spawn else None
            if th:
                th.start()
                time.sleep(2)
            pids = procstat.tree(agent.pid)
            c0, k0, t0, n0 = procstat.cpu_seconds(pids), core_seconds(agent.pid), time.time(), count[0]
            time.sleep(window)
            c1, k1, t1, n1 = procstat.cpu_seconds(pids), core_seconds(agent.pid), time.time(), count[0]
            if th:
                stop.set()
                th.join()
                time.sleep(0.2)
                try:
                    while os.waitpid(-1, os.WNOHANG)[0] > 0:
                        pass
                except ChildProcessError:
                    pass
            print("FIGURE fresh cost %-20s agent CPU %.2f %% of a core, the core alone %.2f %% "
                  "(%d processes/s spawned, %.0f s)"
                  % (label, 100.0 * (c1 - c0) / (t1 - t0), 100.0 * (k1 - k0) / (t1 - t0),
                     (n1 - n0) / (t1 - t0), t1 - t0), flush=True)
    finally:
        agent.terminate()
        agent.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("PP_BUILD_DIR", os.path.join(SRC, "build")))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--window", type=float, default=20)
    ap.add_argument("--rate", type=float, default=50)
    ap.add_argument("--spawn", default="/bin/true", help="the command spawned --rate times a second")
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument("--no-cost", action="store_true")
    ap.add_argument("--only", default="", help="the latency cases whose label holds this")
    ap.add_argument("agent_flags", nargs="*")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/fresh: needs root")
    if not a.no_latency:
        latency(a.build, a.runs, a.only, a.agent_flags)
    if not a.no_cost:
        cost(a.build, a.window, a.rate, a.spawn, a.agent_flags)


if __name__ == "__main__":
    main()
