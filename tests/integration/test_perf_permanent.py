"""A kernel that refuses perf is told once, not at every restart backoff.

The real agent in continuous mode with the real perf plugin, given a perf
event the kernel refuses:
- on a machine without a hardware PMU (this CI's VM: no
  /sys/bus/event_source/devices/cpu) --perf-event cycles: ENOENT from
  perf_event_open;
- on a machine with one, the same is obtained by an unprivileged agent
  (setpriv to nobody, perf_event_paranoid >= 1): EACCES.
perf's start() returns PP_PERMANENT(): over several sessions (longer than
the restart backoffs would be) the explanation is logged once, the worker
is never restarted, and every session is still written, perf-less, with the
reason in the header's plugin status. SIGHUP (configuration reload) tries
once more.
"""
import glob
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perfutil  # noqa: E402
import pputil  # noqa: E402
from pputil import check  # noqa: E402

perfutil.require_perf()
if not os.path.exists(pputil.AGENT):
    pputil.skip("agent not built: " + pputil.AGENT)
plugins = pputil.plugin_dir_with(perfutil.PLUGIN)
has_pmu = os.path.exists("/sys/bus/event_source/devices/cpu")
out = pputil.tempdir("ppperf-perm-")
extra = ["-c", "-f", "49"]
prefix = []
if has_pmu:
    with open("/proc/sys/kernel/perf_event_paranoid") as f:
        if int(f.read()) < 1:
            pputil.skip("this machine has a PMU and perf_event_paranoid < 1: no refusal to provoke")
    prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]
    os.chown(out, 65534, 65534)  # the agent's output directory is its user's
    expect = "the kernel refused system-wide perf events"
    print("hardware PMU present: provoking EACCES as an unprivileged agent")
else:
    extra += ["--perf-event", "cycles"]
    expect = "event 'cycles' is not available on this machine"
    print("no hardware PMU: --perf-event cycles")

cmd = prefix + pputil.agent_cmd(out, plugins, *extra, duration=1)
log_path = cmd[cmd.index("--log-file") + 1]
os.chmod(os.path.dirname(log_path), 0o777)
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def cols():
    return sorted(glob.glob(os.path.join(out, "profile_*.col")))


def log_text():
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


try:
    # 5 one-second sessions span the 1, 2 and 4 s backoffs a restart would take
    end = time.time() + 60
    while time.time() < end and len(cols()) < 5 and p.poll() is None:
        time.sleep(0.2)
    check(len(cols()) >= 5, "sessions go on without perf (%d written)" % len(cols()))
    log = log_text()
    print("\n".join(l for l in log.splitlines() if "perf" in l)[:3000])
    lines = [l for l in log.splitlines() if expect in l]
    plugin_lines = [l for l in lines if "polyprof.perf:" in l]
    verdicts = [l for l in lines if "stays off until the configuration is reloaded" in l]
    check(len(plugin_lines) == 1, "perf's explanation logged once (%d)" % len(plugin_lines))
    check(len(verdicts) == 1, "the supervisor's verdict logged once (%d)" % len(verdicts))
    check(len(lines) == 2, "the reason is in no other line (session summaries say 'off'): %d"
          % len(lines))
    check(log.count("perf 0 @ 0.0 Hz (off until reload)") >= 4, "session summaries say perf is off")
    check("restarting" not in log, "the perf worker is never restarted")
    check("system-wide data missing" not in log and "no data this session" not in log,
          "no per-session warnings about the missing perf data")
    with open(cols()[-1], encoding="utf-8") as f:
        header = json.loads(f.readline()[2:])
        body = f.read()
    status = header.get("polyprof", {}).get("perf", {}).get("status", "")
    check(expect in status, "the header's perf status gives the reason: %r" % status[:160])
    check(header.get("polyprof", {}).get("perf", {}).get("samples") == 0, "no perf samples")
    check(header.get("sampling_event") == ("cpu-time" if has_pmu else "cycles"),
          "header sampling_event follows --perf-event (%s)" % header.get("sampling_event"))

    # configuration reload: perf is tried again, and refused again, once
    n_before = len(cols())
    p.send_signal(signal.SIGHUP)
    end = time.time() + 30
    while time.time() < end and "configuration and plugins reloaded" not in log_text():
        time.sleep(0.2)
    end = time.time() + 30
    while time.time() < end and len(cols()) < n_before + 3 and p.poll() is None:
        time.sleep(0.2)
    log = log_text()
    check("configuration and plugins reloaded" in log, "SIGHUP reloaded the configuration")
    plugin_lines = [l for l in log.splitlines() if expect in l and "polyprof.perf:" in l]
    check(len(plugin_lines) == 2, "after the reload perf was tried exactly once more (%d)"
          % len(plugin_lines))
    check(p.poll() is None, "the agent keeps running")
finally:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
check(p.returncode == 0, "agent exits 0 on SIGTERM (rc %s)" % p.returncode)
pputil.finish()
