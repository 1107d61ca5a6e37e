"""The ruby plugin against targets that plant things where it reads.

The only files the ruby plugin opens in a target's root are the two it
finds in the target's maps: the ruby executable and libruby (their symbols
lead to the VM). Everything else it reads is /proc or the target's memory.
Both are mapped files, so the plant is made from inside the target AFTER
Ruby started (the kernel keeps the mapping; the path in the maps now leads
elsewhere). Each target is an unprivileged ruby (nobody) in its own user and
mount namespace that, once running, puts one of these at the path of its
own binary or of its libruby:

  link    a symbolic link to a root-only canary (the directory holding it is
          bind-mounted over the binary's directory)
  fifo    a FIFO (same way)
  device  a character device node bind-mounted there (same way)
  mount   the canary bind-mounted over the file itself

Then one agent session profiles the eight of them. Asserted:
  * inotify saw no open of the canary or of the device node. Other agents
    running on the same machine (other test runs, system-wide) may look at
    these targets too: fanotify names the process behind each open, and an
    open by a process outside this agent's tree is reported, not counted;
  * no reader was left on any FIFO, and the session ended on time;
  * every target is profiled correctly anyway, its own Ruby frames with
    their files and lines: the plugin opens the file it maps through the
    identity-checked path (the path's inode must be the mapping's, else the
    mapping's own file), never the planted one. A target that could not be
    would have to carry a [Profiling ...] status naming why; none may.
"""
import ctypes
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import hostile  # noqa: E402
import pputil as u  # noqa: E402
import rubyutil as r  # noqa: E402

plugin = r.require_ruby_plugin()
plugins = u.plugin_dir_with(plugin)
for tool in ("setpriv", "unshare", "mount"):
    if not shutil.which(tool):
        u.skip("%s not installed" % tool)
DURATION = 5

# what this ruby maps: its binary and libruby, as the maps name them
probe = subprocess.run(
    [r.RUBY, "-e", 'print RbConfig.ruby, "\\n", File.read("/proc/self/maps")[%r{/\\S*/libruby[^/\\s]*}]'],
    stdout=subprocess.PIPE, text=True, check=True).stdout.split("\n")
exe_path = os.path.realpath(probe[0])
lib_path = probe[1].strip() if len(probe) > 1 else ""
paths = {"exe": exe_path}
if lib_path:
    paths["lib"] = lib_path  # a static ruby has no libruby: its binary is the only file

# A canary the target can name but not read: root-only, in a directory it
# may traverse (a bind mount needs the source's path, not its content).
work = u.tempdir("pphostile-")
os.chmod(work, 0o755)
canary = os.path.join(work, "canary")
with open(canary, "w") as f:
    f.write("canary: the agent must never open this file\n")
os.chmod(canary, 0o600)
device = hostile.device()
watch = hostile.Watch([canary, device])


class Openers:
    """fanotify on files: the pids that opened them (FAN_REPORT_FID, so
    fanotify itself opens nothing). None where fanotify is unavailable."""

    FAN_CLASS_NOTIF, FAN_NONBLOCK, FAN_REPORT_FID = 0x0, 0x2, 0x200
    FAN_MARK_ADD, FAN_OPEN, AT_FDCWD = 0x1, 0x20, -100

    @classmethod
    def start(cls, paths):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int,
                                       ctypes.c_char_p]
        fd = libc.fanotify_init(cls.FAN_CLASS_NOTIF | cls.FAN_NONBLOCK | cls.FAN_REPORT_FID,
                                os.O_RDONLY)
        if fd < 0:
            return None
        for p in paths:
            if libc.fanotify_mark(fd, cls.FAN_MARK_ADD, cls.FAN_OPEN, cls.AT_FDCWD, p.encode()) < 0:
                os.close(fd)
                return None
        o = cls()
        o.fd = fd
        return o

    def pids(self):
        seen = set()
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return seen
            at = 0
            while at + 24 <= len(buf):
                n, _vers, _res, _mlen, _mask, _fd, pid = struct.unpack_from("IBBHQii", buf, at)
                seen.add(pid)
                at += max(n, 24)

    def close(self):
        os.close(self.fd)


def process_tree(pid):
    """pid and its descendants, now."""
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        out.add(p)
        try:
            for tid in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, tid)) as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def who(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return "%d (%s)" % (pid, f.read().replace(b"\0", b" ").decode(errors="replace")[:120])
    except OSError:
        return "%d (exited)" % pid


def plant(case, kind, path):
    """Shell lines the target runs once Ruby is up, and the host path of
    the FIFO when there is one."""
    if kind == "mount":
        return 'mount --bind "%s" "%s"' % (canary, path), None
    # A directory of the target's own in place of the file's directory:
    # the file's name in it is the plant. --rbind carries the device's bind
    # mount along; mount is the last command, so nothing needs the hidden
    # directory (its libraries included) afterwards.
    d = os.path.join(work, case)
    os.mkdir(d)
    name = os.path.join(d, os.path.basename(path))
    lines = []
    fifo = None
    if kind == "link":
        os.symlink(canary, name)
    elif kind == "fifo":
        os.mkfifo(name, 0o644)
        fifo = name
    elif kind == "device":
        open(name, "w").close()
        lines.append('mount --bind "%s" "%s"' % (device, name))
    lines.append('mount --rbind "%s" "%s"' % (d, os.path.dirname(path)))
    return " && ".join(lines), fifo


SCRIPT = """
PLANT = %(plant)r
def spin_%(case)s
  x = 0
  20_000.times { |i| x += i }
  x
end
system(PLANT) or exit!(3)
loop do
  spin_%(case)s
  sleep 0.002
end
"""

openers = Openers.start([canary, device])
targets = {}  # case -> (Popen, script path, mount point, fifo)
try:
    for where, path in paths.items():
        for kind in hostile.KINDS:
            case = "%s_%s" % (where, kind)
            lines, fifo = plant(case, kind, path)
            script = os.path.join(work, case + ".rb")
            with open(script, "w") as f:
                f.write(SCRIPT % {"plant": lines, "case": case})
            os.chmod(script, 0o644)
            mnt = path if kind == "mount" else os.path.dirname(path)
            p = subprocess.Popen(hostile.unprivileged_prefix() + [r.RUBY, script],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work)
            targets[case] = (p, script, mnt, fifo)

    # planted: the mount shows in the target's own mount table
    deadline = time.time() + 20
    pending = set(targets)
    while pending and time.time() < deadline:
        for case in list(pending):
            p, _, mnt, _ = targets[case]
            if p.poll() is not None:
                u.check(False, "%s: the target planted and kept running (exit %s)" % (case, p.poll()))
                pending.discard(case)
                continue
            try:
                with open("/proc/%d/mountinfo" % p.pid) as f:
                    if any(line.split()[4] == mnt for line in f):
                        pending.discard(case)
            except OSError:
                pass
        time.sleep(0.1)
    u.check(not pending, "every target planted its file: still waiting for %s" % sorted(pending))
    live = {c: t for c, t in targets.items() if t[0].poll() is None}
    watch.opened()  # the targets' own set-up is not the agent's doing
    if openers:
        openers.pids()

    out = u.tempdir("ppout-")
    pids = ",".join(str(t[0].pid) for t in live.values())
    t0 = time.time()
    agent = subprocess.Popen(u.agent_cmd(out, plugins, "--pids", pids, "-f", "100", duration=DURATION),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tree = set()
    while agent.poll() is None and time.time() - t0 < DURATION + 60:
        tree |= process_tree(agent.pid)  # the agent and its plugin workers
        time.sleep(0.05)
    if agent.poll() is None:
        agent.kill()
    _, err = agent.communicate()
    took = time.time() - t0
    u.check(agent.returncode == 0, "agent exits 0 (got %s; stderr: %s)" % (agent.returncode, err[-2000:]))
    u.check(took < DURATION + 30, "the session ended on time: %.1f s for a %d s session" % (took, DURATION))

    opened = watch.opened()
    by = openers.pids() if openers else set()
    ours, others = by & tree, by - tree
    if opened and others:
        print("note: opened by processes outside this agent: %s" % ", ".join(who(p) for p in sorted(others)))
    u.check(opened == [] or (openers is not None and others and not ours),
            "nothing of this agent opened the canary or the device node: inotify saw %s%s"
            % (opened, ", the agent's pids %s" % sorted(ours) if ours else ""))
    for case, (_, _, _, fifo) in sorted(live.items()):
        if fifo:
            u.check(not hostile.fifo_has_reader(fifo), "%s: no reader left on the FIFO" % case)

    header, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
    statuses = [f for f, _ in stacks if any(x.startswith("[Profiling") for x in f)]
    for case, (_, script, _, _) in sorted(live.items()):
        mine = r.stacks_with(stacks, script)
        frames = {r.frame(x) for f, _ in mine for x in f if r.frame(x)}
        ok = any(label == "spin_" + case and path == script and line > 0
                 for label, path, line in frames)
        u.check(ok and sum(c for _, c in mine) > 0,
                "%s: profiled through the identity-checked open (spin_%s - %s:N): %d samples"
                % (case, case, script, sum(c for _, c in mine)))
    u.check(statuses == [], "no target needed a status (each was profiled): %s" % statuses)
finally:
    for p, _, _, _ in targets.values():
        u.kill(p)
    watch.close()
    if openers:
        openers.close()
    shutil.rmtree(os.path.dirname(device), ignore_errors=True)
u.finish()
