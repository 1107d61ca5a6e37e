#!/usr/bin/env python3
"""`polyprof top`'s views in a real terminal (tmux): `v` switches from
functions to source lines (a Python program's hot line, "name
(file:line)") and to threads (a native program's two threads by the names
it gave them, each with its process)."""
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmdutil  # noqa: E402
import pputil as u  # noqa: E402

if not shutil.which("tmux"):
    u.skip("tmux not installed (scripts/install-deps.sh installs it)")
if not os.path.exists(u.AGENT):
    u.skip("agent not built: " + u.AGENT)
SESSION = "pptopv%d" % os.getpid()
work = u.tempdir("pptopv-")
sock = os.path.join(work, "tmux.sock")


def tmux(*args):
    return subprocess.run(["tmux", "-S", sock, *args], capture_output=True, text=True, timeout=10).stdout


def wait_screen(pred, timeout=20):
    deadline = time.time() + timeout
    s = ""
    while time.time() < deadline:
        s = tmux("capture-pane", "-t", SESSION, "-p")
        if pred(s):
            return s
        time.sleep(0.2)
    return s


def start(pid):
    tmux("kill-server")
    cmd = "%s top %d --plugin-dir %s --config %s; sleep 60" % (u.AGENT, pid, u.PLUGIN_DIR, cmdutil.EMPTY_CONFIG)
    deadline = time.time() + 10
    while time.time() < deadline:
        tmux("new-session", "-d", "-s", SESSION, "-x", "160", "-y", "30", "sh", "-c", cmd)
        if subprocess.run(["tmux", "-S", sock, "has-session", "-t", SESSION], capture_output=True).returncode == 0:
            return
        time.sleep(0.2)


PY = os.path.join(cmdutil.WORKLOADS, "python", "workload.py")
py = u.spawn([sys.executable, PY, "split", "60"])
native = None
try:
    start(py.pid)
    s = wait_screen(lambda s: "three_parts (" in s)
    u.check("view: functions" in s and "three_parts (%s)" % PY in s, "functions view: three_parts (file), no line")
    tmux("send-keys", "-t", SESSION, "v")
    s = wait_screen(lambda s: "view: lines" in s and re.search(r"work \(\S+workload\.py:\d+\)", s))
    print(s)
    u.check("view: lines" in s and " Line" in s, "v: the lines view, its column says Line")
    u.check(re.search(r"work \(%s:\d+\)" % re.escape(PY), s) is not None, "lines view: work's hot line, file:line")
    tmux("send-keys", "-t", SESSION, "q")
    u.kill(py)

    exe = os.path.join(work, "named_threads")
    subprocess.run(["cc", "-O1", "-pthread", "-fno-omit-frame-pointer", "-o", exe,
                    os.path.join(cmdutil.WORKLOADS, "perf", "named_threads.c")], check=True)
    native = u.spawn([exe, "60"])
    start(native.pid)
    wait_screen(lambda s: "burn_loop" in s)
    tmux("send-keys", "-t", SESSION, "v", "v")
    s = wait_screen(lambda s: "view: threads" in s and "burner (pid" in s and "spinner (pid" in s)
    print(s)
    u.check("view: threads" in s and " Thread" in s, "v v: the threads view, its column says Thread")
    for name in ("burner", "spinner"):
        m = re.search(r"^\s*([\d.]+)%%\s.*\b%s \(pid %d\)" % (name, native.pid), s, re.M)
        u.check(m is not None and float(m.group(1)) > 20, "threads view: %s with its share (%s)" % (name, m and m.group(1)))
    tmux("send-keys", "-t", SESSION, "q")
finally:
    tmux("kill-server")
    u.kill(py)
    if native:
        u.kill(native)
u.finish()
