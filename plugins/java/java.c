/*
 * polyprof java plugin: Java stacks of every HotSpot JVM on the host.
 *
 * mode agent (default; "ap" is accepted as gProfiler's name for it): each
 * JVM gets our JVMTI agent (agent/, libpolyprof-jvmti.so) through HotSpot's
 * dynamic attach: `load <agent> true start,...` once, `dump,file=...` at
 * every snapshot (the agent writes its stacks into a file in the JVM's /tmp,
 * which we read through /proc/<pid>/root), `stop` when the plugin stops;
 * the agent then stays loaded but dormant and is re-armed by the next start.
 *
 * mode perfmap: no agent; `jcmd Compiler.perfmap` (JDK 17+) at every
 * snapshot so the perf plugin can name JIT frames from /tmp/perf-<pid>.map.
 *
 * Attaching can wait seconds for a JVM's attach listener, so new JVMs are
 * attached from tick(), one per tick, never from snapshot().
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "java.h"

enum jstate { J_NEW, J_ARMED, J_PERFMAP, J_SKIPPED, J_FAILED, J_GONE };

struct jvm {
  uint32_t pid;
  uint64_t start_time;
  enum jstate state;
  struct java_target_info ti;
  char agent_path[512]; /* as the JVM sees it */
  char reason[256];
  char *metadata; /* JSON object text */
  uint64_t first_seen_ns;
  int failures;
  int transient;     /* a skip that may resolve itself (JVM still starting) */
  uint64_t retry_ns; /* when to look again at a transient skip */
};

struct state {
  const struct pp_host *host;
  int perfmap; /* mode */
  uint32_t frequency;
  uint32_t duration_s;
  int64_t attach_timeout_s, max_memory_mb, max_depth, min_age_ms;
  int thread_names, collect_metadata;
  char agent_host[1024];
  const char *agent_path_opt;
  struct jvm *jvms;
  size_t njvms, cap;
  uint64_t exited, attached, failed;
};

static const char *const modes[] = {"agent", "ap", "perfmap", NULL};
static const char *const maps[] = {"libjvm.so", NULL};

static const struct pp_option options[] = {
    {.key = "mode",
     .type = PP_OPT_ENUM,
     .choices = modes,
     .default_value = "agent",
     .help = "agent: our JVMTI sampling agent (ap is an alias); perfmap: only "
             "jcmd Compiler.perfmap for perf (JDK 17+)"},
    {.key = "agent_path",
     .type = PP_OPT_STRING,
     .default_value = "",
     .help = "the agent library; empty: java-agent/libpolyprof-jvmti.so next to the plugin"},
    {.key = "attach_timeout",
     .type = PP_OPT_INT,
     .default_value = "6",
     .min = 1,
     .max = 60,
     .cli_flag = "java-jattach-timeout",
     .help = "seconds to wait for a JVM's attach socket and for each attach reply"},
    {.key = "max_memory_mb",
     .type = PP_OPT_INT,
     .default_value = "24",
     .min = 8,
     .max = 1024,
     .help = "memory cap of the agent inside each JVM (stack store, names, code map)"},
    {.key = "max_depth",
     .type = PP_OPT_INT,
     .default_value = "128",
     .min = 1,
     .max = 256,
     .help = "Java frames kept per stack"},
    {.key = "collect_thread_names",
     .type = PP_OPT_BOOL,
     .default_value = "false",
     .help = "use Java thread names instead of the process name as the first frame"},
    {.key = "min_age_ms",
     .type = PP_OPT_INT,
     .default_value = "1500",
     .min = 0,
     .max = 600000,
     .help = "leave JVMs younger than this alone (signal handlers not ready)"},
    {.key = "collect_metadata",
     .type = PP_OPT_BOOL,
     .default_value = "true",
     .help = "report java_version and non-default JVM flags as application metadata"},
};

#define LOG(st, lvl, ...) (st)->host->log((st)->host, (lvl), __VA_ARGS__)

static int java_init(const struct pp_host *host, void **out) {
  if (host->abi_major != PP_ABI_MAJOR || !PP_HOST_HAS(host, scratch_dir)) return -ENOTSUP;
  struct state *st = calloc(1, sizeof(*st));
  if (!st) return -ENOMEM;
  st->host = host;
  st->attach_timeout_s = 6;
  st->max_memory_mb = 24;
  st->max_depth = 128;
  st->min_age_ms = 1500;
  st->collect_metadata = 1;
  host->config_int(host, "attach_timeout", &st->attach_timeout_s);
  host->config_int(host, "max_memory_mb", &st->max_memory_mb);
  host->config_int(host, "max_depth", &st->max_depth);
  host->config_int(host, "min_age_ms", &st->min_age_ms);
  int b = 0;
  if (host->config_bool(host, "collect_thread_names", &b) == 0) st->thread_names = b;
  b = 1;
  if (host->config_bool(host, "collect_metadata", &b) == 0) st->collect_metadata = b;
  host->config_string(host, "agent_path", &st->agent_path_opt);
  *out = st;
  return 0;
}

static int java_start(void *state, struct pp_session *session) {
  struct state *st = state;
  st->perfmap = session->mode && strcmp(session->mode, "perfmap") == 0;
  st->frequency = session->frequency_hz ? session->frequency_hz : 11;
  st->duration_s = session->duration_s ? session->duration_s : 60;
  session->tick_interval_ns = 200000000ull; /* attach work only */
  if (!st->perfmap) {
    int rc = java_agent_host_path(st->agent_path_opt, st->agent_host, sizeof(st->agent_host));
    if (rc != 0) {
      LOG(st, PP_LOG_ERROR, "agent library %s not usable: %s", st->agent_host, strerror(-rc));
      return rc;
    }
  }
  /* re-arm: JVMs we knew from a previous start are attached again from tick() */
  for (size_t i = 0; i < st->njvms; i++)
    if (st->jvms[i].state == J_ARMED || st->jvms[i].state == J_PERFMAP) st->jvms[i].state = J_NEW;
  LOG(st, PP_LOG_INFO, "java: mode %s, %u Hz%s%s", st->perfmap ? "perfmap" : "agent", st->frequency,
      st->perfmap ? "" : ", agent ", st->perfmap ? "" : st->agent_host);
  return 0;
}

static int java_add_targets(void *state, const struct pp_target *t, size_t n) {
  struct state *st = state;
  for (size_t i = 0; i < n; i++) {
    size_t j;
    for (j = 0; j < st->njvms; j++)
      if (st->jvms[j].pid == t[i].pid) break;
    if (j < st->njvms && st->jvms[j].start_time == t[i].start_time) continue;
    if (j == st->njvms) {
      if (st->njvms == st->cap) {
        size_t nc = st->cap ? st->cap * 2 : 16;
        struct jvm *g = realloc(st->jvms, nc * sizeof(*g));
        if (!g) return -ENOMEM;
        st->jvms = g;
        st->cap = nc;
      }
      st->njvms++;
    } else {
      free(st->jvms[j].metadata); /* the pid was reused by another process */
    }
    st->jvms[j] = (struct jvm){.pid = t[i].pid,
                               .start_time = t[i].start_time,
                               .state = J_NEW,
                               .first_seen_ns = st->host->monotonic_ns(st->host)};
  }
  return 0;
}

static void set_state(struct state *st, struct jvm *j, enum jstate s, const char *reason) {
  int same = j->state == s && strcmp(j->reason, reason ? reason : "") == 0;
  j->state = s;
  j->transient = 0;
  snprintf(j->reason, sizeof(j->reason), "%s", reason ? reason : "");
  if (same) return; /* log once per cause */
  if (s == J_SKIPPED)
    LOG(st, PP_LOG_INFO, "pid %u: profiling skipped: %s", j->pid, j->reason);
  else if (s == J_FAILED)
    LOG(st, PP_LOG_WARNING, "pid %u: attach failed: %s", j->pid, j->reason);
}

static unsigned watchdog_s(const struct state *st) {
  return st->duration_s * 3 + 60;
}

static int attach_ms(const struct state *st) {
  return (int)st->attach_timeout_s * 1000;
}

/* One attach operation; returns the reply body (malloc'd) or NULL with err. */
static char *op(struct state *st, struct jvm *j, int allow_signal, const char *cmd, const char *a0,
                const char *a1, const char *a2, int *status, char *err, size_t errlen) {
  struct java_attach_reply r;
  int rc = java_attach(&j->ti, allow_signal, attach_ms(st), cmd, a0, a1, a2, &r, err, errlen);
  if (rc != 0) return NULL;
  *status = r.status;
  return r.body;
}

static void metadata_of(struct state *st, struct jvm *j, const char *props) {
  if (!st->collect_metadata) return;
  char err[256];
  int status = -1;
  char *flags = op(st, j, 0, "jcmd", "VM.flags", NULL, NULL, &status, err, sizeof(err));
  free(j->metadata);
  j->metadata = java_metadata_json(props, flags && status == 0 ? flags : NULL);
  free(flags);
}

static void attach_one(struct state *st, struct jvm *j) {
  char err[512] = "";
  enum jstate was = j->state;
  j->state = J_NEW; /* decided below; the skip checks compare against it */
  int rc = java_target_inspect(j->pid, j->start_time, &j->ti);
  if (rc != 0) {
    set_state(st, j, J_GONE, "exited");
    return;
  }
  int sock = java_socket_exists(j->pid, j->ti.nspid);
  const char *refusal = java_target_refusal(&j->ti, sock);
  if (refusal) {
    j->state = was; /* so set_state logs a repeated cause only once */
    set_state(st, j, J_SKIPPED, refusal);
    if (!j->ti.signal_dispatcher && !j->ti.xrs && j->ti.has_libjvm && !j->ti.openj9 &&
        !j->ti.attach_disabled) {
      /* a JVM still starting up gets its Signal Dispatcher soon: look again */
      j->transient = 1;
      j->retry_ns = st->host->monotonic_ns(st->host) + 1000000000ull;
    }
    return;
  }
  /* properties first: it wakes the attach listener and tells us what VM this is */
  int status = -1;
  char *props = op(st, j, 1, "properties", NULL, NULL, NULL, &status, err, sizeof(err));
  if (!props || status != 0) {
    if (!java_target_alive(j->pid, j->start_time)) {
      set_state(st, j, J_GONE, "exited");
    } else {
      if (props) snprintf(err, sizeof(err), "properties failed (status %d)", status);
      set_state(st, j, J_FAILED, err);
    }
    free(props);
    return;
  }
  char vmname[128];
  java_property(props, "java.vm.name", vmname, sizeof(vmname));
  int major = java_major_version(props);
  if (strstr(vmname, "OpenJ9") || strstr(vmname, "J9") ||
      (!strstr(vmname, "HotSpot") && !strstr(vmname, "OpenJDK") && !strstr(vmname, "GraalVM"))) {
    snprintf(err, sizeof(err), "unsupported JVM '%s'", vmname);
    set_state(st, j, J_SKIPPED, err);
  } else if (major < 8) {
    snprintf(err, sizeof(err), "Java %d is too old (8 or newer needed)", major);
    set_state(st, j, J_SKIPPED, err);
  } else if (st->perfmap && major < 17) {
    snprintf(err, sizeof(err), "perfmap mode needs JDK 17+ (Compiler.perfmap), this is %d", major);
    set_state(st, j, J_SKIPPED, err);
  }
  if (j->state == J_SKIPPED) {
    free(props);
    return;
  }
  if (!j->metadata) metadata_of(st, j, props);
  free(props);

  if (st->perfmap) {
    set_state(st, j, J_PERFMAP, NULL);
    st->attached++;
    return;
  }
  if (!j->agent_path[0] && java_agent_target_path(st->agent_host, j->pid, j->agent_path,
                                                  sizeof(j->agent_path), err, sizeof(err)) != 0) {
    set_state(st, j, J_FAILED, err);
    return;
  }
  char args[1024], result[96];
  java_result_name(j->ti.nspid, result, sizeof(result));
  snprintf(args, sizeof(args), "start,interval=%llu,depth=%lld,maxmem=%lld,file=/tmp/%s",
           1000000000ull / st->frequency, (long long)st->max_depth, (long long)st->max_memory_mb,
           result);
  struct java_attach_reply r;
  rc = java_attach(&j->ti, 0, attach_ms(st) * 2, "load", j->agent_path, "true", args, &r, err,
                   sizeof(err));
  size_t len = 0;
  char *text = java_read_result(j->pid, result, 1u << 20, &len);
  int arc = -1;
  if (rc == 0 && java_load_result(&r, &arc, err, sizeof(err)) == 0) {
    set_state(st, j, J_ARMED, NULL);
    st->attached++;
    LOG(st, PP_LOG_INFO, "pid %u: agent armed (%s)", j->pid, j->agent_path);
  } else if (rc == 0 && text && java_collect_error(text, err, sizeof(err))) {
    /* the agent refused this JVM (unsupported layout, SIGPROF taken...) */
    set_state(st, j, J_SKIPPED, err);
  } else {
    set_state(st, j, java_target_alive(j->pid, j->start_time) ? J_FAILED : J_GONE, err);
  }
  if (rc == 0) java_attach_reply_free(&r);
  free(text);
}

static int java_tick(void *state, uint64_t tick_ns) {
  struct state *st = state;
  (void)tick_ns; /* the loop's clock; ours is the host's, as in first_seen_ns */
  uint64_t now_ns = st->host->monotonic_ns(st->host);
  for (size_t i = 0; i < st->njvms; i++) {
    struct jvm *j = &st->jvms[i];
    if (j->state == J_SKIPPED && j->transient && now_ns >= j->retry_ns) {
      LOG(st, PP_LOG_DEBUG, "pid %u: looking again (%s)", j->pid, j->reason);
      attach_one(st, j);
      break;
    }
    if (j->state != J_NEW) continue;
    if (now_ns - j->first_seen_ns < (uint64_t)st->min_age_ms * 1000000ull) {
      /* the process may be older than our first sight of it */
      struct java_target_info ti;
      if (java_target_inspect(j->pid, j->start_time, &ti) != 0) {
        j->state = J_GONE;
        continue;
      }
      long hz = sysconf(_SC_CLK_TCK);
      struct timespec ts;
      clock_gettime(CLOCK_BOOTTIME, &ts);
      double age_ms =
          ((double)ts.tv_sec + ts.tv_nsec / 1e9 - (double)j->start_time / (double)hz) * 1e3;
      if (age_ms < (double)st->min_age_ms) continue;
    }
    attach_one(st, j);
    break; /* at most one attach per tick: ticks stay short */
  }
  return 0;
}

static void collect_one(struct state *st, struct jvm *j, struct pp_sink *sink,
                        struct java_collect_stats *cs) {
  const struct pp_host *h = st->host;
  char err[512] = "", result[96], args[256];
  if (!java_target_alive(j->pid, j->start_time)) {
    LOG(st, PP_LOG_INFO, "pid %u: JVM exited during the session", j->pid);
    j->state = J_GONE;
    st->exited++;
    return;
  }
  if (j->state == J_PERFMAP) {
    int status = -1;
    char *body = op(st, j, 0, "jcmd", "Compiler.perfmap", NULL, NULL, &status, err, sizeof(err));
    if (!body || status != 0)
      LOG(st, PP_LOG_WARNING, "pid %u: Compiler.perfmap failed: %s", j->pid, body ? body : err);
    else if (java_publish_perfmap(j->pid, j->ti.nspid, err, sizeof(err)) != 0)
      LOG(st, PP_LOG_WARNING, "pid %u: %s", j->pid, err);
    free(body);
    return;
  }
  java_result_name(j->ti.nspid, result, sizeof(result));
  snprintf(args, sizeof(args), "dump,timeout=%u,file=/tmp/%s", watchdog_s(st), result);
  struct java_attach_reply r;
  int rc = java_attach(&j->ti, 0, attach_ms(st), "load", j->agent_path, "true", args, &r, err,
                       sizeof(err));
  int arc = -1;
  size_t len = 0;
  char *text = java_read_result(j->pid, result, 64u << 20, &len);
  if (rc == 0 && java_load_result(&r, &arc, err, sizeof(err)) == 0 && text) {
    java_collect_emit(h, sink, j->pid, text, len, st->thread_names, cs);
    j->failures = 0;
  } else if (!java_target_alive(j->pid, j->start_time)) {
    LOG(st, PP_LOG_INFO, "pid %u: JVM exited during the session", j->pid);
    j->state = J_GONE;
    st->exited++;
  } else {
    if (!err[0]) snprintf(err, sizeof(err), "no dump file");
    h->set_pid_status(sink, j->pid, PP_PID_ERROR, err);
    if (++j->failures >= 3) set_state(st, j, J_FAILED, err);
  }
  if (rc == 0) java_attach_reply_free(&r);
  free(text);
}

static int java_snapshot(void *state, struct pp_sink *sink) {
  struct state *st = state;
  const struct pp_host *h = st->host;
  struct java_collect_stats cs = {0};
  for (size_t i = 0; i < st->njvms; i++) {
    struct jvm *j = &st->jvms[i];
    if (j->state == J_ARMED || j->state == J_PERFMAP) collect_one(st, j, sink, &cs);
    if (j->state == J_SKIPPED) h->set_pid_status(sink, j->pid, PP_PID_SKIPPED, j->reason);
    if (j->state == J_FAILED) h->set_pid_status(sink, j->pid, PP_PID_ERROR, j->reason);
    if (j->metadata && j->state != J_GONE) h->set_app_metadata(sink, j->pid, j->metadata);
  }
  /* forget processes that are gone */
  for (size_t i = 0; i < st->njvms;) {
    if (st->jvms[i].state == J_GONE) {
      free(st->jvms[i].metadata);
      st->jvms[i] = st->jvms[--st->njvms];
    } else {
      i++;
    }
  }
  h->add_counter(sink, "java_stacks", cs.stacks);
  h->add_counter(sink, "java_samples", cs.samples);
  h->add_counter(sink, "java_agent_dropped", cs.dropped);
  h->add_counter(sink, "java_bad_lines", cs.bad_lines);
  h->add_counter(sink, "java_exited", st->exited);
  st->exited = 0;
  return 0;
}

static int java_stop(void *state) {
  struct state *st = state;
  for (size_t i = 0; i < st->njvms; i++) {
    struct jvm *j = &st->jvms[i];
    if (j->state != J_ARMED || !java_target_alive(j->pid, j->start_time)) continue;
    char err[256];
    struct java_attach_reply r;
    /* dormant, not unloaded: a JVM cannot unload an attached agent */
    if (java_attach(&j->ti, 0, attach_ms(st), "load", j->agent_path, "true", "stop", &r, err,
                    sizeof(err)) == 0)
      java_attach_reply_free(&r);
    else
      LOG(st, PP_LOG_WARNING, "pid %u: cannot stop the agent: %s", j->pid, err);
    j->state = J_NEW;
  }
  return 0;
}

static void java_fini(void *state) {
  struct state *st = state;
  if (!st) return;
  for (size_t i = 0; i < st->njvms; i++)
    free(st->jvms[i].metadata);
  free(st->jvms);
  free(st);
}

static const struct pp_plugin descriptor = {
    PP_PLUGIN_HEADER,
    .name = "java",
    .version = POLYPROF_VERSION,
    .description = "Java stacks of HotSpot JVMs (JVMTI agent over dynamic attach, or perf maps)",
    .capabilities = PP_CAP_RUNTIME | PP_CAP_PERFLESS | PP_CAP_NEEDS_ROOT | PP_CAP_NEEDS_KILL |
                    PP_CAP_NEEDS_PTRACE,
    .match_exe = NULL,
    .match_maps = maps,
    .options = options,
    .option_count = sizeof(options) / sizeof(options[0]),
    .init = java_init,
    .start = java_start,
    .add_targets = java_add_targets,
    .tick = java_tick,
    .snapshot = java_snapshot,
    .stop = java_stop,
    .fini = java_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &descriptor;
}
