"""Which of the agent's descriptors are bound to a live target.

A worker holds some descriptors for as long as a target lives: the python
plugin a thread's /proc/PID/task/TID/stat (its cpu mode's running test), the
nodejs plugin a TCP connection to the target's inspector, the dotnet plugin
a unix connection to its diagnostics socket, the java plugin its attach
connection while it attaches. Under churn some targets are alive at every
instant, so these descriptors make the tree's count move with the workload,
and a check of "no descriptor growth" must set them apart. It must also
still catch a leak of exactly these descriptors, so each one is positively
tied to a live process rather than recognised by its name:

  - a /proc file is read through the holder's descriptor: the kernel ties
    the open file to the task it was opened for, so the read fails with
    ESRCH once that task is gone, even if its pid was reused since (pids
    wrap within an hour of churn). A zombie's file counts as not live;
  - a socket counts when its peer socket is held by a live process outside
    the agent's tree: TCP peers matched by address pair in the holder's
    /proc/PID/net/tcp{,6}, unix peers by the peer inode ss(8) reports.

Everything else (a descriptor whose target is gone, a socket nobody holds the
other end of, pipes, the perf worker's files...) is left to the caller.
"""
import os
import re
import subprocess

_SOCKET = re.compile(r"socket:\[(\d+)\]$")
_PROC_FILE = re.compile(r"/proc/(\d+)/")


def _tcp_peers(pid):
    """{socket inode: peer inode} for the established TCP connections of
    pid's network namespace whose both ends are in it (loopback)."""
    by_pair, ino_pair = {}, {}
    for name in ("tcp", "tcp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, name)) as f:
                next(f, None)
                for line in f:
                    p = line.split()
                    if len(p) < 10 or p[3] != "01":  # 01: ESTABLISHED
                        continue
                    ino = int(p[9])
                    if ino:
                        by_pair[(p[1], p[2])] = ino
                        ino_pair[ino] = (p[1], p[2])
        except (OSError, ValueError):
            continue
    out = {}
    for ino, (local, remote) in ino_pair.items():
        peer = by_pair.get((remote, local))
        if peer:
            out[ino] = peer
    return out


def _unix_peers():
    """{socket inode: peer inode} for the connected unix sockets of our
    network namespace (/proc/net/unix does not name peers; ss does)."""
    out = {}
    try:
        text = subprocess.run(["ss", "-xHn"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              universal_newlines=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return out
    for line in text.splitlines():
        p = line.split()
        # u_str ESTAB 0 0 <path or *> <inode> <peer path or *> <peer inode>
        if len(p) >= 8 and p[-1].isdigit() and p[-3].isdigit():
            out[int(p[-3])] = int(p[-1])
    return out


def _socket_owners(skip):
    """{socket inode: pid} over every process but those in skip."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) in skip:
            continue
        base = "/proc/%s/fd" % d
        try:
            fds = os.listdir(base)
        except OSError:
            continue
        for fd in fds:
            try:
                m = _SOCKET.match(os.readlink(os.path.join(base, fd)))
            except OSError:
                continue
            if m:
                out[int(m.group(1))] = int(d)
    return out


def _proc_file_live(holder, fd):
    """True while the task a /proc file was opened for lives and is not a
    zombie (read through the holder's descriptor: ESRCH once it is gone)."""
    try:
        with open("/proc/%d/fd/%s" % (holder, fd), "rb") as f:
            head = f.read(512)
    except OSError:
        return False
    # a stat file: "pid (comm) S ..."; comm may hold spaces and parentheses
    close = head.rfind(b")")
    if close >= 0 and head[close + 1:close + 3] == b" Z":
        return False
    return True


class Binder:
    """Answers "is this descriptor of the agent's tree bound to a live
    target?" for one look; the socket tables are read once, on the first
    socket asked about."""

    def __init__(self, tree_pids):
        self.tree = set(tree_pids)
        self._tcp = {}  # holder pid -> its namespace's TCP peers
        self._unix = None
        self._owners = None

    def bound(self, holder, fd, link):
        """link: readlink of /proc/holder/fd/fd."""
        m = _PROC_FILE.match(link)
        if m:
            return int(m.group(1)) not in self.tree and _proc_file_live(holder, fd)
        m = _SOCKET.match(link)
        if not m:
            return False
        ino = int(m.group(1))
        if self._unix is None:
            self._unix = _unix_peers()
            self._owners = _socket_owners(self.tree)
        peer = self._unix.get(ino)
        if peer is None:
            if holder not in self._tcp:
                self._tcp[holder] = _tcp_peers(holder)
            peer = self._tcp[holder].get(ino)
        return peer is not None and peer in self._owners
