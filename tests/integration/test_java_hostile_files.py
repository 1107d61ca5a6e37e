"""Hostile JVMs: the java plugin never opens, connects to or writes through
anything a JVM puts where the plugin looks.

Each target is the HotCold workload run as nobody in its own user and mount
namespaces, with a private /tmp (a directory of its own bound there), that puts one of these at
one of the paths the plugin uses in the JVM's /tmp:

  socket   /tmp/.java_pid<pid>, the attach socket the plugin connects to
  trigger  /tmp/.attach_pid<pid>, the trigger file the plugin creates
  agentdir /tmp/polyprof-<version>, where root copies the agent library
  result   /tmp/.polyprof-<pid>-<random>, the files the agent writes for the
           plugin (planted by the JVM itself the moment its agent opens one,
           through an LD_PRELOAD shim: the name is random, the JVM learns it
           from the `load` request)

  link     a symbolic link to a root-only canary file
  fifo     a FIFO
  device   a bind mount of a character device
  mount    a bind mount of the canary over the path

One agent session profiles all of them. Asserts: no open of the canary or
the device node (inotify), no reader left on a FIFO, a session that ends on
time, every JVM alive, and for every target a "[Profiling error: ...]"
status naming the path and why.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "java"))
import hostile  # noqa: E402
import javawork  # noqa: E402
import pputil  # noqa: E402
from pputil import check, finish, skip  # noqa: E402

# what each (path, kind) status must say besides naming the path
EXPECT = {
    ("socket", "link"): "not a socket",
    ("socket", "fifo"): "a FIFO, not a socket",
    ("socket", "device"): "a character device, not a socket",
    ("socket", "mount"): "not a socket",
    ("trigger", "link"): "a symbolic link, not a trigger file",
    ("trigger", "fifo"): "a FIFO, not a trigger file",
    ("trigger", "device"): "a character device, not a trigger file",
    ("trigger", "mount"): "owned by uid 0",
    ("agentdir", "link"): "a symbolic link, not our directory",
    ("agentdir", "fifo"): "a FIFO, not our directory",
    ("agentdir", "device"): "a character device, not our directory",
    ("agentdir", "mount"): "a regular file, not our directory",
    ("result", "link"): "owned by uid 0",
    ("result", "fifo"): "a FIFO",
    ("result", "device"): "a character device",
    ("result", "mount"): "owned by uid 0",
}

# The JVM's side of the "result" case: when the agent opens one of its
# output files, put the hostile thing at that path and hand the agent
# /dev/null instead, so what the plugin finds there is the plant.
SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static int (*real_open)(const char *, int, ...);

static int plant(const char *path) {
  const char *kind = getenv("PP_HOSTILE_KIND"), *target = getenv("PP_HOSTILE_TARGET");
  if (!kind || !target) return -1;
  if (!strcmp(kind, "link")) return symlink(target, path);
  if (!strcmp(kind, "fifo")) return mkfifo(path, 0600);
  int fd = real_open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  close(fd);
  return mount(target, path, NULL, MS_BIND, NULL);
}

static int hooked(const char *path, int flags, mode_t mode) {
  if (!real_open) real_open = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
  if (path && !strncmp(path, "/tmp/.polyprof-", 15) && plant(path) == 0)
    return real_open("/dev/null", O_WRONLY | O_CLOEXEC);
  return real_open(path, flags, mode);
}

int open(const char *path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  return hooked(path, flags, mode);
}

int open64(const char *path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  return hooked(path, flags, mode);
}
"""


def ready(pid):
    """libjvm mapped and HotSpot's Signal Dispatcher running."""
    try:
        if "libjvm.so" not in javawork.maps_of(pid):
            return False
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/comm" % (pid, t)) as f:
                if f.read().startswith("Signal Dispatch"):
                    return True
    except OSError:
        pass
    return False


def main():
    if os.geteuid() != 0:
        skip("needs root (targets run as nobody in their own namespaces)")
    if not shutil.which("setpriv") or not shutil.which("unshare"):
        skip("setpriv/unshare not found")
    if not javawork.find_jdk():
        skip("no JDK (java/javac) installed")
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        skip("no C compiler for the JVM-side shim")
    m = re.search(r"polyprof (\S+)", subprocess.run([pputil.AGENT, "--version"], stdout=subprocess.PIPE,
                                                     text=True).stdout)
    agent_dir = "/tmp/polyprof-" + m.group(1)

    # outside /tmp: each target binds a directory of its own over /tmp
    base = tempfile.mkdtemp(prefix="ppjava-hostile-", dir="/var/tmp")
    os.chmod(base, 0o755)
    classes = javawork.compile_workloads(os.path.join(base, "classes"))
    shim = os.path.join(base, "shim.so")
    with open(os.path.join(base, "shim.c"), "w") as f:
        f.write(SHIM)
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", shim, os.path.join(base, "shim.c"), "-ldl"], check=True)
    os.chmod(shim, 0o755)
    canary = os.path.join(base, "canary")
    with open(canary, "w") as f:
        f.write("canary: the agent must never open this file\n")
    os.chmod(canary, 0o600)
    dev = os.path.join(base, "zero")
    os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 5))
    watch = hostile.Watch([canary, dev])

    targets = {}
    try:
        for (where, kind) in EXPECT:
            target = dev if kind == "device" else canary
            # its own /tmp: a directory of its user's (root may write there,
            # as into any /tmp that is the JVM's own)
            tmp = os.path.join(base, "tmp-%s-%s" % (where, kind))
            os.mkdir(tmp, 0o755)
            os.chown(tmp, hostile.NOBODY, hostile.NOBODY)
            script = 'mount --bind "%s" /tmp && ' % tmp
            if where == "result":
                script += "export LD_PRELOAD=%s PP_HOSTILE_KIND=%s PP_HOSTILE_TARGET=%s" % (shim, kind, target)
            elif where == "socket":
                # HotSpot deletes what it finds at its socket path when it
                # starts (a mount point excepted): plant once it runs
                script += ('(while ! grep -qs "^Signal Dispatch" /proc/$$/task/*/comm; do sleep 0.1; done; '
                           'sleep 1; %s) &' % hostile.plant_script(kind, "/tmp/.java_pid$$", target))
            else:
                path = {"trigger": "/tmp/.attach_pid$$", "agentdir": agent_dir}[where]
                script += hostile.plant_script(kind, path, target)
            prefix = hostile.unprivileged_prefix() + ["sh", "-c", script + ' exec "$@"' if where == "socket"
                                                      else script + '; exec "$@"', "hostile"]
            # idle JVMs (workers start after 10 minutes): attaching is what is tested
            targets[(where, kind)] = javawork.start(classes, "HotCold", 120, 1, 600000, prefix=prefix,
                                                    jvm_args=["-Xmx32m", "-XX:+UseSerialGC",
                                                              "-XX:TieredStopAtLevel=1"])
        deadline = time.time() + 60
        while time.time() < deadline and not all(ready(p.pid) for p in targets.values()):
            time.sleep(0.2)
        for case, p in targets.items():
            check(p.poll() is None and ready(p.pid), "%s/%s: a running JVM (pid %d)" % (case + (p.pid,)))
        # the late plants are in place
        deadline = time.time() + 20
        for (where, kind), p in targets.items():
            if where != "socket":
                continue
            path = "/proc/%d/root/tmp/.java_pid%d" % (p.pid, p.pid)
            while time.time() < deadline and not (os.path.lexists(path) and
                                                  os.lstat(path).st_mode & 0o170000 != 0o140000):
                time.sleep(0.1)
            check(os.path.lexists(path), "socket/%s: planted at the socket path" % kind)

        outdir = pputil.tempdir("ppjava-hostile-out-")
        only_java = pputil.plugin_dir_with(os.path.join(pputil.PLUGIN_DIR, "java.so"))
        pids = ",".join(str(p.pid) for p in targets.values())
        cmd = pputil.agent_cmd(outdir, only_java, "--java-min-age-ms", "0", "--pids", pids, "-f", "49",
                               duration=8)
        t0 = time.time()
        try:
            agent = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
            elapsed, rc, log = time.time() - t0, agent.returncode, agent.stdout
        except subprocess.TimeoutExpired as e:
            elapsed, rc = time.time() - t0, None
            log = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        check(rc == 0, "agent exits 0 (rc=%s)" % rc)
        check(elapsed < 50, "the session ended on time (%.1f s for -d 8)" % elapsed)

        # FIFOs as the targets see them: the planted one, or the agent's
        # output files the shim replaced
        for (where, kind), p in targets.items():
            if kind != "fifo":
                continue
            tmp = "/proc/%d/root/tmp" % p.pid
            try:
                names = [n for n in os.listdir(tmp) if n.startswith((".java_pid", ".attach_pid", "polyprof-",
                                                                     ".polyprof-"))]
            except OSError:
                names = []
            fifos = [os.path.join(tmp, n) for n in names if os.path.exists(os.path.join(tmp, n))
                     and os.stat(os.path.join(tmp, n)).st_mode & 0o170000 == 0o010000]
            # the plugin deletes the output files it asked for, planted or not
            check((fifos or where == "result") and not any(hostile.fifo_has_reader(f) for f in fifos),
                  "%s/fifo: no reader left on the FIFO (%s)" % (where, [os.path.basename(f) for f in fifos]))
        opened = watch.opened()
        check(not opened, "the canary and the device node were never opened (%s)" % opened)
        for case, p in targets.items():
            check(p.poll() is None, "%s/%s: the JVM is alive" % case)

        statuses = []
        java_frames = 0
        for c in sorted(os.listdir(outdir)):
            if c.startswith("profile_") and c.endswith(".col"):
                _, stacks = pputil.parse_col(os.path.join(outdir, c))
                statuses += [f for fr, _ in stacks for f in fr if f.startswith("[Profiling ")]
                java_frames += sum(n for fr, n in stacks if any(f.startswith("HotCold.") for f in fr))
        for (where, kind), p in targets.items():
            named = {"socket": "/tmp/.java_pid%d " % p.pid, "trigger": "/tmp/.attach_pid%d " % p.pid,
                     "agentdir": agent_dir + " ", "result": "/tmp/.polyprof-%d-" % p.pid}[where]
            mine = [s for s in statuses if named in s]
            check(any(s.startswith(("[Profiling error: ", "[Profiling skipped: ")) and EXPECT[(where, kind)] in s
                      for s in mine),
                  "%s/%s: status names the path and why (%s)" % (where, kind, mine[:2]))
        check(java_frames == 0, "no Java stacks from a hostile target (%d)" % java_frames)
        if pputil.failures:
            print(log[-4000:])
            print(statuses)
    finally:
        for p in targets.values():
            pputil.kill(p)
        watch.close()
        # mounts and plants die with the targets' namespaces; the files are ours
        shutil.rmtree(base, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
