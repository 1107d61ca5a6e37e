"""Corpus: the JDK's Java compiler (Debian's openjdk-17) compiles a
generated project of generic classes, then a small part of it (a JVM of
about a second and a half, as a build step's), each in its own JVM started as
`java -m jdk.compiler/com.sun.tools.javac.Main` (as build tools run it;
the `javac` launcher is the same code without an appid by gProfiler's
rules), under the agent as shipped.

A user looks for: every sample under `java` with the appid of the compiler's
main class; JavaCompiler in the stacks once the Java plugin attached; code
the JVM ran before that as one `[jit: java, unnamed: ...]` frame per run,
never `(/tmp/perf-PID.map)`; the share of samples whose Java frames are all
named. A JVM is attached once it is java.min_age_ms (0.15 s) old and the
plugin's next tick has come (a JVM without its Signal Dispatcher yet is
looked at again at every tick, not after doubling waits); what it sampled until it ended is dumped by
the agent as the JVM ends, so the short JVM keeps its Java stacks too.
"""
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(__file__))
import corpusutil as cu  # noqa: E402
from corpusutil import u  # noqa: E402

JAVA = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"
if not os.path.exists(JAVA):
    JAVA = shutil.which("java") or JAVA
CLASSES = 120
# classes compiled by each JVM: ~4 s and ~1.5 s of CPU. The core hands a
# JVM to the java plugin within a tick of libjvm.so being mapped (it looks
# at young processes every tick), so even the short one is attached once
# java.min_age_ms old and profiled for most of its life
RUNS = (CLASSES, 12)
# measured on the 2-core machine (docs/fidelity.md): 94-100 %, the agent
# armed 0.2-0.3 s into each JVM (0.15 s of min_age_ms, a tick, ~35 ms of
# `properties`, ~25 ms of agent load; the log's debug line per JVM says so); its JIT compiler threads' samples are
# [no_Java_frame]. The floor leaves room for load (another agent on the
# machine holding a JVM's SIGPROF leaves that JVM unattached) and for a
# faster machine, where the short JVM's unarmed first 0.2 s weigh more
FLOOR = 0.80

cu.need(JAVA, "Java 17 (openjdk-17-jdk-headless)")


def make_sources(d):
    os.makedirs(d)
    names = []
    for i in range(CLASSES):
        n = os.path.join(d, "C%d.java" % i)
        with open(n, "w") as f:
            f.write("""
import java.util.*;
import java.util.function.*;
import java.util.stream.*;
public class C{i}<T extends Comparable<T>> {{
  private final List<T> items = new ArrayList<>();
  public C{i}<T> add(T t) {{ items.add(t); return this; }}
  public Optional<T> max() {{ return items.stream().max(Comparator.naturalOrder()); }}
  public <R> List<R> map(Function<? super T, ? extends R> f) {{ return items.stream().map(f).collect(Collectors.toList()); }}
  public Map<Boolean, List<T>> split(Predicate<T> p) {{ return items.stream().collect(Collectors.partitioningBy(p)); }}
  public static String run(int n) {{
    C{i}<Integer> c = new C{i}<>();
    for (int k = 0; k < n; k++) c.add(k * {i} % 97);
    return c.max().map(Object::toString).orElse("") + c.map(x -> x + 1).size() + C{p}.run(n - 1);
  }}
}}
""".format(i=i, p=(i + 1) % CLASSES))
        names.append(n)
    return names


with cu.Run("javac") as run:
    srcs = make_sources(os.path.join(run.tmp, "src"))
    for k, n in enumerate(RUNS):
        # the small run finds the classes it refers to in the first run's output
        cp = ["-cp", os.path.join(run.tmp, "out0")] if k else []
        rc = run.run([JAVA, "-m", "jdk.compiler/com.sun.tools.javac.Main", "-d", os.path.join(run.tmp, "out%d" % k)]
                     + cp + srcs[:n])
        u.check(rc == 0, "javac run %d compiled %d classes (exit %d)" % (k, n, rc))
lines = run.lines()
mine = [ln for ln in lines if ln.appid and "com.sun.tools.javac.Main" in ln.appid]
print("appids: %s" % sorted({ln.appid for ln in mine}))
cu.dump_top(mine)
cu.check_attribution(run, mine, "javac")
u.check(all(ln.comm == "java" or not cu.PID_COMM.match(ln.comm) for ln in mine),
        "javac: every sample under a name (java, or the JVM thread perf sampled)")
compiler = [ln for ln in mine if ln.has("com/sun/tools/javac/main/JavaCompiler.")]
u.check(compiler, "javac: JavaCompiler frames in %d samples" % cu.total(compiler))
jit = [f for ln in lines for f in ln.frames if f.startswith("[jit: ")]
paths = [f for ln in lines for f in ln.frames if f.startswith("(/tmp/perf-")]
u.check(not paths, "javac: no (/tmp/perf-PID.map) frame (%d)" % len(paths))
runs = [ln for ln in mine if any(a == b and a.startswith("[jit: ") for a, b in zip(ln.frames, ln.frames[1:]))]
u.check(not runs, "javac: unnamed JIT code is one frame per run (%d stacks repeat it)" % len(runs))
print("unnamed JIT frames: %s" % sorted(set(jit)))
# comm java: the `javac` launcher of other builds on the machine runs the same code
cu.check_marked([ln for ln in lines if not cu.PID_COMM.match(ln.comm) and ln.comm != "javac"],
                lambda f: f.startswith("com/sun/tools/javac/"), lambda c: True,
                lambda a: bool(a) and "com.sun.tools.javac.Main" in a, "javac")
cu.check_no_pid_comm(lines, lambda f: "libjvm.so" in f or "JavaMain" in f or f.startswith("[jit: java"), "javac")
# how long after its start each JVM had the agent armed
for k, (pid, t0) in enumerate(zip(run.pids, run.starts)):
    armed = cu.log_times(run.log, "pid %d: agent armed" % pid)
    print("FIGURE corpus.javac attach: JVM %d (pid %d, %.1f s of CPU) armed %s after it started"
          % (k, pid, run.cpus[k], ("%.1f s" % (armed[0] - t0)) if armed else "never"))
# each JVM ended before the snapshot: the stacks it sampled since its last dump came from the
# dump its agent wrote as it ended
col = open(os.path.join(run.out, "last_profile.col"), errors="replace").read()
exits = [int(x) for x in re.findall(r'"java_exit_dumps": (\d+)', col)]
u.check(sum(exits) >= len(RUNS), "javac: the stacks of all %d JVMs dumped as they ended (%d)" % (len(RUNS), sum(exits)))
cu.report("javac", "java", mine, FLOOR)
u.finish()
