"""perf plugin: hostile targets at every file it reads for a process.

The perf plugin samples every process and reads, for a sampled one, files
the process names: the files it maps (its executable, to symbolize it), a
separate debug file of a stripped one (.gnu_debuglink next to it, in its
root), its JIT perf map /tmp/perf-PID.map and its jitdump /tmp/jit-PID.dump.
Each target here is an unprivileged C program (nobody, in its own user and
mount namespace, see hostile.py) that, once it runs, plants from inside at
one of those paths:

  link    a symbolic link to a root-only canary file
  fifo    a FIFO
  device  a bind mount of a character device node
  mount   a bind mount of the canary (over its own running executable for
          the binary case)

and then spins in hostile_root -> hostile_leaf and in anonymous executable
memory. One sampling session per kind covers the four paths at once (perf
is system-wide). Every session must: open neither the canary nor the
device (inotify), finish on time (a FIFO opened for reading would block it
for good), leave no reader on a FIFO; and each target is profiled as well
as the kit allows:

  binary   hostile_leaf symbolized anyway, through the mapping's own file
  debug    the stripped binary stays "(path)": no symbols from the plant
  perfmap  its JIT code stays one unnamed "[jit: ..., unnamed: ...]" frame
           per run, never a file path; native frames named
  jitdump  the same, with no perf map at all

A stripped target with its real debug file next to it (.debug/) shows the
lookup itself works through the kit: hostile_leaf is named.
"""
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile  # noqa: E402
import perfutil  # noqa: E402
import pputil as u  # noqa: E402

perfutil.require_perf()
for tool in ("unshare", "setpriv", "objcopy", "strip"):
    if not shutil.which(tool):
        u.skip("needs " + tool)

DURATION = 4
FREQ = 99
LINK = "hostile.debug"

build = u.tempdir("ppperf-hostile-")
os.chmod(build, 0o755)
hot = perfutil.build_c("hostile", build, "-O1", "-fno-omit-frame-pointer")
debug_file = os.path.join(build, LINK)
stripped = os.path.join(build, "hostile_stripped")
subprocess.run(["objcopy", "--only-keep-debug", hot, debug_file], check=True)
shutil.copy(hot, stripped)
subprocess.run(["strip", "-s", stripped], check=True)
subprocess.run(["objcopy", "--add-gnu-debuglink=" + debug_file, stripped], check=True)


def reachable_canary():
    """A root-only host file (0600) in a directory anyone may traverse, so
    the target can link to it and bind-mount it but never read it."""
    d = u.tempdir("pp-canary-")
    os.chmod(d, 0o755)
    path = os.path.join(d, "canary")
    with open(path, "w") as f:
        f.write("canary: the agent must never open this file\n")
    os.chmod(path, 0o600)
    return path


def target_dir(binary, debug=False):
    """A directory owned by the target with its own copy of the binary (and
    of the real debug file in .debug/ if asked)."""
    d = u.tempdir("pphostile-")
    shutil.copy(binary, os.path.join(d, "hostile"))
    if debug:
        os.mkdir(os.path.join(d, ".debug"))
        shutil.copy(debug_file, os.path.join(d, ".debug", LINK))
    for root, dirs, files in os.walk(d):
        for n in dirs + files:
            os.chown(os.path.join(root, n), hostile.NOBODY, hostile.NOBODY)
    os.chown(d, hostile.NOBODY, hostile.NOBODY)
    os.chmod(d, 0o755)
    return d, os.path.join(d, "hostile")


def plant_line(variant, kind, binary, canary, dev):
    """The shell line the target runs once started; $PP_PID is its pid."""
    target = dev if kind == "device" else canary
    if variant == "binary":
        if kind == "mount":  # over the running executable itself
            return 'mount --bind "%s" "%s"' % (canary, binary)
        return hostile.plant_script(kind, binary, target)
    if variant == "debug":
        path = os.path.join(os.path.dirname(binary), ".debug", LINK)
        return 'mkdir -p "%s" && %s' % (os.path.dirname(path), hostile.plant_script(kind, path, target))
    if variant == "perfmap":
        return hostile.plant_script(kind, "/tmp/perf-$PP_PID.map", target)
    if variant == "jitdump":
        return hostile.plant_script(kind, "/tmp/jit-$PP_PID.dump", target)
    return "true"


def planted_path(variant, pid, binary):
    if variant == "binary":
        return binary
    if variant == "debug":
        return os.path.join(os.path.dirname(binary), ".debug", LINK)
    if variant == "perfmap":
        return "/tmp/perf-%d.map" % pid
    if variant == "jitdump":
        return "/tmp/jit-%d.dump" % pid
    return None


def start(variant, kind, canary, dev):
    debug_ok = variant == "debug_ok"
    d, binary = target_dir(stripped if variant in ("debug", "debug_ok") else hot, debug_ok)
    env = dict(os.environ, PP_HOSTILE_PLANT=plant_line(variant, kind, binary, canary, dev))
    p = subprocess.Popen(hostile.unprivileged_prefix() + [binary, "120"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env, cwd=d, text=True)
    line = p.stdout.readline().strip()
    u.check(line == "planted 0", "%s %s: the target planted it from inside (%r)" % (variant, kind, line))
    return p, binary


def count(prof, pid, pred):
    return sum(c for frames, c in prof.of(pid) if any(pred(f) for f in frames))


def run_session(kind, canary, dev):
    variants = ["binary", "debug", "perfmap", "jitdump"]
    if kind == "link":
        variants.append("debug_ok")
    targets = {}
    watch = None
    try:
        for v in variants:
            targets[v] = start(v, kind, canary, dev)
        pids = [p.pid for p, _ in targets.values()]
        watch = hostile.Watch([canary, dev])
        started = time.time()
        prof = None
        try:
            prof = perfutil.profile(DURATION, freq=FREQ, mode="fp",
                                    lists=["pids=" + ",".join(str(x) for x in pids)],
                                    timeout=DURATION + 90)
        except (subprocess.TimeoutExpired, RuntimeError) as e:
            print("   harness: %s" % e)
        took = time.time() - started
        opened = watch.opened()
        u.check(prof is not None, "%s: the session ended normally" % kind)
        u.check(took < DURATION + 45, "%s: the session finished on time (%.1f s for %d s)"
                % (kind, took, DURATION))
        u.check(not opened, "%s: nothing opened the canary or the device (%s)" % (kind, opened))
        for v, (p, binary) in targets.items():
            path = planted_path(v, p.pid, binary)
            if kind == "fifo" and path:
                u.check(not hostile.fifo_has_reader("/proc/%d/root%s" % (p.pid, path)),
                        "%s %s: no reader left on the FIFO" % (v, kind))
        if prof is None:
            return
        for v, (p, binary) in targets.items():
            pid = p.pid
            label = "%s %s" % (v, kind)
            total = sum(c for _, c in prof.of(pid))
            leaf = count(prof, pid, lambda f: f == "hostile_leaf")
            if total == 0:
                print("   %s: no samples (busy machine?)" % label)
            prof.dump(pid, 3)
            if v in ("binary", "perfmap", "jitdump"):
                u.check(leaf > 0, "%s: hostile_leaf symbolized through the mapping (%d of %d)"
                        % (label, leaf, total))
            if v == "debug_ok":
                u.check(leaf > 0, "%s: hostile_leaf symbolized from its real debug file (%d of %d)"
                        % (label, leaf, total))
            if v == "debug":
                unk = count(prof, pid, lambda f: f == "(%s)" % binary)
                u.check(leaf == 0 and unk > 0, "%s: the stripped binary stays (%s) (%d of %d), "
                        "no symbols from the plant" % (label, binary, unk, total))
            if v in ("perfmap", "jitdump"):
                jit = count(prof, pid, lambda f: f.startswith("[jit: ") and ", unnamed: " in f)
                u.check(jit > 0, "%s: its JIT code stays unnamed [jit: ...] (%d of %d)"
                        % (label, jit, total))
                path = count(prof, pid, lambda f: "/tmp/perf-" in f)
                u.check(path == 0, "%s: no frame names a perf map path (%d)" % (label, path))
    finally:
        if watch:
            watch.close()
        for p, _ in targets.values():
            u.kill(p)
        for p, _ in targets.values():
            for f in ("/tmp/perf-%d.map" % p.pid, "/tmp/jit-%d.dump" % p.pid):
                if os.path.lexists(f):
                    os.unlink(f)


canary = reachable_canary()
dev = hostile.device()
try:
    for kind in hostile.KINDS:
        run_session(kind, canary, dev)
    with open(canary) as f:
        u.check("canary" in f.read(), "the canary is intact")
finally:
    shutil.rmtree(os.path.dirname(dev), ignore_errors=True)
u.finish()
