/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal state of a running agent, shared by the run loop (session.c) and
 * the per-session output stage (session_output.c). Not a public interface.
 */
#ifndef PP_AGENT_H
#define PP_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <jansson.h>

#include "config.h"
#include "enrich.h"
#include "metadata.h"
#include "profile.h"
#include "session.h"
#include "supervisor.h"
#include "targets.h"

struct agent_plugin {
  const struct pp_plugin_info *info;
  const struct pp_plugin_config *pcfg;
  struct pp_worker *worker;
  bool system_wide;
  bool started;
  struct pp_profile *snap; /* this session's snapshot (reused) */
  int snap_rc;             /* 0, or why this session's data is missing */
  char snap_err[256];
  uint64_t cpu_ticks_prev;   /* worker CPU at the previous session end */
  struct pp_target *pending; /* new targets found since the last add_targets */
  size_t npending, pending_cap;
};

struct pp_agent {
  struct pp_config *cfg;
  struct pp_plugin_info *infos;
  size_t ninfos;
  struct agent_plugin *plugins; /* enabled ones */
  size_t nplugins;
  struct pp_targets *targets;
  struct pp_proc_events *proc_events; /* NULL: /proc is listed every scan */
  uint64_t next_listing_ms;           /* with proc_events: the next full /proc listing */
  uint64_t events_due_ms;             /* an exec was read: apply the batch then (0: none) */
  uint64_t events_quiet_until_ms;     /* the socket is not polled before this */
  uint64_t events_last_wake_ms;       /* the last time the socket had data */
  uint64_t last_update_ms;            /* the last scan_targets() */
  uint64_t young_due_ms;              /* the next look at young processes (0: none young) */
  struct pp_enricher *enricher;
  struct pp_metrics *metrics;
  json_t *system_metadata;
  struct pp_profile *merged;
  struct pp_profile *failed; /* error statuses standing in for a failed runtime */
  time_t spawn_time;
  unsigned session_no;
  uint64_t core_cpu_ticks_prev;
  struct pp_uploader *uploader;       /* NULL unless -u or --pyroscope-url (core/upload/) */
  struct pp_pending *pending;         /* session files the output dir refused (output/pending.h) */
  time_t last_stem_time;              /* time in the previous session's file names */
  const struct pp_agent_hooks *hooks; /* one-program commands; NULL for the daemon */
};

/* Per-session timing facts for the output stage. */
struct session_times {
  time_t start, end; /* wall clock */
  double duration_s; /* measured */
};

/* Merge the snapshots, enrich, write the configured outputs and log the
 * session summary. Never fails the agent: problems are logged. */
void pp_agent_write_session(struct pp_agent *a, const struct session_times *t);

/* Write one session file into the output directory; if the directory
 * refuses it (read-only, full...), keep it in memory for a later session
 * (core/session_pending.c). 0 written, 1 kept, -errno lost; logged. */
int pp_agent_output_file(struct pp_agent *a, const char *stem, const char *ext,
                         const char *link_name, int (*fn)(FILE *f, void *ctx), void *ctx);
/* Write what earlier sessions could not, oldest first (start of output). */
void pp_agent_flush_pending(struct pp_agent *a);
/* At exit: one last attempt at the files the output directory refused,
 * and an error line for what is lost. */
void pp_agent_flush_pending_at_exit(struct pp_agent *a);

#endif
