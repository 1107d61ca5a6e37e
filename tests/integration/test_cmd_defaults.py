"""The one-program commands' defaults per runtime: the rate asked for is
the one the runtime's plugin sustains (10 kHz for native code, 5 kHz for Python,
500 Hz for Node.js, 1 kHz for Ruby, also behind `timeout`, and for attach
from the process's executable), wall time for Ruby (a sleeping thread is
sampled) unless --mode cpu, and -i/-f still win."""
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmdutil  # noqa: E402
import pputil  # noqa: E402
from pputil import check  # noqa: E402

if not os.path.exists(pputil.AGENT):
    pputil.skip("agent not built: " + pputil.AGENT)


def asked(r):
    m = re.search(r"at (\d+) Hz requested", r.stderr)
    return int(m.group(1)) if m else None


def achieved(r, plugin):
    m = re.search(r" %s (\d+) samples" % plugin, r.stderr)
    return int(m.group(1)) if m else 0


r = cmdutil.polyprof("run", "--limit", "1", "--", sys.executable, "-c", "pass")
check(asked(r) == 5000, "python: 5 kHz asked (got %s)" % asked(r))
r = cmdutil.polyprof("run", "--limit", "1", "--", "true")
check(asked(r) == 10000, "native: 10 kHz asked (got %s)" % asked(r))
r = cmdutil.polyprof("run", "-i", "2000", "--limit", "1", "--", sys.executable, "-c", "pass")
check(asked(r) == 500, "-i 2000 wins: 500 Hz (got %s)" % asked(r))
r = cmdutil.polyprof("run", "-f", "200", "--limit", "1", "--", "true")
check(asked(r) == 200, "-f 200 wins (got %s)" % asked(r))

if shutil.which("node"):
    r = cmdutil.polyprof("run", "--limit", "1", "--", "node", "-e", "0")
    check(asked(r) == 500, "node: 500 Hz asked (got %s)" % asked(r))
else:
    check(False, "node installed")

if shutil.which("ruby"):
    # behind a wrapper; a thread that sleeps shows in wall time
    prog = "t = Thread.new { sleep 3 }; x = 0; t0 = Time.now; x += 1 while Time.now - t0 < 2.5; t.join"
    r = cmdutil.polyprof("run", "--limit", "0", "--", "timeout", "10", "ruby", "-e", prog)
    print(r.stdout[-1500:], r.stderr[-400:])
    check(asked(r) == 1000, "timeout ruby: 1 kHz asked (got %s)" % asked(r))
    rows = cmdutil.parse_table(r.stdout)
    # Kernel#sleep is a C function: "sleep [c function]" under the Ruby frames
    slept = sum(x["self"] for x in rows if x["function"].startswith("sleep"))
    check(slept > 0.2 * sum(x["self"] for x in rows), "ruby in wall time: the sleeping thread's sleep is sampled (%d)" % slept)
    r = cmdutil.polyprof("run", "--mode", "cpu", "--limit", "0", "--", "ruby", "-e", prog)
    rows = cmdutil.parse_table(r.stdout)
    sleeping = sum(x["self"] for x in rows if x["function"].startswith("sleep"))
    busy = sum(x["self"] for x in rows)
    print(r.stderr[-300:], "sleep", sleeping, "of", busy)
    check(busy > 0 and sleeping <= busy * 0.05, "--mode cpu: ruby's sleeping thread is (almost) not sampled")
    # attach: the rate from the executable
    p = subprocess.Popen(["ruby", "-e", "sleep 30"])
    try:
        time.sleep(0.5)
        r = cmdutil.polyprof("attach", str(p.pid), "-d", "1", "--limit", "1")
        check(asked(r) == 1000, "attach to ruby: 1 kHz asked (got %s)" % asked(r))
    finally:
        p.kill()
        p.wait()
else:
    check(False, "ruby installed")
pputil.finish()
