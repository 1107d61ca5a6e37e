"""The Debian packages, built, installed and used for real (docs/packaging.md).

Runs the README's packaging commands verbatim ("Installing as a service"):
`make deb` in a clean clone of the repository (the packages must land in
its dist/), then the README's `sudo apt install ./dist/...` line there;
`sudo systemctl status polyprof` where PID 1 is systemd (elsewhere the line
must fail only for that reason); the README's `sudo apt remove
polyprof-plugin-java` at the end, after which the agent lists no java
plugin. Checks the packages with lintian and `systemd-analyze verify`, and
drives the installed agent:
- `polyprof --version`; `polyprof plugins` with no flags lists every plugin
  from /usr/lib/<multiarch>/polyprof/plugins;
- the agent runs its plugins in /usr/lib/<multiarch>/polyprof/polyprof-worker;
- the service's command line (ExecStart of the installed unit, nothing else)
  under the unit's capability bounding set runs continuous sessions from the
  config file, writing into /var/lib/polyprof; the Python program it
  profiles runs as `nobody`, so the capability set must really be enough;
- removing polyprof-plugin-python fires the dpkg trigger, which SIGHUPs the
  agent: the session before had Python frames, a later one has none (the
  process is still profiled natively);
- with the agent stopped and a pid file pointing at another process, the
  trigger leaves that process alone;
- a plugin built out of tree from polyprof-dev alone (pkg-config, gcc) is
  listed by `polyprof plugins` and its frames appear in the agent's profile;
  the example plugin builds from /usr/share/doc/polyprof-dev/examples;
- purge removes /etc/polyprof, the state and log directories and the agent.
The machine is left clean: every package is purged at the end, on failure
too. Needs root; it owns the polyprof package names on the machine.
"""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import pputil as u  # noqa: E402

SRC = u.SRC
PLUGINS = ["perf", "python", "java", "php", "ruby", "nodejs", "dotnet", "example"]
PACKAGES = ["polyprof", "polyprof-dev", "polyprof-plugins"] + ["polyprof-plugin-" + p for p in PLUGINS]
CONFIG = "/etc/polyprof/polyprof.yaml"
STATE = "/var/lib/polyprof"
PIDFILE = "/run/polyprof/polyprof.pid"
UNIT = "/lib/systemd/system/polyprof.service"

if os.geteuid() != 0:
    u.skip("installs packages system-wide: must run as root")
for tool in ("dpkg-buildpackage", "dh", "lintian", "systemd-analyze", "pkg-config", "gcc", "setpriv", "git", "sudo"):
    if not shutil.which(tool):
        u.skip("%s is missing: run scripts/install-deps.sh deb" % tool)

multiarch = subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], stdout=subprocess.PIPE,
                           text=True, check=True).stdout.strip()
PLUGIN_DIR = "/usr/lib/%s/polyprof/plugins" % multiarch
procs = []  # everything we start, killed in cleanup()
extra_files = []  # files we put into package-owned directories


# the capabilities `polyprof check` may name as step capabilities
CAP_NUMBERS = {"CAP_DAC_OVERRIDE": 1, "CAP_FOWNER": 3, "CAP_KILL": 5, "CAP_SETGID": 6, "CAP_SETUID": 7,
               "CAP_SYS_CHROOT": 18, "CAP_SYS_ADMIN": 21}


def worker_status(parent):
    """{comm: /proc/PID/status fields} of the plugin workers of `parent`."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/status" % d) as f:
                st = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
        except OSError:
            continue
        st = {k: v.strip() for k, v in st.items()}
        if st.get("PPid") == str(parent) and st.get("Name", "").startswith("pp-"):
            out[st["Name"]] = st
    return out


def worker_exes(parent):
    """{comm: executable} of the children of `parent` (its plugin workers)."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
            if int(st[st.rindex(")") + 2:].split()[1]) == parent:
                out[st[st.index("(") + 1:st.rindex(")")]] = os.readlink("/proc/%s/exe" % d)
        except (OSError, ValueError):
            continue
    return out


def run(cmd, timeout=600, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout, **kw)
    return p.returncode, p.stdout


def installed(pkg):
    rc, out = run(["dpkg-query", "-W", "-f=${Status}", pkg])
    return rc == 0 and "installed" in out and "not-installed" not in out


def purge_all():
    # the README's install line takes the -dbgsym packages too
    rc, out = run(["dpkg-query", "-W", "-f=${Package}\n", "polyprof*"])
    present = [p for p in out.split() if p in PACKAGES or p.endswith("-dbgsym")] if rc == 0 else []
    if present:
        run(["dpkg", "--purge"] + present)


def cleanup():
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    for f in extra_files:
        if os.path.lexists(f):
            os.unlink(f)
    purge_all()


def wait_for(pred, timeout, step=0.2):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return None


class Sessions:
    """Watches /var/lib/polyprof for new profiles (rotating output keeps only
    the latest, so each one is read as soon as the link moves)."""

    def __init__(self):
        self.seen = set()
        self.profiles = []  # (name, text, time first seen)

    def poll(self):
        link = os.path.join(STATE, "last_profile.col")
        try:
            name = os.readlink(link)
            with open(link, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            return None
        if name in self.seen:
            return None
        self.seen.add(name)
        self.profiles.append((name, text, time.time()))
        return text

    def next(self, timeout):
        return wait_for(self.poll, timeout, 0.1)


def stacks_of(text, comm):
    return [l for l in text.split("\n")[1:] if l and l.split(";")[2:3] == [comm]]


def unit_value(key):
    with open(UNIT) as f:
        for line in f:
            if line.startswith(key + "="):
                return line.split("=", 1)[1].strip()
    return ""


def set_config(key_line, value_line):
    with open(CONFIG) as f:
        text = f.read()
    u.check(text.count(key_line + "\n") == 1, "config has the line %r" % key_line)
    with open(CONFIG, "w") as f:
        f.write(text.replace(key_line + "\n", value_line + "\n"))


def readme_commands():
    """The commands of the README's "Installing as a service" block, each
    without its trailing comment."""
    with open(os.path.join(SRC, "README.md")) as f:
        text = f.read()
    section = text.split("## Installing as a service", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [l.split("#", 1)[0].strip() for l in block.splitlines() if l.split("#", 1)[0].strip()]


def readme_run(line, cwd, timeout=900):
    """A README line exactly as a user pastes it into a shell (no terminal:
    debconf takes its defaults)."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive", DEB_JOBS=os.environ.get("DEB_JOBS", "2"))
    # "Y" as a user answers apt's "Do you want to continue?"
    p = subprocess.run(["bash", "-c", line], cwd=cwd, input="Y\n", stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout, env=env)
    return p.returncode, p.stdout


def systemd_is_init():
    try:
        return os.readlink("/proc/1/exe").endswith("/systemd") or os.path.isdir("/run/systemd/system")
    except OSError:
        return os.path.isdir("/run/systemd/system")


WORKLOAD = """
import time
def polyprof_pkg_busy_loop():
    x = 0
    while True:
        for i in range(200000):
            x += i
        time.sleep(0.001)
polyprof_pkg_busy_loop()
"""

try:
    # --- build -------------------------------------------------------------
    purge_all()  # a previous run that died mid-way
    readme = readme_commands()
    u.check(len(readme) == 4 and readme[0] == "make deb" and readme[1].startswith("sudo apt install ./dist/"),
            "the README's packaging commands: %s" % readme)
    clone = os.path.join(u.tempdir("ppdeb-"), "polyprof")
    rc, out = run(["git", "clone", "--quiet", "--no-hardlinks", SRC, clone])
    if not u.check(rc == 0, "a clean clone of the repository (%s)" % out.strip()[-300:]):
        raise SystemExit
    dist = os.path.join(clone, "dist")
    t0 = time.time()
    rc, out = readme_run(readme[0], clone, timeout=3000)
    print("%s: %.0f s, load average %s" % (readme[0], time.time() - t0, os.getloadavg()))
    if not u.check(rc == 0 and glob.glob(os.path.join(dist, "polyprof_*.deb")),
                   "README: `%s` in a clean clone leaves the packages in dist/ (rc %d)" % (readme[0], rc)):
        print(out[-4000:])
        raise SystemExit
    debs = {}
    for path in glob.glob(os.path.join(dist, "*.deb")):
        name = os.path.basename(path).split("_")[0]
        if not name.endswith("-dbgsym"):
            debs[name] = path
    u.check(sorted(debs) == sorted(PACKAGES), "one package each: %s" % sorted(debs))

    def contents(pkg):
        return run(["dpkg-deb", "-c", debs[pkg]])[1]

    agent_list = contents("polyprof")
    for f in ("./usr/sbin/polyprof", "./etc/polyprof/polyprof.yaml", "./etc/default/polyprof",
              "./lib/systemd/system/polyprof.service", "./usr/share/man/man8/polyprof.8.gz",
              "./usr/share/man/man5/polyprof.yaml.5.gz", "./var/lib/polyprof/", "./var/log/polyprof/"):
        u.check(f in agent_list, "polyprof ships %s" % f)
    worker = "/usr/lib/%s/polyprof/polyprof-worker" % multiarch
    u.check("." + worker in agent_list, "polyprof ships the plugin worker executable " + worker)
    conffiles = run(["dpkg-deb", "-I", debs["polyprof"], "conffiles"])[1]
    u.check("/etc/polyprof/polyprof.yaml" in conffiles.split(), "polyprof.yaml is a conffile")
    triggers = run(["dpkg-deb", "-I", debs["polyprof"], "triggers"])[1]
    u.check("interest-noawait " + PLUGIN_DIR in triggers, "polyprof has a file trigger on " + PLUGIN_DIR)
    for p in PLUGINS:
        u.check("." + PLUGIN_DIR + "/%s.so" % p in contents("polyprof-plugin-" + p),
                "polyprof-plugin-%s ships %s/%s.so" % (p, PLUGIN_DIR, p))
    u.check("." + PLUGIN_DIR + "/java-agent/libpolyprof-jvmti.so" in contents("polyprof-plugin-java"),
            "polyprof-plugin-java ships the JVMTI agent")
    u.check("." + PLUGIN_DIR + "/nodejs-perfmap.node" in contents("polyprof-plugin-nodejs"),
            "polyprof-plugin-nodejs ships the perf-map addon")
    dev = contents("polyprof-dev")
    for f in ("./usr/include/polyprof/plugin.h", "./usr/lib/%s/pkgconfig/polyprof-plugin.pc" % multiarch,
              "./usr/include/polyprof/kit.h", "./usr/include/polyprof/kit/target_table.h",
              "./usr/lib/%s/libpolyprof-kit.a" % multiarch,
              "./usr/share/doc/polyprof-dev/plugin-sdk.md", "./usr/share/doc/polyprof-dev/examples/example.c",
              "./usr/share/doc/polyprof-dev/examples/Makefile"):
        u.check(f in dev, "polyprof-dev ships %s" % f)
    meta = run(["dpkg-deb", "-f", debs["polyprof-plugins"], "Depends", "Recommends"])[1]
    u.check(all("polyprof-plugin-" + p in meta for p in ("perf", "python", "java", "ruby")),
            "polyprof-plugins pulls in the default set: %s" % meta.strip())

    # every package, the debug symbols too (dist/debug, apart from the
    # README's globs)
    changes = glob.glob(os.path.join(dist, "*.deb")) + glob.glob(os.path.join(dist, "debug", "*.deb"))
    u.check(glob.glob(os.path.join(dist, "debug", "*-dbgsym_*.deb")) and not glob.glob(os.path.join(dist, "*-dbgsym_*.deb")),
            "make deb puts the -dbgsym packages in dist/debug, not dist/")
    rc, out = run(["lintian", "--fail-on", "error"] + changes, timeout=900)
    errors = [l for l in out.split("\n") if l.startswith("E: ")]
    u.check(rc == 0 and not errors, "lintian: no errors (%s)" % (errors or "clean"))
    print("lintian:\n" + out)

    # --- install -----------------------------------------------------------
    rc, out = readme_run(readme[1], clone)
    if not u.check(rc == 0, "README: `%s` installs the packages" % readme[1]):
        print(out[-4000:])
        raise SystemExit
    missing = [p for p in PACKAGES if p != "polyprof-dev" and not installed(p)]
    u.check(not missing, "README's install line installs the agent and every plugin (missing: %s)" % missing)
    rc, out = run(["dpkg", "-i", debs["polyprof-dev"]])  # the SDK checks below
    u.check(rc == 0, "dpkg -i polyprof-dev")
    rc, out = readme_run(readme[2], clone)
    if systemd_is_init():
        u.check(rc in (0, 3) and "polyprof.service" in out, "README: `%s`: %s" % (readme[2], out.strip()[:300]))
    else:
        # a container or VM whose PID 1 is not systemd: the line can only
        # fail, and must fail for that reason alone
        u.check(rc != 0 and ("not been booted with systemd" in out or "Failed to connect to bus" in out),
                "README: `%s` here, where PID 1 is not systemd, fails only for that: %s"
                % (readme[2], out.strip()[:200]))
    rc, out = run(["systemd-analyze", "verify", UNIT])
    u.check(rc == 0 and "polyprof.service" not in out,
            "systemd-analyze verify %s passes: %s" % (UNIT, out.strip()[-600:]))

    rc, out = run(["polyprof", "--version"])
    u.check(rc == 0 and out.startswith("polyprof "), "polyprof --version: %s" % out.strip())
    u.check(shutil.which("polyprof") == "/usr/sbin/polyprof", "the agent is /usr/sbin/polyprof")
    rc, out = run(["polyprof", "plugins"])
    u.check(rc == 0 and ("plugin directory: " + PLUGIN_DIR) in out,
            "polyprof plugins uses the system plugin directory with no flags")
    listed = {l.split()[0] for l in out.split("\n")[2:] if l and not l.startswith(" ")}
    u.check(set(PLUGINS) <= listed, "polyprof plugins lists every installed plugin: %s" % sorted(listed))
    u.check("refused" not in out, "no plugin refused:\n" + out)
    with open(CONFIG) as f:
        cfg = f.read()
    u.check("  continuous: true\n" in cfg and "  dir: /var/lib/polyprof\n" in cfg
            and "  pid_file: /run/polyprof/polyprof.pid\n" in cfg,
            "the installed config runs the service: continuous, /var/lib/polyprof, /run/polyprof pid file")

    # --- the service's command line, under the unit's capabilities ---------
    nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    py = subprocess.Popen(nobody + ["/usr/bin/python3", "-c", WORKLOAD])
    procs.append(py)
    sleeper = subprocess.Popen(nobody + ["sleep", "900"])
    procs.append(sleeper)
    # an admin's edit of the conffile: short sessions, only our processes
    # (the machine may run other people's programs)
    set_config("  duration: 60", "  duration: 5")
    set_config("  pids: []", "  pids: [%d, %d]" % (py.pid, sleeper.pid))

    exec_start = unit_value("ExecStart").replace("$POLYPROF_OPTS", "").split()
    u.check(exec_start == ["/usr/sbin/polyprof", "--config", CONFIG],
            "ExecStart is the agent with the config file only: %s" % exec_start)
    caps = unit_value("CapabilityBoundingSet").split()
    bounding = "-all," + ",".join("+" + c[len("CAP_"):].lower() for c in caps)
    log_path = "/var/log/polyprof/polyprof.log"
    # other agents on the machine may share the default log file: read ours
    log_start = os.path.getsize(log_path) if os.path.exists(log_path) else 0

    def agent_log():
        try:
            with open(log_path, errors="replace") as f:
                f.seek(log_start)
                return f.read()
        except OSError:
            return ""

    agent = subprocess.Popen(["setpriv", "--bounding-set=" + bounding, "--no-new-privs", "--"] + exec_start,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    procs.append(agent)
    pid_ok = wait_for(lambda: os.path.exists(PIDFILE) and open(PIDFILE).read().strip() == str(agent.pid), 30)
    u.check(pid_ok, "the agent writes its pid to " + PIDFILE)
    with open("/proc/%d/status" % agent.pid) as f:
        capbnd = [l for l in f.read().split("\n") if l.startswith("CapBnd:")]
    print("agent %s (unit: %s)" % (capbnd, " ".join(caps)))

    sessions = Sessions()
    first = sessions.next(60)
    if first is None:
        print(agent.stderr.read(4000) if agent.poll() is not None else "(agent still running)")
    u.check(first is not None, "a profile appears in %s within 60 s" % STATE)
    exes = worker_exes(agent.pid)
    chk = subprocess.run(["/usr/sbin/polyprof", "check", "--config", CONFIG], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    # what each worker holds for single steps only (permitted, not effective)
    step = {}
    plugin = None
    for line in chk.stdout.splitlines():
        m = re.match(r"^  (\w+)( \(disabled\))?$", line)
        if m:
            plugin = m.group(1)
        elif plugin and line.strip().startswith("for single steps only"):
            names = line.split(":", 1)[1].strip()
            unknown = [n for n in names.split(",") if n not in CAP_NUMBERS and n != "none"]
            u.check(not unknown, "%s: every step capability check lists is known to this test (%s)"
                    % (plugin, unknown))
            step["pp-" + plugin] = sum(1 << CAP_NUMBERS[n] for n in names.split(",") if n in CAP_NUMBERS)
    # least privilege under the unit: every worker has no_new_privs, its
    # seccomp filter, a capability set inside the unit's (cut to its
    # plugin's declaration), its step capabilities not effective, and a
    # read-only view of the file system (docs/security.md)
    agent_bnd = int(capbnd[0].split()[1], 16) if capbnd else 0
    agent_mnt = os.readlink("/proc/%d/ns/mnt" % agent.pid)
    for comm, st in sorted(worker_status(agent.pid).items()):
        bnd, eff = int(st["CapBnd"], 16), int(st["CapEff"], 16)
        u.check(st.get("NoNewPrivs") == "1" and st.get("Seccomp") == "2",
                "%s under the unit: no_new_privs and a seccomp filter" % comm)
        u.check(bnd & ~agent_bnd == 0 and eff == bnd & ~step.get(comm, 0) and bnd != agent_bnd,
                "%s under the unit: its own capability set %#x (effective %#x, steps %#x), inside the unit's %#x"
                % (comm, bnd, eff, step.get(comm, 0), agent_bnd))
        wpid = int(st["Pid"])
        with open("/proc/%d/mountinfo" % wpid) as f:
            root_opts = [l.split()[5] for l in f if l.split()[4] == "/"]
        u.check(os.readlink("/proc/%d/ns/mnt" % wpid) != agent_mnt and root_opts
                and root_opts[0].split(",")[0] == "ro",
                "%s under the unit: a mount namespace of its own with / read-only (%s)" % (comm, root_opts))
    # the unit's set is derived from the workers' sets: their union, plus
    # CAP_SETPCAP with which the agent cuts them
    union = set()
    for line in chk.stdout.splitlines():
        if line.strip().startswith("capabilities: "):
            union |= set(line.split(":", 1)[1].split("(")[0].strip().split(",")) - {"none"}
    u.check(union and union | {"CAP_SETPCAP"} == set(caps),
            "the unit's capability set is the union of the workers' sets plus CAP_SETPCAP: unit %s, workers %s"
            % (sorted(caps), sorted(union)))
    u.check(unit_value("AmbientCapabilities").split() == caps, "AmbientCapabilities is the bounding set")
    u.check(exes.get("pp-python") == "/usr/lib/%s/polyprof/polyprof-worker" % multiarch,
            "the installed agent runs its plugins in the packaged worker executable: %s" % exes)
    jlog = agent_log()
    u.check(("agent %s/java-agent/libpolyprof-jvmti.so" % PLUGIN_DIR) in jlog and "not usable" not in jlog,
            "the java plugin finds its JVMTI agent in the system plugin directory with no flags")
    # the first session may start before the workload has its first frames:
    # look at the next one too
    before = None
    for _ in range(3):
        text = first if before is None and first else sessions.next(30)
        first = None
        if text and any("polyprof_pkg_busy_loop" in l and "_[p]" in l for l in stacks_of(text, "python3")):
            before = text
            break
    u.check(before is not None,
            "with the python plugin, the nobody-owned workload has Python frames under the unit's capabilities")

    # --- removing the python plugin reloads the agent ----------------------
    rc, out = run(["dpkg", "-r", "polyprof-plugin-python"])
    u.check(rc == 0, "dpkg -r polyprof-plugin-python (the metapackage stays)")
    u.check(installed("polyprof-plugins"), "polyprof-plugins is still installed")
    u.check("agent (pid %d) reloads" % agent.pid in out,
            "the trigger signalled the running agent: %s" % out.strip()[-400:])
    reloaded = wait_for(lambda: agent_log().count("configuration and plugins reloaded") == 1, 40)
    u.check(reloaded, "the agent reloaded at the session boundary (log)")
    while sessions.poll():  # written before the reload
        pass
    after = sessions.next(30)  # the first session with the new plugin set
    u.check(after is not None, "sessions continue after the python plugin is removed")
    if after is not None:
        py_lines = stacks_of(after, "python3")
        u.check(py_lines and not any("_[p]" in l for l in py_lines),
                "the next session has no Python frames but still profiles python3 natively (%d stacks)"
                % len(py_lines))
    rc, out = run(["polyprof", "plugins"])
    u.check("python " not in out, "polyprof plugins no longer lists python")

    # --- an out-of-tree plugin from polyprof-dev ---------------------------
    rc, cflags = run(["pkg-config", "--cflags", "polyprof-plugin"])
    rc2, plugdir = run(["pkg-config", "--variable=plugindir", "polyprof-plugin"])
    u.check(rc == 0 and rc2 == 0 and plugdir.strip() == PLUGIN_DIR,
            "pkg-config polyprof-plugin: plugindir=%s" % plugdir.strip())
    work = u.tempdir("ppoot-")
    shutil.copy(os.path.join(HERE, "oot_probe.c"), work)
    so = os.path.join(work, "oot_probe.so")
    # -nostdinc of the source tree: only /usr/include (polyprof-dev) is seen
    rc, out = run(["sh", "-c", "gcc -O2 -fPIC -shared -Wall -Werror -Wl,--no-undefined "
                   "$(pkg-config --cflags polyprof-plugin) -o %s %s/oot_probe.c" % (so, work)], cwd=work)
    u.check(rc == 0, "the out-of-tree plugin builds against the installed header: %s" % out.strip())
    dest = os.path.join(PLUGIN_DIR, "oot_probe.so")
    extra_files.append(dest)
    shutil.copy(so, dest)
    rc, out = run(["polyprof", "plugins"])
    u.check(re.search(r"^oot_probe\s+0\.1\s+1\.\d+\s+enabled", out, re.M) is not None,
            "polyprof plugins lists the out-of-tree plugin as enabled:\n" + out)
    os.kill(agent.pid, signal.SIGHUP)  # what an admin does after dropping a plugin in
    wait_for(lambda: agent_log().count("configuration and plugins reloaded") == 2, 40)
    while sessions.poll():
        pass
    text = sessions.next(30)
    u.check(text is not None and any("oot_probe_marker" in l for l in stacks_of(text, "sleep")),
            "the out-of-tree plugin's frames appear under the sleep process")

    # the shipped example builds with its Makefile from the installed SDK
    ex = u.tempdir("ppex-")
    shutil.rmtree(ex)
    shutil.copytree("/usr/share/doc/polyprof-dev/examples", ex)
    rc, out = run(["make", "-C", ex, "NAME=example"])
    u.check(rc == 0 and os.path.exists(os.path.join(ex, "example.so")),
            "the example plugin builds from /usr/share/doc/polyprof-dev/examples: %s" % out.strip()[-300:])
    only = u.tempdir("ppexdir-")
    shutil.copy(os.path.join(ex, "example.so"), only)
    rc, out = run(["polyprof", "plugins", "--plugin-dir", only])
    u.check(re.search(r"^example\s", out, re.M) is not None, "the agent loads the rebuilt example plugin")

    # --- stop; the trigger never signals a process that is not the agent ---
    agent.send_signal(signal.SIGTERM)
    try:
        agent.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pass
    u.check(agent.returncode == 0, "the agent exits 0 on SIGTERM (got %s)" % agent.returncode)
    u.check(not os.path.exists(PIDFILE), "and removes its pid file")
    with open(PIDFILE, "w") as f:  # stale pid file naming another process
        f.write("%d\n" % sleeper.pid)
    rc, out = run(["dpkg", "-i", debs["polyprof-plugin-python"]])
    u.check(rc == 0 and "Processing triggers for polyprof" in out,
            "polyprof-plugin-python reinstalls and fires the trigger")
    time.sleep(0.5)
    u.check(sleeper.poll() is None and "reloads" not in out,
            "the trigger did not SIGHUP pid %d, which is not /usr/sbin/polyprof" % sleeper.pid)
    os.unlink(PIDFILE)

    # --- the README's last line: one runtime off ------------------------------
    rc, out = readme_run(readme[3], clone)
    u.check(rc == 0 and not installed("polyprof-plugin-java"), "README: `%s`" % readme[3])
    rc, out = run(["polyprof", "plugins"])
    u.check(rc == 0 and not re.search(r"^java\s", out, re.M), "after it, polyprof plugins lists no java plugin")

    # --- purge ---------------------------------------------------------------
    os.unlink(dest)  # not owned by a package
    dbgsym = run(["dpkg-query", "-W", "-f=${Package}\n", "polyprof*-dbgsym"])[1].split()
    rc, out = run(["dpkg", "--purge"] + PACKAGES + [p for p in dbgsym if installed(p)])
    u.check(rc == 0, "dpkg --purge of every package")
    for path in ("/etc/polyprof", STATE, "/var/log/polyprof", "/usr/sbin/polyprof", PLUGIN_DIR,
                 "/etc/default/polyprof", "/etc/systemd/system/multi-user.target.wants/polyprof.service"):
        u.check(not os.path.lexists(path), "purge removed %s" % path)
    u.check(not any(installed(p) for p in PACKAGES), "no polyprof package is left installed")
except SystemExit:
    pass
finally:
    cleanup()
u.finish()
