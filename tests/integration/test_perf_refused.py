"""perf plugin: a kernel that refuses perf gives one clear message saying
what to change.

- unprivileged (perf_event_paranoid > 0, no CAP_PERFMON): names the sysctl
  and the capability;
- a hardware event on a machine without a PMU: says to use cpu-clock;
- an unknown event name: lists the known ones.
In each case start() fails cleanly (the agent then runs perf-less).
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perfutil  # noqa: E402
import pputil  # noqa: E402
from pputil import check  # noqa: E402

for p in (perfutil.HARNESS, perfutil.PLUGIN):
    if not os.path.exists(p):
        pputil.skip("not built: " + p)


def run(*args, user=None):
    cmd = [perfutil.HARNESS, perfutil.PLUGIN, "-d", "0.3", "-F", "11", "-o", os.devnull] + list(args)
    if user:
        cmd = ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups",
               "--inh-caps=-all", "--bounding-set=-all"] + cmd
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)


with open("/proc/sys/kernel/perf_event_paranoid") as f:
    paranoid = int(f.read().strip())

if os.geteuid() == 0 and shutil.which("setpriv") and paranoid >= 1:
    r = run(user=65534)
    print(r.stderr.strip())
    errors = [l for l in r.stderr.splitlines() if l.startswith("[error]")]
    check(r.returncode == 4, "unprivileged: start() fails (exit %d)" % r.returncode)
    check(len(errors) == 1, "unprivileged: exactly one error line")
    text = " ".join(errors)
    check("perf_event_paranoid" in text and "CAP_PERFMON" in text and "root" in text,
          "unprivileged: the message names the sysctl, the capability and root")
else:
    print("NOTE: needs root, setpriv and perf_event_paranoid >= 1 for the unprivileged case")

r = run("--opt", "event=no-such-event")
print(r.stderr.strip())
check(r.returncode == 4 and "unknown perf event 'no-such-event'" in r.stderr and "cpu-clock" in r.stderr,
      "unknown event: refused with the list of events")

if os.geteuid() == 0:
    r = run("--opt", "event=cycles")
    if r.returncode == 0:
        print("NOTE: this machine has a hardware PMU: 'cycles' works")
        check(True, "hardware event accepted where a PMU exists")
    else:
        print(r.stderr.strip())
        check(r.returncode == 4 and "--perf-event cpu-clock" in r.stderr,
              "no PMU: the message says to use --perf-event cpu-clock")
pputil.finish()
