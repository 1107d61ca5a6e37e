"""gProfiler's command line starts polyprof: every flag and GPROFILER_*
variable of gProfiler is accepted. Flags without an equivalent give exactly
one warning line each; mapped flags and variables have their effect in the
written profile or the agent's log. Real agent, short real sessions (perf
plugin; the python plugin for --python-mode pyperf/auto).
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402

PERF = os.path.join(u.PLUGIN_DIR, "perf.so")
PYTHON = os.path.join(u.PLUGIN_DIR, "python.so")
for p in (PERF, PYTHON):
    if not os.path.exists(p):
        u.skip("plugin not built: " + p)
if os.geteuid() != 0:
    u.skip("system-wide perf sampling needs root")

# gProfiler flags polyprof accepts and ignores, with a value where they take one
IGNORED = [
    ("--min-duration", "5"), ("--insert-dso-name", None),
    ("--max-processes-runtime-profiler", "10"), ("--skip-system-profilers-above", "1000"),
    ("--log-usage", None), ("--dont-disable-core-files", None), ("--profile-api-version", "v1"),
    ("--controller-pid", "1"), ("--external-metadata", "/nonexistent.json"),
    ("--diagnostics", None),
    ("--heartbeat-file", "/nonexistent/hb"), ("--enable-heartbeat-server", None),
    ("--heartbeat-interval", "30"), ("--spark-sample-period", "120"),
    ("--collect-spark-metrics", None), ("--curlify-requests", None),
    ("--hw-events-file", "/nonexistent.json"), ("--enable-hw-metrics-collection", None),
    ("--perfspect-path", "/nonexistent"), ("--perfspect-duration", "60"),
    ("--perf-use-cgroups", None), ("--perf-max-cgroups", "50"),
    ("--perf-max-docker-containers", "0"), ("--java-no-version-check", None),
    ("--java-async-profiler-mode", "cpu"), ("--java-async-profiler-safemode", "0"),
    ("--java-async-profiler-features", "probesp,vtable"),
    ("--java-async-profiler-args", "interval=1"), ("--java-async-profiler-mcache", "30"),
    ("--java-async-profiler-no-report-meminfo", None),
    ("--no-java-async-profiler-buildids", None), ("--java-safemode", None),
    ("--java-collect-jvm-flags", "all"),
    ("--java-full-hserr", None), ("--java-include-method-modifiers", None),
    ("--java-line-numbers", "line-of-function"), ("--no-python-versions", None),
    ("--pyperf-user-stacks-pages", "4"), ("--python-pyperf-verbose", None),
    ("--python-pyspy-process", "1"), ("--python-skip-pyperf-profiler-above", "0"),
]

# gProfiler flags polyprof implements (core, or a plugin's option; plugins
# that are not loaded leave a note, not an error)
IMPLEMENTED = [
    "--perf-mode", "fp", "--perf-dwarf-stack-size", "8192", "--perf-no-memory-restart",
    "--java-mode", "ap", "--java-jattach-timeout", "30", "--java-collect-thread-names",
    "--php-mode", "disabled", "--php-proc-filter", "php-fpm", "--ruby-mode", "rbspy",
    "--dotnet-mode", "none", "--nodejs-mode", "disabled", "--no-java",
    "--disable-container-names", "--disable-application-identifiers", "--no-verify",
    "--server-upload-timeout", "120", "--dont-send-logs", "--rotating-output", "--flamegraph",
    "--mode", "cpu", "--alloc-interval", "2mb", "--app-id-args-filter", "-Dfoo",
    "--disable-pidns-check",
    "--java-collect-spark-app-name-as-appid",
    "--log-rotate-max-size", "5242880", "--log-rotate-backup-count", "1",
]


def warnings_of(text, flag):
    return [l for l in text.splitlines() if "WARNING" in l and (flag + " ") in l]


def header(out):
    with open(os.path.join(out, "last_profile.col"), encoding="utf-8") as f:
        return json.loads(f.readline()[2:])


perf_only = u.plugin_dir_with(PERF)

# 1. every ignored flag in one command line (twice for one of them), plus
#    the mapped --profile-spawned-processes after --no-proc-events
args = []
for flag, value in IGNORED:
    args += [flag] + ([value] if value else [])
args += ["--min-duration=9", "--no-proc-events", "--profile-spawned-processes"] + IMPLEMENTED
out = u.tempdir()
p = u.run_agent(out, perf_only, *args, duration=1)
u.check(p.returncode == 0, "ignored and implemented gProfiler flags: exit 0%s" % ("" if p.returncode == 0 else " (%d: %s)" % (p.returncode, p.stderr[-400:])))
for flag, _ in IGNORED:
    n = len(warnings_of(p.stderr, flag))
    u.check(n == 1, "%s: one warning line (%d)" % (flag, n))
u.check(os.path.exists(os.path.join(out, "last_profile.col")), "the session is written")
u.check("following the kernel's process events" in p.stderr,
        "--profile-spawned-processes: process events followed (it comes after --no-proc-events)")
# a warning never hides a mistake: a value-taking flag without its value is an error
p = u.run_agent(u.tempdir(), perf_only, "--heartbeat-interval", duration=1)
u.check(p.returncode == 2 and "--heartbeat-interval needs a value" in p.stderr,
        "a gProfiler flag missing its value is a usage error")

# 2. GPROFILER_* variables: the flag of the same name
env = dict(os.environ, GPROFILER_PROFILING_FREQUENCY="7", GPROFILER_SERVICE_NAME="svc-env",
           GPROFILER_DONT_SEND_LOGS="1", GPROFILER_TOKEN="tok-env")
out = u.tempdir()
p = subprocess.run(u.agent_cmd(out, perf_only, duration=1), env=env, stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, text=True, timeout=120)
u.check(p.returncode == 0, "GPROFILER_* variables: exit 0%s" % ("" if p.returncode == 0 else " (%s)" % p.stderr[-300:]))
h = header(out)
ra = h["metadata"]["run_arguments"]
u.check(h.get("sampling_frequency") == 7, "GPROFILER_PROFILING_FREQUENCY=7 sets the frequency (%s)" % h.get("sampling_frequency"))
u.check(ra.get("service_name") == "svc-env", "GPROFILER_SERVICE_NAME sets the service name (%s)" % ra.get("service_name"))
u.check(ra.get("server_token") == "<redacted>", "GPROFILER_TOKEN sets the token")
# the flag still wins over the variable
out = u.tempdir()
p = subprocess.run(u.agent_cmd(out, perf_only, "-f", "9", duration=1), env=env,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
h = header(out)
u.check(p.returncode == 0 and h.get("sampling_frequency") == 9, "-f 9 wins over GPROFILER_PROFILING_FREQUENCY")

# 3. --python-mode pyperf / auto: run, and say once what runs instead
with_python = u.plugin_dir_with(PERF, PYTHON)
for mode in ("pyperf", "auto"):
    out = u.tempdir()
    p = u.run_agent(out, with_python, "--python-mode", mode, duration=1)
    lines = [l for l in p.stderr.splitlines() if "WARNING" in l and "--python-mode " + mode in l]
    u.check(p.returncode == 0, "--python-mode %s: exit 0%s" % (mode, "" if p.returncode == 0 else " (%s)" % p.stderr[-300:]))
    u.check(len(lines) == 1 and "no PyPerf" in lines[0] and "outside the process" in lines[0],
            "--python-mode %s: one warning line saying what runs instead (%s)" % (mode, lines))
out = u.tempdir()
p = u.run_agent(out, with_python, "--python-mode", "pyspy", duration=1)
u.check(p.returncode == 0 and "no PyPerf" not in p.stderr, "--python-mode pyspy: no warning (it is what runs)")


# 4. the command lines gProfiler's README gives, as written there (output
#    and runtime options; --perf-event with its period; Databricks' and
#    Fargate's --disable-pidns-check --perf-mode=none)
README_LINES = [
    ["--rotating-output", "--no-flamegraph", "--profiling-frequency", "11", "--profiling-duration", "1",
     "--no-java", "--java-mode", "disabled", "--no-java-async-profiler-buildids", "--no-python",
     "--python-mode", "pyspy", "--php-mode", "phpspy", "--no-php", "--php-proc-filter", "php-fpm",
     "--dotnet-mode=dotnet-trace", "--no-dotnet", "--no-ruby", "--ruby-mode", "disabled",
     "--nodejs-mode", "none", "--perf-mode", "fp", "--dont-send-logs", "--disable-metrics-collection",
     "--disable-metadata-collection", "--disable-application-identifiers"],
    ["--perf-event", "cpu-clock", "--perf-event-period", "10000", "--hw-events-file", "/nonexistent.json"],
    ["--disable-pidns-check", "--perf-mode=none"],
]
for line in README_LINES:
    out = u.tempdir()
    p = u.run_agent(out, with_python, "--pids", str(os.getpid()), *line, duration=1)
    u.check(p.returncode == 0 and os.path.exists(os.path.join(out, "last_profile.col")),
            "gProfiler README command line %s: exit 0 and a profile%s"
            % (" ".join(line[:4]), "" if p.returncode == 0 else " (%s)" % p.stderr[-300:]))
u.finish()
