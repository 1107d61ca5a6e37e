#!/usr/bin/env python3
"""Profile types per runtime: the agent's CPU for --mode cpu, wall and
cpu,offcpu with one runtime plugin (and perf for offcpu, whose native
stacks the runtime's replace) on that runtime's sleep-and-burn workload of
tests/workloads/modes (or tests/workloads/java/SleepBurn.java), each at the
default rate (11 Hz) and at -f 100. Each line also gives the workload's own
CPU over the session (its burner takes about what the host leaves it, so
this shows a mode that costs the target much more, not small differences).

The cost of wall for java (signals to every Java thread on wall-clock
timers) and nodejs v8 (a stack copy by the kernel at every context switch)
is paid inside the target, so it is measured there too: the target's CPU
per second of wall time while it only sleeps (SleepBurn's and
sleep_burn_sync.js's burner off: --idle), cpu against wall.

Usage: sudo bench/modes/runtimes.py [-d 10] [--build build] [--only java,php,...]
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
WL = os.path.join(SRC, "tests", "workloads", "modes")


def proc_cpu(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            v = f.read().rsplit(")", 1)[1].split()
        return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def start(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if "ready" not in p.stdout.readline():
        p.kill()
        raise RuntimeError("workload did not start: %s" % cmd)
    time.sleep(2)  # the JVM is left alone until 1.5 s old
    return p


def agent(a, plugins, mode, pid, extra, freq):
    plug = tempfile.mkdtemp(prefix="ppbench-rt-")
    os.chmod(plug, 0o755)
    for p in plugins:
        os.symlink(os.path.join(a.build, "plugins", p), os.path.join(plug, p))
    out = tempfile.mkdtemp(prefix="ppbench-rt-out-")
    c0 = proc_cpu(pid)
    r = subprocess.run([os.path.join(a.build, "polyprof"), "-o", out, "-d", str(a.d),
                        "--plugin-dir", plug, "--config",
                        os.path.join(SRC, "tests/integration/empty.yaml"), "--mode", mode,
                        "-f", str(freq), "--pids", str(pid), "--pid-file",
                        os.path.join(out, "pid")] + list(extra),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=a.d + 120)
    c1 = proc_cpu(pid)
    m = re.search(r"agent CPU ([0-9.]+) s", r.stderr)
    shutil.rmtree(plug, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    if not m:
        print(r.stderr[-1500:])
    return (float(m.group(1)) if m else float("nan")), c1 - c0


RUNTIMES = {
    # name: (plugin, command(tmp, idle), extra flags)
    "java": ("java.so", lambda tmp, idle: ["java", "-cp", tmp, "SleepBurn", "100000"] +
             (["idle"] if idle else []), ()),
    "php": ("php.so", lambda tmp, idle: ["php", os.path.join(WL, "sleep_burn.php"), "100000"],
            ("--php-mode", "phpspy")),
    "nodejs-v8": ("nodejs.so", lambda tmp, idle: ["node", os.path.join(WL, "sleep_burn_sync.js"),
                                                  "100000"] + (["idle"] if idle else []),
                  ("--nodejs-mode", "v8")),
    "ruby": ("ruby.so", lambda tmp, idle: ["ruby", os.path.join(WL, "block_3to1.rb"), "100000"],
             ()),
    "python": ("python.so", lambda tmp, idle: [sys.executable, os.path.join(WL, "block_3to1.py"),
                                               "100000"], ()),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-d", type=int, default=10)
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--only", default=",".join(RUNTIMES))
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    tmp = tempfile.mkdtemp(prefix="ppbench-rt-java-")
    os.chmod(tmp, 0o755)
    subprocess.run(["javac", "-d", tmp, os.path.join(SRC, "tests/workloads/java/SleepBurn.java")],
                   check=True)
    print("date: %s, duration %d s, load %s" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                               a.d, open("/proc/loadavg").read().split()[0]))
    for name in a.only.split(","):
        so, cmd, extra = RUNTIMES[name]
        for freq in (11, 100):
            p = start(cmd(tmp, False))
            try:
                for mode in ("cpu", "wall", "cpu,offcpu"):
                    plugins = [so, "perf.so"] if "offcpu" in mode else [so]
                    cpu, target = agent(a, plugins, mode, p.pid, extra, freq)
                    print("%-9s -f %-3d --mode %-10s agent CPU %.2f s (%.2f %% of a core), "
                          "workload CPU %.2f s" % (name, freq, mode, cpu, 100 * cpu / a.d, target))
            finally:
                p.kill()
                p.wait()
        if name in ("java", "nodejs-v8"):
            p = start(cmd(tmp, True))
            try:
                for mode in ("cpu", "wall"):
                    _, target = agent(a, [so], mode, p.pid, extra, 100)
                    print("%-9s idle workload -f 100 --mode %-4s: its CPU %.3f s in %d s" % (
                        name, mode, target, a.d))
            finally:
                p.kill()
                p.wait()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
