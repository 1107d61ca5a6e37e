#!/usr/bin/env python3
"""`polyprof top` in a real terminal: tmux runs it, send-keys types, the
screen is read back with capture-pane.

With the example plugin on a busy and a sleeping process: the view shows
both processes, the achieved rate and missed samples, the keys line, the
busy process's running state at the top; s, p, r and space change the sort,
the process and runtime filters and pause (the counts stop moving); q,
Ctrl-C and SIGTERM each end it with status 0, the alternate screen left, the
cursor shown and the terminal's line mode and echo back; a terminal smaller
than the view gets one line and status 2.
"""
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pputil as u  # noqa: E402

if not shutil.which("tmux"):
    u.skip("tmux not installed (scripts/install-deps.sh installs it)")
example = os.path.join(u.PLUGIN_DIR, "example.so")
if not os.path.exists(example):
    u.skip("example plugin not built: " + example)
plugins = u.plugin_dir_with(example)
EMPTY = os.path.join(u.SRC, "tests", "integration", "empty.yaml")
SESSION = "pptop%d" % os.getpid()
work = u.tempdir("pptop-")
sock = os.path.join(work, "tmux.sock")


def tmux(*args):
    return subprocess.run(["tmux", "-S", sock, *args], capture_output=True, text=True, timeout=10).stdout


def screen():
    return tmux("capture-pane", "-t", SESSION, "-p")


def wait_screen(pred, timeout=15):
    deadline = time.time() + timeout
    while time.time() < deadline:
        s = screen()
        if pred(s):
            return s
        time.sleep(0.2)
    return screen()


def start(pids, width=120, height=30):
    # after top: its status and the terminal's modes, as the shell sees them
    cmd = ("trap '' INT; %s top %s --plugin-dir %s --config %s --example-mode states; echo EXIT=$?; "
           "stty -a | tr ' ;' '\\n\\n' | grep -xE -- '-?(icanon|echo)' | tr '\\n' ' '; echo; sleep 60"
           % (u.AGENT, " ".join(map(str, pids)), plugins, EMPTY))
    tmux("kill-server")
    # the old server may still be going away: retry until the session exists
    deadline = time.time() + 10
    while time.time() < deadline:
        tmux("new-session", "-d", "-s", SESSION, "-x", str(width), "-y", str(height), "sh", "-c", cmd)
        if subprocess.run(["tmux", "-S", sock, "has-session", "-t", SESSION], capture_output=True).returncode == 0:
            return
        time.sleep(0.2)


def top_pid():
    deadline = time.time() + 5
    while time.time() < deadline:
        pid = find_top()
        if pid:
            return pid
        time.sleep(0.2)
    return 0


def find_top():
    shell = int(tmux("display", "-p", "-t", SESSION, "#{pane_pid}").strip() or 0)
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    st = f.read()
            except OSError:
                continue
            if int(st.rsplit(")", 1)[1].split()[1]) == shell and "(polyprof)" in st:
                return int(d)
    return 0


def check_restored(how):
    s = wait_screen(lambda s: "EXIT=" in s and "icanon" in s, 20)
    u.check("EXIT=0" in s, "%s: exit status 0 (%s)" % (how, s.strip()[-200:]))
    modes = [ln for ln in s.splitlines() if "icanon" in ln]
    u.check(modes and modes[0].split() == ["icanon", "echo"], "%s: line mode and echo restored (%s)" % (how, modes))
    u.check(tmux("display", "-p", "-t", SESSION, "#{alternate_on} #{cursor_flag}").split() == ["0", "1"],
            "%s: alternate screen left, cursor shown" % how)
    u.check("polyprof top" not in s, "%s: the view is gone from the screen" % how)


busy = u.spawn([sys.executable, "-c", "while True: pass"])
sleeper = u.spawn(["sleep", "300"])
try:
    time.sleep(0.3)
    start([busy.pid, sleeper.pid])
    s = wait_screen(lambda s: "[thread-state R]" in s and "%d sleep" % sleeper.pid in s)
    u.check("%d python" % busy.pid in s and "%d sleep" % sleeper.pid in s, "both processes named in the header")
    u.check("samples/s achieved" in s and "missed" in s, "achieved rate and missed samples shown")
    u.check("keys: q quit" in s and "space pause" in s, "the keys are on screen")
    rows = [ln for ln in s.splitlines() if "%" in ln and ("thread-state" in ln or "Runtime" in ln)]
    u.check(len(rows) >= 2 and "Function" in rows[0] and "[thread-state R]" in rows[1],
            "the busy process's running state is the top row (%s)" % rows[:3])
    tmux("send-keys", "-t", SESSION, "s")
    u.check("sort: %total" in wait_screen(lambda s: "sort: %total" in s, 3), "s: sorted by %total")
    tmux("send-keys", "-t", SESSION, "p")
    s = wait_screen(lambda s: "process: %d" % busy.pid in s or "process: %d" % sleeper.pid in s, 3)
    u.check("process: %d" % busy.pid in s or "process: %d" % sleeper.pid in s, "p: filtered to one process")
    tmux("send-keys", "-t", SESSION, "p", "p", "r", "r")
    s = wait_screen(lambda s: "runtime: kernel" in s and "process: all" in s, 3)
    u.check("runtime: kernel" in s and "process: all" in s, "r: filtered to a runtime; p cycles back to all")
    kernel_rows = [ln for ln in s.splitlines() if ln.rstrip().endswith("]") or "%" in ln and "s  " in ln]
    u.check(all(" kernel " in ln for ln in kernel_rows if "%" in ln and "Runtime" not in ln and "sort:" not in ln),
            "only kernel functions listed (%s)" % kernel_rows[:4])
    tmux("send-keys", "-t", SESSION, "r", "r", "r", "r", "r", "r", "r", "r", " ")
    s1 = wait_screen(lambda s: "[PAUSED]" in s, 3)
    u.check("[PAUSED]" in s1, "space: paused")
    time.sleep(2.2)
    s2 = screen()
    total = [ln for ln in s1.splitlines() if "in all" in ln]
    u.check(total and total == [ln for ln in s2.splitlines() if "in all" in ln], "paused: the counts stay (%s)" % total)
    tmux("send-keys", "-t", SESSION, "q")
    check_restored("q")

    start([busy.pid])
    wait_screen(lambda s: "[thread-state R]" in s)
    tmux("send-keys", "-t", SESSION, "C-c")
    check_restored("Ctrl-C")

    start([busy.pid])
    wait_screen(lambda s: "[thread-state R]" in s)
    pid = top_pid()
    u.check(pid > 0, "found top's pid")
    if pid:
        os.kill(pid, 15)
    check_restored("SIGTERM")

    start([busy.pid], width=50, height=8)
    s = wait_screen(lambda s: "EXIT=" in s, 10)
    msg = [ln for ln in s.splitlines() if ln.strip()]
    u.check(len(msg) >= 2 and "terminal 50x8 is below 60x10" in msg[0] and msg[1] == "EXIT=2",
            "too small a terminal: one line, status 2 (%s)" % msg[:2])
    tmux("kill-server")

    r = subprocess.run([u.AGENT, "top", "999999999", "--config", EMPTY], capture_output=True, text=True, timeout=10)
    u.check(r.returncode == 2 and r.stderr.count("\n") == 1 and "999999999" in r.stderr,
            "a pid that is gone: one line, status 2 (%r)" % r.stderr)
finally:
    tmux("kill-server")
    u.kill(busy)
    u.kill(sleeper)
u.finish()
