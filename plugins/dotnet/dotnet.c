/*
 * polyprof .NET (CoreCLR) plugin.
 *
 * Modes:
 *  - dotnet-trace: an EventPipe session per target over the runtime's
 *    diagnostic socket (no tool in the target, no restart), with the
 *    SampleProfiler and the runtime provider's method events; the nettrace
 *    stream is parsed here (nettrace.c) and IPs are named from
 *    MethodLoadVerbose / rundown events (methods.c).
 *  - perfmap: EnablePerfMap (.NET 8+) so perf names JIT frames from
 *    /tmp/perf-<pid>.map; DisablePerfMap at stop. No stacks from here.
 *
 * Everything read from the target (IPC replies, the stream) is untrusted and
 * bounded; see docs/dotnet.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "appid.h"
#include "ipc.h"
#include "methods.h"
#include "polyprof/plugin.h"
#include "session.h"

#define IPC_TIMEOUT_MS 3000
#define PUMP_BYTES_PER_TICK (8u << 20)
#define ATTACH_RETRY_NS 1000000000ull
#define HRESULT_UNKNOWN_COMMAND 0x80131385u

enum dn_tstate { T_PENDING, T_ACTIVE, T_FAILED };

struct dn_target {
  uint32_t pid, nspid;
  uint64_t start_time;
  int state;
  uint64_t first_try_ns, next_try_ns;
  char sock[PATH_MAX];
  struct dotnet_session *cur, *old;
  struct dotnet_methods *methods;
  bool perfmap;
  bool logged_eof;
  uint32_t failures; /* consecutive, for the retry backoff */
  uint64_t last_rundown_ns;
  uint64_t rundown_resets; /* method-map clears already answered by a rundown */
  bool rate_logged;
  char version[64];
  char appid[512];
  char error[192];
};

struct dn_state {
  const struct pp_host *host;
  struct dotnet_cfg cfg;
  bool trace_mode, perfmap_mode;
  int64_t max_methods, attach_timeout_s;
  struct dn_target *t;
  size_t n, cap;
  /* counters since the last snapshot */
  uint64_t truncated, parse_errors, unknown_frames, dropped;
};

static const char *const mode_choices[] = {"dotnet-trace", "perfmap", NULL};
static const char *const match_maps[] = {"libcoreclr.so", NULL};

static const struct pp_option options[] = {
    {.key = "mode",
     .type = PP_OPT_ENUM,
     .default_value = "disabled",
     .choices = mode_choices,
     .help = "dotnet-trace: EventPipe sampling in the agent; perfmap: make the runtime write "
             "/tmp/perf-PID.map for perf; disabled"},
    {.key = "buffer_mb",
     .type = PP_OPT_INT,
     .default_value = "32",
     .min = 1,
     .max = 1024,
     .help = "EventPipe buffer in the target per session (MiB); overflow drops events there"},
    {.key = "max_stacks",
     .type = PP_OPT_INT,
     .default_value = "16384",
     .min = 64,
     .max = 1 << 22,
     .help = "distinct stacks kept per target per session; more are counted as dropped"},
    {.key = "max_methods",
     .type = PP_OPT_INT,
     .default_value = "262144",
     .min = 1024,
     .max = 1 << 24,
     .help = "code ranges kept per target; the map is cleared when full"},
    {.key = "max_depth",
     .type = PP_OPT_INT,
     .default_value = "256",
     .min = 1,
     .max = 512,
     .help = "frames kept per stack (leaf end)"},
    {.key = "stop_timeout_ms",
     .type = PP_OPT_INT,
     .default_value = "10000",
     .min = 100,
     .max = 60000,
     .help = "how long a stopped session may go on streaming (its rundown included) before it is "
             "closed; snapshots never wait for it"},
    {.key = "wall",
     .type = PP_OPT_BOOL,
     .default_value = "false",
     .help = "also count threads outside managed code (blocked, native): wall-clock profile"},
    {.key = "rundown",
     .type = PP_OPT_BOOL,
     .default_value = "true",
     .help = "request a method rundown when attaching (names code compiled before the first "
             "session; see rundown_interval_s)"},
    {.key = "rundown_interval_s",
     .type = PP_OPT_INT,
     .default_value = "0",
     .min = 0,
     .max = 86400,
     .help = "rundown again this often after attaching (names ReadyToRun code first run later); "
             "0: only when attaching and after the method map overflowed"},
    {.key = "max_block_kb",
     .type = PP_OPT_INT,
     .default_value = "4096",
     .min = 64,
     .max = 65536,
     .help = "largest nettrace block accepted; a larger one ends the stream"},
    {.key = "attach_timeout_s",
     .type = PP_OPT_INT,
     .default_value = "30",
     .min = 0,
     .max = 3600,
     .help = "how long to retry a process whose diagnostic socket is not there yet"},
};

#define LOG(st, lvl, ...) (st)->host->log((st)->host, (lvl), __VA_ARGS__)

static int64_t cfg_int(const struct pp_host *h, const char *key, int64_t def) {
  int64_t v = def;
  if (h->config_int(h, key, &v) < 0) v = def;
  return v;
}

static int dn_init(const struct pp_host *host, void **out) {
  if (host->abi_major != PP_ABI_MAJOR || !PP_HOST_HAS(host, scratch_dir)) return -ENOTSUP;
  struct dn_state *st = calloc(1, sizeof(*st));
  if (!st) return -ENOMEM;
  st->host = host;
  st->cfg.buffer_mb = (uint32_t)cfg_int(host, "buffer_mb", 32);
  st->cfg.max_stacks = (uint32_t)cfg_int(host, "max_stacks", 16384);
  st->cfg.max_depth = (uint32_t)cfg_int(host, "max_depth", 256);
  st->cfg.stop_timeout_ms = (uint32_t)cfg_int(host, "stop_timeout_ms", 10000);
  st->cfg.max_block = (uint32_t)cfg_int(host, "max_block_kb", 4096) * 1024;
  st->max_methods = cfg_int(host, "max_methods", 262144);
  st->attach_timeout_s = cfg_int(host, "attach_timeout_s", 30);
  int b = 0;
  if (host->config_bool(host, "wall", &b) == 0) st->cfg.wall = b;
  b = 1;
  if (host->config_bool(host, "rundown", &b) == 0) st->cfg.rundown = b;
  st->cfg.rundown_interval_s = (uint32_t)cfg_int(host, "rundown_interval_s", 0);
  *out = st;
  return 0;
}

static int dn_start(void *state, struct pp_session *session) {
  struct dn_state *st = state;
  const char *mode = session->mode ? session->mode : "dotnet-trace";
  st->trace_mode = strcmp(mode, "dotnet-trace") == 0;
  st->perfmap_mode = strcmp(mode, "perfmap") == 0;
  st->cfg.frequency_hz = session->frequency_hz ? session->frequency_hz : 100;
  /* the stream is read from tick(): often enough that the runtime's buffer
   * never fills, rarely enough to cost nothing */
  session->tick_interval_ns = 50000000ull;
  LOG(st, PP_LOG_INFO, "mode %s, %u Hz per thread, %s threads", mode, st->cfg.frequency_hz,
      st->cfg.wall ? "all managed" : "running managed");
  return 0;
}

static void target_release(struct dn_target *t) {
  dotnet_session_free(t->cur);
  dotnet_session_free(t->old);
  dotnet_methods_free(t->methods);
  t->cur = t->old = NULL;
  t->methods = NULL;
}

static int dn_add_targets(void *state, const struct pp_target *tg, size_t count) {
  struct dn_state *st = state;
  uint64_t now = st->host->monotonic_ns(st->host);
  for (size_t i = 0; i < count; i++) {
    size_t j;
    for (j = 0; j < st->n; j++)
      if (st->t[j].pid == tg[i].pid) break;
    if (j < st->n) {
      if (st->t[j].start_time == tg[i].start_time) continue;
      target_release(&st->t[j]); /* pid reused by a new process */
    } else {
      if (st->n == st->cap) {
        size_t ncap = st->cap ? st->cap * 2 : 16;
        struct dn_target *g = realloc(st->t, ncap * sizeof(*g));
        if (!g) return -ENOMEM;
        st->t = g;
        st->cap = ncap;
      }
      st->n++;
    }
    st->t[j] = (struct dn_target){.pid = tg[i].pid,
                                  .nspid = tg[i].pid,
                                  .start_time = tg[i].start_time,
                                  .state = T_PENDING,
                                  .first_try_ns = now,
                                  .next_try_ns = now};
  }
  return 0;
}

static bool target_alive(struct dn_state *st, const struct dn_target *t) {
  uint64_t start = 0;
  return st->host->proc_start_time(st->host, t->pid, &start) == 0 && start == t->start_time;
}

/* t->error holds the reason. Failures are retried with backoff (1 s doubling
 * to 60 s): a runtime may refuse a session for a while (too many sessions,
 * starting up) and recover. Logged once per target at `level`, then at debug. */
static void mark_failed(struct dn_state *st, struct dn_target *t, int level) {
  t->state = T_FAILED;
  uint32_t shift = t->failures < 6 ? t->failures : 6;
  uint64_t backoff = (1ull << shift) * 1000000000ull;
  if (backoff > 60000000000ull) backoff = 60000000000ull;
  t->next_try_ns = st->host->monotonic_ns(st->host) + backoff;
  LOG(st, t->failures ? PP_LOG_DEBUG : level, "pid %u: %s", t->pid, t->error);
  t->failures++;
}

static void set_failed(struct dn_state *st, struct dn_target *t, int level, const char *what,
                       int err) {
  snprintf(t->error, sizeof(t->error), "%s: %s", what, strerror(err));
  mark_failed(st, t, level);
}

/* Reads the runtime version and validates that the socket belongs to pid. */
static int query_info(struct dn_state *st, struct dn_target *t) {
  static uint8_t reply[DOTNET_IPC_MAX_PAYLOAD];
  size_t len = 0;
  uint32_t hr = 0;
  int rc = dotnet_ipc_call(t->sock, DOTNET_IPC_SET_PROCESS, DOTNET_IPC_PROC_INFO2, NULL, 0, reply,
                           sizeof(reply), &len, &hr, IPC_TIMEOUT_MS);
  if (rc == -EPROTO) return 0; /* older runtime: no version, still usable */
  if (rc < 0) return rc;
  struct dotnet_proc_info info;
  if (dotnet_ipc_parse_info2(reply, len, &info) < 0) return -EBADMSG;
  if (info.pid != t->nspid) {
    LOG(st, PP_LOG_WARNING, "pid %u: diagnostic socket answers for pid %llu, ignoring it", t->pid,
        (unsigned long long)info.pid);
    return -ESRCH;
  }
  /* "10.0.12+95017c..." -> keep the version before the commit */
  snprintf(t->version, sizeof(t->version), "%s", info.version);
  char *plus = strchr(t->version, '+');
  if (plus) *plus = '\0';
  return 0;
}

/* Rundown (the runtime enumerating all its code when a session stops)
 * names code that existed before the session, ReadyToRun code included, but
 * each one costs the target a burst of CPU (bench/dotnet/RESULTS.md). The
 * method map outlives sessions and live MethodLoadVerbose events name all
 * code JIT-compiled while a session runs, and consecutive sessions overlap,
 * so one rundown at attach names everything (see start_attach_rundown).
 * Later ones are asked for only after the map overflowed and was cleared,
 * or every rundown_interval_s if configured (for ReadyToRun code first run
 * after attach, which no live event names). (Asking after every session
 * with unnamed frames made it near-continuous: stubs are never named.) */
static bool want_rundown(struct dn_state *st, struct dn_target *t, uint64_t now) {
  if (!st->cfg.rundown) return false;
  uint64_t resets = dotnet_methods_resets(t->methods);
  bool due = st->cfg.rundown_interval_s &&
             now - t->last_rundown_ns >= (uint64_t)st->cfg.rundown_interval_s * 1000000000ull;
  if (resets == t->rundown_resets && !due) return false;
  t->rundown_resets = resets;
  t->last_rundown_ns = now;
  return true;
}

/* The attach rundown runs in its own session, stopped as soon as it is
 * started, so the names arrive within a second or so, before the first
 * snapshot, instead of after the first sampling session (which would hold
 * that snapshot up or leave its frames unnamed). It uses the idle `old`
 * slot; the first rotation waits for it if it is still streaming. */
static void start_attach_rundown(struct dn_state *st, struct dn_target *t, uint64_t now) {
  if (!st->cfg.rundown || dotnet_session_busy(t->old)) return;
  uint32_t hr = 0;
  int rc =
      dotnet_session_start(t->old, t->sock, t->methods, DOTNET_SESSION_RUNDOWN_ONLY, true, &hr);
  if (rc == 0) rc = dotnet_session_request_stop(t->old, t->sock);
  if (rc < 0) {
    LOG(st, PP_LOG_INFO, "pid %u: no rundown (%s): code compiled before attach stays unnamed",
        t->pid, rc == -EPROTO ? "refused" : strerror(-rc));
    dotnet_session_reset(t->old);
    return;
  }
  t->last_rundown_ns = now;
  t->rundown_resets = dotnet_methods_resets(t->methods);
}

static void try_attach(struct dn_state *st, struct dn_target *t, uint64_t now) {
  t->next_try_ns = now + ATTACH_RETRY_NS;
  if (!target_alive(st, t)) return;
  st->host->proc_ns_pid(st->host, t->pid, &t->nspid);
  int rc = dotnet_ipc_find_socket(st->host, t->pid, t->sock, sizeof(t->sock));
  if (rc < 0) {
    /* a young runtime creates its socket a little after libcoreclr is mapped */
    if (now - t->first_try_ns < (uint64_t)st->attach_timeout_s * 1000000000ull) return;
    set_failed(st, t, PP_LOG_WARNING,
               "no diagnostic socket (DOTNET_EnableDiagnostics=0 or unknown TMPDIR?)", -rc);
    return;
  }
  rc = query_info(st, t);
  if (rc < 0) {
    if (rc == -ECONNREFUSED || rc == -ECONNRESET) { /* stale socket or starting up */
      if (now - t->first_try_ns < (uint64_t)st->attach_timeout_s * 1000000000ull) return;
    }
    set_failed(st, t, PP_LOG_WARNING, "diagnostic IPC failed", -rc);
    return;
  }
  if (!t->appid[0]) dotnet_appid(st->host, t->pid, t->appid, sizeof(t->appid));

  if (st->perfmap_mode) {
    uint8_t p[4] = {DOTNET_PERFMAP_TYPE_PERFMAP, 0, 0, 0};
    uint32_t hr = 0;
    rc = dotnet_ipc_call(t->sock, DOTNET_IPC_SET_PROCESS, DOTNET_IPC_PROC_ENABLE_PERFMAP, p,
                         sizeof(p), NULL, 0, NULL, &hr, IPC_TIMEOUT_MS);
    if (rc == -EPROTO) {
      snprintf(t->error, sizeof(t->error), "EnablePerfMap refused (hresult 0x%08x%s)", hr,
               hr == HRESULT_UNKNOWN_COMMAND ? ": needs .NET 8+" : "");
      mark_failed(st, t, PP_LOG_WARNING);
      return;
    }
    if (rc < 0) {
      set_failed(st, t, PP_LOG_WARNING, "EnablePerfMap failed", -rc);
      return;
    }
    t->perfmap = true;
    t->state = T_ACTIVE;
    t->failures = 0;
    LOG(st, PP_LOG_INFO, "pid %u: perf map enabled (/tmp/perf-%u.map in its mount namespace)",
        t->pid, t->nspid);
    return;
  }

  if (!t->methods) t->methods = dotnet_methods_new((uint32_t)st->max_methods, 32u << 20);
  if (!t->cur) t->cur = dotnet_session_new(&st->cfg);
  if (!t->old) t->old = dotnet_session_new(&st->cfg);
  if (!t->methods || !t->cur || !t->old) {
    set_failed(st, t, PP_LOG_ERROR, "session setup", ENOMEM);
    return;
  }
  uint32_t hr = 0;
  dotnet_session_reset(t->cur);
  rc = dotnet_session_start(t->cur, t->sock, t->methods, DOTNET_SESSION_SAMPLING, false, &hr);
  if (rc < 0) {
    if (rc == -EPROTO)
      snprintf(t->error, sizeof(t->error), "EventPipe session refused (hresult 0x%08x)", hr);
    else
      snprintf(t->error, sizeof(t->error), "EventPipe session failed: %s", strerror(-rc));
    mark_failed(st, t, PP_LOG_WARNING);
    return;
  }
  t->state = T_ACTIVE;
  t->failures = 0;
  t->logged_eof = false;
  LOG(st, PP_LOG_INFO, "pid %u: EventPipe session %llx started (.NET %s)", t->pid,
      (unsigned long long)t->cur->id, t->version[0] ? t->version : "unknown");
  /* after the sampling session, so code compiled in between is named by
   * the sampling session's live events */
  start_attach_rundown(st, t, now);
}

/* Reads a stopped session (or the attach rundown) that is still streaming;
 * closes it at its deadline, so a runtime that never ends it costs nothing
 * but that session's last samples or names. */
static void pump_stopped(struct dn_state *st, struct dn_target *t) {
  struct dotnet_session *s = t->old;
  if (!s || !dotnet_session_busy(s)) return;
  dotnet_session_pump(s, PUMP_BYTES_PER_TICK);
  if (dotnet_session_busy(s) && dotnet_session_now_ts() >= s->stop_deadline_ns) {
    LOG(st, PP_LOG_WARNING, "pid %u: stopped session %s not finished after %u ms; closing it",
        t->pid, s->rundown ? "(rundown)" : "", st->cfg.stop_timeout_ms);
    s->eof = s->closed_by_us = true;
    dotnet_session_close(s);
  }
  if (dotnet_session_busy(s) || s->end_logged || !s->rundown) return;
  s->end_logged = true;
  if (s->closed_by_us || dotnet_nt_state(s->nt) != DOTNET_NT_END) return;
  LOG(st, PP_LOG_INFO, "pid %u: rundown done in %llu ms after stop; %u code ranges known", t->pid,
      (unsigned long long)((s->ended_ns - s->stop_ns) / 1000000ull),
      dotnet_methods_count(t->methods));
}

static int dn_tick(void *state, uint64_t now) {
  struct dn_state *st = state;
  now = st->host->monotonic_ns(st->host);
  for (size_t i = 0; i < st->n; i++) {
    struct dn_target *t = &st->t[i];
    if ((t->state == T_PENDING || t->state == T_FAILED) && now >= t->next_try_ns)
      try_attach(st, t, now);
    if (t->state == T_ACTIVE && t->cur && t->cur->fd >= 0) {
      if (dotnet_session_pump(t->cur, PUMP_BYTES_PER_TICK) && !t->logged_eof) {
        t->logged_eof = true;
        LOG(st, PP_LOG_INFO, "pid %u: event stream ended (%s)", t->pid,
            dotnet_nt_state(t->cur->nt) == DOTNET_NT_ERROR ? dotnet_nt_error(t->cur->nt)
                                                           : "process exited?");
      }
    }
    if (t->state == T_ACTIVE) pump_stopped(st, t);
  }
  return 0;
}

/* Logs once per target how often the runtime really samples: .NET 10
 * ignores SampleProfilerIntervalMS and sweeps every ~1-3 ms (1 ms sleep
 * plus the sweep), which costs the target far more than the session
 * frequency asks for; DOTNET_EventPipeThreadSamplingRate in the target's
 * environment at startup does set it. */
static void log_sampler_rate(struct dn_state *st, struct dn_target *t,
                             const struct dotnet_session *s) {
  if (t->rate_logged || s->sampler_intervals < 50) return;
  t->rate_logged = true;
  double got_ms = (double)s->sampler_interval_ns / (double)s->sampler_intervals / 1e6;
  double asked_ms = (double)s->interval_ns / 1e6;
  if (got_ms < asked_ms / 2)
    LOG(st, PP_LOG_WARNING,
        "pid %u: the runtime samples every %.2f ms, not the %.1f ms asked (.NET %s ignores "
        "SampleProfilerIntervalMS): the target pays for that rate; start it with "
        "DOTNET_EventPipeThreadSamplingRate=%u to lower it",
        t->pid, got_ms, asked_ms, t->version[0] ? t->version : "?",
        (unsigned)(s->interval_ns / 1000000u));
  else
    LOG(st, PP_LOG_INFO, "pid %u: the runtime samples every %.2f ms (asked %.1f ms)", t->pid,
        got_ms, asked_ms);
}

/* Hands out what a session collected since its last drain and forgets it;
 * the session itself may still be streaming (late samples of a stopped
 * session go to the next snapshot). */
static void emit_session(struct dn_state *st, struct dn_target *t, struct dotnet_session *s,
                         struct pp_sink *sink) {
  const struct pp_host *h = st->host;
  struct pp_frame frames[512];
  size_t pos = 0;
  struct dotnet_agg_entry e;
  while (dotnet_agg_next(s->agg, &pos, &e)) {
    uint32_t n = e.nips < 512 ? e.nips : 512;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
      const char *name = dotnet_methods_lookup(t->methods, e.ips[i]);
      if (!name) {
        st->unknown_frames++;
        /* runs of unnamed frames (stubs, native transitions) fold into one */
        if (k > 0 && strcmp(frames[k - 1].name, "[unknown]") == 0) continue;
        name = "[unknown]";
      }
      frames[k++] = (struct pp_frame){.name = name, .kind = PP_FRAME_DOTNET};
    }
    if (k == 0)
      frames[k++] = (struct pp_frame){.name = "[no managed frames]", .kind = PP_FRAME_DOTNET};
    /* comm stays NULL: the process's comm, as for every runtime stack
     * (docs/formats.md); the thread is in tid */
    struct pp_sample smp = {.pid = t->pid,
                            .tid = t->nspid == t->pid ? e.tid : 0,
                            .frames = frames,
                            .nframes = k,
                            .count = e.count};
    h->emit(sink, &smp);
  }
  st->dropped += dotnet_agg_dropped(s->agg);
  if (s->eof && !s->end_counted && dotnet_nt_state(s->nt) != DOTNET_NT_END) {
    if (dotnet_nt_state(s->nt) == DOTNET_NT_ERROR) {
      st->parse_errors++;
      LOG(st, PP_LOG_WARNING, "pid %u: malformed event stream: %s", t->pid, dotnet_nt_error(s->nt));
    } else {
      st->truncated++;
    }
    s->end_counted = true;
  }
  log_sampler_rate(st, t, s);
  h->add_counter(sink, "samples", s->samples);
  h->add_counter(sink, "external_samples", s->external);
  h->add_counter(sink, "samples_without_stack", s->unknown_stack);
  h->add_counter(sink, "method_events", s->method_events);
  h->add_counter(sink, "stream_bytes", dotnet_session_undrained_bytes(s));
  h->add_counter(sink, "sampler_intervals", s->sampler_intervals);
  h->add_counter(sink, "sampler_interval_us", s->sampler_interval_ns / 1000u);
  dotnet_session_drained(s);
}

static void emit_target_facts(struct dn_state *st, struct dn_target *t, struct pp_sink *sink) {
  const struct pp_host *h = st->host;
  if (t->state == T_FAILED) {
    h->set_pid_status(sink, t->pid, PP_PID_ERROR, t->error);
    return;
  }
  if (t->appid[0]) h->set_appid(sink, t->pid, t->appid);
  if (t->version[0]) {
    char v[96], json[160];
    dotnet_json_string(t->version, v, sizeof(v));
    snprintf(json, sizeof(json), "{\"dotnet_version\": %s}", v);
    h->set_app_metadata(sink, t->pid, json);
  }
}

/* Ends a sampling period for one target without waiting on the runtime:
 * the next session starts, the previous one is asked to stop and its
 * samples so far are emitted now; what it still streams (its last buffers)
 * is cut at the rotation time and emitted at the next snapshot. If the
 * session stopped at the previous snapshot (or the attach rundown) is
 * still streaming, the live session is not rotated this time: its samples
 * are emitted and it keeps running. */
static void snapshot_trace_target(struct dn_state *st, struct dn_target *t, struct pp_sink *sink) {
  struct dotnet_session *prev = t->cur;
  dotnet_session_pump(prev, PUMP_BYTES_PER_TICK);
  pump_stopped(st, t);
  emit_session(st, t, t->old, sink); /* late samples of the previous period */
  if (dotnet_session_busy(t->old) || prev->fd < 0) {
    emit_session(st, t, prev, sink);
    return;
  }
  dotnet_session_reset(t->old);
  t->cur = t->old;
  t->old = prev;
  uint32_t hr = 0;
  int rc = dotnet_session_start(t->cur, t->sock, t->methods, DOTNET_SESSION_SAMPLING,
                                want_rundown(st, t, st->host->monotonic_ns(st->host)), &hr);
  if (rc < 0) {
    dotnet_session_reset(t->cur); /* fd -1: attached again after this snapshot */
    LOG(st, PP_LOG_INFO, "pid %u: cannot start the next session: %s", t->pid, strerror(-rc));
  }
  prev->cutoff_ts = dotnet_session_now_ts();
  if (dotnet_session_request_stop(prev, t->sock) < 0) {
    prev->eof = prev->closed_by_us = true;
    dotnet_session_close(prev);
  }
  emit_session(st, t, prev, sink);
}

static int dn_snapshot(void *state, struct pp_sink *sink) {
  struct dn_state *st = state;
  const struct pp_host *h = st->host;
  for (size_t i = 0; i < st->n;) {
    struct dn_target *t = &st->t[i];
    if (st->trace_mode && t->state == T_ACTIVE && t->cur && t->old)
      snapshot_trace_target(st, t, sink);
    bool alive = target_alive(st, t);
    if (alive || t->state == T_FAILED) emit_target_facts(st, t, sink);
    if (!alive) { /* exited: what it streamed is emitted above */
      if (t->state == T_ACTIVE && !t->logged_eof)
        LOG(st, PP_LOG_INFO, "pid %u: event stream ended (process exited)", t->pid);
      target_release(t);
      st->t[i] = st->t[--st->n];
      continue;
    }
    if (st->trace_mode && t->state == T_ACTIVE && t->cur && t->cur->fd < 0) {
      t->state = T_PENDING; /* stream broke but the process lives: attach again */
      t->first_try_ns = h->monotonic_ns(h);
    }
    i++;
  }
  uint64_t methods = 0;
  for (size_t i = 0; i < st->n; i++)
    if (st->t[i].methods) methods += dotnet_methods_count(st->t[i].methods);
  h->add_counter(sink, "known_methods", methods);
  h->add_counter(sink, "truncated_streams", st->truncated);
  h->add_counter(sink, "malformed_streams", st->parse_errors);
  h->add_counter(sink, "unknown_frames", st->unknown_frames);
  h->add_counter(sink, "dropped_stacks", st->dropped);
  st->truncated = st->parse_errors = st->unknown_frames = st->dropped = 0;
  return 0;
}

static int dn_stop(void *state) {
  struct dn_state *st = state;
  for (size_t i = 0; i < st->n; i++) {
    struct dn_target *t = &st->t[i];
    if (t->perfmap && target_alive(st, t)) {
      uint32_t hr = 0;
      int rc = dotnet_ipc_call(t->sock, DOTNET_IPC_SET_PROCESS, DOTNET_IPC_PROC_DISABLE_PERFMAP,
                               NULL, 0, NULL, 0, NULL, &hr, IPC_TIMEOUT_MS);
      if (rc < 0) LOG(st, PP_LOG_INFO, "pid %u: DisablePerfMap: %s", t->pid, strerror(-rc));
      t->perfmap = false;
    }
    /* stop politely and read until the runtime closes (it may block on a
     * full socket otherwise), a second at most */
    struct dotnet_session *ss[2] = {t->cur, t->old};
    for (int k = 0; k < 2; k++)
      if (ss[k] && ss[k]->fd >= 0 && !ss[k]->stopping &&
          dotnet_session_request_stop(ss[k], t->sock) < 0)
        dotnet_session_close(ss[k]);
    uint64_t deadline = st->host->monotonic_ns(st->host) + 1000000000ull;
    for (;;) {
      struct pollfd p[2];
      nfds_t np = 0;
      for (int k = 0; k < 2; k++)
        if (ss[k] && ss[k]->fd >= 0) p[np++] = (struct pollfd){.fd = ss[k]->fd, .events = POLLIN};
      if (np == 0 || st->host->monotonic_ns(st->host) >= deadline) break;
      poll(p, np, 50);
      for (int k = 0; k < 2; k++)
        if (ss[k]) dotnet_session_pump(ss[k], PUMP_BYTES_PER_TICK);
    }
    target_release(t);
  }
  st->n = 0;
  return 0;
}

static void dn_fini(void *state) {
  struct dn_state *st = state;
  if (!st) return;
  for (size_t i = 0; i < st->n; i++)
    target_release(&st->t[i]);
  free(st->t);
  free(st);
}

static const struct pp_plugin descriptor = {
    PP_PLUGIN_HEADER,
    .name = "dotnet",
    .version = "0.1.0",
    .description = ".NET (CoreCLR) managed stacks via EventPipe, or perf maps for perf",
    .capabilities = PP_CAP_RUNTIME | PP_CAP_PERFLESS | PP_CAP_NEEDS_PTRACE,
    .match_exe = NULL,
    .match_maps = match_maps,
    .options = options,
    .option_count = sizeof(options) / sizeof(options[0]),
    .init = dn_init,
    .start = dn_start,
    .add_targets = dn_add_targets,
    .tick = dn_tick,
    .snapshot = dn_snapshot,
    .stop = dn_stop,
    .fini = dn_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &descriptor;
}
