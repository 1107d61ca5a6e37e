"""The perf maps the default mode (`auto` with perf, no --dotnet-mode given)
makes the runtime write are removed, and only those.

One agent run (2 s sessions) over six .NET 10 processes and one .NET 8
process (the self-contained test workload) run as nobody:
- one that exits mid-run: its map is gone within seconds of the session it
  exited in, while the agent still runs;
- one that lives: its map is there while the agent runs (perf names its JIT
  code from it up to the last session), gone once the agent stopped, the
  process unharmed;
- one started with DOTNET_PerfMapEnabled=1: its map stays;
- one whose map the test replaces, while the agent runs, by a link (owned by
  nobody) to a root-owned file elsewhere: the link stays, the file it
  points at is untouched;
- one with a file at the map's path before the agent came: it stays;
- one in its own user and mount namespaces with a /tmp of its own (a
  tmpfs, as in a container): its map, seen only through its root, is gone
  once the agent stopped. That /tmp is sticky and not root's: the removal
  takes the worker's CAP_FOWNER step (the host's /tmp is root's);
- the .NET 8 one, whose runtime writes /tmp/perfinfo-PID.map beside its
  map at EnablePerfMap (9 and 10 do not): both gone once the agent stopped.
"""
import os
import signal
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import hostile  # noqa: E402
import pputil  # noqa: E402
from pputil import check, finish, skip  # noqa: E402

sys.path.insert(0, os.path.join(pputil.SRC, "tests", "workloads", "dotnet"))
import build_workload  # noqa: E402

NOBODY = 65534


def as_nobody():
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)


def spawn(exe, behaviours, **env):
    e = build_workload.dotnet_env()
    e.pop("DOTNET_PerfMapEnabled", None)
    e.update(env)
    p = subprocess.Popen([exe, "60", behaviours], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, env=e, cwd="/", preexec_fn=as_nobody)
    return p


def spawn_contained(exe):
    """As nobody in new user and mount namespaces, with a tmpfs of its own
    on /tmp (the shell execs the workload: same pid)."""
    e = build_workload.dotnet_env()
    e.pop("DOTNET_PerfMapEnabled", None)
    return subprocess.Popen(hostile.unprivileged_prefix() +
                            ["sh", "-c", 'mount -t tmpfs tmpfs /tmp && exec "$@"', "ct", exe, "60", "generic"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=e, cwd="/")


def mapfile(p):
    return "/tmp/perf-%d.map" % p.pid


def perfinfo(p):
    return "/tmp/perfinfo-%d.map" % p.pid


def contained_map(p):
    """Its map as it sees it, through its root (its pid namespace is the host's)."""
    return "/proc/%d/root/tmp/perf-%d.map" % (p.pid, p.pid)


def cols_of(outdir):
    return sorted(f for f in os.listdir(outdir) if f.startswith("profile_") and f.endswith(".col"))


def wait_for(cond, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def main():
    if os.geteuid() != 0:
        skip("needs root (targets run as nobody)")
    exe = build_workload.published("/opt/polyprof-test", "10")
    exe8 = build_workload.published("/opt/polyprof-test", "8")
    if not exe or not exe8:
        skip("no up-to-date self-contained .NET 10 and 8 workloads under /opt/polyprof-test "
             "(run scripts/install-deps.sh test)")
    secret_dir = pputil.tempdir("ppdotnet-canary-")
    os.chmod(secret_dir, 0o700)
    canary = os.path.join(secret_dir, "canary")
    with open(canary, "w") as f:
        f.write("root's own\n")
    procs = {}
    agent = None
    try:
        procs = {"exits": spawn(exe, "generic,stdin-exit"), "lives": spawn(exe, "split", DOTNET_ReadyToRun="0"),
                 "own": spawn(exe, "generic", DOTNET_PerfMapEnabled="1"),
                 "link": spawn(exe, "generic"), "before": spawn(exe, "generic"),
                 "contained": spawn_contained(exe), "net8": spawn(exe8, "generic")}
        for p in procs.values():
            line = p.stdout.readline()
            if not line.startswith("ready"):
                raise RuntimeError("workload did not start: %r" % line)
        for p in procs.values():
            if os.path.lexists(mapfile(p)) and p is not procs["own"]:
                os.unlink(mapfile(p))  # left by an earlier process with this pid
        with open(mapfile(procs["before"]), "w") as f:
            f.write("planted before\n")
        os.chown(mapfile(procs["before"]), NOBODY, NOBODY)

        outdir = pputil.tempdir("ppdotnet-cleanup-")
        cmd = pputil.agent_cmd(outdir, pputil.PLUGIN_DIR, "-c", "-f", "99", "--no-python", "--no-ruby",
                               "--no-java", "--no-php", "--no-nodejs", "--pids",
                               ",".join(str(p.pid) for p in procs.values()), duration=2)
        agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ok = wait_for(lambda: len(cols_of(outdir)) >= 1 and all(
            os.path.exists(mapfile(procs[k])) for k in ("exits", "lives", "link")) and
            os.path.exists(contained_map(procs["contained"])) and
            os.path.exists(perfinfo(procs["net8"])), 30)
        check(ok, "the runtimes wrote their perf maps (default mode: auto, perf samples)")
        lives_map = os.path.exists(mapfile(procs["lives"]))
        net8_files = os.path.exists(mapfile(procs["net8"])) and os.path.exists(perfinfo(procs["net8"]))
        contained = procs["contained"]
        contained_before = os.path.exists(contained_map(contained)) and not os.path.lexists(mapfile(contained))

        # the target exits mid-run: its map goes while the agent runs on
        procs["exits"].stdin.close()
        procs["exits"].wait(timeout=20)
        gone = wait_for(lambda: not os.path.lexists(mapfile(procs["exits"])), 10)
        check(gone and agent.poll() is None,
              "the process that exited: its perf map removed while the agent runs (%s)" % gone)

        # a link to a root-owned file, owned by the target's user, where its map was
        link = mapfile(procs["link"])
        os.unlink(link)
        os.symlink(canary, link)
        os.lchown(link, NOBODY, NOBODY)
        n = len(cols_of(outdir))
        wait_for(lambda: len(cols_of(outdir)) >= n + 1, 10)
        time.sleep(1.5)  # the last session, ended by the signal, holds 1.5 s

        agent.send_signal(signal.SIGINT)
        agent.wait(timeout=60)
        check(agent.returncode == 0, "agent exits 0 (rc=%s)" % agent.returncode)
        log = open(os.path.join(os.path.dirname(cmd[cmd.index("--log-file") + 1]), "polyprof.log")).read()
        check("mode auto: perf samples, the runtime writes its perf map" in log,
              "no --dotnet-mode: the daemon profiles .NET in auto mode")

        check(lives_map and not os.path.lexists(mapfile(procs["lives"])) and procs["lives"].poll() is None,
              "the live process: its map there while the agent ran (%s), removed after it stopped, "
              "the process unharmed" % lives_map)
        # its JIT code (all of it: ReadyToRun off) named from the map up to
        # the last session
        cols = cols_of(outdir)
        _, last = pputil.parse_col(os.path.join(outdir, cols[-1])) if cols else (None, [])
        split = [(fr, c) for fr, c in last if len(fr) > 2 and fr[2] == "split"]
        named = sum(c for fr, c in split if any("[PolyprofWorkload] Polyprof.Workload.SplitWorker::" in f
                                                for f in fr))
        total = sum(c for _, c in split)
        check(named >= 20 and named * 2 >= total,
              "the live process's JIT frames named from its map in the last session (%d of %d samples)"
              % (named, total))

        own = mapfile(procs["own"])
        check(os.path.isfile(own) and os.path.getsize(own) > 0,
              "started with DOTNET_PerfMapEnabled=1: its map stays")
        st = os.lstat(link)
        check(stat.S_ISLNK(st.st_mode) and os.readlink(link) == canary,
              "the planted link stays a link to the root-owned file")
        check(open(canary).read() == "root's own\n", "the file the link points at is untouched")
        check(os.path.isfile(mapfile(procs["before"])), "the file at the map's path before the agent stays")
        check(contained_before and contained.poll() is None and not os.path.lexists(contained_map(contained)),
              "the process with a /tmp of its own: its map there, in its root only, while the agent ran "
              "(%s), removed after it stopped" % contained_before)
        net8 = procs["net8"]
        check(net8_files and not os.path.lexists(mapfile(net8)) and not os.path.lexists(perfinfo(net8)),
              ".NET 8: its perf map and perfinfo file there while the agent ran (%s), both removed after "
              "it stopped" % net8_files)
        left = [p.pid for p in procs.values() if os.path.lexists(perfinfo(p)) and p is not procs["own"]]
        check(not left, "no perfinfo file left by the processes the agent enabled (%s)" % left)
    finally:
        if agent:
            pputil.kill(agent)
        for p in procs.values():
            pputil.kill(p)
        for p in procs.values():
            for f in (mapfile(p), perfinfo(p)):
                if os.path.lexists(f):
                    os.unlink(f)
    finish()


if __name__ == "__main__":
    main()
