/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One JVM's life in the plugin, as the kit's target table drives it.
 *
 * attach(): the /proc checks (never signal what is not a running HotSpot
 * JVM), `properties` (wakes the attach listener, says which VM), the
 * metadata, then the agent: copied into the JVM's /tmp if needed and armed
 * with `load ... start`. It only does that from tick(), one JVM per tick:
 * called from add_targets() (or when this tick already talked to a JVM, or
 * the JVM is younger than min_age_ms) it says "not yet" without counting an
 * attempt, so the table's retry limit and backoff measure the JVM, not our
 * pacing. A JVM still starting up (no Signal Dispatcher yet) is a retry
 * with its reason; what cannot be profiled is a skip or a failure with its
 * reason, reported by the table at every snapshot.
 *
 * The agent is stopped (dormant) at stop() and re-armed by tick() in the
 * next session; a JVM whose dumps keep failing is re-armed too, and if
 * arming fails the table attaches it again from scratch, which names why.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "java.h"
#include "polyprof/kit/cap_step.h"

struct java_jvm {
  struct java_target_info ti;
  char agent_path[512];  /* as the JVM sees it */
  char *metadata;        /* JSON object text */
  int perfmap;           /* attached for perfmap mode */
  int perfmap_copied;    /* a copy of its perf map is in the host's /tmp */
  int armed;             /* the agent samples for this session */
  int failures;          /* dumps failed in a row */
  uint64_t last_dump_ns; /* pp_clock_ns of the last dump (or of arming) */
  char *early;           /* dumps taken from tick() since the last snapshot */
  size_t early_len;
  int exit_dir;       /* the JVM's /tmp, held from arming: where its exit dump lands (-1) */
  char exit_name[96]; /* the exit dump's name in it ("" none) */
};

#define MAX_DUMP_FAILURES 3
/* A young JVM's stacks are taken every EARLY_DUMP_NS while it is younger
 * than EARLY_AGE_MS, not only at the snapshot: the agent keeps them inside
 * the JVM, so a JVM that exits before the snapshot (javac, a build step, a
 * CLI tool) would otherwise lose every sample; now it loses at most the
 * last EARLY_DUMP_NS. Older JVMs are dumped at snapshots only (one attach
 * operation per JVM per session). EARLY_MAX_BYTES bounds what one JVM
 * holds between snapshots. */
#define EARLY_DUMP_NS 1000000000ull
#define EARLY_AGE_MS 120000.0
#define EARLY_MAX_BYTES (8u << 20)
/* A process this old without a Signal Dispatcher thread is not a JVM
 * starting up: skipped instead of retried. */
#define STARTUP_MS 30000.0

static unsigned watchdog_s(const struct java_state *st) {
  return st->duration_s * 3 + 60;
}

static int attach_ms(const struct java_state *st) {
  return (int)st->attach_timeout_s * 1000;
}

/* One attach operation; returns the reply body (malloc'd) or NULL with err. */
static char *op(struct java_state *st, struct java_jvm *j, int allow_signal, const char *cmd,
                const char *a0, const char *a1, const char *a2, int *status, char *err,
                size_t errlen) {
  struct java_attach_reply r;
  int rc = java_attach(&j->ti, allow_signal, attach_ms(st), cmd, a0, a1, a2, &r, err, errlen);
  if (rc != 0) return NULL;
  *status = r.status;
  return r.body;
}

static int skip(struct java_state *st, struct pp_target_entry *t, const char *why) {
  snprintf(t->reason, sizeof(t->reason), "%s", why);
  PP_INFO(st->host, "pid %u: profiling skipped: %s", t->pid, why);
  return PP_ATTACH_SKIP;
}

static int fail(struct java_state *st, struct pp_target_entry *t, const char *why) {
  snprintf(t->reason, sizeof(t->reason), "%s", why);
  PP_WARNING(st->host, "pid %u: attach failed: %s", t->pid, why);
  return PP_ATTACH_FAIL;
}

/* Starts the agent for this session: 0, or PP_ATTACH_SKIP (the agent
 * refused this JVM), PP_ATTACH_FAIL, -ESRCH, with err. */
static int arm(struct java_state *st, struct pp_target_entry *t, struct java_jvm *j, char *err,
               size_t errlen) {
  if (!j->agent_path[0]) {
    /* the copy into a JVM's /tmp that only its user may write is the step
     * that needs CAP_DAC_OVERRIDE */
    struct pp_cap_step dac;
    pp_cap_step_begin(&dac, PP_CAP_NEEDS_FILE_OVERRIDE);
    int rc = java_agent_target_path(st->agent_host, &j->ti, j->agent_path, sizeof(j->agent_path),
                                    err, errlen);
    pp_cap_step_end(&dac);
    if (rc != 0) return PP_ATTACH_FAIL;
  }
  char args[1024], result[96], why[256];
  java_result_name(j->ti.nspid, result, sizeof(result));
  /* the JVM's /tmp stays open while it is armed, so what the agent writes
   * there when the JVM ends can be read after the process (and, in a
   * container, its mount namespace) is gone */
  if (j->exit_dir < 0) j->exit_dir = java_open_target_tmp(t->pid, NULL, 0);
  j->exit_name[0] = '\0';
  if (j->exit_dir >= 0) java_result_name(j->ti.nspid, j->exit_name, sizeof(j->exit_name));
  snprintf(args, sizeof(args),
           "start,interval=%llu,depth=%lld,maxmem=%lld,alloc=%lld%s%s,file=/tmp/%s%s%s",
           1000000000ull / st->frequency, (long long)st->max_depth, (long long)st->max_memory_mb,
           (long long)st->alloc, st->wall ? ",wall" : "", st->offcpu ? ",offcpu" : "", result,
           j->exit_name[0] ? ",exit=/tmp/" : "", j->exit_name);
  struct java_attach_reply r;
  st->tick_busy = 1;
  int rc = java_attach(&j->ti, 0, attach_ms(st) * 2, "load", j->agent_path, "true", args, &r, err,
                       errlen);
  size_t len = 0;
  /* only read for the agent's own error line: a refused file is no error */
  char *text = java_read_result(t->pid, result, 1u << 20, &len, why, sizeof(why));
  int arc = -1, out;
  if (rc == 0 && java_load_result(&r, &arc, err, errlen) == 0) {
    j->armed = 1;
    j->failures = 0;
    j->last_dump_ns = pp_clock_ns();
    PP_INFO(st->host, "pid %u: agent armed (%s)", t->pid, j->agent_path);
    out = 0;
  } else if (rc == 0 && text && java_collect_error(text, err, errlen)) {
    out = PP_ATTACH_SKIP; /* the agent refused this JVM (unsupported layout, SIGPROF taken...) */
  } else {
    out = java_target_alive(t->pid, t->start_time) ? PP_ATTACH_FAIL : -ESRCH;
  }
  if (rc == 0) java_attach_reply_free(&r);
  free(text);
  return out;
}

int java_jvm_attach(void *plugin, struct pp_target_entry *t) {
  struct java_state *st = plugin;
  if (!st->in_tick || st->tick_busy || java_target_age_ms(t->start_time) < (double)st->min_age_ms) {
    /* our pacing, not the JVM's answer: not an attempt */
    t->attempts--;
    return -EAGAIN;
  }
  struct java_jvm *j = calloc(1, sizeof(*j));
  if (!j) return -ENOMEM;
  j->exit_dir = -1;
  t->data = j;
  if (java_target_inspect(t->pid, t->start_time, &j->ti) != 0) return -ESRCH;
  if (!j->ti.has_libjvm) return PP_ATTACH_IGNORE;
  int sock = java_socket_exists(t->pid, j->ti.nspid);
  const char *refusal = java_target_refusal(&j->ti, sock);
  if (refusal) {
    if (!j->ti.signal_dispatcher && !j->ti.xrs && !j->ti.openj9 && !j->ti.attach_disabled &&
        java_target_age_ms(t->start_time) < STARTUP_MS) {
      /* a JVM still starting gets its Signal Dispatcher within a fraction
       * of a second: looked at again at every tick (-EINPROGRESS, not an
       * attempt, so no backoff: doubling waits put the arming of a short
       * JVM most of a second after its start). STARTUP_MS bounds it. */
      snprintf(t->reason, sizeof(t->reason), "%s", refusal);
      if (t->last_error != -EINPROGRESS)
        PP_INFO(st->host, "pid %u: profiling skipped: %s", t->pid, refusal);
      t->attempts--;
      return -EINPROGRESS;
    }
    return skip(st, t, refusal);
  }
  /* properties first: it wakes the attach listener and tells us what VM this is */
  char err[512] = "";
  int status = -1;
  st->tick_busy = 1;
  uint64_t t0 = pp_clock_ns();
  char *props = op(st, j, 1, "properties", NULL, NULL, NULL, &status, err, sizeof(err));
  uint64_t t_props = pp_clock_ns();
  if (!props || status != 0) {
    free(props);
    if (!java_target_alive(t->pid, t->start_time)) return -ESRCH;
    if (props) snprintf(err, sizeof(err), "properties failed (status %d)", status);
    return fail(st, t, err);
  }
  char vmname[128];
  java_property(props, "java.vm.name", vmname, sizeof(vmname));
  int major = java_major_version(props);
  if (strstr(vmname, "OpenJ9") || strstr(vmname, "J9") ||
      (!strstr(vmname, "HotSpot") && !strstr(vmname, "OpenJDK") && !strstr(vmname, "GraalVM")))
    snprintf(err, sizeof(err), "unsupported JVM '%s'", vmname);
  else if (major < 8)
    snprintf(err, sizeof(err), "Java %d is too old (8 or newer needed)", major);
  else if (st->perfmap && major < 17)
    snprintf(err, sizeof(err), "perfmap mode needs JDK 17+ (Compiler.perfmap), this is %d", major);
  if (err[0]) {
    free(props);
    return skip(st, t, err);
  }
  if (st->perfmap) {
    j->perfmap = 1;
  } else {
    /* armed before the metadata is asked for: a short JVM's samples
     * start one round trip sooner */
    int rc = arm(st, t, j, err, sizeof(err));
    if (rc != 0) free(props);
    if (rc == PP_ATTACH_SKIP) return skip(st, t, err);
    if (rc == PP_ATTACH_FAIL) return fail(st, t, err);
    if (rc != 0) return rc;
    /* where a young JVM's time to armed goes */
    PP_DEBUG(st->host, "pid %u: %.0f ms old, properties %.0f ms, agent load %.0f ms", t->pid,
             java_target_age_ms(t->start_time), (double)(t_props - t0) / 1e6,
             (double)(pp_clock_ns() - t_props) / 1e6);
  }
  if (st->collect_metadata) {
    char *flags = op(st, j, 0, "jcmd", "VM.flags", NULL, NULL, &status, err, sizeof(err));
    j->metadata = java_metadata_json(props, flags && status == 0 ? flags : NULL);
    free(flags);
  }
  free(props);
  return 0;
}

/* Adds a dump's text to what the JVM keeps for the snapshot (takes text). */
static void keep_early(struct java_state *st, struct java_jvm *j, char *text, size_t len) {
  char *g =
      j->early_len + len <= EARLY_MAX_BYTES ? realloc(j->early, j->early_len + len + 1) : NULL;
  if (!g) {
    st->early_dropped++;
    free(text);
    return;
  }
  memcpy(g + j->early_len, text, len);
  j->early_len += len;
  g[j->early_len] = '\0';
  j->early = g;
  free(text);
}

/* The JVM has ended: gone, or a zombie its parent has not reaped yet (its
 * VMDeath has run, and no attach can reach it any more). */
static bool jvm_ended(const struct pp_target_entry *t) {
  if (!java_target_alive(t->pid, t->start_time)) return true;
  char state = 0;
  return pp_proc_state(t->pid, 0, &state) == 0 && (state == 'Z' || state == 'X');
}

/* A JVM that ended: what its agent dumped then, if anything, joins its
 * early dumps. Its /tmp is let go either way. */
static void take_exit_dump(struct java_state *st, struct pp_target_entry *t, struct java_jvm *j) {
  if (j->exit_dir < 0) return;
  if (j->exit_name[0] && jvm_ended(t)) {
    size_t len = 0;
    char *text = java_read_exit_dump(j->exit_dir, j->exit_name, j->ti.uid,
                                     EARLY_MAX_BYTES - j->early_len, &len);
    if (text) {
      st->exit_dumps++;
      keep_early(st, j, text, len);
    }
  }
  close(j->exit_dir);
  j->exit_dir = -1;
  j->exit_name[0] = '\0';
}

void java_jvm_release(void *plugin, struct pp_target_entry *t) {
  struct java_state *st = plugin;
  struct java_jvm *j = t->data;
  if (!j) return;
  /* nothing of a JVM's stays after it */
  if (j->perfmap_copied) java_unpublish_perfmap(st->host->scratch_dir(st->host), t->pid);
  take_exit_dump(st, t, j);
  free(j->metadata);
  if (j->early) { /* an exited JVM's last stacks: the snapshot emits them */
    if (st->ngone < sizeof(st->gone) / sizeof(st->gone[0])) {
      st->gone[st->ngone++] = (struct java_exited_dump){t->pid, j->early, j->early_len};
      j->early = NULL;
    } else {
      st->early_dropped++;
    }
  }
  free(j->early);
  free(j);
  t->data = NULL;
}

void java_jvm_rearm_one(struct java_state *st) {
  struct pp_target_entry *t;
  PP_TARGETS_FOREACH(st->targets, t, PP_TARGET_ATTACHED) {
    struct java_jvm *j = t->data;
    if (j->perfmap != st->perfmap) {
      /* the mode changed between sessions: look at it anew */
      pp_target_table_reattach(st->targets, t);
      return;
    }
    if (st->perfmap || j->armed) continue;
    char err[512] = "";
    int rc = arm(st, t, j, err, sizeof(err));
    if (rc == -ESRCH) {
      pp_target_table_gone(st->targets, t);
    } else if (rc != 0) {
      PP_DEBUG(st->host, "pid %u: re-arming failed (%s): attaching again", t->pid, err);
      pp_target_table_reattach(st->targets, t);
    }
    return;
  }
}

/* The agent's stacks since the last dump, written by the agent into the
 * JVM's /tmp and read back: the text (malloc'd) or NULL with err. */
static char *dump(struct java_state *st, struct pp_target_entry *t, struct java_jvm *j, size_t *len,
                  char *err, size_t errlen) {
  char result[96], args[256], why[256] = "";
  java_result_name(j->ti.nspid, result, sizeof(result));
  snprintf(args, sizeof(args), "dump,timeout=%u,file=/tmp/%s", watchdog_s(st), result);
  struct java_attach_reply r;
  int rc =
      java_attach(&j->ti, 0, attach_ms(st), "load", j->agent_path, "true", args, &r, err, errlen);
  int arc = -1;
  *len = 0;
  char *text = java_read_result(t->pid, result, 64u << 20, len, why, sizeof(why));
  int ok = rc == 0 && java_load_result(&r, &arc, err, errlen) == 0 && text;
  if (rc == 0) java_attach_reply_free(&r);
  j->last_dump_ns = pp_clock_ns();
  if (ok) return text;
  free(text);
  if (!err[0]) snprintf(err, errlen, "no dump: %s", why[0] ? why : "no file");
  return NULL;
}

/* From tick(), when it has talked to no JVM yet: one young JVM whose last
 * dump is EARLY_DUMP_NS old is dumped now and the text kept for the
 * snapshot. */
static void early_dump_one(struct java_state *st) {
  uint64_t now = pp_clock_ns();
  struct pp_target_entry *t;
  PP_TARGETS_FOREACH(st->targets, t, PP_TARGET_ATTACHED) {
    struct java_jvm *j = t->data;
    if (st->perfmap || !j->armed || now - j->last_dump_ns < EARLY_DUMP_NS ||
        java_target_age_ms(t->start_time) >= EARLY_AGE_MS)
      continue;
    st->tick_busy = 1;
    char err[512] = "";
    size_t len = 0;
    char *text = dump(st, t, j, &len, err, sizeof(err));
    if (!text) {
      /* gone or failing: the snapshot says which */
      PP_DEBUG(st->host, "pid %u: early dump failed: %s", t->pid, err);
      return;
    }
    keep_early(st, j, text, len);
    return;
  }
}

void java_jvm_tick_work(struct java_state *st) {
  java_jvm_rearm_one(st);
  if (!st->tick_busy) early_dump_one(st);
}

static void collect_one(struct java_state *st, struct pp_target_entry *t, struct pp_sink *sink,
                        struct java_collect_stats *cs) {
  const struct pp_host *h = st->host;
  struct java_jvm *j = t->data;
  char err[512] = "";
  int rc;
  bool alive = !jvm_ended(t);
  if (!alive) take_exit_dump(st, t, j); /* its last stacks, dumped as it ended */
  if (j->early) {                       /* taken while it lived, whether or not it still does */
    java_collect_emit(h, sink, t->pid, j->early, j->early_len, st->thread_names, cs);
    free(j->early);
    j->early = NULL;
    j->early_len = 0;
  }
  if (!alive) {
    PP_INFO(h, "pid %u: JVM exited during the session", t->pid);
    pp_target_table_gone(st->targets, t);
    st->exited++;
    return;
  }
  if (j->perfmap) {
    int status = -1;
    char *body = op(st, j, 0, "jcmd", "Compiler.perfmap", NULL, NULL, &status, err, sizeof(err));
    if (!body || status != 0)
      PP_WARNING(h, "pid %u: Compiler.perfmap failed: %s", t->pid, body ? body : err);
    else if ((rc = java_publish_perfmap(h->scratch_dir(h), t->pid, j->ti.nspid,
                                        st->perfmap_copy_max, err, sizeof(err))) < 0)
      PP_WARNING(h, "pid %u: %s", t->pid, err);
    else if (rc > 0)
      j->perfmap_copied = 1;
    free(body);
    return;
  }
  if (!j->armed) return; /* re-armed from tick() */
  size_t len = 0;
  char *text = dump(st, t, j, &len, err, sizeof(err));
  if (text) {
    java_collect_emit(h, sink, t->pid, text, len, st->thread_names, cs);
    j->failures = 0;
  } else if (!java_target_alive(t->pid, t->start_time)) {
    PP_INFO(h, "pid %u: JVM exited during the session", t->pid);
    pp_target_table_gone(st->targets, t);
    st->exited++;
  } else {
    PP_WARNING(h, "pid %u: %s", t->pid, err);
    h->set_pid_status(sink, t->pid, PP_PID_ERROR, err);
    if (++j->failures >= MAX_DUMP_FAILURES) j->armed = 0;
  }
  free(text);
}

void java_jvm_free_gone(struct java_state *st) {
  for (size_t i = 0; i < st->ngone; i++)
    free(st->gone[i].text);
  st->ngone = 0;
}

void java_jvm_collect_all(struct java_state *st, struct pp_sink *sink) {
  const struct pp_host *h = st->host;
  struct java_collect_stats cs = {0};
  for (size_t i = 0; i < st->ngone; i++)
    java_collect_emit(h, sink, st->gone[i].pid, st->gone[i].text, st->gone[i].len, st->thread_names,
                      &cs);
  java_jvm_free_gone(st);
  struct pp_target_entry *t;
  PP_TARGETS_FOREACH(st->targets, t, PP_TARGET_ATTACHED) {
    collect_one(st, t, sink, &cs);
    struct java_jvm *j = t->data;
    if (t->state == PP_TARGET_ATTACHED && j->metadata)
      h->set_app_metadata(sink, t->pid, j->metadata);
  }
  h->add_counter(sink, "java_stacks", cs.stacks);
  h->add_counter(sink, "java_samples", cs.samples);
  h->add_counter(sink, "java_agent_dropped", cs.dropped);
  h->add_counter(sink, "java_bad_lines", cs.bad_lines);
  if (st->exit_dumps) h->add_counter(sink, "java_exit_dumps", st->exit_dumps);
  st->exit_dumps = 0;
  if (st->offcpu) h->add_counter(sink, "java_offcpu_stacks", cs.offcpu_stacks);
  if (st->alloc) {
    h->add_counter(sink, "java_alloc_stacks", cs.alloc_stacks);
    h->add_counter(sink, "java_alloc_bytes", cs.alloc_bytes);
    h->add_counter(sink, "java_alloc_dropped", cs.alloc_dropped);
  }
  h->add_counter(sink, "java_early_dropped", st->early_dropped);
  st->early_dropped = 0;
}

void java_jvm_stop_all(struct java_state *st) {
  struct pp_target_entry *t;
  PP_TARGETS_FOREACH(st->targets, t, PP_TARGET_ATTACHED) {
    struct java_jvm *j = t->data;
    if (!j->armed) continue;
    j->armed = 0;
    if (jvm_ended(t)) continue; /* no attach reaches it; its exit dump is read at release */
    char err[256];
    struct java_attach_reply r;
    /* dormant, not unloaded: a JVM cannot unload an attached agent */
    if (java_attach(&j->ti, 0, attach_ms(st), "load", j->agent_path, "true", "stop", &r, err,
                    sizeof(err)) == 0)
      java_attach_reply_free(&r);
    else
      PP_WARNING(st->host, "pid %u: cannot stop the agent: %s", t->pid, err);
  }
}
