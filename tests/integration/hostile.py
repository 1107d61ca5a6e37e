"""Hostile targets for the safe target-root access tests (standard library).

A hostile target is an unprivileged process (uid/gid 65534) in its own user
and mount namespace. Inside, it is root over its own mounts, so it can put
at any path the agent will look at (a perf map, a socket, its own binary):

  link    a symbolic link to a root-only host file (a canary)
  fifo    a FIFO (an agent that opens it for reading blocks forever)
  device  a bind mount of a character device (it may not mknod one)
  mount   a bind mount of the root-only canary over the path

The canary and the device node are watched with inotify: any open() of either by
anyone is seen (an O_PATH lookup, which reads nothing, is not an open). A
test plants with plant(), profiles, then asserts with Watch.opened() that
nothing was opened and with the profile that the target's status names why.
"""
import atexit
import ctypes
import os
import struct
import subprocess
import tempfile

NOBODY = 65534
_libc = ctypes.CDLL(None, use_errno=True)
IN_OPEN = 0x20
IN_ACCESS = 0x01
IN_NONBLOCK = 0o4000
KINDS = ("link", "fifo", "device", "mount")


def device():
    """A character device node of its own (the numbers of /dev/zero:
    reading it as a file never ends), so that the inotify watch sees the
    agent's opens and no other process's. Returns its path."""
    d = tempfile.mkdtemp(prefix="pp-dev-")
    os.chmod(d, 0o755)
    _made.append(d)
    path = os.path.join(d, "zero")
    os.mknod(path, 0o666 | 0o020000, os.makedev(1, 5))
    return path


_made = []


def canary():
    """A root-only host file (0600) with unique content, in a directory any
    user can traverse, so that an unprivileged target can name it for a
    link or a bind mount without being able to read it; returns its path."""
    d = tempfile.mkdtemp(prefix="pp-canary-")
    os.chmod(d, 0o755)
    _made.append(d)
    path = os.path.join(d, "canary")
    with open(path, "wb") as f:
        f.write(b"canary: the agent must never open this file\n")
    os.chmod(path, 0o600)
    return path


def cleanup():
    """Removes what canary() and device() made (call it when done)."""
    import shutil
    for d in _made:
        shutil.rmtree(d, ignore_errors=True)
    del _made[:]


class Watch:
    """inotify on files: opened() lists those someone opened or read."""

    def __init__(self, paths):
        self.fd = _libc.inotify_init1(IN_NONBLOCK)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.wd = {}
        for p in paths:
            wd = _libc.inotify_add_watch(self.fd, p.encode(), IN_OPEN | IN_ACCESS)
            if wd < 0:
                raise OSError(ctypes.get_errno(), "inotify_add_watch " + p)
            self.wd[wd] = p

    def opened(self):
        seen = set()
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return sorted(seen)
            at = 0
            while at + 16 <= len(buf):
                wd, mask, _cookie, n = struct.unpack_from("iIII", buf, at)
                seen.add(self.wd.get(wd, "?"))
                at += 16 + n

    def close(self):
        os.close(self.fd)


def unprivileged_prefix():
    """argv prefix running a command as nobody in new user + mount
    namespaces (mapped to root inside, so it may bind-mount)."""
    return ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
            "unshare", "--user", "--map-root-user", "--mount"]


def plant_script(kind, path, target):
    """Shell lines that put `kind` at `path` inside the namespaces ($$ may be
    used in path: it is the pid the final exec keeps). `target` is the
    canary for link and mount, the node from device() for device."""
    if kind == "link":
        return 'rm -f "%s"; ln -s "%s" "%s"' % (path, target, path)
    if kind == "fifo":
        return 'rm -f "%s"; mkfifo "%s"' % (path, path)
    if kind == "device":
        return 'rm -f "%s"; : > "%s"; mount --bind "%s" "%s"' % (path, path, target, path)
    if kind == "mount":
        return '[ -e "%s" ] || : > "%s"; mount --bind "%s" "%s"' % (path, path, target, path)
    raise ValueError(kind)


def spawn(kind, path, target, argv, cwd=None, env=None):
    """Starts argv as a hostile target with `kind` planted at `path` first.
    For "mount" over a file the target maps (its binary), plant it from the
    target itself after it started instead (see plant_script)."""
    script = plant_script(kind, path, target) + '; exec "$@"'
    return subprocess.Popen(unprivileged_prefix() + ["sh", "-c", script, "hostile"] + list(argv),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd, env=env)


def fifo_has_reader(path):
    """True if someone holds the FIFO open for reading (the agent would be
    blocked in it): a non-blocking open for writing succeeds only then."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return False
    os.close(fd)
    return True


atexit.register(cleanup)
