"""--python-native: a target the plugin attached but cannot give a perf
event yields no samples however busy it is, and says why.

With native frames every sample comes from a per-thread perf event, and
events are kept on 64 processes at most. 66 CPython processes (Debian's
python3, asleep: the status does not depend on their load) profiled in
one cpu-mode session: exactly two show as
  <comm>;[Profiling skipped: python.native: perf events on 64 processes ...]
and the log names the first of them; the other 64 carry no status.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import pyutil as py  # noqa: E402

if not os.path.exists(py.PLUGIN):
    u.skip("python plugin not built: " + py.PLUGIN)
EXE = "/usr/bin/python3"
u.check(os.path.exists(EXE), "Debian's python3 present")
TARGETS = 66
SLOTS = 64

procs = []
try:
    for _ in range(TARGETS):
        procs.append(subprocess.Popen(
            [EXE, "-c", "import sys, time; print('ready', flush=True); time.sleep(60)"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
    py.wait_ready(procs)
    r, header, stacks, log = py.profile([p.pid for p in procs], "--python-native",
                                        "--python-mode", "cpu", duration=3, freq=99)
    u.check(r.returncode == 0 and header is not None,
            "agent ran (rc %d: %s)" % (r.returncode, r.stderr[-400:]))
    skipped = [f for f, _ in stacks
               if any(x.startswith("[Profiling skipped: python.native: perf events on %d "
                                   "processes at most" % SLOTS) for x in f)]
    other = [f for f, _ in stacks if any(x.startswith("[Profiling ") for x in f)
             and f not in skipped]
    u.check(len(skipped) == TARGETS - SLOTS,
            "%d of %d targets say they got no perf events (%d: %s)"
            % (TARGETS - SLOTS, TARGETS, len(skipped), skipped[:2]))
    u.check(not other, "no other target has a status (%s)" % other[:2])
    u.check("processes at most, none left for this one" in log,
            "the log names a target without events")
finally:
    for p in procs:
        u.kill(p)
u.finish()
