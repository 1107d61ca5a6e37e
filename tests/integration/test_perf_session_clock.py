"""Session clock against real perf sampling: a session covers exactly the
time the plugins sampled.

cpu-clock fires on every busy online CPU at the session frequency. An idle
CPU in a tickless kernel (this VM) loses part of its samples, so the test
keeps every CPU busy with a spinner; then perf's sample count over a session
is known in advance: CPUs x frequency x duration.

- single session (-d 2): the clock starts once perf is sampling (its start
  loads /proc/kallsyms and opens one ring per CPU first, ~0.2 s here, more
  under load): the first session must not come out short;
- continuous (-c -d 1): the next session begins at the snapshot that ended
  the previous one (writing the outputs takes time whose samples belong to
  the next session), so every session's count matches its length and the
  sessions, laid end to end, account for every sample.
"""
import atexit
import glob
import json
import os
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
FREQ = 49
ncpu = os.sysconf("SC_NPROCESSORS_ONLN")
spinners = [pputil.spawn(["sh", "-c", "while :; do :; done"]) for _ in range(ncpu)]
atexit.register(lambda: [pputil.kill(s) for s in spinners])


def headers(out):
    hs = []
    for path in sorted(glob.glob(os.path.join(out, "profile_*.col"))):
        with open(path, encoding="utf-8") as f:
            hs.append(json.loads(f.readline()[2:]))
    return hs


# single session
out = pputil.tempdir("ppperf-clock-")
r = pputil.run_agent(out, plugins, "-f", str(FREQ), duration=2, timeout=120)
check(r.returncode == 0, "agent exits 0 (rc %d)" % r.returncode)
hs = headers(out)
check(len(hs) == 1, "one session written")
if hs:
    perf = hs[0]["polyprof"]["perf"]
    want = ncpu * FREQ * 2
    print("single session: %d perf samples, %.1f Hz (expected %d = %d CPUs x %d Hz x 2 s; load %.1f)"
          % (perf["samples"], perf["rate_hz"], want, ncpu, FREQ, os.getloadavg()[0]))
    check(0.95 * want <= perf["samples"] <= 1.05 * want,
          "first session has its full share of samples: %d of %d" % (perf["samples"], want))
    check(abs(perf["rate_hz"] - ncpu * FREQ) <= 0.05 * ncpu * FREQ,
          "measured duration matches: %.1f Hz for %d CPUs x %d Hz" % (perf["rate_hz"], ncpu, FREQ))

# continuous sessions (a 6th is awaited so that the 5 checked ones all ran
# to their end: the last one is cut short by SIGTERM, too short to measure)
out = pputil.tempdir("ppperf-clock-c-")
cmd = pputil.agent_cmd(out, plugins, "-c", "-f", str(FREQ), duration=1)
p = pputil.spawn(cmd)
try:
    end = time.time() + 60
    while time.time() < end and len(glob.glob(os.path.join(out, "profile_*.col"))) < 6:
        time.sleep(0.2)
finally:
    p.terminate()
    try:
        p.wait(timeout=30)
    except Exception:  # noqa: BLE001 - never leave the agent behind
        pass
    pputil.kill(p)
hs = headers(out)
check(len(hs) >= 5, "5 continuous sessions written (%d)" % len(hs))
for i, h in enumerate(hs[:5]):
    perf = h["polyprof"]["perf"]
    print("session %d: %d samples, %.1f Hz" % (i + 1, perf["samples"], perf["rate_hz"]))
    check(abs(perf["rate_hz"] - ncpu * FREQ) <= 0.07 * ncpu * FREQ,
          "session %d: %.1f Hz matches %d CPUs x %d Hz over its measured length"
          % (i + 1, perf["rate_hz"], ncpu, FREQ))
    check(0.9 * ncpu * FREQ <= perf["samples"] <= 1.1 * ncpu * FREQ,
          "session %d: %d samples for a 1 s session" % (i + 1, perf["samples"]))
pputil.finish()
