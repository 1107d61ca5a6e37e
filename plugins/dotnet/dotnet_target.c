/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One .NET process as the target table holds it: attach (find its
 * diagnostic socket, check the runtime, start the EventPipe session or
 * enable its perf map), release (every socket and session closed), and
 * what happens to it at each tick, snapshot and stop.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dotnet.h"

#define PUMP_BYTES_PER_TICK (8u << 20)

/* What the table holds per process, beyond struct dotnet_target. */
struct dn_target {
  struct dotnet_target t;
  bool broken; /* the stream broke, the process lives: attach again */
  bool exited; /* the stream ended with the process: sockets closed */
};

static bool timed_out(const struct dotnet_state *st, const struct pp_target_entry *e) {
  return e->attempts >= st->socket_attempts;
}

/* Reads the runtime version and checks that the socket belongs to pid. */
static int query_info(struct dotnet_state *st, struct pp_target_entry *e, struct dotnet_target *t) {
  static uint8_t reply[DOTNET_IPC_MAX_PAYLOAD];
  size_t len = 0;
  uint32_t hr = 0;
  int rc = dotnet_ipc_call(t->pid, t->sock, DOTNET_IPC_SET_PROCESS, DOTNET_IPC_PROC_INFO2, NULL, 0,
                           reply, sizeof(reply), &len, &hr, DOTNET_IPC_TIMEOUT_MS);
  if (rc == -EPROTO) return 0; /* older runtime: no version, still usable */
  if (rc < 0) return rc;
  struct dotnet_proc_info info;
  if (dotnet_ipc_parse_info2(reply, len, &info) < 0) return -EBADMSG;
  if (info.pid != t->nspid) {
    snprintf(e->reason, sizeof(e->reason), "diagnostic socket %.100s answers for pid %llu", t->sock,
             (unsigned long long)info.pid);
    PP_WARNING(st->host, "pid %u: %s, ignoring it", t->pid, e->reason);
    return PP_ATTACH_FAIL;
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
static bool want_rundown(struct dotnet_state *st, struct dotnet_target *t, uint64_t now) {
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
static void start_attach_rundown(struct dotnet_state *st, struct dotnet_target *t, uint64_t now) {
  if (!st->cfg.rundown || dotnet_session_busy(t->old)) return;
  uint32_t hr = 0;
  int rc =
      dotnet_session_start(t->old, t->sock, t->methods, DOTNET_SESSION_RUNDOWN_ONLY, true, &hr);
  if (rc == 0) rc = dotnet_session_request_stop(t->old, t->sock);
  if (rc < 0) {
    PP_INFO(st->host, "pid %u: no rundown (%s): code compiled before attach stays unnamed", t->pid,
            rc == -EPROTO ? "refused" : strerror(-rc));
    dotnet_session_reset(t->old);
    return;
  }
  t->last_rundown_ns = now;
  t->rundown_resets = dotnet_methods_resets(t->methods);
}

/* The rotating sessions sample themselves, or in burst mode only carry
 * the live method events (dotnet_bursts.c samples). */
static enum dotnet_session_kind session_kind(const struct dotnet_state *st) {
  return st->cfg.bursts ? DOTNET_SESSION_METHODS : DOTNET_SESSION_SAMPLING;
}

static int start_tracing(struct dotnet_state *st, struct pp_target_entry *e,
                         struct dotnet_target *t) {
  bool thread_ids = t->nspid == t->pid;
  t->methods = dotnet_methods_new(st->max_methods, 32u << 20);
  t->cur = dotnet_session_new(&st->cfg, t->pid, thread_ids);
  t->old = dotnet_session_new(&st->cfg, t->pid, thread_ids);
  if (!t->methods || !t->cur || !t->old) {
    snprintf(e->reason, sizeof(e->reason), "session setup: %s", strerror(ENOMEM));
    return -ENOMEM;
  }
  bool unreliable = dotnet_sample_type_unreliable(t->version);
  if (st->cfg.bursts) {
    t->bursts = dotnet_bursts_new(&st->cfg, t->pid, thread_ids, unreliable);
    if (!t->bursts) {
      snprintf(e->reason, sizeof(e->reason), "session setup: %s", strerror(ENOMEM));
      return -ENOMEM;
    }
    t->rate_logged = true; /* the bursts report their own rate */
  }
  if (unreliable) {
    t->cur->type_unreliable = t->old->type_unreliable = true;
    PP_INFO(st->host,
            "pid %u: .NET %s marks every sample External: running threads are told by their "
            "schedstat",
            t->pid, t->version);
  }
  uint32_t hr = 0;
  int rc = dotnet_session_start(t->cur, t->sock, t->methods, session_kind(st), false, &hr);
  if (rc < 0) {
    if (rc == -EPROTO)
      snprintf(e->reason, sizeof(e->reason), "EventPipe session refused (hresult 0x%08x)", hr);
    else
      snprintf(e->reason, sizeof(e->reason), "EventPipe session failed: %s", strerror(-rc));
    /* logged once per target at warning, then at debug */
    PP_LOG(st->host, e->attempts > 1 ? PP_LOG_DEBUG : PP_LOG_WARNING, "pid %u: %s", t->pid,
           e->reason);
    return rc == -ESRCH ? -EIO : rc;
  }
  PP_INFO(st->host, "pid %u: EventPipe session %llx started (.NET %s), sampling %s", t->pid,
          (unsigned long long)t->cur->id, t->version[0] ? t->version : "unknown",
          st->cfg.bursts ? "in bursts" : "continuously");
  /* after the sampling session, so code compiled in between is named by
   * the sampling session's live events */
  start_attach_rundown(st, t, pp_clock_ns());
  return 0;
}

/* A process that exec'd into something else keeps its pid and start time:
 * only its maps say whether the runtime is still there. */
static int maps_coreclr(uint32_t pid) {
  struct pp_map *maps = NULL;
  size_t n = 0;
  int rc = pp_maps_read(pid, 0, 0, &maps, &n);
  if (rc < 0) return rc == -ENOENT ? -ESRCH : rc;
  int found = 0;
  for (size_t i = 0; i < n && !found; i++) {
    const char *slash = maps[i].path ? strrchr(maps[i].path, '/') : NULL;
    found = slash && strncmp(slash + 1, "libcoreclr.so", 13) == 0;
  }
  pp_maps_free(maps, n);
  return found;
}

/* The table's attach(): a negative errno is retried with backoff (a young
 * runtime creates its socket a little after libcoreclr is mapped; a runtime
 * may refuse a session for a while and recover). A socket that is not
 * there yet leaves no status until attach_timeout_s is over. */
static int dn_attach(void *plugin, struct pp_target_entry *e) {
  struct dotnet_state *st = plugin;
  int rc = maps_coreclr(e->pid);
  if (rc < 0) return rc;
  if (rc == 0) return PP_ATTACH_IGNORE; /* not (or no longer) a .NET process */
  /* a .NET process, not to be sampled: said before its socket is touched */
  if (st->perfless_skip) {
    snprintf(e->reason, sizeof(e->reason),
             "no perf to sample .NET with; EventPipe sampling suspends the target "
             "(dotnet.perfless: bursts accepts that)");
    return PP_ATTACH_SKIP;
  }
  struct dn_target *d = calloc(1, sizeof(*d));
  if (!d) return -ENOMEM;
  e->data = d;
  struct dotnet_target *t = &d->t;
  t->pid = t->nspid = e->pid;
  if (pp_proc_ns_pid(e->pid, &t->nspid) < 0) t->nspid = e->pid;
  char why[sizeof(e->reason)];
  rc = dotnet_ipc_find_socket(e->pid, t->nspid, e->start_time, t->sock, sizeof(t->sock), why,
                              sizeof(why));
  if (rc == -ESRCH) return rc;
  if (rc == -ENOENT || rc == -ECONNREFUSED || rc == -ECONNRESET || rc == -EAGAIN) {
    /* not there yet, or a stale socket of an earlier process */
    if (!timed_out(st, e)) return rc;
    if (rc == -ENOENT)
      snprintf(e->reason, sizeof(e->reason),
               "no diagnostic socket (DOTNET_EnableDiagnostics=0 or unknown TMPDIR?)");
    else
      snprintf(e->reason, sizeof(e->reason), "diagnostic IPC failed: %s", strerror(-rc));
    PP_WARNING(st->host, "pid %u: %s", e->pid, e->reason);
    return PP_ATTACH_FAIL;
  }
  if (rc < 0) { /* refused by the kit: a link, a FIFO, a socket of another user... */
    snprintf(e->reason, sizeof(e->reason), "%s", why[0] ? why : "diagnostic socket path too long");
    PP_WARNING(st->host, "pid %u: diagnostic socket refused: %s", e->pid, e->reason);
    return PP_ATTACH_SKIP;
  }
  rc = query_info(st, e, t);
  if (rc == PP_ATTACH_FAIL) return rc;
  if (rc < 0) {
    if ((rc == -ECONNREFUSED || rc == -ECONNRESET) && !timed_out(st, e)) return rc;
    snprintf(e->reason, sizeof(e->reason), "diagnostic IPC failed: %s", strerror(-rc));
    PP_LOG(st->host, e->attempts > 1 ? PP_LOG_DEBUG : PP_LOG_WARNING, "pid %u: %s", e->pid,
           e->reason);
    return rc == -ESRCH ? -EIO : rc;
  }
  dotnet_appid(e->pid, t->appid, sizeof(t->appid));
  if (st->perfmap_mode) return dotnet_perfmap_enable(st, e, t);
  return start_tracing(st, e, t);
}

/* The table's release(): the target is gone, exec'd, stopped or refused;
 * its sockets are closed here, at once. */
static void dn_release(void *plugin, struct pp_target_entry *e) {
  (void)plugin;
  struct dn_target *d = e->data;
  if (!d) return;
  dotnet_mapfiles_release(d->t.mapfiles);
  dotnet_session_free(d->t.cur);
  dotnet_session_free(d->t.old);
  dotnet_bursts_free(d->t.bursts);
  dotnet_methods_free(d->t.methods);
  free(d);
  e->data = NULL;
}

const struct pp_target_ops dotnet_target_ops = {dn_attach, dn_release};

/* Reads a stopped session (or the attach rundown) that is still streaming;
 * closes it at its deadline, so a runtime that never ends it costs nothing
 * but that session's last samples or names. */
static void pump_stopped(struct dotnet_state *st, struct dotnet_target *t) {
  struct dotnet_session *s = t->old;
  if (!s || !dotnet_session_busy(s)) return;
  dotnet_session_pump(s, PUMP_BYTES_PER_TICK);
  if (dotnet_session_busy(s) && pp_clock_ns() >= s->stop_deadline_ns) {
    PP_WARNING(st->host, "pid %u: stopped session %s not finished after %u ms; closing it", t->pid,
               s->rundown ? "(rundown)" : "", st->cfg.stop_timeout_ms);
    s->eof = s->closed_by_us = true;
    dotnet_session_close(s);
  }
  if (dotnet_session_busy(s) || s->end_logged || !s->rundown) return;
  s->end_logged = true;
  if (s->closed_by_us || dotnet_nt_state(s->nt) != DOTNET_NT_END) return;
  PP_INFO(st->host, "pid %u: rundown done in %llu ms after stop; %u code ranges known", t->pid,
          (unsigned long long)((s->ended_ns - s->stop_ns) / 1000000ull),
          dotnet_methods_count(t->methods));
}

void dotnet_targets_pump(struct dotnet_state *st) {
  dotnet_mapfiles_sweep(st, false);
  if (!st->targets) return;
  pp_target_table_poll(st->targets, pp_clock_ns());
  struct pp_target_entry *e;
  PP_TARGETS_FOREACH(st->targets, e, PP_TARGET_ATTACHED) {
    struct dn_target *d = e->data;
    struct dotnet_target *t = &d->t;
    if (d->broken) {
      pp_target_table_reattach(st->targets, e);
      continue;
    }
    if (d->exited) continue;
    if (t->perfmap) dotnet_perfmap_report(st, t, NULL, false);
    if (t->cur && t->cur->fd >= 0 && dotnet_session_pump(t->cur, PUMP_BYTES_PER_TICK) &&
        !t->logged_eof) {
      t->logged_eof = true;
      bool gone = !pp_proc_same_process(e->pid, e->start_time);
      PP_INFO(st->host, "pid %u: event stream ended (%s)", t->pid,
              dotnet_nt_state(t->cur->nt) == DOTNET_NT_ERROR ? dotnet_nt_error(t->cur->nt)
              : gone                                         ? "process exited"
                                                             : "process exited?");
      if (gone) {
        /* nothing is held for a dead process: its samples so far wait for
         * the snapshot, its sockets do not */
        d->exited = true;
        dotnet_session_pump(t->old, PUMP_BYTES_PER_TICK);
        dotnet_session_close(t->cur);
        dotnet_session_close(t->old);
        if (t->bursts) {
          dotnet_session_pump(dotnet_bursts_session(t->bursts), PUMP_BYTES_PER_TICK);
          dotnet_bursts_close(t->bursts);
        }
        continue;
      }
    }
    pump_stopped(st, t);
    /* not while the attach rundown streams: the runtime answers no IPC
     * command until it is written */
    if (t->bursts && t->cur && t->cur->fd >= 0 && !(t->old->rundown && dotnet_session_busy(t->old)))
      dotnet_bursts_tick(t->bursts, st->host, t->sock, t->methods, pp_clock_ns());
  }
}

/* Logs once per target how often the runtime really samples: .NET 10
 * ignores SampleProfilerIntervalMS and sweeps every ~1-3 ms (1 ms sleep
 * plus the sweep), which costs the target far more than the session
 * frequency asks for; DOTNET_EventPipeThreadSamplingRate in the target's
 * environment at startup does set it. */
static void log_sampler_rate(struct dotnet_state *st, struct dotnet_target *t,
                             const struct dotnet_session *s) {
  if (t->rate_logged || s->sampler_intervals < 50) return;
  t->rate_logged = true;
  double got_ms = (double)s->sampler_interval_ns / (double)s->sampler_intervals / 1e6;
  double asked_ms = (double)s->interval_ns / 1e6;
  if (got_ms < asked_ms / 2)
    PP_WARNING(st->host,
               "pid %u: the runtime samples every %.2f ms, not the %.1f ms asked (.NET %s ignores "
               "SampleProfilerIntervalMS): the target pays for that rate; start it with "
               "DOTNET_EventPipeThreadSamplingRate=%u to lower it",
               t->pid, got_ms, asked_ms, t->version[0] ? t->version : "?",
               (unsigned)(s->interval_ns / 1000000u));
  else
    PP_INFO(st->host, "pid %u: the runtime samples every %.2f ms (asked %.1f ms)", t->pid, got_ms,
            asked_ms);
}

/* Hands out what a session collected since its last drain and forgets it;
 * the session itself may still be streaming (late samples of a stopped
 * session go to the next snapshot). */
static void emit_session(struct dotnet_state *st, struct dotnet_target *t, struct dotnet_session *s,
                         struct pp_sink *sink) {
  const struct pp_host *h = st->host;
  dotnet_stacks_emit(s->stacks, t->methods, h, sink, &st->unknown_frames);
  if (s->eof && !s->end_counted && dotnet_nt_state(s->nt) != DOTNET_NT_END) {
    if (dotnet_nt_state(s->nt) == DOTNET_NT_ERROR) {
      st->parse_errors++;
      PP_WARNING(h, "pid %u: malformed event stream: %s", t->pid, dotnet_nt_error(s->nt));
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
  h->add_counter(sink, "r2r_entry_points", s->r2r_entries);
  h->add_counter(sink, "thread_cpu_looks", s->cpu_looks);
  h->add_counter(sink, "stream_bytes", dotnet_session_undrained_bytes(s));
  h->add_counter(sink, "sampler_intervals", s->sampler_intervals);
  h->add_counter(sink, "sampler_interval_us", s->sampler_interval_ns / 1000u);
  dotnet_session_drained(s);
}

/* Its appid, its runtime version and the mode it is profiled in (with
 * mode auto, why: the profile says which way its frames were taken). */
static void emit_target_facts(struct dotnet_state *st, struct dotnet_target *t,
                              struct pp_sink *sink) {
  const struct pp_host *h = st->host;
  if (t->appid[0]) h->set_appid(sink, t->pid, t->appid);
  char v[96], mode[64], why[sizeof(st->mode_reason) * 2], json[sizeof(why) + 256];
  pp_json_string(v, sizeof(v), t->version);
  pp_json_string(mode, sizeof(mode), st->mode_name ? st->mode_name : "?");
  pp_json_string(why, sizeof(why), st->mode_reason);
  int n = snprintf(json, sizeof(json), "{\"dotnet_mode\": %s", mode);
  if (t->version[0] && n > 0 && (size_t)n < sizeof(json))
    n += snprintf(json + n, sizeof(json) - (size_t)n, ", \"dotnet_version\": %s", v);
  if (st->auto_mode && n > 0 && (size_t)n < sizeof(json))
    n += snprintf(json + n, sizeof(json) - (size_t)n, ", \"dotnet_mode_reason\": %s", why);
  if (n > 0 && (size_t)n < sizeof(json) - 1) {
    snprintf(json + n, sizeof(json) - (size_t)n, "}");
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
static void snapshot_trace_target(struct dotnet_state *st, struct dotnet_target *t,
                                  struct pp_sink *sink) {
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
  int rc = dotnet_session_start(t->cur, t->sock, t->methods, session_kind(st),
                                want_rundown(st, t, pp_clock_ns()), &hr);
  if (rc < 0) {
    dotnet_session_reset(t->cur); /* fd -1: attached again after this snapshot */
    PP_INFO(st->host, "pid %u: cannot start the next session: %s", t->pid, strerror(-rc));
  }
  prev->cutoff_ts = pp_clock_ns();
  if (dotnet_session_request_stop(prev, t->sock) < 0) {
    prev->eof = prev->closed_by_us = true;
    dotnet_session_close(prev);
  }
  emit_session(st, t, prev, sink);
}

void dotnet_targets_snapshot(struct dotnet_state *st, struct pp_sink *sink) {
  const struct pp_host *h = st->host;
  if (!st->targets) return;
  uint64_t methods = 0;
  struct pp_target_entry *e;
  PP_TARGETS_FOREACH(st->targets, e, PP_TARGET_ATTACHED) {
    struct dn_target *d = e->data;
    struct dotnet_target *t = &d->t;
    if (st->trace_mode && t->cur && t->old) {
      if (t->bursts) {
        emit_session(st, t, dotnet_bursts_session(t->bursts), sink);
        dotnet_bursts_report(t->bursts, h, sink, t->version);
      }
      if (d->exited) { /* what it streamed before it exited */
        emit_session(st, t, t->old, sink);
        emit_session(st, t, t->cur, sink);
      } else {
        snapshot_trace_target(st, t, sink);
        /* the stream broke but the process lives: attached again at the
         * next tick */
        if (t->cur->fd < 0) d->broken = true;
      }
    }
    if (st->perfmap_mode) {
      dotnet_perfmap_report(st, t, sink, !pp_proc_same_process(e->pid, e->start_time));
      dotnet_mapfiles_note(st, t->mapfiles);
    }
    emit_target_facts(st, t, sink);
    if (t->methods) methods += dotnet_methods_count(t->methods);
  }
  /* exited targets are released here, after their last samples went out;
   * failed and skipped ones get their status */
  pp_target_table_report(st->targets, sink);
  h->add_counter(sink, "known_methods", methods);
  h->add_counter(sink, "truncated_streams", st->truncated);
  h->add_counter(sink, "malformed_streams", st->parse_errors);
  h->add_counter(sink, "unknown_frames", st->unknown_frames);
  st->truncated = st->parse_errors = st->unknown_frames = 0;
}

void dotnet_targets_stop(struct dotnet_state *st) {
  if (!st->targets) return;
  struct pp_target_entry *e;
  PP_TARGETS_FOREACH(st->targets, e, PP_TARGET_ATTACHED) {
    struct dn_target *d = e->data;
    struct dotnet_target *t = &d->t;
    if (d->exited) continue;
    if (t->perfmap && pp_proc_same_process(e->pid, e->start_time)) dotnet_perfmap_disable(st, t);
    /* stop politely and read until the runtime closes (it may block on a
     * full socket otherwise), a second at most */
    if (t->bursts) dotnet_bursts_stop(t->bursts, t->sock);
    struct dotnet_session *ss[3] = {t->cur, t->old,
                                    t->bursts ? dotnet_bursts_session(t->bursts) : NULL};
    for (int k = 0; k < 3; k++)
      if (ss[k] && ss[k]->fd >= 0 && !ss[k]->stopping &&
          dotnet_session_request_stop(ss[k], t->sock) < 0)
        dotnet_session_close(ss[k]);
    uint64_t deadline = pp_clock_ns() + 1000000000ull;
    for (;;) {
      struct pollfd p[3];
      nfds_t np = 0;
      for (int k = 0; k < 3; k++)
        if (ss[k] && ss[k]->fd >= 0) p[np++] = (struct pollfd){.fd = ss[k]->fd, .events = POLLIN};
      if (np == 0 || pp_clock_ns() >= deadline) break;
      poll(p, np, 50);
      for (int k = 0; k < 3; k++)
        if (ss[k]) dotnet_session_pump(ss[k], PUMP_BYTES_PER_TICK);
    }
  }
}
