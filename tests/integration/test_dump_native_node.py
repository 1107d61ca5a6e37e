"""polyprof dump PID of a Node.js process (nodejs v8 mode): the thread
running JavaScript shows its JS frames, read at once by the nodejs plugin's
dump() (the thread held an instant, its registers and stack copy walked as
a sample is); V8's and libuv's threads show their native stacks (the perf
plugin's dump()). The process runs on, no thread stopped or left traced.
An idle node shows its event loop waiting (epoll)."""
import json
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
if not shutil.which("node"):
    pputil.skip("node not installed (scripts/install-deps.sh test)")

tmp = pputil.tempdir("pptest-dump-node-")
BUSY = os.path.join(tmp, "busy.js")
with open(BUSY, "w") as f:
    f.write("function innerSpin(n) { let x = 0; for (let i = 0; i < n; i++) x += i % 7; return x; }\n"
            "function outerLoop() { for (;;) innerSpin(1e6); }\n"
            "outerLoop();\n")
IDLE = os.path.join(tmp, "idle.js")
with open(IDLE, "w") as f:
    f.write("setInterval(() => {}, 100000);\n")


def unharmed(p, what):
    time.sleep(0.2)
    check(p.poll() is None, "%s: node still runs" % what)
    bad = []
    for tid in os.listdir("/proc/%d/task" % p.pid):
        try:
            stat = open("/proc/%d/task/%s/stat" % (p.pid, tid)).read()
            status = open("/proc/%d/task/%s/status" % (p.pid, tid)).read()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2] in "tTZ" or not re.search(r"TracerPid:\s+0\n", status):
            bad.append(tid)
    check(not bad, "%s: no thread stopped or left traced (%s)" % (what, bad))


def index_of(names, name):
    return names.index(name) if name in names else -1


p = pputil.spawn(["node", BUSY])
try:
    time.sleep(1.5)
    r = cmdutil.polyprof("dump", str(p.pid), "--json")
    print(r.stdout[:3000], r.stderr[-800:])
    check(r.returncode == 0, "dump exits 0")
    d = json.loads(r.stdout)
    by_tid = {s["tid"]: s for s in d["stacks"]}
    check(d.get("read") == "now" and set(by_tid) == {t["tid"] for t in d["threads"]},
          "dump --json: read now, a stack for every thread (%d of %d)" % (len(by_tid), len(d["threads"])))
    main = [f["name"] for f in by_tid.get(p.pid, {}).get("frames", [])]
    check(0 <= index_of(main, "innerSpin") < index_of(main, "outerLoop"),
          "main thread: innerSpin <- outerLoop, innermost first (%s)" % main[:4])
    js = [f for f in by_tid.get(p.pid, {}).get("frames", []) if f["name"] in ("innerSpin", "outerLoop")]
    check(js and all(f["runtime"].startswith("js") or f["runtime"] == "javascript" or "js" in f["runtime"] for f in js),
          "main thread: JS frames (%s)" % [f["runtime"] for f in js])
    others = [s for t, s in by_tid.items() if t != p.pid]
    check(others and all(s["frames"] and all(f["runtime"] in ("native", "kernel") for f in s["frames"]) for s in others),
          "V8's and libuv's threads: native stacks (%s)" % [s["frames"][0]["name"] for s in others if s["frames"]])
    unharmed(p, "busy node after dump")
finally:
    pputil.kill(p)

p = pputil.spawn(["node", IDLE])
try:
    time.sleep(1.5)
    r = cmdutil.polyprof("dump", str(p.pid))
    print(r.stdout[:1500])
    m = re.search(r'Stack of "node" \(thread %d, [a-z ]+\), innermost first:\n((    .*\n)+)' % p.pid, r.stdout + "\n")
    frames = [l.strip() for l in m.group(1).splitlines()] if m else []
    check(any("epoll" in f for f in frames[:3]) and any(f.startswith("uv_run") for f in frames),
          "idle node: the main thread waits in epoll under uv_run (%s)" % frames[:4])
    unharmed(p, "idle node after dump")
finally:
    pputil.kill(p)

pputil.finish()
