"""Signals and the single-instance lock, on the real agent.

- SIGTERM in the middle of a long session ends it early, still writes its
  profile, and exits 0.
- SIGHUP with a broken config file keeps the running configuration; with a
  good one the agent reloads at the session boundary.
- A second agent with the same pid file refuses to start and names the pid
  holding the lock.
- Continuous mode writes one profile per session, with --rotating-output
  keeping only the last pair.
"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402

example = os.path.join(u.PLUGIN_DIR, "example.so")
if not os.path.exists(example):
    u.skip("example plugin not built: " + example)
plugins = u.plugin_dir_with(example)


def wait_for(pred, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.1)
    return False


sleeper = u.spawn(["sleep", "600"])
try:
    # --- SIGTERM mid-session -------------------------------------------------
    out = u.tempdir("ppout-")
    cmd = u.agent_cmd(out, plugins, "--example-mode", "states", "--pids", str(sleeper.pid), duration=60)
    pidfile = cmd[cmd.index("--pid-file") + 1]
    agent = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    u.check(wait_for(lambda: os.path.exists(pidfile), 10), "agent wrote its pid file")
    time.sleep(2)

    # --- second instance ----------------------------------------------------
    second = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    u.check(second.returncode == 1, "second agent exits 1 (got %d)" % second.returncode)
    u.check("pid %d" % agent.pid in second.stderr,
            "second agent names the pid holding the lock: %s" % second.stderr.strip()[-300:])

    t0 = time.time()
    agent.send_signal(signal.SIGTERM)
    try:
        _, err = agent.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        agent.kill()
        _, err = agent.communicate()
    u.check(agent.returncode == 0, "SIGTERM: exit 0 (got %s)" % agent.returncode)
    u.check(time.time() - t0 < 15, "SIGTERM: stopped within 15 s of the signal")
    header, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
    u.check(any(f[2] == "sleep" for f, _ in stacks), "SIGTERM: the cut-short session was written")
    u.check(not os.path.exists(pidfile), "pid file removed at exit")

    # --- SIGHUP: bad config rejected, good config reloaded ---------------------
    out2 = u.tempdir("ppout-")
    cfgdir = u.tempdir("ppcfg-")
    cfg = os.path.join(cfgdir, "polyprof.yaml")
    with open(cfg, "w") as f:
        f.write("profiling:\n  frequency: 11\n")
    cmd = u.agent_cmd(out2, plugins, "--example-mode", "states", "--pids", str(sleeper.pid), "-c", "--rotating-output", duration=2)
    cmd[cmd.index("--config") + 1] = cfg
    logfile = cmd[cmd.index("--log-file") + 1]
    agent = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1)
    with open(cfg, "w") as f:
        f.write("profiling:\n  frequncy: 11\n")
    agent.send_signal(signal.SIGHUP)

    def log_has(s):
        try:
            with open(logfile) as f:
                return s in f.read()
        except OSError:
            return False

    u.check(wait_for(lambda: log_has("reload rejected"), 10), "bad config on SIGHUP is rejected")
    u.check(log_has("frequncy"), "the rejection names the bad key")
    u.check(agent.poll() is None, "agent keeps running after a rejected reload")
    with open(cfg, "w") as f:
        f.write("profiling:\n  frequency: 15\n")
    agent.send_signal(signal.SIGHUP)
    u.check(wait_for(lambda: log_has("configuration and plugins reloaded"), 10),
            "good config on SIGHUP is applied at the session boundary")
    time.sleep(2.5)
    agent.send_signal(signal.SIGINT)
    try:
        agent.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        agent.kill()
        agent.communicate()
    u.check(agent.returncode == 0, "SIGINT: exit 0 (got %s)" % agent.returncode)
    files = sorted(os.listdir(out2))
    cols = [f for f in files if f.endswith(".col") and f.startswith("profile_")]
    htmls = [f for f in files if f.endswith(".html") and f.startswith("profile_")]
    u.check(len(cols) == 1 and len(htmls) == 1, "--rotating-output keeps one pair: %s" % files)
    with open(logfile) as f:
        sessions = f.read().count("] INFO: polyprof: session ")
    u.check(sessions >= 3, "continuous mode ran %d sessions (>= 3)" % sessions)
finally:
    u.kill(sleeper)
u.finish()
