#!/usr/bin/env python3
"""java plugin, agent mode, on real JVMs: frames, suffixes, the 3:1 hot-method
split, lambdas / inner / anonymous classes, inlining, interpreted and C1
frames, '|' in signatures, appid with --app-id-args-filter, metadata, thread
names, and an unchanged JVM output."""
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
work = pputil.tempdir("ppjava-out-")
plugins = pputil.plugin_dir_with(os.path.join(pputil.PLUGIN_DIR, "java.so"))

# Two JVMs: a default one (C2 code) and one limited to C1
# (-XX:TieredStopAtLevel=1); the appid filter tells them apart. The workers
# start 3 s in, after the attach, so their code is compiled with the
# agent's debug information (inlined frames at any pc).
outs = {}
procs = {}
for name, extra, nthreads in (("c2", [], 3), ("c1", ["-XX:TieredStopAtLevel=1"], 1)):
    out = open(os.path.join(work, name + ".out"), "w")
    err = open(os.path.join(work, name + ".err"), "w")
    procs[name] = javawork.start(classes, "HotCold", 22, nthreads, 3000, jvm_args=extra, stdout=out, stderr=err)
    outs[name] = (out.name, err.name)

try:
    out_dir = os.path.join(work, "prof")
    # only this test's JVMs: another HotCold JVM on the host (the soak's
    # churn runs the same class) would share the appid these checks select by
    mine = "%d,%d" % (procs["c2"].pid, procs["c1"].pid)
    # 250 Hz: enough samples for the 3:1 check on a busy shared CI machine
    res = pputil.run_agent(out_dir, plugins, "-f", "250", "--app-id-args-filter", "-XX:TieredStopAtLevel=.*",
                           "--java-min-age-ms", "500", "--pids", mine, duration=15)
    pputil.check(res.returncode == 0, "agent exits 0 (rc %d: %s)" % (res.returncode, res.stderr[-500:]))
    header, stacks = pputil.parse_col(os.path.join(out_dir, "last_profile.col"))

    c2 = [(f, c) for f, c in stacks if any(x == "appid: java: HotCold" for x in f)]
    c1 = [(f, c) for f, c in stacks if any(x.startswith("appid: java: HotCold (-XX:TieredStopAtLevel=1") for x in f)]
    pputil.check(len(c2) > 0, "stacks of the default JVM, appid 'java: HotCold'")
    pputil.check(len(c1) > 0, "stacks of the C1 JVM, appid with the --app-id-args-filter match")

    def frames(sel):
        return set(x for f, _ in sel for x in f)

    def count(sel, pred):
        return sum(c for f, c in sel if any(pred(x) for x in f))

    f2 = frames(c2)
    hot = count(c2, lambda x: x.startswith("HotCold.hotWork(J)J"))
    cold = count(c2, lambda x: x.startswith("HotCold.coldWork(Ljava/lang/String|J)J"))
    total = hot + cold
    share = 100.0 * hot / total if total else 0
    print("hot %d cold %d -> %.1f%% hot" % (hot, cold, share))
    pputil.check(total >= 300, "enough samples in the hot/cold methods (%d)" % total)
    pputil.check(70.0 <= share <= 80.0, "hotWork:coldWork is 3:1 within 5 points (%.1f%% hot)" % share)
    pputil.check("HotCold.hotWork(J)J_[j]" in f2, "JIT frame HotCold.hotWork(J)J_[j]")
    pputil.check("HotCold.mix(J)J_[i]" in f2, "inlined frame HotCold.mix(J)J_[i]")
    pputil.check("HotCold.interpWork(J)J_[0]" in f2, "interpreted frame HotCold.interpWork(J)J_[0]")
    pputil.check("HotCold.coldWork(Ljava/lang/String|J)J_[j]" in f2, "';' in signatures shown as '|'")
    pputil.check(any(x.startswith("HotCold$$Lambda$") and x.endswith(".run()V_[0]") or
                     x.startswith("HotCold$$Lambda$") and x.endswith(".run()V_[j]") for x in f2),
                 "lambda frame HotCold$$Lambda$N...run()V")
    pputil.check(any(x.startswith("HotCold.lambda$main$0(J)V") for x in f2), "lambda body HotCold.lambda$main$0(J)V")
    pputil.check(any(x.startswith("HotCold$InnerWorker.run()V") for x in f2), "inner class HotCold$InnerWorker.run()V")
    pputil.check(any(x.startswith("HotCold$1.run()V") for x in f2), "anonymous class HotCold$1.run()V")
    pputil.check(any(x.startswith("java/lang/Thread.run()V") for x in f2), "root frame java/lang/Thread.run()V")
    pputil.check(all(f[2] == "java" for f, _ in c2), "comm frame is the process name without thread names")
    pputil.check(not any(";" in x or " " in x for x in f2 if not x.startswith("appid:")),
                 "no separators inside Java frames")
    f1 = frames(c1)
    pputil.check("HotCold.hotWork(J)J_[1]" in f1 or "HotCold.mix(J)J_[1]" in f1,
                 "C1 frames HotCold.hotWork(J)J_[1] under -XX:TieredStopAtLevel=1")

    md = [m for m in header["application_metadata"][1:] if m and "java_version" in m]
    pputil.check(len(md) >= 1 and "OpenJDK" in md[0]["java_version"], "java_version metadata")
    pputil.check(len(md) >= 1 and any(f.get("name") == "TieredStopAtLevel" for m in md for f in m.get("jvm_flags", [])),
                 "jvm_flags metadata lists -XX:TieredStopAtLevel")
    counters = header.get("polyprof", {}).get("java", {}).get("counters", {})
    pputil.check(counters.get("java_samples", 0) > 0, "java_samples counter")

    # thread names as first frame
    out_dir2 = os.path.join(work, "prof2")
    res = pputil.run_agent(out_dir2, plugins, "-f", "50", "--java-collect-thread-names", "--pids", mine, duration=3)
    _, stacks2 = pputil.parse_col(os.path.join(out_dir2, "last_profile.col"))
    comms = set(f[2] for f, _ in stacks2)
    pputil.check(any(c.startswith("worker-") for c in comms), "--java-collect-thread-names: worker-N frames (%s)" % sorted(comms)[:6])

    for name, p in procs.items():
        pputil.check(p.poll() is None, "%s JVM still running after profiling" % name)
finally:
    for p in procs.values():
        p.wait(timeout=60)
for name, (o, e) in outs.items():
    with open(o) as f:
        out = f.read()
    with open(e) as f:
        err = f.read()
    pputil.check(out == "ready\ndone\n", "%s JVM stdout unchanged (%r)" % (name, out[:200]))
    pputil.check(err == "", "%s JVM stderr empty (%r)" % (name, err[:300]))
pputil.finish()
