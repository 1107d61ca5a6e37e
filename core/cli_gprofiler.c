/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gProfiler flags that have no polyprof equivalent (docs/gprofiler-compat.md
 * lists them with what polyprof does instead). Flags with an equivalent are
 * in cli.c's table or a plugin's options, not here.
 */
#include <string.h>

#include "cli_gprofiler.h"
#include "log.h"

#define V PP_GP_VALUE
#define B PP_GP_BARE

static const struct pp_gprofiler_flag flags[] = {
    {"--min-duration", V, "every process is profiled from its first sample, whatever its age"},
    {"--insert-dso-name", B, "native frames carry the symbol only, never the DSO name"},
    {"--max-processes-runtime-profiler", V,
     "each plugin has its own target cap (see `polyprof plugins`)"},
    {"--skip-system-profilers-above", V, "perf always runs, whatever the number of processes"},
    {"--log-usage", B, "each session's log line already has the agent's CPU time and peak memory"},
    {"--dont-disable-core-files", B,
     "polyprof starts no external profiler processes, so no core files to keep"},
    {"--profile-api-version", V, "profiles are always uploaded with the v2 API"},
    {"--controller-pid", V, "the agent runs until signalled; stop it with SIGTERM"},
    {"--external-metadata", V,
     "no external metadata file is read; big_data/external_metadata stay {}"},
    {"--diagnostics", B, "use -v for debug messages"},
    {"--heartbeat-file", V, "no heartbeat file is touched; use systemd's watchdog (sd_notify)"},
    {"--enable-heartbeat-server", B, "no dynamic profiling: the command line decides what runs"},
    {"--heartbeat-interval", V, "no dynamic profiling: the command line decides what runs"},
    {"--spark-sample-period", V, "no Spark metrics are collected"},
    {"--collect-spark-metrics", B, "no Spark metrics are collected"},
    {"--curlify-requests", B, "uploads are logged with -v, not as curl commands"},
    {"--hw-events-file", V, "no hardware event groups; perf samples cpu-clock or --perf-event"},
    {"--enable-hw-metrics-collection", B, "no hardware metrics; hwmetrics stays null"},
    {"--perfspect-path", V, "no hardware metrics; hwmetrics stays null"},
    {"--perfspect-duration", V, "no hardware metrics; hwmetrics stays null"},
    {"--perf-use-cgroups", B, "perf samples the whole system (or --pids)"},
    {"--perf-max-cgroups", V, "perf samples the whole system (or --pids)"},
    {"--perf-max-docker-containers", V, "perf samples the whole system (or --pids)"},
    {"--java-no-version-check", B, "the java plugin decides by itself which JVMs it can attach to"},
    {"--java-async-profiler-mode", V,
     "the java plugin's own JVMTI agent samples on-CPU stacks; there is no mode to choose"},
    {"--java-async-profiler-safemode", V,
     "polyprof loads its own JVMTI agent, not async-profiler, whose options do not apply"},
    {"--java-async-profiler-features", V,
     "polyprof loads its own JVMTI agent, not async-profiler, whose options do not apply"},
    {"--java-async-profiler-args", V,
     "polyprof loads its own JVMTI agent, not async-profiler, whose options do not apply"},
    {"--java-async-profiler-mcache", V,
     "polyprof loads its own JVMTI agent, not async-profiler, whose options do not apply"},
    {"--java-async-profiler-no-report-meminfo", B,
     "polyprof loads its own JVMTI agent, not async-profiler, whose options do not apply"},
    {"--no-java-async-profiler-buildids", B,
     "polyprof loads its own JVMTI agent, not async-profiler, whose options do not apply"},
    {"--java-safemode", PP_GP_OPTIONAL,
     "polyprof loads its own JVMTI agent, not async-profiler, whose safemodes do not apply"},
    {"--java-collect-jvm-flags", V,
     "the non-default JVM flags are collected with --java-collect-metadata (on by default), not by "
     "name"},
    {"--java-full-hserr", B,
     "polyprof loads its own JVMTI agent, not async-profiler; hs_err files are not read"},
    {"--java-include-method-modifiers", B, "Java frames carry no method modifiers"},
    {"--java-line-numbers", V, "Java frames carry no line numbers"},
    {"--no-python-versions", B, "Python versions stay in the application metadata"},
    {"--pyperf-user-stacks-pages", V, "no PyPerf: Python is read from outside the process"},
    {"--python-pyperf-verbose", B, "no PyPerf: Python is read from outside the process"},
    {"--python-pyspy-process", V, "every Python process is read the same way from outside"},
    {"--python-skip-pyperf-profiler-above", V,
     "no PyPerf: Python is read from outside the process"},
};

const struct pp_gprofiler_flag *pp_gprofiler_flag_find(const char *flag) {
  for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
    if (strcmp(flags[i].name, flag) == 0) return &flags[i];
  return NULL;
}

void pp_gprofiler_flag_warn(const struct pp_gprofiler_flag *f) {
  pp_log(PP_LOG_WARNING, "polyprof", "%s (gProfiler) is accepted and ignored: %s", f->name,
         f->instead);
}
