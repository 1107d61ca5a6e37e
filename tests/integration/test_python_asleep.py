"""cpu mode skips the Python processes that sleep, and only those.

Before it reads a process's interpreter, the python plugin asks the
kernel whether any of its threads ran since the last look (one pread of
each thread's schedstat) and, if one did, whether one runs now; a process
that keeps sleeping is looked at every 2, 4, ... ticks, at most once a
second. Three targets
for one session at 49 Hz:

  idle    blocked in time.sleep: no Python stack, and nearly every tick of
          it skipped (the `asleep_skips` counter)
  busy    a pure-Python loop: sampled at every tick, as before
  waker   wakes every 50 ms for a few ms of Python (about 10 % of a core):
          sampled, its stacks present, and none of its ticks weighed twice
          more than the time it ran allows

Twice: with looks (the default below 100 targets), then with the per-CPU
context switch records forced on (--python-switch-records-from 1), which
decide every process at every tick without a look.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import pyutil as py  # noqa: E402

if not os.path.exists(py.PLUGIN):
    u.skip("python plugin not built: " + py.PLUGIN)
exe = "/usr/bin/python3"
if not os.path.exists(exe):
    u.skip("no /usr/bin/python3")

FREQ, DUR = 49, 4
idle = u.spawn([exe, "-c", "import time\ndef pp_idle_sleep():\n    time.sleep(600)\npp_idle_sleep()\n"])
busy = u.spawn([exe, "-c", "def pp_busy_loop():\n    while True:\n        pass\npp_busy_loop()\n"])
waker = u.spawn([exe, "-c", "import time\ndef pp_waker_burn():\n    t = time.monotonic()\n"
                 "    while time.monotonic() - t < 0.005:\n        pass\n"
                 "while True:\n    pp_waker_burn()\n    time.sleep(0.045)\n"])
try:
    time.sleep(0.5)
    # looks (the default below 100 targets), then the per-CPU context switch
    # records forced on from one target
    for label, extra in (("looks", ()), ("switch records", ("--python-switch-records-from", "1"))):
        out = u.tempdir("ppout-")
        r = u.run_agent(out, u.plugin_dir_with(py.PLUGIN), "--pids", "%d,%d,%d" % (idle.pid, busy.pid, waker.pid),
                        "-f", str(FREQ), *extra, duration=DUR)
        u.check(r.returncode == 0, "%s: agent exits 0: %s" % (label, r.stderr[-800:]))
        with open(os.path.join(out, "last_profile.col")) as f:
            header = json.loads(f.readline()[2:])
        _, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
        counters = header["polyprof"]["python"]["counters"]
        ticks = FREQ * DUR

        def count(fn):
            return sum(c for fr, c in stacks if any(fn in x and x.endswith("_[p]") for x in fr))

        u.check(count("pp_idle_sleep") == 0, "%s: idle: no Python stack (%d)" % (label, count("pp_idle_sleep")))
        skips = counters.get("asleep_skips", 0)
        u.check(skips >= 0.6 * ticks, "%s: idle: most of its %d ticks skipped (asleep_skips %d)" % (label, ticks, skips))
        b = count("pp_busy_loop")
        u.check(b >= 0.6 * ticks, "%s: busy: sampled at every tick (%d of ~%d)" % (label, b, ticks))
        w = count("pp_waker_burn")
        u.check(w >= 3, "%s: waker: its bursts are sampled (%d)" % (label, w))
        # ~10 % of the time on a CPU: far from every tick, even weighted
        u.check(w <= 0.5 * ticks, "%s: waker: not over-counted (%d of %d ticks)" % (label, w, ticks))
finally:
    for p in (idle, busy, waker):
        u.kill(p)
u.finish()
