#!/usr/bin/env python3
"""Cost of python.native (native frames under Python), peer in the same run.

    python3 bench/python/native.py [--build build] [--seconds 10] [--hz 1000]

tests/workloads/python/native_hot.py (its time in deflate and memset called
from Python, a 4-deep Python stack over ~30 native frames) on CPython 3.9,
the newest austin 1.0.1 (Debian's package) reads correctly, one target, --hz per second:
  - the agent with --python-native (python worker CPU / samples, from the
    agent's session line: perf events, stack copies, DWARF unwinding,
    symbols, the Python read and the merge);
  - the agent in plain cpu mode (the same line);
  - austin -s (on-CPU samples only; Debian's austin has no native mode)
    attached to the same process (its CPU / the samples it wrote).
One line per figure: microseconds of CPU per sample, and the ratios.
"""
import argparse
import os
import re
import resource
import shutil
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
WORKLOAD = os.path.join(SRC, "tests", "workloads", "python", "native_hot.py")

ap = argparse.ArgumentParser()
ap.add_argument("--build", default=os.path.join(SRC, "build"))
ap.add_argument("--seconds", type=int, default=10)
ap.add_argument("--hz", type=int, default=1000)
ap.add_argument("--python", default="/root/.pyenv/versions/3.9.18/bin/python")
args = ap.parse_args()
args.build = os.path.abspath(args.build)
AGENT = os.path.join(args.build, "polyprof")
PLUGIN = os.path.join(args.build, "plugins", "python.so")
AUSTIN = shutil.which("austin")


def agent(pid, extra):
    out = tempfile.mkdtemp(prefix="ppbench-")
    plugins = tempfile.mkdtemp(prefix="ppbench-plugins-")
    os.symlink(PLUGIN, os.path.join(plugins, "python.so"))
    log = os.path.join(out, "agent.log")
    cmd = [AGENT, "-o", out, "-d", str(args.seconds), "--plugin-dir", plugins, "--pid-file",
           os.path.join(out, "pid"), "--log-file", log, "--config",
           os.path.join(SRC, "tests", "integration", "empty.yaml"), "--pids", str(pid), "-f",
           str(args.hz), "--python-mode", "cpu"] + extra
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=args.seconds + 120)
    with open(log, errors="replace") as f:
        text = f.read()
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(plugins, ignore_errors=True)
    m = re.search(r"session 1: ([\d.]+) s, (\d+) samples.*?agent CPU [\d.]+ s \([\d.]+% of a "
                  r"core: core ([\d.]+) s, workers ([\d.]+) s", text, re.S)
    if not m:
        raise SystemExit("no session line in the agent's log:\n" + text[-2000:])
    samples, workers = int(m.group(2)), float(m.group(4))
    return workers * 1e6 / max(samples, 1), samples


def austin(pid):
    out = tempfile.mktemp(prefix="austin-")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.Popen([AUSTIN, "-s", "-i", str(int(1e6 / args.hz)), "-p", str(pid), "-o", out],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(args.seconds)
    p.send_signal(2)
    p.wait(timeout=30)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with open(out, errors="replace") as f:
        n = sum(1 for line in f if line.strip() and not line.startswith("#"))
    os.unlink(out)
    return cpu * 1e6 / max(n, 1), n


def main():
    for path in (AGENT, PLUGIN, args.python):
        if not os.path.exists(path):
            raise SystemExit("missing: " + path)
    d = tempfile.mkdtemp(prefix="ppbench-wl-")
    script = os.path.join(d, "native_hot.py")
    shutil.copy(WORKLOAD, script)
    p = subprocess.Popen([args.python, script, str(args.seconds * 4 + 60)], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        p.stdout.readline()
        native, n_native = agent(p.pid, ["--python-native"])
        plain, n_plain = agent(p.pid, [])
        print("native  %.1f us/sample (%d samples, %d Hz, python worker CPU)" %
              (native, n_native, args.hz))
        print("plain   %.1f us/sample (%d samples)" % (plain, n_plain))
        print("native/plain %.2f" % (native / plain))
        if AUSTIN:
            au, n_au = austin(p.pid)
            print("austin  %.1f us/sample (%d samples, -s, no native frames)" % (au, n_au))
            print("native/austin %.2f" % (native / au))
        else:
            print("austin  not installed")
    finally:
        p.kill()
        p.wait()
        shutil.rmtree(d, ignore_errors=True)


main()
