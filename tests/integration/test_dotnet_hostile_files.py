"""Hostile .NET targets: the plugin never opens or connects to anything a
target points it at but its own diagnostic socket.

Each target is the test workload run as nobody in its own user and mount
namespaces, with diagnostics off (DOTNET_EnableDiagnostics=0: no socket of
its own), that puts something else where the agent looks for the socket:

  socket path (TMPDIR/dotnet-diagnostic-PID-START-socket, the exact name):
    link-file    a symbolic link to a root-only canary file
    link-socket  a symbolic link to a root-only canary socket (listening)
    fifo         a FIFO
    fifo-listed  a FIFO under another start time (found by listing TMPDIR)
    device       a bind mount of a character device
    mount        a bind mount of the canary file
    busy-socket  its own socket whose listen backlog is full (a blocking
                 connect would never return)
  the directory itself (TMPDIR, listed when the exact name is not there):
    tmpdir-link  TMPDIR is a link to a root-only host directory holding a
                 root-owned socket named like the target's: a directory
                 the target's user cannot enter is never listed

Asserts: no open of the canary file or the device node (inotify), no
connection to the canary socket, no reader on the FIFO, a session that ends
on time, and for every target a "[Profiling skipped: ...]" status that says
why (the busy socket: "[Profiling error: ...]", it may accept later).
"""
import os
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import hostile  # noqa: E402
import pputil  # noqa: E402
from pputil import check, finish, skip  # noqa: E402

sys.path.insert(0, os.path.join(pputil.SRC, "tests", "workloads", "dotnet"))
import build_workload  # noqa: E402

# what each case's status must say (besides naming its path)
EXPECT = {
    "link-file": "not a socket",
    "link-socket": "owned by uid 0",
    "fifo": "a FIFO, not a socket",
    "fifo-listed": "a FIFO, not a socket",
    "device": "a character device, not a socket",
    "mount": "not a socket",
    "tmpdir-link": "cannot enter",
    "busy-socket": "diagnostic IPC failed",
}


def public_dir(prefix):
    d = pputil.tempdir(prefix)
    os.chmod(d, 0o755)
    return d


def listening_socket(path):
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen(8)
    s.setblocking(False)
    return s


def has_coreclr(pid):
    try:
        with open("/proc/%d/maps" % pid) as f:
            return "libcoreclr.so" in f.read()
    except OSError:
        return False


def main():
    if os.geteuid() != 0:
        skip("needs root (targets run as nobody in their own namespaces)")
    if not shutil.which("setpriv") or not shutil.which("unshare"):
        skip("setpriv/unshare not found")
    try:
        out = build_workload.build(pputil.BUILD)
    except FileNotFoundError as e:
        skip(str(e))
    exe = os.path.join(out, "PolyprofWorkload")

    # canaries: a root-only file in a directory nobody may traverse (so the
    # mount source can be looked up), a root-only listening socket, a device
    base = public_dir("ppdotnet-hostile-")
    canary = os.path.join(base, "canary")
    with open(canary, "w") as f:
        f.write("canary: the agent must never open this file\n")
    os.chmod(canary, 0o600)
    secret = os.path.join(base, "secret")  # root-only: the target cannot enter it
    os.mkdir(secret, 0o700)
    canary_sock_path = os.path.join(base, "canary.sock")
    canary_sock = listening_socket(canary_sock_path)
    os.chmod(canary_sock_path, 0o600)
    dev = hostile.device()
    watch = hostile.Watch([canary, dev])

    targets = {}
    env_base = {"PATH": "/usr/bin:/bin", "DOTNET_EnableDiagnostics": "0",
                "DOTNET_CLI_TELEMETRY_OPTOUT": "1", "DOTNET_NOLOGO": "1"}
    secret_socks = []
    try:
        for case in EXPECT:
            tmp = os.path.join(base, case)
            os.mkdir(tmp)
            os.chown(tmp, hostile.NOBODY, hostile.NOBODY)
            env = dict(env_base, HOME=tmp)
            if case == "busy-socket":
                env["TMPDIR"] = tmp
                script = "true"
            elif case == "tmpdir-link":
                env["TMPDIR"] = os.path.join(tmp, "t")
                script = 'ln -s "%s" "%s/t"' % (secret, tmp)
            else:
                env["TMPDIR"] = tmp
                # the exact name the runtime would use: pid and start time
                path = tmp + '/dotnet-diagnostic-$$-$(cut -d" " -f22 /proc/$$/stat)-socket'
                if case == "fifo-listed":
                    path = tmp + "/dotnet-diagnostic-$$-1-socket"
                kind, target = {"link-file": ("link", canary), "link-socket": ("link", canary_sock_path),
                                "fifo": ("fifo", None), "fifo-listed": ("fifo", None),
                                "device": ("device", dev), "mount": ("mount", canary)}[case]
                script = hostile.plant_script(kind, path, target)
            p = subprocess.Popen(hostile.unprivileged_prefix() +
                                 ["sh", "-c", script + '; exec "$@"', "hostile", exe, "60", "split"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            targets[case] = (p, tmp)
        deadline = time.time() + 30
        while time.time() < deadline and not all(has_coreclr(p.pid) for p, _ in targets.values()):
            time.sleep(0.2)
        for case, (p, tmp) in targets.items():
            check(p.poll() is None and has_coreclr(p.pid), "%s: target runs .NET (pid %d)" % (case, p.pid))
        # the plants took effect in the targets' own view
        for case, want in (("mount", os.stat(canary)), ("device", os.stat(dev))):
            p, tmp = targets[case]
            names = [n for n in os.listdir(tmp) if n.startswith("dotnet-diagnostic-")]
            seen = os.stat("/proc/%d/root%s/%s" % (p.pid, tmp, names[0])) if names else None
            check(seen is not None and (seen.st_ino, seen.st_dev) == (want.st_ino, want.st_dev),
                  "%s: planted over the socket path in the target's mount namespace" % case)
        # the socket the agent finds by listing the linked TMPDIR: named for
        # the target, owned by root, in a directory only root may enter
        pid = targets["tmpdir-link"][0].pid
        sp = os.path.join(secret, "dotnet-diagnostic-%d-1-socket" % pid)
        secret_socks.append(listening_socket(sp))
        # a socket of the target's user at the exact name that never accepts
        p, tmp = targets["busy-socket"]
        with open("/proc/%d/stat" % p.pid) as f:
            start = f.read().rsplit(")", 1)[1].split()[19]
        bp = os.path.join(tmp, "dotnet-diagnostic-%d-%s-socket" % (p.pid, start))
        busy = socket.socket(socket.AF_UNIX)
        busy.bind(bp)
        os.chown(bp, hostile.NOBODY, hostile.NOBODY)
        busy.listen(0)
        fillers = []
        while len(fillers) < 64:
            c = socket.socket(socket.AF_UNIX)
            c.setblocking(False)
            try:
                c.connect(bp)
            except BlockingIOError:
                c.close()
                break
            fillers.append(c)
        secret_socks.append(busy)

        outdir = pputil.tempdir("ppdotnet-hostile-out-")
        only_dotnet = pputil.plugin_dir_with(os.path.join(pputil.PLUGIN_DIR, "dotnet.so"))
        pids = ",".join(str(p.pid) for p, _ in targets.values())
        cmd = pputil.agent_cmd(outdir, only_dotnet, "--dotnet-mode", "dotnet-trace",
                               "--dotnet-attach-timeout-s", "0", "--pids", pids, duration=3)
        t0 = time.time()
        try:
            agent = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   timeout=90)
            elapsed = time.time() - t0
            log = agent.stdout
            rc = agent.returncode
        except subprocess.TimeoutExpired as e:
            elapsed, rc = time.time() - t0, None
            log = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        check(rc == 0, "agent exits 0 (rc=%s)" % rc)
        check(elapsed < 45, "the session ended on time (%.1f s for -d 3)" % elapsed)

        for case in ("fifo", "fifo-listed"):
            tmp = targets[case][1]
            fifo = os.path.join(tmp, [n for n in os.listdir(tmp) if n.startswith("dotnet-diagnostic-")][0])
            check(not hostile.fifo_has_reader(fifo), "%s: no reader left on the FIFO" % case)
        opened = watch.opened()
        check(not opened, "the canary and the device node were never opened (%s)" % opened)
        for s, name in [(canary_sock, "canary socket"), (secret_socks[0], "root-owned socket")]:
            try:
                c, _ = s.accept()
                c.close()
                check(False, "no connection to the %s" % name)
            except BlockingIOError:
                check(True, "no connection to the %s" % name)

        statuses = []
        named = 0
        for c in sorted(os.listdir(outdir)):
            if c.startswith("profile_") and c.endswith(".col"):
                _, stacks = pputil.parse_col(os.path.join(outdir, c))
                statuses += [f for fr, _ in stacks for f in fr if f.startswith("[Profiling ")]
                named += sum(n for fr, n in stacks if any(f.endswith("_[net]") for f in fr))
        for case, (_, tmp) in targets.items():
            if case == "busy-socket":
                mine = [s for s in statuses if EXPECT[case] in s]
                check(any(s.startswith("[Profiling error: ") for s in mine),
                      "%s: status names why (%s)" % (case, mine[:2]))
                continue
            mine = [s for s in statuses if tmp + "/" in s]
            check(any(s.startswith("[Profiling skipped: ") and EXPECT[case] in s for s in mine),
                  "%s: status names why (%s)" % (case, mine[:2]))
        check(named == 0, "no .NET frames from a hostile target (%d)" % named)
        if pputil.failures:
            print(log[-3000:])
            print(statuses)
    finally:
        for p, _ in targets.values():
            pputil.kill(p)
        canary_sock.close()
        for s in secret_socks:
            s.close()
        watch.close()
        # mounts die with the targets' namespaces; the files are ours
        shutil.rmtree(os.path.dirname(dev), ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
