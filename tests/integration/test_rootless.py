"""Rootless mode (--rootless): the agent run by an ordinary user.

The test creates a throwaway user, starts a Python workload and a native C
workload as that user, and runs the agent as that user with --rootless
--pids. It asserts that the profile holds the workloads' Python frames
(_[p]) and native frames from perf's per-thread events, and nothing of any
other process; that a pid owned by root, a missing --pids and running
--rootless as root are refused with a clear message; that the log and pid
file went to the user's own directory; and that `polyprof check --rootless`
says what works and what does not. The user is removed afterwards.

Needs root (to create the user). If kernel.perf_event_paranoid is above 2
(Debian's default 3 forbids unprivileged perf), it is lowered to 2 for the
test and restored.
"""
import os
import pwd
import shutil
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pputil  # noqa: E402

PARANOID = "/proc/sys/kernel/perf_event_paranoid"
SYSTEM_PYTHON = "/usr/bin/python3"  # the test's python may live under /root


def run_as(user, cmd, env, timeout=120):
    return subprocess.run(cmd, user=user.pw_uid, group=user.pw_gid, extra_groups=[], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout, cwd=env["HOME"])


def spawn_as(user, cmd, env):
    return subprocess.Popen(cmd, user=user.pw_uid, group=user.pw_gid, extra_groups=[], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=env["HOME"])


def stage(tmp):
    """Copies the agent, its worker executable, its plugins, the workloads and an empty config into
    a directory the unprivileged user can read (the build tree may not be)."""
    bindir = os.path.join(tmp, "bin")
    plugdir = os.path.join(tmp, "plugins")
    os.makedirs(bindir)
    os.makedirs(plugdir)
    agent = shutil.copy(pputil.AGENT, bindir)
    # the agent runs its plugins in this executable, found next to itself
    shutil.copy(os.path.join(os.path.dirname(pputil.AGENT), "polyprof-worker"), bindir)
    for name in ("perf.so", "python.so"):
        shutil.copy(os.path.join(pputil.PLUGIN_DIR, name), plugdir)
    workload = shutil.copy(os.path.join(pputil.SRC, "tests", "workloads", "python", "workload.py"), tmp)
    config = shutil.copy(os.path.join(pputil.SRC, "tests", "integration", "empty.yaml"), tmp)
    hot = os.path.join(bindir, "hot")
    subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer",
                    "-o", hot, os.path.join(pputil.SRC, "tests", "workloads", "perf", "hot.c")],
                   check=True)
    for root, dirs, files in os.walk(tmp):
        os.chmod(root, 0o755)
        for f in files:
            p = os.path.join(root, f)
            os.chmod(p, 0o755 if os.access(p, os.X_OK) else 0o644)
    return agent, plugdir, workload, config, hot


def main():
    if os.geteuid() != 0:
        pputil.skip("creating a throwaway user needs root")
    for tool in ("useradd", "userdel", "cc"):
        if not shutil.which(tool):
            pputil.skip("%s not found" % tool)
    if not os.path.exists(SYSTEM_PYTHON):
        pputil.skip("no %s for the workload" % SYSTEM_PYTHON)
    for p in (pputil.AGENT, os.path.join(pputil.PLUGIN_DIR, "perf.so")):
        if not os.path.exists(p):
            pputil.skip("not built: " + p)

    name = "pprl" + uuid.uuid4().hex[:8]
    tmp = pputil.tempdir("pprootless-")
    os.chmod(tmp, 0o755)
    paranoid_before = open(PARANOID).read().strip()
    procs = []
    created = False
    try:
        subprocess.run(["useradd", "--no-create-home", "--home-dir", tmp, "--shell", "/bin/sh",
                        "--user-group", name], check=True)
        created = True
        user = pwd.getpwnam(name)
        if int(paranoid_before) > 2:
            with open(PARANOID, "w") as f:
                f.write("2")
        agent, plugdir, workload, config, hot = stage(tmp)
        out = os.path.join(tmp, "out")
        os.makedirs(out)
        os.chown(out, user.pw_uid, user.pw_gid)
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "LANG": "C.UTF-8"}
        userdir = "/tmp/polyprof-%d" % user.pw_uid

        py = spawn_as(user, [SYSTEM_PYTHON, workload, "nested", "120"], env)
        native = spawn_as(user, [hot, "120"], env)
        procs += [py, native]
        time.sleep(1.0)
        check = pputil.check
        check(py.poll() is None and native.poll() is None, "workloads run as %s" % name)

        base = [agent, "--config", config, "--plugin-dir", plugdir, "-o", out]
        # what works, before running
        r = run_as(user, base + ["check", "--rootless", "--pids", "%d,%d" % (py.pid, native.pid)], env)
        print(r.stdout)
        check("accepted: 2 pid(s), all yours" in r.stdout, "check --rootless accepts the user's own pids")
        check("perf (native stacks): on" in r.stdout, "check --rootless: perf works on own pids")
        check("system-wide sampling: off" in r.stdout, "check --rootless: system-wide sampling needs root")
        check("kernel frames (_[k]): off" in r.stdout,
              "check --rootless: kernel frames off, with the reason (perf_event_paranoid=2)")

        # refusals
        r = run_as(user, base + ["--rootless", "--pids", str(os.getpid()), "-d", "2"], env)
        check(r.returncode == 2 and "pid %d" % os.getpid() in r.stderr and "belongs to root" in r.stderr
              and "not to you" in r.stderr,
              "a root-owned pid is refused naming the pid and its owner: " + r.stderr.strip()[-200:])
        r = run_as(user, base + ["--rootless", "-d", "2"], env)
        check(r.returncode == 2 and "--rootless needs --pids" in r.stderr,
              "--rootless without --pids is refused: " + r.stderr.strip()[-160:])
        r = subprocess.run(base + ["--rootless", "--pids", str(py.pid), "-d", "2",
                                   "--log-file", "", "--pid-file", ""],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        check(r.returncode == 2 and "you are root" in r.stderr, "--rootless as root is refused")
        check(not os.listdir(out), "refused runs wrote no profile")

        # the real run
        r = run_as(user, base + ["--rootless", "--pids", "%d,%d" % (py.pid, native.pid), "-d", "6"],
                   env, timeout=180)
        print(r.stderr[-3000:])
        check(r.returncode == 0, "rootless run exits 0 (rc %d)" % r.returncode)
        col = os.path.join(out, "last_profile.col")
        check(os.path.exists(col), "rootless run wrote a profile")
        if os.path.exists(col):
            _, stacks = pputil.parse_col(col)
            comms = {s[2] for s, _ in stacks if len(s) > 2}
            py_frames = [f for s, _ in stacks for f in s if f.endswith("_[p]")]
            hot_stacks = [s for s, _ in stacks if len(s) > 2 and s[2] == "hot"]
            hot_frames = {f for s in hot_stacks for f in s}
            check(any("inner_leaf" in f for f in py_frames) and any("middle_frame" in f for f in py_frames),
                  "the Python workload's frames are in the profile (inner_leaf, middle_frame _[p])")
            check("hot_a" in hot_frames and "main" in hot_frames,
                  "the native workload's frames are in the profile (hot_a ... main, from perf)")
            check(not any(f.endswith("_[k]") for s, _ in stacks for f in s),
                  "no kernel frames (the kernel allows user space only)")
            check(comms <= {"python3", "hot"},
                  "only the given pids are profiled (comms: %s)" % sorted(comms))
            st = os.stat(col)
            check(st.st_uid == user.pw_uid, "the profile belongs to the user")
        log = os.path.join(userdir, "polyprof.log")
        check(os.path.exists(log), "the log went to the user's directory " + log)
        if os.path.exists(log):
            text = open(log).read()
            check("rootless" in text and "kernel frames (_[k]): off" in text,
                  "the log says once at start what needs root")
            check(text.count("system-wide sampling: off") == 1, "the report is logged once")
        check(os.stat(userdir).st_mode & 0o777 == 0o700 and os.stat(userdir).st_uid == user.pw_uid,
              "the user's directory is private (0700, owned by the user)")
    finally:
        for p in procs:
            pputil.kill(p)
        if created:
            uid = pwd.getpwnam(name).pw_uid
            subprocess.run(["userdel", name], stderr=subprocess.DEVNULL)
            shutil.rmtree("/tmp/polyprof-%d" % uid, ignore_errors=True)
        if open(PARANOID).read().strip() != paranoid_before:
            with open(PARANOID, "w") as f:
                f.write(paranoid_before)
        shutil.rmtree(tmp, ignore_errors=True)
    pputil.finish()


if __name__ == "__main__":
    main()
