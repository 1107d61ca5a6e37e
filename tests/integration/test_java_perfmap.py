#!/usr/bin/env python3
"""java plugin, perfmap mode: no agent in the JVM; every session runs
jcmd Compiler.perfmap over the attach socket, so /tmp/perf-<pid>.map names
the JIT-compiled methods for perf. Also: --no-java / mode disabled leave
JVMs alone. (That perf's own output then shows named JIT frames is checked
on the perf plugin's side.)"""
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

classes = javawork.compile_workloads()
work = pputil.tempdir("ppjava-pm-")
plugins = pputil.plugin_dir_with(os.path.join(pputil.PLUGIN_DIR, "java.so"))
out_path = os.path.join(work, "jvm.out")
proc = javawork.start(classes, "HotCold", 60, 2, 0, stdout=open(out_path, "w"))
pmap = "/tmp/perf-%d.map" % proc.pid
try:
    pputil.check(javawork.wait_for_line(out_path, "ready"), "JVM started")
    # disabled: nothing touches the JVM (the example plugin keeps the agent
    # from refusing to run with no plugin at all)
    both = pputil.plugin_dir_with(os.path.join(pputil.PLUGIN_DIR, "java.so"),
                                  os.path.join(pputil.PLUGIN_DIR, "example.so"))
    for flags in (["--no-java"], ["--java-mode", "disabled"]):
        res = pputil.run_agent(os.path.join(work, "off"), both, "--java-min-age-ms", "0", "--example-mode", "states",
                               *flags, duration=2)
        pputil.check(res.returncode == 0 and not os.path.exists("/tmp/.java_pid%d" % proc.pid),
                     "%s: no attach (rc %d)" % (" ".join(flags), res.returncode))

    res = pputil.run_agent(os.path.join(work, "prof"), plugins, "--java-mode", "perfmap", "--java-min-age-ms", "0",
                           duration=4)
    pputil.check(res.returncode == 0, "agent exits 0 in perfmap mode")
    pputil.check(os.path.exists(pmap), "%s written" % pmap)
    text = open(pmap).read() if os.path.exists(pmap) else ""
    lines = text.splitlines()
    pputil.check(len(lines) > 10 and all(re.match(r"^0x[0-9a-f]+ 0x[0-9a-f]+ .+", ln) for ln in lines[:50]),
                 "perf map format '0x<start> 0x<size> <name>' (%d lines)" % len(lines))
    pputil.check(any("HotCold.hotWork(long)" in ln for ln in lines), "JIT-compiled HotCold.hotWork is named")
    maps = javawork.maps_of(proc.pid)
    pputil.check("libpolyprof-jvmti" not in maps, "no agent loaded in perfmap mode")
    pputil.check(proc.poll() is None, "JVM still running")
finally:
    pputil.kill(proc)
    if os.path.exists(pmap):
        os.unlink(pmap)
with open(out_path) as f:
    pputil.check(f.read() == "ready\n", "JVM output unchanged")
pputil.finish()
