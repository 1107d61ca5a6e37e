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
- --databricks-job-name-as-service-name: the service name from the cluster's
  Spark UI as gProfiler reads it (metrics.properties names the driver, its
  /api/v1/applications and the application's /environment hold the cluster
  tags), served here by a loopback fake: the job's RunName, the cluster name
  when the tags are redacted (its "run-N-" removed), an answer only after
  Spark said it was starting, and "databricks" when there is no cluster.
Real agent (perf, python and java plugins), real processes.
"""
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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

# 3. Databricks: the service name from the cluster's Spark UI
class SparkUI:
    """/api/v1/applications and its /environment, as a Databricks driver
    serves them; `starting` requests are answered as Spark does while it
    starts."""

    def __init__(self):
        self.tags, self.cluster_name, self.starting, self.requests = None, None, 0, []
        ui = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                ui.requests.append(self.path)
                if ui.starting > 0:
                    ui.starting -= 1
                    body, ctype = b"Spark is starting up. Please wait a while until it's ready.", "text/plain"
                elif self.path == "/api/v1/applications":
                    body, ctype = json.dumps([{"id": "app-20261126-0001", "name": "Databricks Shell"}]).encode(), "application/json"
                elif self.path == "/api/v1/applications/app-20261126-0001/environment":
                    props = [["spark.master", "local"], ["spark.app.name", "Databricks Shell"]]
                    if ui.tags is not None:
                        props.append(["spark.databricks.clusterUsageTags.clusterAllTags", ui.tags])
                    if ui.cluster_name is not None:
                        props.append(["spark.databricks.clusterUsageTags.clusterName", ui.cluster_name])
                    body = json.dumps({"runtime": {}, "sparkProperties": props,
                                       "classpathEntries": [["/databricks/jars/x%d.jar" % i, "System Classpath"]
                                                            for i in range(3000)]}).encode()
                    ctype = "application/json"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


ui = SparkUI()
dbx = u.tempdir("ppdbx-")
props = os.path.join(dbx, "metrics.properties")
with open(props, "w") as f:
    f.write("*.sink.ganglia.class=org.apache.spark.metrics.sink.GangliaSink\n"
            "*.sink.ganglia.host=127.0.0.1:%d\n*.sink.ganglia.port=8649\n" % ui.port)


def service_name_with(properties, timeout_s=20):
    cfg = os.path.join(dbx, "polyprof.yaml")
    with open(cfg, "w") as f:
        f.write("upload:\n  databricks_properties: %s\n  databricks_timeout_s: %d\n" % (properties, timeout_s))
    out = u.tempdir()
    cmd = [a for a in u.agent_cmd(out, perf_only, "--databricks-job-name-as-service-name", "--pids",
                                  str(os.getpid()), duration=1)]
    cmd[cmd.index("--config") + 1] = cfg
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if p.returncode != 0:
        print(p.stderr[-1500:])
    with open(os.path.join(out, "last_profile.col"), encoding="utf-8") as f:
        head = json.loads(f.readline()[2:])
    return p, head["metadata"]["run_arguments"].get("service_name"), time.time() - t0


ui.tags = json.dumps([{"key": "Vendor", "value": "Databricks"}, {"key": "RunName", "value": "Nightly ETL"},
                      {"key": "ClusterName", "value": "job-77-run-12-Nightly"}])
ui.cluster_name = "job-77-run-12-Nightly"
ui.starting = 2
p, name, took = service_name_with(props)
u.check(p.returncode == 0 and name == "databricks-job-nightly-etl",
        "databricks: the job's RunName, after Spark said twice it was starting: %s (%.1f s) %s"
        % (name, took, "" if p.returncode == 0 else p.stderr[-300:]))
u.check("databricks: service name databricks-job-nightly-etl" in p.stderr, "databricks: the name is logged")
ui.tags = "*********(redacted)"
ui.cluster_name = "job-77-run-12-Nightly Cluster"
p, name, _ = service_name_with(props)
u.check(name == "databricks-job-77-nightly-cluster",
        "databricks: redacted tags: the cluster name without its run id: %s" % name)
p, name, took = service_name_with(os.path.join(dbx, "absent.properties"), timeout_s=2)
u.check(p.returncode == 0 and name == "databricks" and "within 2 s" in p.stderr,
        "databricks: no cluster: \"databricks\" after the timeout, said once: %s (%.1f s)" % (name, took))
ui.httpd.shutdown()
u.finish()
