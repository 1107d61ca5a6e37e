"""Reads an agent's cost from /proc: the agent and every descendant (its
plugin workers and anything they start).

CPU: utime + stime + cutime + cstime of the agent and of each live
descendant, in seconds. A child that exits and is reaped moves its time into
its parent's cutime/cstime, so the total stays monotonic across worker
restarts and short-lived helpers.
Memory: VmHWM (peak RSS of each process, summed: an upper bound of the
tree's peak since peaks need not coincide), VmRSS, RssAnon (the
process's own memory, without file pages such as libraries and ELF files
mapped while reading their symbols) and Pss (shared pages split between
the processes mapping them, from smaps_rollup).
"""
import os
import stat
import time

TICK = os.sysconf("SC_CLK_TCK")


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


def _stat_fields(pid):
    s = _read("/proc/%d/stat" % pid)
    if not s:
        return None
    # comm may hold spaces or parentheses: split after the last ')'
    return s[s.rindex(")") + 2:].split()


def children_map():
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        f = _stat_fields(int(d))
        if f:
            kids.setdefault(int(f[1]), []).append(int(d))
    return kids


def tree(root):
    """root and all its live descendants."""
    kids = children_map()
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def cpu_seconds(pids):
    total = 0
    for p in pids:
        f = _stat_fields(p)
        if f:  # fields after comm: state=0 ... utime=11 stime=12 cutime=13 cstime=14
            total += int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
    return total / TICK


def status_kib(pid, key):
    s = _read("/proc/%d/status" % pid)
    if not s:
        return 0
    for line in s.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def pss_kib(pid):
    s = _read("/proc/%d/smaps_rollup" % pid)
    if not s:
        return 0
    for line in s.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def fd_count(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return 0


def fd_targets(pid):
    """What each open descriptor of pid names, normalised so two instants
    compare: "socket", "pipe", "anon_inode:[perf_event]", a file path
    (prefixed "file:" for regular files), /proc/1234/task/1235/stat as
    /proc/N/task/N/stat.
    Returns (fd, target, (dev, ino) or None, the link as read) per
    descriptor."""
    out = []
    base = "/proc/%d/fd" % pid
    try:
        fds = os.listdir(base)
    except OSError:
        return out
    for fd in fds:
        try:
            t = link = os.readlink(os.path.join(base, fd))
        except OSError:
            continue
        key = None
        if t.startswith("socket:"):
            t = "socket"
        elif t.startswith("pipe:"):
            t = "pipe"
        elif t.startswith("/"):
            try:
                st = os.stat(os.path.join(base, fd))
                if stat.S_ISREG(st.st_mode):
                    key = (st.st_dev, st.st_ino)
            except OSError:
                pass
            parts = t.split("/")
            if len(parts) > 2 and parts[1] == "proc":
                t = "/".join("N" if x.isdigit() else x for x in parts)
            if key and not t.startswith("/proc/"):
                t = "file:" + t
        out.append((fd, t, key, link))
    return out


def comm(pid):
    return (_read("/proc/%d/comm" % pid) or "?").strip()


class Snapshot:
    """Memory and fd figures of a process tree at one instant."""

    def __init__(self, root):
        self.pids = tree(root)
        self.per = {}
        for p in self.pids:
            self.per[p] = {"comm": comm(p), "hwm": status_kib(p, "VmHWM"), "rss": status_kib(p, "VmRSS"),
                           "anon": status_kib(p, "RssAnon"),
                           "pss": pss_kib(p), "fds": fd_count(p)}
        self.hwm = sum(v["hwm"] for v in self.per.values())
        self.rss = sum(v["rss"] for v in self.per.values())
        self.pss = sum(v["pss"] for v in self.per.values())
        self.anon = sum(v["anon"] for v in self.per.values())
        self.fds = sum(v["fds"] for v in self.per.values())


def wait_with_peak(pid, poll_s=0.05):
    """Waits for a child; returns (exit status, CPU seconds, peak RSS KiB).

    wait4's ru_maxrss cannot be used for a child of a Python harness: the
    kernel carries the pre-exec address space's high-water mark (the
    harness's own RSS, shared through vfork) into the child's maxrss. The
    child's own VmHWM, polled until it exits, has only its own pages."""
    peak = 0
    while True:
        hwm = status_kib(pid, "VmHWM")
        if hwm:
            peak = max(peak, hwm)
        done, status, ru = os.wait4(pid, os.WNOHANG)
        if done:
            return status, ru.ru_utime + ru.ru_stime, peak
        time.sleep(poll_s)
