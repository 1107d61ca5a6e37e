"""polyprof attach PID and dump PID on running programs: attach -d prints
the 3:1 split of Python, Ruby and Node.js programs as a table; attach ends
when the program exits; dump shows the function each thread is in (read at
once by the Python, Ruby and PHP plugins' dump(), by thread id), with
the threads' names and states, as text and JSON."""
import json
import os
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
W = cmdutil.WORKLOADS


def attach(cmd, heavy, light, what, warmup=1.0):
    p = pputil.spawn(cmd)
    try:
        time.sleep(warmup)
        r = cmdutil.polyprof("attach", str(p.pid), "-d", "3")
        print(r.stdout[-1000:], r.stderr[-500:])
        check(r.returncode == 0, "%s: attach exits 0 (got %d)" % (what, r.returncode))
        cmdutil.check_split(cmdutil.parse_table(r.stdout), heavy, light, what)
        check(p.poll() is None, "%s: the program runs on after attach" % what)
    finally:
        pputil.kill(p)


attach([sys.executable, os.path.join(W, "python", "workload.py"), "split", "60"], "three_parts", "one_part", "attach python")
if shutil.which("ruby"):
    attach(["ruby", os.path.join(W, "ruby", "split.rb")], "heavy_three", "light_one", "attach ruby")
else:
    check(False, "ruby installed")
if shutil.which("node"):
    attach(["node", os.path.join(W, "nodejs", "split.js")], "heavyPath", "lightPath", "attach node", warmup=2.0)
else:
    check(False, "node installed")

# attach without -d ends when the program exits
p = pputil.spawn([sys.executable, os.path.join(W, "python", "workload.py"), "split", "3"])
t0 = time.time()
r = cmdutil.polyprof("attach", str(p.pid))
p.wait()
check(r.returncode == 0 and time.time() - t0 < 20 and "three_parts" in r.stdout, "attach ends with the program and prints")

# dump: each thread's function, names and states
p = pputil.spawn([sys.executable, os.path.join(W, "python", "workload.py"), "threads", "60"])
try:
    time.sleep(1)
    r = cmdutil.polyprof("dump", str(p.pid))
    print(r.stdout, r.stderr[-500:])
    check(r.returncode == 0, "dump exits 0")
    check("Thread %d " % p.pid in r.stdout and "(running)" in r.stdout or "(sleeping)" in r.stdout, "dump lists the threads with their states")
    blocks = r.stdout.split("\nStack of ")[1:]
    check(any(b.split("\n")[1].strip().startswith(("spin (", "busy_thread (")) for b in blocks), "dump: the main thread is in spin/busy_thread")
    check(any(b.split("\n")[1].strip().startswith("sleeper_thread (") for b in blocks), "dump: the other thread is in sleeper_thread")
    check("stacks read now" in r.stdout, "dump python: the stacks are read at once (the plugin's dump())")
    r = cmdutil.polyprof("dump", str(p.pid), "--json")
    d = json.loads(r.stdout)
    check(d["pid"] == p.pid and len(d["threads"]) == 2 and all("state" in t and "name" in t for t in d["threads"]), "dump --json: threads with names and states")
    check(any(s["frames"] and s["frames"][0]["name"] == "sleeper_thread" and s["frames"][0]["runtime"] == "python" for s in d["stacks"]), "dump --json: innermost frame first, with its runtime")
    # read now: one stack per thread, by its id (both threads are "python3")
    tids = {t["tid"]: t["state"] for t in d["threads"]}
    by_tid = {s.get("tid"): s["frames"][0]["name"] for s in d["stacks"]}
    check(d.get("read") == "now" and set(by_tid) == set(tids), "dump --json: read now, one stack per thread id (%s)" % by_tid)
    check(by_tid.get(p.pid) in ("spin", "busy_thread") and "sleeper_thread" in by_tid.values(),
          "dump --json: the main thread (tid = pid) spins, the other sleeps (%s)" % by_tid)
finally:
    pputil.kill(p)
if shutil.which("ruby"):
    p = pputil.spawn(["ruby", os.path.join(W, "ruby", "split.rb")])
    try:
        time.sleep(1)
        r = cmdutil.polyprof("dump", str(p.pid))
        check(r.returncode == 0 and "    burn " in r.stdout and "_[rb]" in r.stdout, "dump ruby: the thread is in burn")
        check("stacks read now" in r.stdout and "(thread %d, " % p.pid in r.stdout,
              "dump ruby: read at once, the main thread by its id")
    finally:
        pputil.kill(p)
if shutil.which("php"):
    p = pputil.spawn(["php", os.path.join(W, "php", "busy.php"), "30"])
    try:
        time.sleep(1)
        r = cmdutil.polyprof("dump", str(p.pid))
        print(r.stdout[-600:])
        blocks = r.stdout.split("\nStack of ")[1:]
        check(r.returncode == 0 and "stacks read now" in r.stdout and len(blocks) == 1
              and "(thread %d, " % p.pid in blocks[0], "dump php: its one stack read at once, on the main thread")
        check(blocks and blocks[0].split("\n")[1].strip().startswith("spin "), "dump php: the script is in spin")
    finally:
        pputil.kill(p)
else:
    check(False, "php installed")
pputil.finish()
