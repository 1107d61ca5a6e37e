"""The php plugin against PHP processes that plant traps at the files it opens.

The only files the plugin opens in a target's root are the ones the process
maps and holds executor_globals: its own binary (php-cli, php-fpm) or a
libphp*.so (mod_php, embed). Each target here is an unprivileged PHP
process (nobody, in its own user and mount namespace, see hostile.py) that,
once running, replaces one of them at the path its maps name with

  link    a symbolic link to a root-only canary file
  fifo    a FIFO
  device  a bind mount of a character device
  mount   a bind mount of the canary

The binary is a copy of php in a directory the target may write (a link or
FIFO needs the old file removed, so the maps say "(deleted)"); the library
is a copy of a small non-PHP library named libphp-hostile.so, loaded with
FFI. All eight run at once in one agent session. Asserted: inotify saw no
open of any canary or device node, the session ended on time, no FIFO has a
reader, and each target is either profiled correctly (its PHP function in
the stacks: the mapped file was reached through its identity, not the path)
or its status says "[Profiling skipped/error: ...]" with the reason.
"""
import os
import shutil
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import phputil as pu  # noqa: E402
import hostile  # noqa: E402

php = pu.require_php()
php_real = os.path.realpath(php)
if not shutil.which("unshare") or not shutil.which("setpriv"):
    u.skip("unshare/setpriv (util-linux) not installed")
LIBZ = next((p for p in ("/usr/lib/x86_64-linux-gnu/libz.so.1", "/lib/x86_64-linux-gnu/libz.so.1",
                         "/usr/lib64/libz.so.1") if os.path.exists(p)), None)
plugins = u.plugin_dir_with(pu.PHP_SO)
DURATION = 4

# Plants the trap from inside the target (it runs as root in its
# namespaces), then spins in hostile_spin() forever. argv[1]: "" or a
# library to load with FFI first; argv[2]: the shell command planting.
CODE = r'''
if ($argv[1] !== "") { $ffi = FFI::cdef("", $argv[1]); }
system($argv[2], $rc);
file_put_contents($argv[3], $rc === 0 ? "planted" : "failed $rc");
function hostile_spin() { $x = 0; for ($i = 0; $i < 200000; $i++) { $x += $i % 7; } return $x; }
while (true) { hostile_spin(); }
'''


def root_only_canary(d):
    """hostile.canary() moved into d (searchable by everyone, so the target
    can name it in a bind mount; the file itself stays root-only 0600)."""
    c = hostile.canary()
    dst = os.path.join(d, os.path.basename(c))
    shutil.move(c, dst)
    os.chmod(dst, 0o600)
    return dst


def plant_command(kind, path, canary, dev):
    """The shell command a running target uses to replace `path`, a file it
    maps: removing it first for a link or FIFO (a new file at that name)."""
    if kind == "link":
        return 'rm -f "%s" && ln -s "%s" "%s"' % (path, canary, path)
    if kind == "fifo":
        return 'rm -f "%s" && mkfifo "%s"' % (path, path)
    if kind == "device":
        return 'mount --bind "%s" "%s"' % (dev, path)
    return 'mount --bind "%s" "%s"' % (canary, path)


def planted_ok(pid, kind, path, canary_ino):
    """What the target now has at `path`, seen in its own mount namespace
    (lstat/stat open nothing)."""
    p = "/proc/%d/root%s" % (pid, path)
    try:
        if kind == "link":
            return stat.S_ISLNK(os.lstat(p).st_mode)
        st = os.stat(p)
    except OSError:
        return False
    if kind == "fifo":
        return stat.S_ISFIFO(st.st_mode)
    if kind == "device":
        return stat.S_ISCHR(st.st_mode)
    return st.st_ino == canary_ino


cases = []  # dicts: name, kind, what, path, canary, dev, proc, flag
watched = []
try:
    for what in ("binary", "libphp"):
        if what == "libphp" and not LIBZ:
            print("no libz.so.1 to copy: the libphp cases are left out")
            continue
        for kind in hostile.KINDS:
            d = u.tempdir("pphostile-")
            os.chmod(d, 0o777)  # the target (nobody) replaces files here
            cdir = u.tempdir("ppcanary-")
            os.chmod(cdir, 0o755)
            canary = root_only_canary(cdir)
            dev = hostile.device()
            # matched by the core as php[0-9]*; its name is the target's
            # comm, which tells the stacks of the eight apart in the .col
            comm = "php8-%s-%s" % (what[:3], kind)
            binary = os.path.join(d, comm)
            shutil.copy2(php_real, binary)
            os.chmod(binary, 0o755)
            lib = ""
            if what == "libphp":
                lib = os.path.join(d, "libphp-hostile.so")
                shutil.copy2(LIBZ, lib)
                os.chmod(lib, 0o755)
            path = binary if what == "binary" else lib
            flag = os.path.join(d, "planted")
            argv = hostile.unprivileged_prefix() + [
                binary, "-d", "ffi.enable=1", "-r", CODE, lib,
                plant_command(kind, path, canary, dev), flag]
            proc = u.spawn(argv)
            cases.append(dict(name="%s/%s" % (what, kind), comm=comm, kind=kind, what=what, path=path, canary=canary,
                              dev=dev, proc=proc, flag=flag, dir=d))
            watched += [canary, dev]

    # every target has planted its trap before the agent looks
    deadline = time.time() + 20
    while time.time() < deadline and not all(os.path.exists(c["flag"]) for c in cases):
        time.sleep(0.1)
    for c in cases:
        planted = os.path.exists(c["flag"]) and open(c["flag"]).read() == "planted"
        ok = planted and planted_ok(c["proc"].pid, c["kind"], c["path"], os.stat(c["canary"]).st_ino)
        u.check(ok, "%s: the target replaced %s by its trap (pid %d)" % (c["name"], c["path"], c["proc"].pid))

    watch = hostile.Watch(watched)
    out = u.tempdir("ppout-")
    pids = ",".join(str(c["proc"].pid) for c in cases)
    t0 = time.time()
    r, log = pu.run_agent_logged(out, plugins, "--php-mode", "phpspy", "--pids", pids, "-f", "50",
                                 duration=DURATION, timeout=DURATION + 60)
    took = time.time() - t0
    opened = watch.opened()
    watch.close()
    u.check(r.returncode == 0, "agent exits 0 (got %d; stderr: %s)" % (r.returncode, r.stderr[-1500:]))
    u.check(took < DURATION + 30, "the session ends on time: %.1f s for a %d s session" % (took, DURATION))
    u.check(not opened, "no canary or device node was opened: %s" % opened)
    for c in cases:
        if c["kind"] == "fifo":
            u.check(not hostile.fifo_has_reader(c["path"]), "%s: nobody is left reading the FIFO" % c["name"])

    col = os.path.join(out, "last_profile.col")
    u.check(os.path.exists(col), "a profile was written")
    _, stacks = u.parse_col(col) if os.path.exists(col) else (None, [])
    for c in cases:
        pid = c["proc"].pid
        mine = [(f, n) for f, n in stacks if len(f) > 3 and f[2] == c["comm"]]
        profiled = sum(n for f, n in mine if any(x.startswith("hostile_spin ") and x.endswith("_[php]") for x in f))
        status = [x for f, _ in mine for x in f if x.startswith("[Profiling skipped: ") or
                  x.startswith("[Profiling error: ")]
        print("%s (pid %d): %d samples in hostile_spin; status %s" % (c["name"], pid, profiled, status[:1]))
        if c["what"] == "binary":
            # the binary is PHP: profiled through the mapping's own file, or
            # a status naming why
            u.check(profiled > 0 or any(len(s) > len("[Profiling error: ]") for s in status),
                    "%s: profiled correctly anyway, or a status says why: %s" % (c["name"], status[:1]))
        else:
            # libphp-hostile.so is not PHP: never profiled, and the status
            # names the library
            u.check(profiled == 0 and any("libphp-hostile.so" in s for s in status),
                    "%s: a skip/error status naming the library: %s" % (c["name"], status[:1]))
finally:
    for c in cases:
        u.kill(c["proc"])
    for c in cases:  # hostile.device() leaves its node's directory to the caller
        shutil.rmtree(os.path.dirname(c["dev"]), ignore_errors=True)
u.finish()
