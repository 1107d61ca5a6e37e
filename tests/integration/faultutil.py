"""Helpers for the fault tests (test_fault_*.py): a continuous agent run
that the test disturbs while it runs, then stops and inspects.

Every fault test asserts the same four things about the agent: a clear log
line naming the fault, no crash (it is alive until SIGTERM and exits 0),
nothing lost beyond what the fault made impossible, and recovery by itself
at a later session.
"""
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402


def children_of(ppid, comm):
    """Pids of the processes named comm whose parent is ppid."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        name = st[st.index("(") + 1:st.rindex(")")]
        parent = int(st[st.rindex(")") + 2:].split()[1])
        if parent == ppid and name == comm:
            out.append(int(d))
    return out


class Agent:
    """A continuous agent (`-c`) writing to out_dir, with its own config."""

    def __init__(self, out_dir, plugin_dir, config_text, *extra, duration=3):
        self.out = out_dir
        self.work = u.tempdir("ppfault-")
        self.config = os.path.join(self.work, "polyprof.yaml")
        with open(self.config, "w") as f:
            f.write(config_text)
        cmd = u.agent_cmd(out_dir, plugin_dir, "-c", *extra, duration=duration)
        cmd[cmd.index("--config") + 1] = self.config
        self.logfile = cmd[cmd.index("--log-file") + 1]
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stderr = ""

    def alive(self):
        return self.proc.poll() is None

    def log(self):
        try:
            with open(self.logfile, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def session_lines(self):
        """The "session N:" summary lines logged so far."""
        return [l for l in self.log().splitlines() if "polyprof: session " in l]

    def wait_sessions(self, n, timeout=90):
        """Waits until n sessions were logged (written or not); True if so."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if len(self.session_lines()) >= n:
                return True
            if not self.alive():
                return False
            time.sleep(0.2)
        return False

    def wait_log(self, text, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if text in self.log():
                return True
            if not self.alive():
                return False
            time.sleep(0.2)
        return False

    def children(self, comm):
        """Pids of the agent's child processes named comm (workers are
        "pp-<plugin>")."""
        return children_of(self.proc.pid, comm)

    def stop(self):
        """SIGTERM, wait; returns the exit code (kills it after 60 s)."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, self.stderr = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, self.stderr = self.proc.communicate()
        return self.proc.returncode

    def kill(self):
        if self.alive():
            self.proc.kill()
        try:
            self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pass


def cols(out_dir):
    """The profile_*.col files of out_dir, oldest first."""
    try:
        names = os.listdir(out_dir)
    except OSError:
        return []
    return sorted(os.path.join(out_dir, n) for n in names
                  if n.startswith("profile_") and n.endswith(".col"))


def stacks_of_pid(stacks, pid_comm):
    """Frames (after appmeta;container;comm) of the stacks whose comm frame
    is pid_comm."""
    return [(f[3:], c) for f, c in stacks if len(f) > 3 and f[2] == pid_comm]


def comms(stacks):
    return {f[2] for f, _ in stacks if len(f) > 2}


def session_totals(log_text):
    """Sample totals of the "session N: ..., X samples in ..." log lines."""
    out = []
    for l in log_text.splitlines():
        m = re.search(r"polyprof: session \d+: [0-9.]+ s, (\d+) samples", l)
        if m:
            out.append(int(m.group(1)))
    return out


def col_total(path):
    return sum(c for _, c in u.parse_col(path)[1])


def leftovers(out_dir):
    """Temp files of interrupted writes (.<name>.<pid>.<n>.tmp, <link>.tmp)."""
    return [n for n in os.listdir(out_dir) if n.endswith(".tmp")]


class Tmpfs:
    """A small tmpfs of our own (root only): the output directory whose
    filesystem the test makes read-only or full."""

    def __init__(self, size):
        self.path = u.tempdir("ppfs-")
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0755" % size, "tmpfs",
                            self.path], stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            u.skip("cannot mount a tmpfs (needs root): " + r.stderr.strip())

    def remount(self, opt):
        """remount,ro / remount,rw; retried while the kernel says busy (a
        file being written at that instant)."""
        for _ in range(50):
            r = subprocess.run(["mount", "-o", "remount," + opt, self.path],
                               stderr=subprocess.PIPE, text=True)
            if r.returncode == 0:
                return True
            time.sleep(0.1)
        print("remount %s failed: %s" % (opt, r.stderr))
        return False

    def umount(self):
        subprocess.run(["umount", "-l", self.path], stderr=subprocess.DEVNULL)
        try:
            os.rmdir(self.path)
        except OSError:
            pass
