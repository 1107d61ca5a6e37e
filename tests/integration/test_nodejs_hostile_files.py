"""nodejs plugin: hostile targets at every path it reaches in a target's root.

The plugin touches three kinds of file in a Node process's root:

  binary    the node executable (read for Node's exported symbols before
            any SIGUSR1)
  addondir  /tmp/polyprof-nodejs, where attach-maps copies its addon
  perfmap   /tmp/perf-<pid>.map, written by that addon in the target and
            removed by the agent when the writer stops

Each target is node run as nobody in its own user and mount namespace
(hostile.py) with a /tmp of its own, so what it plants there is its own. It plants a link to a root-only canary (a directory for addondir), a
FIFO, a bind-mounted device node, or a bind mount of the canary; the node
binary gets the canary mounted over it from inside once Node runs, and the
perf map gets it mounted over it once the addon writes it. The targets have
their own process titles (comm) so the profile tells them apart.

Every case: neither canary nor the device is opened (inotify), the agent's
sessions finish on time, no FIFO is left with a reader, and the target is
either profiled anyway (the binary: opened as the inode it maps) or has a
"[Profiling error/skipped: ...]" status naming the path.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "nodejs"))
import hostile  # noqa: E402
import nodetest as n  # noqa: E402
import pputil as u  # noqa: E402

n.require_node()
if not shutil.which("unshare") or not shutil.which("setpriv"):
    u.skip("needs unshare and setpriv (util-linux)")
plugins = n.plugin_dir()
if not os.path.exists(os.path.join(plugins, "nodejs-perfmap.node")):
    u.skip("nodejs-perfmap.node not built")

# Runs in the target: a little named JS work, and the plants that can only
# happen once Node runs (over its own binary, over the map the addon wrote).
WORK = r'''
const { execSync } = require('child_process');
const fs = require('fs');
function hostileWork() {
  let x = 0;
  const end = Date.now() + Number(process.env.PP_BUSY_MS);
  while (Date.now() < end) x += Math.sqrt(x + 1);
  return x;
}
setInterval(hostileWork, 50);
const canary = process.env.PP_CANARY;
if (process.env.PP_PLANT === 'binary')
  execSync(`mount --bind ${canary} ${process.execPath}`);
if (process.env.PP_PLANT === 'perfmap-late') {
  const map = `/tmp/perf-${process.pid}.map`;
  const iv = setInterval(() => {
    try {
      if (fs.statSync(map).size > 0) {
        execSync(`mount --bind ${canary} ${map}`);
        clearInterval(iv);
      }
    } catch (e) {}
  }, 100);
}
'''

# Outside /tmp: the targets put a /tmp of their own over it.
base = tempfile.mkdtemp(prefix="pp-nodejs-hostile-", dir="/var/tmp")
os.chmod(base, 0o755)
canary = os.path.join(base, "canary")
with open(canary, "w") as f:
    f.write("canary: the agent must never open this file\n")
os.chmod(canary, 0o600)
canary_dir = os.path.join(base, "canary-dir")
os.mkdir(canary_dir, 0o700)
canary_in_dir = os.path.join(canary_dir, "canary")
with open(canary_in_dir, "w") as f:
    f.write("canary\n")
os.chmod(canary_in_dir, 0o600)
dev = os.path.join(base, "zero")
os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 5))
script = os.path.join(base, "hostile_work.js")
with open(script, "w") as f:
    f.write(WORK)
os.chmod(script, 0o644)
watch = hostile.Watch([canary, canary_dir, canary_in_dir, dev])


def spawn(title, plant_line, env_extra, busy_ms):
    """node as nobody, own namespaces and /tmp, plant_line run first. The
    /tmp is a host directory bound over it (a tmpfs mounted in the target's
    user namespace could not hold the root-owned directory the agent makes)."""
    env = dict(os.environ, PP_CANARY=canary, PP_BUSY_MS=str(busy_ms), **env_extra)
    tmp = os.path.join(base, "tmp-" + title)
    os.mkdir(tmp)
    os.chmod(tmp, 0o1777)
    sh = 'mount --bind %s /tmp && %s; exec "$@"' % (tmp, plant_line or ":")
    with open(os.path.join(base, title + ".err"), "wb") as err:
        p = subprocess.Popen(
            hostile.unprivileged_prefix() + ["sh", "-c", sh, "hostile", n.NODE, "--title=" + title,
                                             script],
            stdout=subprocess.DEVNULL, stderr=err, env=env)
    p.title = title
    return p


def stderr_of(p):
    with open(os.path.join(base, p.title + ".err"), "rb") as f:
        return f.read()[-1500:].decode(errors="replace").strip() or "empty"


def still_running(p):
    """Checks p runs; if it died, says how and shows its stderr."""
    rc = p.poll()
    why = ""
    if rc is not None:
        how = "killed by signal %d" % -rc if rc < 0 else "exit status %d" % rc
        why = " (%s; its stderr: %s)" % (how, stderr_of(p))
    u.check(rc is None, "%s: target still running%s" % (p.title, why))


def mounted_at(pid, path, timeout=10.0):
    end = time.time() + timeout
    while True:
        try:
            with open("/proc/%d/mountinfo" % pid) as f:
                if any(ln.split()[4] == path for ln in f):
                    return True
        except OSError:
            return False
        if time.time() >= end:
            return False
        time.sleep(0.1)


def status_of(stacks, comm):
    return [x for f, _ in stacks if f[2] == comm for x in f
            if x.startswith("[Profiling error:") or x.startswith("[Profiling skipped:")]


def run_agent(mode, procs, duration, done=None, timeout=90):
    """Runs the agent over procs until done(profiles) holds (or 3 sessions
    without done), checking that sessions keep coming on time meanwhile."""
    out = u.tempdir("ppout-")
    t0 = time.time()
    agent = n.Agent(out, plugins, "--nodejs-mode", mode, "--pids",
                    ",".join(str(p.pid) for p in procs), duration=duration, freq=50)
    late = []
    while time.time() - t0 < timeout and agent.p.poll() is None:
        time.sleep(1)
        got, el = len(agent.profiles()), time.time() - t0
        if el > 15 and got < el / duration - 4:
            late.append("%d sessions after %.0fs" % (got, el))
        if got >= 3 and (done is None or done(agent.profiles())):
            break
    rc = agent.stop()
    got = len(agent.profiles())
    u.check(got >= 3 and not late and rc == 0,
            "%s: sessions on time (%d in %.0fs%s), agent exits 0 (rc %s)"
            % (mode, got, time.time() - t0, ", late: %s" % late[:2] if late else "", rc))
    if rc != 0:
        print(agent.stderr[-2000:])
    return agent


procs = []
try:
    # --- binary (inspector mode): profiled anyway, through the mapped inode
    binary = spawn("pph-binary", None, {"PP_PLANT": "binary"}, 20)
    procs.append(binary)
    exe = os.path.realpath(n.NODE)
    u.check(mounted_at(binary.pid, exe), "binary: the canary is mounted over %s in the target" % exe)
    agent = run_agent("inspector", [binary], 2)
    still_running(binary)
    _, stacks = n.stacks_of(agent.profiles()[1:])
    # its JS stacks (V8 often inlines hostileWork into the timer callback)
    js = sum(c for f, c in stacks if f[2] == "pph-binary" and
             any(x.startswith(("hostileWork", "listOnTimeout")) for x in f))
    if not u.check(js >= 10, "binary: profiled anyway (%d JS samples; statuses %s)"
                   % (js, status_of(stacks, "pph-binary")[:1])):
        print("its stderr: " + stderr_of(binary))

    # --- addondir and perfmap (attach-maps mode)
    cases = {}
    for kind in hostile.KINDS:
        target = canary_dir if kind == "link" else dev if kind == "device" else canary
        cases["pph-dir-" + kind] = ("polyprof-nodejs", hostile.plant_script(
            kind, "/tmp/polyprof-nodejs", target), {})
        target = dev if kind == "device" else canary
        cases["pph-map-" + kind] = ("perf-", hostile.plant_script(
            kind, "/tmp/perf-$$.map", target), {})
    cases["pph-map-late"] = (None, None, {"PP_PLANT": "perfmap-late"})
    maps_procs = {}
    for title, (_, line, extra) in cases.items():
        maps_procs[title] = spawn(title, line, extra, 5)
        procs.append(maps_procs[title])
    time.sleep(1)
    fifos = ["/proc/%d/root/tmp/polyprof-nodejs" % maps_procs["pph-dir-fifo"].pid,
             "/proc/%d/root/tmp/perf-%d.map" % (maps_procs["pph-map-fifo"].pid,
                                                maps_procs["pph-map-fifo"].pid)]
    late = maps_procs["pph-map-late"]
    mounted = []

    def all_seen(paths):
        """Every planted target has its status, and the late one has the
        canary over its map (then one more session, so that the agent's
        stop finds it there)."""
        _, stacks = n.stacks_of(paths)
        if not all(any(needle in x for x in status_of(stacks, title))
                   for title, (needle, _, _) in cases.items() if needle):
            return False
        if not mounted:
            if mounted_at(late.pid, "/tmp/perf-%d.map" % late.pid, 0):
                mounted.append(len(paths))
            return False
        return len(paths) > mounted[0]

    agent = run_agent("attach-maps", list(maps_procs.values()), 2, all_seen)
    _, stacks = n.stacks_of(agent.profiles())
    for title, (needle, _, _) in cases.items():
        if needle is None:
            continue
        st = status_of(stacks, title)
        u.check(any(needle in x for x in st), "%s: status names %s: %s" % (title, needle, st[:1]))
    u.check(bool(mounted), "perfmap-late: the canary was mounted over the map the addon wrote, "
            "and left there at stop")
    for fifo in fifos:
        u.check(not hostile.fifo_has_reader(fifo), "no reader left on %s" % fifo)
    for p in maps_procs.values():
        still_running(p)
    still_running(binary)
    opened = watch.opened()
    u.check(not opened, "nothing opened the canaries or the device: %s" % opened)
    with open(canary) as f:
        u.check(f.read().startswith("canary:"), "the canary is intact")
finally:
    for p in procs:
        u.kill(p)
    watch.close()
    shutil.rmtree(base, ignore_errors=True)
u.finish()
