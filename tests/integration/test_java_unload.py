#!/usr/bin/env python3
"""java plugin: classes that are unloaded while being sampled (throw-away
class loaders, lambdas inside them, forced GCs) never crash the JVM; their
frames are named; the JVM's output is unchanged."""
import os
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
work = pputil.tempdir("ppjava-unl-")
plugins = pputil.plugin_dir_with(os.path.join(pputil.PLUGIN_DIR, "java.so"))
out_path, err_path = os.path.join(work, "jvm.out"), os.path.join(work, "jvm.err")
unload_log = os.path.join(work, "unload.log")
proc = javawork.start(classes, "Unload", 40, jvm_args=["-Xlog:disable", "-Xlog:all=warning:stderr",
                                                       "-Xlog:class+unload=info:file=%s" % unload_log],
                      stdout=open(out_path, "w"), stderr=open(err_path, "w"))
named = 0
try:
    pputil.check(javawork.wait_for_line(out_path, "ready"), "JVM started")
    for i in range(6):
        out_dir = os.path.join(work, "p%d" % i)
        res = pputil.run_agent(out_dir, plugins, "-f", "200", "--java-min-age-ms", "0", duration=3)
        if res.returncode == 0:
            _, stacks = pputil.parse_col(os.path.join(out_dir, "last_profile.col"))
            if any(x.startswith("UnloadTarget.spin(J)J_[") for f, _ in stacks for x in f):
                named += 1
        pputil.check(proc.poll() is None, "JVM alive after profiling run %d" % i)
    pputil.check(named >= 3, "UnloadTarget.spin frames named in %d of 6 runs" % named)
finally:
    rc = proc.wait(timeout=90)
pputil.check(rc == 0, "JVM exit code 0 (%d)" % rc)
with open(unload_log) as f:
    unloaded = f.read().count("UnloadTarget")
pputil.check(unloaded > 5, "UnloadTarget classes were unloaded during the test (%d)" % unloaded)
with open(out_path) as f:
    out = f.read()
with open(err_path) as f:
    err = f.read()
pputil.check(out == "ready\ndone\n", "JVM stdout unchanged (%r)" % out[:200])
pputil.check("hs_err" not in err and "SIGSEGV" not in err, "no crash report (%r)" % err[:300])
pputil.finish()
