"""python plugin: hostile targets at the one file it opens in a target's root.

The plugin opens exactly one kind of file in a target: the file that holds
CPython, which the target maps (its executable for a static build, else
its libpython), to read its symbols. Each case runs an unprivileged Python
(nobody, in its own user and mount namespace, see hostile.py) from a copy
of that file in a directory it owns, and once the interpreter runs it
plants, from inside, at that very path:

  link    a symbolic link to a root-only canary file
  fifo    a FIFO
  device  a bind mount of a character device node
  mount   a bind mount of the canary over the file it runs from

The agent then profiles it. Every case must: open neither the canary nor
the device (inotify), finish its session on time (a FIFO opened for
reading would block it for good), leave no reader on the FIFO, and either
profile the target correctly anyway (the kit opens a mapped file only as
the inode its maps name, else the mapping's own file) or give it a
"[Profiling skipped: ...]" / "[Profiling error: ...]" status naming why.

  binary     Debian's static python3, copied: CPython is in the executable
  libpython  gdb's embedded Python, its libpython3.11.so.1.0 a copy found
             through LD_LIBRARY_PATH (gdb is the one distribution program
             linking it); skipped without gdb
  refused    binary, the agent started without CAP_SYS_ADMIN and
             CAP_CHECKPOINT_RESTORE in its bounding set, so the mapping's
             own file (/proc/PID/map_files) is out of its reach: the target
             must get a "[Profiling skipped: ...]" status naming the path
"""
import os
import shutil
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import hostile  # noqa: E402
import pputil as u  # noqa: E402
import pyutil as py  # noqa: E402

if os.geteuid() != 0:
    u.skip("needs root (the agent, and mounts in the targets' namespaces)")
if not os.path.exists(py.PLUGIN):
    u.skip("python plugin not built: " + py.PLUGIN)
if not shutil.which("unshare") or not shutil.which("setpriv"):
    u.skip("needs unshare and setpriv (util-linux)")
static_py = os.path.realpath("/usr/bin/python3")
if not os.path.exists(static_py):
    u.skip("no /usr/bin/python3")

DURATION = 4
FREQ = 50

WORKLOAD = r'''
import os, sys, time
rc = os.system(os.environ["PP_HOSTILE_PLANT"])
sys.stdout.write("planted %d\n" % rc)
sys.stdout.flush()
deadline = time.time() + float(os.environ["PP_HOSTILE_SECONDS"])

def hostile_leaf():
    x = 0
    while time.time() < deadline:
        x += 1
    return x

def hostile_root():
    return hostile_leaf()

hostile_root()
'''


def reachable_canary():
    """A root-only host file (0600) in a directory any user may traverse:
    the target can name it (a link) and bind-mount it (path lookup only),
    never read it. hostile.canary() puts it in /root, which an
    unprivileged target cannot traverse to mount it."""
    d = u.tempdir("pp-canary-")
    os.chmod(d, 0o755)
    path = os.path.join(d, "canary")
    with open(path, "w") as f:
        f.write("canary: the agent must never open this file\n")
    os.chmod(path, 0o600)
    return path


def plant_line(kind, path, canary, dev):
    """What the target runs on the file it maps: the file exists and is
    busy (running or mapped), so a mount goes over it as it is; the other
    kinds replace it (the mapping keeps the old inode, the maps say
    "(deleted)")."""
    if kind == "mount":
        return 'mount --bind "%s" "%s"' % (canary, path)
    return hostile.plant_script(kind, path, dev if kind == "device" else canary)


def what_is_at(pid, path):
    """The kind of file at path as the target sees it (checked from here,
    to know the plant really happened)."""
    try:
        st = os.lstat("/proc/%d/root%s" % (pid, path))
    except OSError as e:
        return "missing (%s)" % e.strerror
    if stat.S_ISLNK(st.st_mode):
        return "link"
    if stat.S_ISFIFO(st.st_mode):
        return "fifo"
    if stat.S_ISCHR(st.st_mode):
        return "device"
    return "file %d" % st.st_ino


# without these the kit cannot open /proc/PID/map_files: only the path is left
NO_MAP_FILES = ["setpriv", "--bounding-set=-sys_admin,-checkpoint_restore",
                "--inh-caps=-sys_admin,-checkpoint_restore"]


def run_case(variant, kind, canary, dev):
    d = u.tempdir("pphostile-")
    os.chmod(d, 0o755)
    script = os.path.join(d, "hostile_work.py")
    with open(script, "w") as f:
        f.write(WORKLOAD)
    env = dict(os.environ, PP_HOSTILE_SECONDS="60")
    if variant in ("binary", "refused"):
        mapped = os.path.join(d, "python3")
        shutil.copy(static_py, mapped)
        argv = [mapped, script]
    else:
        mapped = os.path.join(d, "libpython3.11.so.1.0")
        shutil.copy("/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0", mapped)
        env["LD_LIBRARY_PATH"] = d
        argv = ["gdb", "-nx", "-batch", "-ex",
                "python exec(compile(open(%r).read(), %r, 'exec'))" % (script, script)]
    for name in os.listdir(d):
        os.chown(os.path.join(d, name), hostile.NOBODY, hostile.NOBODY)
    os.chown(d, hostile.NOBODY, hostile.NOBODY)
    before = what_is_at(os.getpid(), mapped)
    env["PP_HOSTILE_PLANT"] = plant_line(kind, mapped, canary, dev)
    label = "%s %s" % (variant, kind)
    p = subprocess.Popen(hostile.unprivileged_prefix() + argv, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env, cwd=d, text=True)
    watch = None
    try:
        line = p.stdout.readline().strip()
        u.check(line == "planted 0", "%s: the target planted it from inside (%r)" % (label, line))
        now = what_is_at(p.pid, mapped)
        expect = "file" if kind == "mount" else kind
        u.check(now.startswith(expect) and now != before,
                "%s: the target sees %s at %s (was %s)" % (label, now, mapped, before))
        watch = hostile.Watch([canary, dev])
        out = u.tempdir("ppout-")
        plugins = u.plugin_dir_with(py.PLUGIN)
        started = time.time()
        try:
            cmd = u.agent_cmd(out, plugins, "--pids", str(p.pid), "-f", str(FREQ), "--python-mode",
                              "wall", duration=DURATION)
            if variant == "refused":
                cmd = NO_MAP_FILES + cmd
            rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                timeout=DURATION + 90).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        took = time.time() - started
        opened = watch.opened()
        u.check(rc == 0, "%s: agent exits 0 (%s)" % (label, rc))
        u.check(took < DURATION + 30, "%s: the session finished on time (%.1f s for %d s)"
                % (label, took, DURATION))
        u.check(not opened, "%s: nothing opened the canary or the device (%s)" % (label, opened))
        if kind == "fifo":
            u.check(not hostile.fifo_has_reader("/proc/%d/root%s" % (p.pid, mapped)),
                    "%s: no reader left on the FIFO" % label)
        col = os.path.join(out, "last_profile.col")
        stacks = u.parse_col(col)[1] if os.path.exists(col) else []
        mine = [(py.py_frames(fr), c) for fr, c in stacks if any("(" + script + ":" in f for f in fr)]
        profiled = sum(c for fr, c in mine
                       if [n for n, _, _ in fr[-2:]] == ["hostile_root", "hostile_leaf"])
        status = [f for fr, _ in stacks for f in fr
                  if f.startswith("[Profiling skipped: ") or f.startswith("[Profiling error: ")]
        if status:
            print("   status: %s" % status[0])
        if variant == "refused":
            u.check(status and status[0].startswith("[Profiling skipped: ") and mapped in status[0],
                    "%s: skipped, the status names the path and why (%s)" % (label, status[:1]))
        u.check(profiled >= DURATION * FREQ // 4 or status,
                "%s: profiled correctly anyway (%d samples of hostile_root;hostile_leaf) or a "
                "status says why (%s)" % (label, profiled, status[:1]))
        u.check(not (profiled and status), "%s: not both profiled and refused" % label)
    finally:
        if watch:
            watch.close()
        u.kill(p)


canary = reachable_canary()
dev = hostile.device()
variants = ["binary", "refused"]
if shutil.which("gdb") and os.path.exists("/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"):
    variants.append("libpython")
else:
    print("SKIPPED part: libpython (needs gdb and Debian's libpython3.11.so.1.0)")
try:
    for variant in variants:
        for kind in hostile.KINDS:
            run_case(variant, kind, canary, dev)
    with open(canary) as f:
        u.check("canary" in f.read(), "the canary is intact")
finally:
    shutil.rmtree(os.path.dirname(dev), ignore_errors=True)
u.finish()
