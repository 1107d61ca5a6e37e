"""What the environment a deployment gives the agent changes, as gProfiler does
(docs/deployment.md):
- AWS ECS Fargate (AWS_EXECUTION_ENV=AWS_ECS_FARGATE): the agent runs as the
  entrypoint of a task, pid 1 of its own pid namespace with no host pid
  namespace; perf is turned off (even over --perf-mode fp on the command
  line) and the pid namespace check skipped, and the Python process of the
  task still gets its Python frames. Without the variable the same command
  line refuses to run outside the init pid namespace.
- --java-collect-spark-app-name-as-appid: a JVM whose arguments name a Spark
  executor gets ", spark: <spark.app.name>" from its working directory's
  __spark_conf__/__spark_conf__.properties in its appid; without the flag
  it does not.
Real agent (perf, python and java plugins), real processes.
"""
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402

PERF = os.path.join(u.PLUGIN_DIR, "perf.so")
PYTHON = os.path.join(u.PLUGIN_DIR, "python.so")
for p in (PERF, PYTHON):
    if not os.path.exists(p):
        u.skip("plugin not built: " + p)
if os.geteuid() != 0:
    u.skip("a new pid namespace and system-wide perf need root")
for tool in ("unshare", "java"):
    if not shutil.which(tool):
        u.skip("%s is missing: run scripts/install-deps.sh test" % tool)

plugins = u.plugin_dir_with(PERF, PYTHON)
WORKLOAD = """
import time
def fargate_task_busy():
    end = time.time() + 20
    while time.time() < end:
        sum(range(2000))
fargate_task_busy()
"""

# 1. ECS Fargate: the task's own pid namespace, the agent as its pid 1
work = u.tempdir("ppfargate-")
script = os.path.join(work, "busy.py")
with open(script, "w") as f:
    f.write(WORKLOAD)
out = u.tempdir()
# sh execs the agent after starting the workload: the agent is pid 1
inner = "python3 %s & exec %s" % (script, " ".join("'%s'" % a for a in u.agent_cmd(out, plugins, "--perf-mode", "fp", duration=3)))
env = dict(os.environ, AWS_EXECUTION_ENV="AWS_ECS_FARGATE")
p = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", inner], env=env,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
u.check(p.returncode == 0, "Fargate: the agent runs as pid 1 of the task's pid namespace (rc %d: %s)"
        % (p.returncode, p.stderr[-600:]))
u.check("AWS ECS Fargate" in p.stderr and "perf is off" in p.stderr,
        "Fargate: one log line says perf is off and the pid namespace check skipped")
u.check("perf: disabled (--perf-mode disabled)" in p.stderr,
        "Fargate: the perf plugin is disabled over --perf-mode fp on the command line")
col = os.path.join(out, "last_profile.col")
if u.check(os.path.exists(col), "Fargate: a profile is written"):
    _, stacks = u.parse_col(col)
    py = [s for s, _ in stacks if any("fargate_task_busy" in fr and fr.endswith("_[p]") for fr in s)]
    u.check(py, "Fargate: the task's Python process has its Python frames (%d stacks)" % len(stacks))
    u.check(not any(fr.endswith("_[k]") for s, _ in stacks for fr in s),
            "Fargate: no kernel frames, perf did not run")

# the same, outside Fargate: refused (the check is what Fargate skips)
out = u.tempdir()
env = {k: v for k, v in os.environ.items() if k != "AWS_EXECUTION_ENV"}
p = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc"] + u.agent_cmd(out, plugins, duration=1),
                   env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
u.check(p.returncode == 1 and "init pid namespace" in p.stderr,
        "without AWS_EXECUTION_ENV the same agent refuses a private pid namespace (rc %d)" % p.returncode)

# 2. Spark executors' appid
JAVA_SRC = """
public class SparkExecutorStandIn {
    public static void main(String[] args) {
        long end = System.currentTimeMillis() + 25000, x = 0;
        while (System.currentTimeMillis() < end) { x += System.nanoTime() % 7; }
        System.out.println(x);
    }
}
"""
cwd = u.tempdir("ppspark-")
os.makedirs(os.path.join(cwd, "__spark_conf__"))
with open(os.path.join(cwd, "__spark_conf__", "__spark_conf__.properties"), "w") as f:
    f.write("# written by the Spark driver\nspark.master=yarn\nspark.app.name=pp-spark-job\n")
with open(os.path.join(cwd, "SparkExecutorStandIn.java"), "w") as f:
    f.write(JAVA_SRC)
subprocess.run(["javac", "SparkExecutorStandIn.java"], cwd=cwd, check=True, timeout=120)
jvm = u.spawn(["java", "-Dspark.role=org.apache.spark.executor.CoarseGrainedExecutorBackend",
               "-cp", cwd, "SparkExecutorStandIn"], cwd=cwd)
try:
    time.sleep(1.5)
    perf_only = u.plugin_dir_with(PERF)
    appids = {}
    for flagged in (True, False):
        out = u.tempdir()
        extra = ["--pids", str(jvm.pid)] + (["--java-collect-spark-app-name-as-appid"] if flagged else [])
        p = u.run_agent(out, perf_only, *extra, duration=2)
        u.check(p.returncode == 0, "spark appid (flag %s): exit 0 (%s)" % (flagged, p.stderr[-300:]))
        _, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
        appids[flagged] = {fr for s, _ in stacks for fr in s if fr.startswith("appid: ")}
    u.check(any(a.endswith(", spark: pp-spark-job") for a in appids[True]),
            "--java-collect-spark-app-name-as-appid: the executor's appid carries the Spark app name: %s"
            % sorted(appids[True]))
    u.check(appids[False] and not any("spark:" in a for a in appids[False]),
            "without the flag the appid has no Spark app name: %s" % sorted(appids[False]))
finally:
    u.kill(jvm)
u.finish()
