"""Plugin workers run with least privilege, end to end on the real agent.

1. Every in-tree plugin's worker (one agent running them all, with a
   python target so the runtime workers have work) holds exactly the Linux
   capabilities its declaration maps to (CapPrm, CapInh, CapBnd of
   /proc/PID/status), with NoNewPrivs 1 and Seccomp 2 (filter); CapEff and
   CapAmb hold all of them but those it needs for single steps only
   (nodejs: CAP_SYS_ADMIN, CAP_SYS_CHROOT, CAP_KILL and CAP_DAC_OVERRIDE,
   java: CAP_SETUID, CAP_SETGID, CAP_KILL and CAP_DAC_OVERRIDE, dotnet:
   CAP_DAC_OVERRIDE and CAP_FOWNER), which it raises around each step. The expected sets are written out here on purpose:
   a change of a plugin's privileges must change this test too.
2. A plugin that makes a system call outside its allow-list (ta_syscall:
   personality(), once) has its worker stopped with the log line "worker
   ta_syscall stopped: system call personality ... not in its allow-list";
   the agent keeps running, the healthy plugin beside it keeps its data in
   every session, and the restarted worker brings its data back.
3. A plugin that declares no privileges (tp_undeclared) is refused, by name.
4. `polyprof check` shows each worker's capabilities (the same sets), which
   are always effective and which for single steps only, no_new_privs, its
   allow-list file and its mount view; perf's step capabilities for native
   allocations as a conditional line, and as its step capabilities under
   `--mode alloc --pids`.
"""
import glob
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402

if os.geteuid() != 0:
    u.skip("needs root: the workers' capability sets are cut from the agent's")

with open("/proc/sys/kernel/cap_last_cap") as f:
    LAST_CAP = int(f.read())
CAP = {"CAP_DAC_OVERRIDE": 1, "CAP_DAC_READ_SEARCH": 2, "CAP_FOWNER": 3, "CAP_KILL": 5, "CAP_SETGID": 6,
       "CAP_SETUID": 7, "CAP_IPC_LOCK": 14, "CAP_SYS_CHROOT": 18, "CAP_SYS_PTRACE": 19,
       "CAP_SYS_ADMIN": 21, "CAP_SYSLOG": 34, "CAP_PERFMON": 38, "CAP_CHECKPOINT_RESTORE": 40}
PERFMON = "CAP_PERFMON" if LAST_CAP >= 38 else "CAP_SYS_ADMIN"
READ = ["CAP_SYS_PTRACE", "CAP_DAC_READ_SEARCH"] + (["CAP_CHECKPOINT_RESTORE"] if LAST_CAP >= 40 else [])
EXPECTED = {
    "perf": [PERFMON, "CAP_IPC_LOCK", "CAP_SYSLOG"] + READ,
    "python": [PERFMON, "CAP_IPC_LOCK", "CAP_SYSLOG"] + READ,
    "php": READ,
    "ruby": [PERFMON, "CAP_IPC_LOCK"] + READ,
    "java": READ + ["CAP_KILL", "CAP_SETUID", "CAP_SETGID", "CAP_DAC_OVERRIDE"],
    "nodejs": [PERFMON, "CAP_IPC_LOCK"] + READ + ["CAP_KILL", "CAP_SYS_ADMIN", "CAP_SYS_CHROOT", "CAP_DAC_OVERRIDE"],
    "dotnet": READ + ["CAP_DAC_OVERRIDE", "CAP_FOWNER"],
    "example": READ,
}
# Permitted, raised only around the step that needs them. Before 5.8 perf
# events need CAP_SYS_ADMIN all the time: then it is no step capability.
STEP = {
    "java": ["CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_DAC_OVERRIDE"],
    "nodejs": ["CAP_SYS_CHROOT", "CAP_KILL", "CAP_DAC_OVERRIDE"] + (["CAP_SYS_ADMIN"] if PERFMON != "CAP_SYS_ADMIN" else []),
    "dotnet": ["CAP_DAC_OVERRIDE", "CAP_FOWNER"],
}

# perf's, when native allocations are asked (PP_CAP_NEEDS_NSENTER as a step)
NATIVE_ALLOC_STEP = ["CAP_SYS_CHROOT"] + (["CAP_SYS_ADMIN"] if PERFMON != "CAP_SYS_ADMIN" else [])


def mask(names):
    m = 0
    for n in names:
        m |= 1 << CAP[n]
    return m


def status(pid):
    fields = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            fields[k] = v.strip()
    return fields


def workers_of(agent_pid):
    found = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            st = status(int(d))
        except OSError:
            continue
        if st.get("PPid") == str(agent_pid) and st.get("Name", "").startswith("pp-"):
            found[st["Name"][3:]] = int(d)
    return found


def wait_cols(out, n, agent, limit):
    deadline = time.time() + limit
    while time.time() < deadline and agent.poll() is None:
        cols = sorted(f for f in os.listdir(out) if f.startswith("profile_") and f.endswith(".col"))
        if len(cols) >= n:
            return cols
        time.sleep(0.3)
    return sorted(f for f in os.listdir(out) if f.startswith("profile_") and f.endswith(".col"))


def stop(agent):
    agent.send_signal(signal.SIGTERM)
    try:
        agent.communicate(timeout=40)
    except subprocess.TimeoutExpired:
        agent.kill()
        agent.communicate()


# ---- 1. every in-tree plugin's worker --------------------------------------
present = [n for n in EXPECTED if os.path.exists(os.path.join(u.PLUGIN_DIR, n + ".so"))]
missing = sorted(set(EXPECTED) - set(present))
u.check(not missing, "every in-tree plugin is built: missing %s" % missing)
target = u.spawn([sys.executable, "-c", "import time\nwhile True: sum(range(1000))"])
out = u.tempdir("ppout-")
try:
    cmd = u.agent_cmd(out, u.PLUGIN_DIR, "-c", "--php-mode", "phpspy", "--nodejs-mode", "inspector",
                      "--dotnet-mode", "dotnet-trace", "--example-mode", "states", duration=2)
    logfile = cmd[cmd.index("--log-file") + 1]
    agent = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_cols(out, 1, agent, 60)
    workers = workers_of(agent.pid)
    for name in present:
        pid = workers.get(name)
        if not u.check(pid is not None, "%s: a worker process runs (found %s)" % (name, sorted(workers))):
            continue
        st = status(pid)
        want = mask(EXPECTED[name])
        step = mask(STEP.get(name, []))
        for key in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"):
            got = int(st[key], 16)
            exp = want & ~step if key in ("CapEff", "CapAmb") else want
            u.check(got == exp, "%s worker: %s %#x == declared %#x (%s; step only: %s)"
                    % (name, key, got, exp, ",".join(EXPECTED[name]), ",".join(STEP.get(name, [])) or "none"))
        u.check(st.get("NoNewPrivs") == "1", "%s worker: NoNewPrivs 1 (got %s)" % (name, st.get("NoNewPrivs")))
        u.check(st.get("Seccomp") == "2", "%s worker: Seccomp 2 (got %s)" % (name, st.get("Seccomp")))
    u.check(agent.poll() is None, "agent still running with every plugin sandboxed")
    stop(agent)
    with open(logfile) as f:
        log = f.read()
    u.check("not in its allow-list" not in log, "no worker stopped by its allow-list: %s"
            % [l for l in log.splitlines() if "allow-list" in l][:3])
    u.check("has no system call allow-list" not in log, "every in-tree plugin ships its allow-list")
finally:
    u.kill(target)

# ---- 4. polyprof check shows what each worker holds ---------------------------
chk = subprocess.run([u.AGENT, "check", "--plugin-dir", u.PLUGIN_DIR, "--config",
                      os.path.join(u.SRC, "tests", "integration", "empty.yaml")],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
text = chk.stdout
u.check("plugin workers (what each one holds once started):" in text, "check has the workers' section")
section = text.split("plugin workers (what each one holds once started):", 1)[-1]
for name in present:
    m = re.search(r"\n  %s( \(disabled\))?\n((    .*\n)+)" % re.escape(name), section)
    block = m.group(2) if m else ""
    caps_line = [l for l in block.splitlines() if "capabilities:" in l]
    shown = set(caps_line[0].split(":", 1)[1].strip().split(",")) if caps_line else set()
    u.check(shown == set(EXPECTED[name]), "check: %s worker's capabilities %s" % (name, sorted(shown)))

    def listed(label):
        line = [l for l in block.splitlines() if l.strip().startswith(label)]
        names = line[0].split(":", 1)[1].strip() if line else "?"
        return set() if names == "none" else set(names.split(","))
    u.check(listed("for single steps only") == set(STEP.get(name, [])),
            "check: %s worker's step capabilities %s" % (name, sorted(listed("for single steps only"))))
    u.check(listed("always effective") == set(EXPECTED[name]) - set(STEP.get(name, [])),
            "check: %s worker's always-effective capabilities %s" % (name, sorted(listed("always effective"))))
    u.check("no_new_privs: yes" in block and ("seccomp: filter, " in block and name + ".seccomp" in block)
            and "mount view:" in block, "check: %s worker's no_new_privs, allow-list and mount view" % name)

# perf's native allocations (--mode alloc with --pids) add uprobe events,
# opened with CAP_SYS_ADMIN raised around each: check says so as a
# conditional line, and as perf's step capabilities once the command line
# asks for them
perf_block = re.search(r"\n  perf( \(disabled\))?\n((    .*\n)+)", section)
perf_block = perf_block.group(2) if perf_block else ""
cond = [l for l in perf_block.splitlines() if l.strip().startswith("for single steps with native allocations")]
cond = set(cond[0].split(":", 1)[1].strip().split(",")) if cond else set()
u.check(cond == set(NATIVE_ALLOC_STEP), "check: perf's native-allocation step capabilities %s" % sorted(cond))
chk = subprocess.run([u.AGENT, "check", "--plugin-dir", u.PLUGIN_DIR, "--config",
                      os.path.join(u.SRC, "tests", "integration", "empty.yaml"),
                      "--mode", "alloc", "--pids", str(os.getpid())],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
u.check(chk.returncode == 0, "check --mode alloc --pids: exit 0 (got %d: %s)" % (chk.returncode, chk.stdout[-300:]))
section = chk.stdout.split("plugin workers (what each one holds once started):", 1)[-1]
perf_block = re.search(r"\n  perf( \(disabled\))?\n((    .*\n)+)", section)
perf_block = perf_block.group(2) if perf_block else ""
steps = [l for l in perf_block.splitlines() if l.strip().startswith("for single steps only")]
steps = set(steps[0].split(":", 1)[1].strip().split(",")) if steps else set()
u.check(steps == set(NATIVE_ALLOC_STEP),
        "check --mode alloc --pids: perf's step capabilities %s" % sorted(steps))
u.check("single steps with native allocations" not in perf_block,
        "check --mode alloc --pids: no conditional line once they are asked")

# ---- 2 and 3. a forbidden system call, an undeclared plugin ----------------
needed = [os.path.join(u.TEST_PLUGIN_DIR, n) for n in ("ta_ok.so", "ta_syscall.so", "tp_undeclared.so")]
for p in needed:
    if not os.path.exists(p):
        u.skip("test plugin not built: " + p)
plugins = u.plugin_dir_with(*needed)
work = u.tempdir("ppsys-")
cfg = os.path.join(work, "polyprof.yaml")
with open(cfg, "w") as f:
    f.write("plugins:\n  timeout_s: 5\n  restart_backoff_max_s: 1\n"
            "ta_syscall:\n  fault_file: tripped-%s\n" % os.path.basename(work))
sleeper = u.spawn(["sleep", "600"])
catter = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
out = u.tempdir("ppout-")
try:
    time.sleep(0.3)
    cmd = u.agent_cmd(out, plugins, "--pids", "%d,%d" % (sleeper.pid, catter.pid), "-c", duration=2)
    cmd[cmd.index("--config") + 1] = cfg
    logfile = cmd[cmd.index("--log-file") + 1]
    agent = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cols = wait_cols(out, 4, agent, 60)
    u.check(agent.poll() is None, "agent survived a worker stopped by its allow-list")
    stop(agent)
    with open(logfile) as f:
        log = f.read()
    stopped = [l for l in log.splitlines()
               if "worker ta_syscall stopped: system call personality" in l and "not in its allow-list" in l]
    u.check(len(stopped) >= 1, "the log names the plugin and the refused call: %s"
            % [l for l in log.splitlines() if "ta_syscall" in l][:6])
    u.check(any("plugin ta_syscall: worker stopped: system call personality not in its allow-list; restarting"
                in l for l in log.splitlines()), "and the worker is restarted as after a crash")
    refused = [l for l in log.splitlines() if "tp_undeclared" in l and "refused" in l]
    u.check(any("plugin tp_undeclared declares no privileges" in l for l in refused),
            "the undeclared plugin is refused by name: %s" % refused)
    u.check(len(cols) >= 3, "sessions written: %s" % cols)
    sessions = [u.parse_col(os.path.join(out, c))[1] for c in cols]

    def lines_for(stacks, comm):
        return [f[3:] for f, _ in stacks if len(f) > 3 and f[2] == comm]

    u.check(all(["ta_main", "ta_ok_work"] in lines_for(s, "cat") for s in sessions),
            "the healthy plugin has data in every session")
    first = lines_for(sessions[0], "sleep")
    u.check(any(len(l) == 1 and l[0].startswith("[Profiling error: ta_syscall ") and "allow-list" in l[0]
                for l in first), "session 1: the stopped plugin's pid says why: %s" % first)
    u.check(any(["ta_main", "ta_syscall_work"] in lines_for(s, "sleep") for s in sessions[1:]),
            "a later session has the restarted worker's data")
finally:
    u.kill(sleeper)
    u.kill(catter)
# the fault markers lie in the test plugins' runtime directories
for marker in glob.glob("/run/polyprof/ta_*/*-" + os.path.basename(work) + "*"):
    os.unlink(marker)
u.finish()
