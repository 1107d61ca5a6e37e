#!/usr/bin/env python3
"""java plugin: 50 attach/snapshot/stop cycles against one JVM. The JVM keeps
running, prints exactly what it prints without profiling, maps the agent
library once (re-armed, never loaded twice), and every cycle gets its
stacks."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "java"))
import pputil  # noqa: E402
import javawork  # noqa: E402

if os.geteuid() != 0:
    pputil.skip("needs root (attach as the JVM's user, SIGQUIT)")
if not javawork.find_jdk():
    pputil.skip("no JDK (java/javac) installed")

CYCLES = int(os.environ.get("PP_JAVA_CYCLES", "50"))
classes = javawork.compile_workloads()
work = pputil.tempdir("ppjava-cyc-")
plugins = pputil.plugin_dir_with(os.path.join(pputil.PLUGIN_DIR, "java.so"))
out_path, err_path = os.path.join(work, "jvm.out"), os.path.join(work, "jvm.err")
proc = javawork.start(classes, "HotCold", 100000, 2, 0, stdout=open(out_path, "w"), stderr=open(err_path, "w"))
pputil.check(javawork.wait_for_line(out_path, "ready"), "JVM started")

with_stacks = 0
failed_runs = 0
try:
    for i in range(CYCLES):
        out_dir = os.path.join(work, "p%d" % i)
        res = pputil.run_agent(out_dir, plugins, "-f", "100", "--java-min-age-ms", "0", duration=1)
        if res.returncode != 0:
            failed_runs += 1
            print("cycle %d: rc %d: %s" % (i, res.returncode, res.stderr[-400:]))
            continue
        _, stacks = pputil.parse_col(os.path.join(out_dir, "last_profile.col"))
        if any(x.startswith("HotCold.hotWork(J)J_[") for f, _ in stacks for x in f):
            with_stacks += 1
        if proc.poll() is not None:
            break
    pputil.check(failed_runs == 0, "all %d agent runs exit 0 (%d failed)" % (CYCLES, failed_runs))
    pputil.check(proc.poll() is None, "the JVM is still running after %d cycles" % CYCLES)
    # a cycle may end before the JVM's timer fired on a loaded machine
    pputil.check(with_stacks >= CYCLES * 9 // 10, "Java stacks in %d of %d cycles" % (with_stacks, CYCLES))
    maps = javawork.maps_of(proc.pid)
    inodes = set(line.split()[4] for line in maps.splitlines() if "libpolyprof-jvmti.so" in line)
    pputil.check(len(inodes) == 1, "the agent library is mapped once (%d distinct files)" % len(inodes))
    try:
        with open("/proc/%d/timers" % proc.pid) as f:
            timers = f.read()
    except OSError:
        timers = ""
    pputil.check("signal: 27/" not in timers, "agent dormant after stop: no SIGPROF timers left in the JVM")
    with open(out_path) as f:
        out = f.read()
    with open(err_path) as f:
        err = f.read()
    pputil.check(out == "ready\n", "JVM stdout unchanged (%r)" % out[:300])
    pputil.check(err == "", "JVM stderr empty: no thread dump, no warning (%r)" % err[:300])
    tmp_left = [n for n in os.listdir("/tmp") if re.match(r"\.polyprof-%d-" % proc.pid, n)]
    pputil.check(not tmp_left, "no result files left in /tmp (%s)" % tmp_left[:3])
    pputil.check(not os.path.exists("/tmp/.attach_pid%d" % proc.pid), "no attach trigger left")
finally:
    pputil.kill(proc)
pputil.finish()
