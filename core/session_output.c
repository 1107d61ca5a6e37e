/* SPDX-License-Identifier: Apache-2.0 */
/*
 * End of a session: merge the plugins' snapshots, enrich, write the outputs
 * and log what the session cost. Everything here degrades instead of failing:
 * a plugin without data becomes error stacks for its pids, an output that
 * cannot be written is logged and the others are still written.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "k8s_select.h"
#include "log.h"
#include "merge.h"
#include "metadata.h"
#include "output/col.h"
#include "output/col_header.h"
#include "output/files.h"
#include "output/formats.h"
#include "output/html.h"
#include "polyprof/kit/heap.h"
#include "polyprof/kit/proc.h"
#include "profile_mode.h"
#include "session_debug.h"
#include "upload/publish.h"

/* A runtime plugin that lost its data: every pid it was covering gets an
 * error status so the merged profile says so instead of silently showing
 * native stacks only. */
static void mark_failed(struct pp_agent *a, size_t idx) {
  struct agent_plugin *ap = &a->plugins[idx];
  pp_profile_clear(ap->snap);
  char reason[320];
  snprintf(reason, sizeof(reason), "%s %s", ap->info->desc.name, ap->snap_err);
  uint32_t rid = pp_profile_intern_cstr(ap->snap, reason);
  const struct pp_target *t;
  size_t n = pp_targets_of(a->targets, idx, &t);
  for (size_t i = 0; i < n; i++) {
    struct pp_pid_rec *r = pp_profile_pid_upsert(ap->snap, t[i].pid);
    if (!r) break;
    r->status = PP_PID_ERROR;
    r->reason = rid;
    r->start_time = t[i].start_time;
  }
}

static uint64_t hwm_kb(pid_t pid) {
  char path[64], buf[4096];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  if (pp_read_file(path, buf, sizeof(buf), NULL) < 0) return 0;
  const char *p = strstr(buf, "VmHWM:");
  return p ? strtoull(p + 6, NULL, 10) : 0;
}

struct write_ctx {
  const struct pp_output_format *fmt;
  const struct pp_output_input *in;
};

static int write_format(FILE *f, void *vctx) {
  const struct write_ctx *c = vctx;
  return c->fmt->write(f, c->in);
}

static bool format_enabled(const struct pp_config *cfg, const struct pp_output_format *fmt) {
  /* --no-flamegraph turns the HTML off even when output.formats lists it */
  if (!strcmp(fmt->name, "html") && !cfg->flamegraph) return false;
  for (size_t i = 0; i < cfg->output_format_count; i++)
    if (strcmp(cfg->output_formats[i], fmt->name) == 0) return true;
  return false;
}

/* Every configured format of this session into the output directory, in
 * table order; each one written or kept is independent of the others.
 * wrote[i] says whether pp_output_formats[i] reached the directory. */
static void write_formats(struct pp_agent *a, const char *stem, const char *infix,
                          const struct pp_output_input *in, bool wrote[PP_OUTPUT_FORMAT_COUNT]) {
  for (size_t i = 0; i < PP_OUTPUT_FORMAT_COUNT; i++) {
    const struct pp_output_format *fmt = &pp_output_formats[i];
    struct write_ctx wc = {.fmt = fmt, .in = in};
    char ext[64], link[128];
    snprintf(ext, sizeof(ext), "%s%s", infix, fmt->ext);
    pp_profile_type_link(fmt->last_link, infix, link, sizeof(link));
    wrote[i] = format_enabled(a->cfg, fmt) &&
               pp_agent_output_file(a, stem, ext, link, write_format, &wc) == 0;
  }
}

struct type_args {
  const struct session_times *t;
  const char *stem;
  const struct pp_html_plugin_stat *stats;
  json_t *plugin_stats;
  double cpu_avg, mem_avg;
};

/* Merge, enrich, write and publish the profile of one type into a->merged;
 * wrote[] as write_formats (files of a plainly named type only). */
static void write_type(struct pp_agent *a, const struct type_args *ta, unsigned type,
                       const struct pp_profile *base, const struct pp_merge_source *srcs,
                       size_t nsrc, bool wrote[PP_OUTPUT_FORMAT_COUNT]) {
  const struct pp_config *cfg = a->cfg;
  const struct session_times *t = ta->t;
  const struct pp_profile_type_desc *td = pp_profile_type(type);
  int rc = pp_merge(a->merged, base, srcs, nsrc);
  if (rc < 0) pp_log(PP_LOG_ERROR, "polyprof", "merge failed: %s", strerror(-rc));

  json_t *app_meta = json_array();
  json_t *containers = json_array();
  json_array_append_new(app_meta, json_null());
  rc = pp_enrich(a->enricher, a->merged, app_meta, containers);
  if (rc < 0) pp_log(PP_LOG_WARNING, "polyprof", "enrichment incomplete: %s", strerror(-rc));
  if (cfg->containers_select &&
      pp_containers_select(&a->merged, cfg->containers_select, containers) < 0)
    pp_log(PP_LOG_ERROR, "polyprof", "--containers: out of memory; the session is kept whole");

  struct pp_header_args ha = {
      .cfg = cfg,
      .system_metadata = a->system_metadata,
      .containers = containers,
      .app_meta_list = app_meta,
      .cpu_avg = ta->cpu_avg,
      .mem_avg = ta->mem_avg,
      .start_time = t->start,
      .end_time = t->end,
      .plugin_stats = ta->plugin_stats,
  };
  json_t *header = pp_col_header(&ha);
  pp_profile_type_stamp_header(header, type);
  char *header_text = header ? pp_json_dumps_python(header) : NULL;
  json_decref(header);

  char start_iso[32], end_iso[32], host[256] = "", title[320];
  pp_iso_time(t->start, start_iso, sizeof(start_iso));
  pp_iso_time(t->end, end_iso, sizeof(end_iso));
  gethostname(host, sizeof(host) - 1);
  snprintf(title, sizeof(title), "polyprof — %s — %s", host, start_iso);
  struct pp_html_info hi = {
      .title = title,
      .start_time = start_iso,
      .end_time = end_iso,
      .duration_s = t->duration_s,
      .hostname = host,
      .plugins = ta->stats,
      .plugin_count = a->nplugins,
      .unit = td->unit,
  };

  char infix[32];
  pp_profile_type_infix(cfg->profile_types, type, infix, sizeof(infix));
  /* the flame graph links its frames to the heatmap written beside it */
  char heatmap_href[160];
  const struct pp_output_format *heatmap = pp_output_format_find("heatmap");
  if (cfg->output_dir && heatmap && format_enabled(cfg, heatmap)) {
    snprintf(heatmap_href, sizeof(heatmap_href), "%s%s%s", ta->stem, infix, heatmap->ext);
    hi.heatmap_href = heatmap_href;
  }
  if (cfg->output_dir && header_text) {
    struct pp_col_opts col = {
        .app_metadata_prefix = cfg->application_metadata,
        .container_prefix = true,
        .appids = cfg->app_identifiers,
    };
    char name[128];
    snprintf(name, sizeof(name), "polyprof %s", end_iso);
    struct pp_output_input in = {
        .profile = a->merged,
        .header_json = header_text,
        .col = &col,
        .html = &hi,
        .start = t->start,
        .end = t->end,
        .frequency = cfg->frequency,
        .name = name,
        .sample_type = td->pprof_type,
        .sample_unit = td->pprof_unit,
    };
    pp_agent_flush_pending(a);
    write_formats(a, ta->stem, infix, &in, wrote);
    if (cfg->debug_plugin_totals && !*infix) pp_agent_write_plugin_totals(a, ta->stem);
  }

  /* uploads (core/upload/publish.c), after the local files so a dead
   * server never costs them */
  if (header_text) {
    struct pp_publish_args pa = {
        .cfg = cfg,
        .uploader = a->uploader,
        .merged = a->merged,
        .header_text = header_text,
        .start = t->start,
        .end = t->end,
        .cpu_avg = ta->cpu_avg,
        .mem_avg = ta->mem_avg,
        .profile_type = type,
    };
    pp_publish_session(&pa);
  }
  if (*infix) {
    for (size_t i = 0; i < PP_OUTPUT_FORMAT_COUNT; i++)
      if (wrote[i])
        pp_log(PP_LOG_INFO, "polyprof", "wrote %s/%s%s%s (%s, %llu %s)", cfg->output_dir, ta->stem,
               infix, pp_output_formats[i].ext, td->name,
               (unsigned long long)pp_profile_total(a->merged), td->unit);
  }
  free(header_text);
  json_decref(app_meta);
  json_decref(containers);
}

/* Several types, or one that is not cpu: each plugin's snapshot is cut
 * into its types first; every type is then merged and written like the
 * cpu profile. cpu goes last so a->merged holds it for the session log. */
static const unsigned type_order[] = {PP_PROFILE_WALL, PP_PROFILE_OFFCPU, PP_PROFILE_ALLOC,
                                      PP_PROFILE_CPU};

/* A type asked for and given by an enabled plugin: one that none gives was
 * refused at start and writes no empty files. */
static bool type_written(const struct pp_agent *a, unsigned type) {
  const struct pp_config *cfg = a->cfg;
  if (!(cfg->profile_types & PP_TYPE_BIT(type))) return false;
  bool given = false;
  for (size_t i = 0; i < a->nplugins; i++)
    given |=
        (pp_profile_types_of(cfg, a->plugins[i].info->desc.name, a->plugins[i].system_wide).gives &
         PP_TYPE_BIT(type)) != 0;
  return given;
}

unsigned pp_agent_merged_type(const struct pp_agent *a) {
  if (a->cfg->profile_types == PP_TYPES_CPU_ONLY) return PP_PROFILE_CPU;
  unsigned last = PP_PROFILE_CPU;
  for (size_t o = 0; o < sizeof(type_order) / sizeof(type_order[0]); o++)
    if (type_written(a, type_order[o])) last = type_order[o];
  return last;
}

static void write_types(struct pp_agent *a, const struct type_args *ta,
                        const struct pp_profile *base, const struct pp_merge_source *srcs,
                        size_t nsrc, bool wrote[PP_OUTPUT_FORMAT_COUNT]) {
  const struct pp_config *cfg = a->cfg;
  struct pp_profile *tbase = pp_profile_new(), *tsrc[PP_TARGETS_MAX_PLUGINS] = {NULL};
  bool ok = tbase != NULL;
  for (size_t i = 0; i < nsrc; i++)
    ok &= (tsrc[i] = pp_profile_new()) != NULL;
  for (size_t o = 0; ok && o < sizeof(type_order) / sizeof(type_order[0]); o++) {
    unsigned type = type_order[o];
    if (!type_written(a, type)) continue;
    /* the system-wide plugin gives cpu and offcpu; wall and alloc come
     * from runtime plugins alone (perf-less merge) */
    const struct pp_profile *b = NULL;
    if (base && (type == PP_PROFILE_CPU || type == PP_PROFILE_OFFCPU)) {
      if (pp_profile_type_extract(tbase, base, type, -1) < 0) ok = false;
      b = tbase;
    }
    struct pp_merge_source ts[PP_TARGETS_MAX_PLUGINS];
    size_t n = 0;
    /* perf's native allocations (--pids) are bytes of their own, next to
     * a runtime's: added, never scaled to one another */
    if (base && type == PP_PROFILE_ALLOC) {
      if (pp_profile_type_extract(tbase, base, type, -1) < 0) ok = false;
      ts[n++] = (struct pp_merge_source){.plugin = "perf", .profile = tbase};
    }
    for (size_t i = 0; ok && i < nsrc; i++) {
      struct pp_plugin_types pt = pp_profile_types_of(cfg, srcs[i].plugin, false);
      if (!(pt.gives & PP_TYPE_BIT(type))) continue;
      if (pp_profile_type_extract(tsrc[i], srcs[i].profile, type,
                                  pt.untagged_is_wall ? PP_PROFILE_WALL : -1) < 0)
        ok = false;
      ts[n++] = (struct pp_merge_source){.plugin = srcs[i].plugin, .profile = tsrc[i]};
    }
    bool scratch[PP_OUTPUT_FORMAT_COUNT] = {false};
    bool plain = type == PP_PROFILE_CPU || pp_profile_types_count(cfg->profile_types) < 2;
    if (ok) write_type(a, ta, type, b, ts, n, plain ? wrote : scratch);
  }
  if (!ok) pp_log(PP_LOG_ERROR, "polyprof", "profile types: out of memory, session not written");
  pp_profile_free(tbase);
  for (size_t i = 0; i < nsrc; i++)
    pp_profile_free(tsrc[i]);
}

static bool process_selected(void *ctx, uint32_t pid, uint64_t start_time) {
  struct pp_agent *a = ctx;
  return pp_enrich_selected(a->enricher, pid, start_time, a->cfg->containers_select);
}

/* --containers: the system-wide profiler's samples of the other processes
 * go before the merge (runtime plugins never had them). */
static void select_base(struct pp_agent *a, struct agent_plugin *ap) {
  if (a->cfg->containers_select && pp_profile_keep_pids(&ap->snap, process_selected, a) < 0)
    pp_log(PP_LOG_ERROR, "polyprof", "--containers: out of memory; %s's samples are kept whole",
           ap->info->desc.name);
}

void pp_agent_write_session(struct pp_agent *a, const struct session_times *t) {
  const struct pp_config *cfg = a->cfg;
  const struct pp_profile *base = NULL;
  struct pp_merge_source srcs[PP_TARGETS_MAX_PLUGINS];
  size_t nsrc = 0;
  struct pp_html_plugin_stat stats[PP_TARGETS_MAX_PLUGINS];
  json_t *plugin_stats = json_object();
  double dur = t->duration_s > 0 ? t->duration_s : 1;

  for (size_t i = 0; i < a->nplugins; i++) {
    struct agent_plugin *ap = &a->plugins[i];
    const char *name = ap->info->desc.name;
    uint64_t samples = ap->snap_rc == 0 ? pp_profile_total(ap->snap) : 0;
    stats[i] = (struct pp_html_plugin_stat){
        .name = name,
        .samples = samples,
        .rate_hz = (double)samples / dur,
        .status = ap->snap_rc == 0 ? "ok" : ap->snap_err,
    };
    json_t *js = json_object();
    json_object_set_new(js, "samples", json_integer((json_int_t)samples));
    json_object_set_new(js, "rate_hz", json_real((double)samples / dur));
    json_object_set_new(js, "status", json_string(stats[i].status));
    json_object_set_new(js, "restarts", json_integer(pp_worker_restarts(ap->worker)));
    if (ap->snap_rc == 0) {
      json_t *counters = json_object();
      for (size_t k = 0; k < pp_profile_counter_count(ap->snap); k++) {
        const struct pp_counter_rec *cr = pp_profile_counter_at(ap->snap, k);
        json_object_set_new(counters, pp_profile_str(ap->snap, cr->name),
                            json_integer((json_int_t)cr->value));
      }
      json_object_set_new(js, "counters", counters);
    }
    json_object_set_new(plugin_stats, name, js);

    if (ap->system_wide) {
      if (ap->snap_rc == 0 && !base) {
        select_base(a, ap);
        base = ap->snap;
      } else if (ap->snap_rc < 0 && !pp_worker_off(ap->worker))
        pp_log(PP_LOG_WARNING, "polyprof",
               "%s: system-wide data missing this session; runtime stacks are kept unscaled", name);
      continue;
    }
    if (ap->snap_rc < 0) mark_failed(a, i);
    srcs[nsrc++] = (struct pp_merge_source){.plugin = name, .profile = ap->snap};
  }

  double cpu_avg = -1, mem_avg = -1;
  if (cfg->metrics_collection) pp_metrics_session(a->metrics, &cpu_avg, &mem_avg);

  /* File names carry the end time to the second; a session ended early
   * (SIGTERM) in the same second as the previous one must not overwrite
   * its files, so its name moves on by a second. */
  time_t stem_time = t->end > a->last_stem_time ? t->end : a->last_stem_time + 1;
  a->last_stem_time = stem_time;
  char stem[64];
  pp_output_stem(stem_time, stem, sizeof(stem));

  struct type_args ta = {
      .t = t,
      .stem = stem,
      .stats = stats,
      .plugin_stats = plugin_stats,
      .cpu_avg = cpu_avg,
      .mem_avg = mem_avg,
  };
  bool wrote[PP_OUTPUT_FORMAT_COUNT] = {false};
  if (cfg->profile_types == PP_TYPES_CPU_ONLY)
    write_type(a, &ta, PP_PROFILE_CPU, base, srcs, nsrc, wrote);
  else
    write_types(a, &ta, base, srcs, nsrc, wrote);

  /* what the session cost the agent itself */
  long hz = sysconf(_SC_CLK_TCK);
  uint64_t core_ticks = 0, worker_ticks = 0, worker_hwm = 0;
  pp_proc_cpu_ticks((uint32_t)getpid(), &core_ticks);
  for (size_t i = 0; i < a->nplugins; i++) {
    struct agent_plugin *ap = &a->plugins[i];
    pid_t wp = pp_worker_pid(ap->worker);
    uint64_t ticks = 0;
    if (wp > 0 && pp_proc_cpu_ticks((uint32_t)wp, &ticks) == 0) {
      worker_ticks += ticks >= ap->cpu_ticks_prev ? ticks - ap->cpu_ticks_prev : ticks;
      ap->cpu_ticks_prev = ticks;
      worker_hwm += hwm_kb(wp);
    }
  }
  uint64_t core_delta = core_ticks - a->core_cpu_ticks_prev;
  a->core_cpu_ticks_prev = core_ticks;
  /* VmHWM, not getrusage's ru_maxrss: that one keeps the peak of whatever
   * ran before exec() (a Python harness that started the agent) */
  uint64_t core_hwm = hwm_kb(getpid());

  char per_plugin[1024] = "";
  size_t at = 0;
  for (size_t i = 0; i < a->nplugins && at < sizeof(per_plugin); i++) {
    /* a plugin that is off said why once, when it went off */
    bool off = pp_worker_off(a->plugins[i].worker);
    int n =
        snprintf(per_plugin + at, sizeof(per_plugin) - at, "%s%s %llu @ %.1f Hz%s%s", i ? ", " : "",
                 stats[i].name, (unsigned long long)stats[i].samples, stats[i].rate_hz,
                 off                     ? " (off until reload)"
                 : a->plugins[i].snap_rc ? " FAILED: "
                                         : "",
                 a->plugins[i].snap_rc && !off ? stats[i].status : "");
    if (n < 0) break;
    at += (size_t)n;
  }
  double core_s = (double)core_delta / (double)hz, worker_s = (double)worker_ticks / (double)hz;
  pp_log(PP_LOG_INFO, "polyprof",
         "session %u: %.1f s, %llu samples in %zu stacks over %zu processes [%s]; agent CPU "
         "%.2f s (%.2f%% of a core: core %.2f s, workers %.2f s), peak RSS core %.1f MiB, "
         "workers %.1f MiB",
         a->session_no, t->duration_s, (unsigned long long)pp_profile_total(a->merged),
         pp_profile_stack_count(a->merged), pp_profile_pid_count(a->merged), per_plugin,
         core_s + worker_s, 100.0 * (core_s + worker_s) / dur, core_s, worker_s,
         (double)core_hwm / 1024.0, (double)worker_hwm / 1024.0);
  for (size_t i = 0; i < PP_OUTPUT_FORMAT_COUNT; i++)
    if (wrote[i])
      pp_log(PP_LOG_INFO, "polyprof", "wrote %s/%s%s", cfg->output_dir, stem,
             pp_output_formats[i].ext);

  json_decref(plugin_stats);
  pp_release_heap();
}
