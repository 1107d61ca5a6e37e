"""--mode wall for Java (mapped onto java.wall: the JVMTI agent's per-thread
timers on wall-clock time): SleepBurn's sleeping and burning threads both
show; --mode cpu (CPU-time timers) shows the burner only; with perf,
--mode cpu,offcpu gives the sleeper's Java stack as off-CPU time."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads",
                                "java"))
import javawork  # noqa: E402
import modeutil  # noqa: E402
import pputil as u  # noqa: E402

plugin = os.path.join(u.PLUGIN_DIR, "java.so")
if not os.path.exists(plugin):
    u.skip("java plugin not built: " + plugin)
if os.geteuid() != 0:
    u.skip("needs root (attach as the JVM's user)")
if not javawork.find_jdk():
    u.skip("no JDK (java/javac) installed")
classes = javawork.compile_workloads()
# the JVM is left alone until 0.5 s old (java.min_age_ms): start() waits for "ready"
cmd = ["java", "-cp", classes, "SleepBurn", "60"]
modeutil.check_wall_and_cpu(plugin, cmd, None, "SleepBurn.sleeper", "SleepBurn.burner", comm="java",
                            pids=True)
# --mode cpu,offcpu with perf: a thread the agent's wall-clock signal finds
# blocked in a system call is off-CPU time with its Java stack
modeutil.check_offcpu_runtime(plugin, cmd, "java", "SleepBurn.sleeper", "SleepBurn.burner",
                              "SleepBurn")
u.finish()
