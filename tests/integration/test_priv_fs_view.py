"""Each plugin worker sees the file system read-only, but for its runtime
directory.

With a python target (so the python worker has work) and the perf plugin:
every worker runs in a mount namespace of its own (not the agent's), whose
mounts are all read-only (/ and /proc among them) except
/run/polyprof/<plugin>. Inside that namespace even root with every
capability cannot create a file in /etc, /var/tmp or /tmp (EROFS), while
the runtime directory takes files; nothing appears in the host's /etc,
/var/tmp or /tmp. The workers still do their job: the profile has the
target's Python frames. `polyprof check` describes the view.
"""
import os
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pputil as u  # noqa: E402

if os.geteuid() != 0:
    u.skip("needs root: a mount namespace per worker is made with CAP_SYS_ADMIN")
if not subprocess.run(["sh", "-c", "command -v nsenter"], stdout=subprocess.DEVNULL).returncode == 0:
    u.skip("nsenter (util-linux) not found")


def status(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return line.split(":", 1)[1].strip()
    return None


def workers_of(agent_pid):
    found = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if status(int(d), "PPid") == str(agent_pid) and status(int(d), "Name").startswith("pp-"):
                    found[status(int(d), "Name")[3:]] = int(d)
            except (OSError, AttributeError):
                pass
    return found


def mounts(pid):
    """mount point -> per-mount options, from /proc/PID/mountinfo."""
    out = {}
    with open("/proc/%d/mountinfo" % pid) as f:
        for line in f:
            parts = line.split()
            out[parts[4]] = parts[5].split(",")
    return out


def inside(pid, script):
    """Runs `script` as root with every capability in the worker's mount
    namespace (only: pid, network, ... stay the host's)."""
    return subprocess.run(["nsenter", "-t", str(pid), "-m", "sh", "-c", script],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=20)


plugins = u.plugin_dir_with(os.path.join(u.PLUGIN_DIR, "python.so"), os.path.join(u.PLUGIN_DIR, "perf.so"))
target = u.spawn([sys.executable, "-c", "def spin_here():\n    while True: sum(range(1000))\nspin_here()"])
out = u.tempdir("ppview-out-")
tag = "pp-view-" + uuid.uuid4().hex[:12]
try:
    cmd = u.agent_cmd(out, plugins, "-c", "--pids", str(target.pid), duration=2)
    agent = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.time() + 60
    while time.time() < end and agent.poll() is None:
        if len([f for f in os.listdir(out) if f.startswith("profile_") and f.endswith(".col")]) >= 2:
            break
        time.sleep(0.2)
    workers = workers_of(agent.pid)
    u.check(sorted(workers) == ["perf", "python"], "both workers run (%s)" % sorted(workers))
    agent_ns = os.readlink("/proc/%d/ns/mnt" % agent.pid)
    for name, pid in sorted(workers.items()):
        u.check(os.readlink("/proc/%d/ns/mnt" % pid) != agent_ns,
                "%s worker: a mount namespace of its own" % name)
        m = mounts(pid)
        run_dir = "/run/polyprof/" + name
        u.check("ro" in m.get("/", []), "%s worker: / is read-only (%s)" % (name, m.get("/")))
        u.check("ro" in m.get("/proc", ["ro"]), "%s worker: /proc is read-only (%s)" % (name, m.get("/proc")))
        writable = sorted(p for p, o in m.items() if "rw" in o)
        u.check(writable == [run_dir], "%s worker: only %s is a writable mount (%s)" % (name, run_dir, writable))
        for d in ("/etc", "/var/tmp", "/tmp"):
            r = inside(pid, 'touch "%s/%s"' % (d, tag))
            u.check(r.returncode != 0 and "Read-only file system" in r.stdout,
                    "%s worker's view: root cannot create a file in %s (%s)" % (name, d, r.stdout.strip()))
            u.check(not os.path.exists(os.path.join(d, tag)), "nothing appeared in the host's %s" % d)
        r = inside(pid, 'touch "{1}/{0}" && rm "{1}/{0}" && echo wrote'.format(tag, run_dir))
        u.check(r.returncode == 0 and "wrote" in r.stdout,
                "%s worker's view: %s takes files (%s)" % (name, run_dir, r.stdout.strip()))
    agent.terminate()
    agent.communicate(timeout=60)
    u.check(agent.returncode == 0, "agent exits 0 (rc %s)" % agent.returncode)
    header, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
    u.check(any("spin_here" in x and x.endswith("_[p]") for f, _ in stacks for x in f),
            "the python worker still profiles: spin_here_[p] frames")
finally:
    u.kill(target)
    for d in ("/etc", "/var/tmp", "/tmp"):
        if os.path.exists(os.path.join(d, tag)):
            os.unlink(os.path.join(d, tag))

chk = subprocess.run([u.AGENT, "check", "--plugin-dir", plugins, "--config",
                      os.path.join(u.SRC, "tests", "integration", "empty.yaml")],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
views = [l.strip() for l in chk.stdout.splitlines() if l.strip().startswith("mount view:")]
u.check(len(views) == 2 and all("a mount namespace of its own, every mount read-only but /run/polyprof/" in v
                                and "/tmp" not in v.split("(")[0] for v in views),
        "check describes each worker's view: %s" % views)
u.finish()
