"""Plugin isolation, end to end on the real agent.

Three plugins cover three real processes: ta_ok (cat) is healthy, ta_crash
(sleep) dies with SIGSEGV in its first snapshot, ta_hang (tail) never
answers its first snapshot. Next to them sit plugins that must be refused
at load time (wrong ABI major, no entry symbol, crashing constructor).

Expected: the agent never dies; the first session still has ta_ok's data,
and the pids of the failed plugins carry
"[Profiling error: <plugin> <reason>]"; both workers are restarted with
backoff and a later session has their data again (targets replayed).
"""
import glob
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402

needed = ["ta_ok.so", "ta_crash.so", "ta_hang.so"]
for n in needed:
    if not os.path.exists(os.path.join(u.TEST_PLUGIN_DIR, n)):
        u.skip("test plugin not built: " + n)
refused = [n for n in ("tp_abi_major.so", "tp_no_entry.so", "tp_ctor_crash.so")
           if os.path.exists(os.path.join(u.TEST_PLUGIN_DIR, n))]
plugins = u.plugin_dir_with(*[os.path.join(u.TEST_PLUGIN_DIR, n) for n in needed + refused])

work = u.tempdir("ppiso-")
cfg = os.path.join(work, "polyprof.yaml")
with open(cfg, "w") as f:
    f.write("plugins:\n  timeout_s: 2\n  restart_backoff_max_s: 1\n"
            "ta_crash:\n  fault_file: crashed-%s\n"
            "ta_hang:\n  fault_file: hung-%s\n" % (os.path.basename(work), os.path.basename(work)))

sleeper = u.spawn(["sleep", "600"])
tailer = u.spawn(["tail", "-f", "/dev/null"])
catter = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
out = u.tempdir("ppout-")
try:
    time.sleep(0.3)
    pids = "%d,%d,%d" % (sleeper.pid, tailer.pid, catter.pid)
    cmd = u.agent_cmd(out, plugins, "--pids", pids, "-c", duration=3)
    cmd[cmd.index("--config") + 1] = cfg
    logfile = cmd[cmd.index("--log-file") + 1]
    agent = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        cols = sorted(f for f in os.listdir(out) if f.startswith("profile_") and f.endswith(".col"))
        if len(cols) >= 4 or agent.poll() is not None:
            break
        time.sleep(0.5)
    u.check(agent.poll() is None, "agent survived a crashing and a hanging plugin")
    agent.send_signal(signal.SIGTERM)
    try:
        _, err = agent.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        agent.kill()
        _, err = agent.communicate()
    u.check(agent.returncode == 0, "agent exit 0 (got %s)" % agent.returncode)
    with open(logfile) as f:
        log = f.read()
    for n in refused:
        u.check(n in log and "WARNING" in log, "%s refused with a log line naming it" % n)

    cols = sorted(f for f in os.listdir(out) if f.startswith("profile_") and f.endswith(".col"))
    u.check(len(cols) >= 3, "at least 3 sessions written: %s" % cols)
    sessions = [u.parse_col(os.path.join(out, c))[1] for c in cols]

    def lines_for(stacks, comm):
        return [f[3:] for f, _ in stacks if len(f) > 3 and f[2] == comm]

    first = sessions[0]
    u.check(["ta_main", "ta_ok_work"] in lines_for(first, "cat"),
            "session 1: the healthy plugin's data is there: %s" % lines_for(first, "cat"))
    sleep1 = lines_for(first, "sleep")
    u.check(any(len(l) == 1 and l[0].startswith("[Profiling error: ta_crash ") and "SIGSEGV" in l[0]
                for l in sleep1), "session 1: crashed plugin's pid has an error stack: %s" % sleep1)
    tail1 = lines_for(first, "tail")
    u.check(any(len(l) == 1 and l[0].startswith("[Profiling error: ta_hang ") for l in tail1),
            "session 1: hung plugin's pid has an error stack: %s" % tail1)
    later = [s for s in sessions[1:]]
    u.check(any(["ta_main", "ta_crash_work"] in lines_for(s, "sleep") for s in later),
            "a later session has the restarted crash plugin's data (targets replayed)")
    u.check(any(["ta_main", "ta_hang_work"] in lines_for(s, "tail") for s in later),
            "a later session has the restarted hang plugin's data")
    u.check(all(["ta_main", "ta_ok_work"] in lines_for(s, "cat") for s in sessions),
            "the healthy plugin has data in every session")
finally:
    u.kill(sleeper)
    u.kill(tailer)
    u.kill(catter)
# the fault markers lie in the test plugins' runtime directories
for marker in glob.glob("/run/polyprof/ta_*/*-" + os.path.basename(work) + "*"):
    os.unlink(marker)
u.finish()
