/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The .col header, line 0 of every .col: "# " + this JSON object, written
 * the way Python's json.dumps writes it, with gProfiler's keys in
 * gProfiler's order (docs/formats.md) so that whatever reads gProfiler's
 * files reads ours. Built from facts collected elsewhere (system metadata,
 * host metrics, containers, application metadata); this file only places
 * them. The upload token is never among them.
 */
#include "output/col_header.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metadata.h"

static void set_str(json_t *o, const char *k, const char *v) {
  json_object_set_new(o, k, v ? pp_json_string_lossy(v, strlen(v)) : json_null());
}

/* Value of a bound option of an enabled plugin (defaults applied by the
 * binder), or NULL. */
static const char *plugin_option(const struct pp_config *cfg, const char *plugin, const char *key) {
  const struct pp_plugin_config *pc = cfg ? pp_config_plugin(cfg, plugin) : NULL;
  if (!pc || !pc->enabled) return NULL;
  for (size_t i = 0; i < pc->option_count; i++) {
    const struct pp_bound_option *bo = &pc->options[i];
    if (bo->opt && bo->opt->key && strcmp(bo->opt->key, key) == 0) return bo->scalar;
  }
  return NULL;
}

/* gProfiler's sampling keys: the event is "cpu-time" unless perf samples
 * another one (--perf-event), and "period" replaces the frequency when perf
 * samples every N events (--perf-event-period). The software cpu-clock is
 * the cpu-time default under another name. */
static void add_sampling(json_t *o, const struct pp_config *cfg) {
  const char *event = plugin_option(cfg, "perf", "event");
  const char *period = plugin_option(cfg, "perf", "event_period");
  long long n = period ? strtoll(period, NULL, 10) : 0;
  bool custom = event && *event && strcmp(event, "cpu-clock") != 0;
  set_str(o, "sampling_event", custom ? event : "cpu-time");
  if (n > 0) {
    set_str(o, "sampling_mode", "period");
    json_object_set_new(o, "sampling_period", json_integer(n));
  } else {
    set_str(o, "sampling_mode", "frequency");
    json_object_set_new(o, "sampling_frequency", json_integer(cfg ? cfg->frequency : 11));
  }
}

static json_t *session_metadata(const struct pp_header_args *a, const char *mode) {
  const struct pp_config *cfg = a->cfg;
  json_t *md;
  if ((!cfg || cfg->metadata_collection) && json_is_object(a->system_metadata)) {
    md = json_deep_copy(a->system_metadata);
    char now[32];
    pp_iso_time(a->end_time, now, sizeof(now));
    set_str(md, "current_time", now);
  } else {
    /* --disable-metadata-collection: only what the server cannot work without */
    md = json_object();
    json_t *h = json_object_get(a->system_metadata, "hostname");
    char host[256];
    if (!json_is_string(h) && gethostname(host, sizeof(host)) != 0)
      snprintf(host, sizeof(host), "<unknown>");
    host[sizeof(host) - 1] = '\0';
    json_object_set_new(md, "hostname", json_is_string(h) ? json_copy(h) : json_string(host));
  }
  set_str(md, "profiling_mode", mode);
  add_sampling(md, cfg);
  return md;
}

json_t *pp_col_header(const struct pp_header_args *a) {
  if (!a) return NULL;
  const struct pp_config *cfg = a->cfg;
  const char *mode = cfg && cfg->profiling_mode ? cfg->profiling_mode : "cpu";
  bool containers_on = !cfg || cfg->container_names;
  json_t *h = json_object();
  if (!h) return NULL;
  json_object_set_new(
      h, "containers",
      containers_on && json_is_array(a->containers) ? json_deep_copy(a->containers) : json_array());
  json_object_set_new(h, "container_names_enabled", json_boolean(containers_on));
  json_object_set_new(h, "metadata", session_metadata(a, mode));
  json_t *metrics = json_object();
  json_object_set_new(metrics, "cpu_avg", a->cpu_avg >= 0 ? json_real(a->cpu_avg) : json_null());
  json_object_set_new(metrics, "mem_avg", a->mem_avg >= 0 ? json_real(a->mem_avg) : json_null());
  json_object_set_new(h, "metrics", metrics);
  json_t *am = json_is_array(a->app_meta_list) && json_array_size(a->app_meta_list)
                   ? json_deep_copy(a->app_meta_list)
                   : json_array();
  if (am && json_array_size(am) == 0) json_array_append_new(am, json_null());
  json_object_set_new(h, "application_metadata", am);
  json_object_set_new(h, "application_metadata_enabled",
                      json_boolean(!cfg || cfg->application_metadata));
  set_str(h, "profiling_mode", mode);
  json_object_set_new(h, "hwmetrics", json_null());
  json_object_set_new(h, "htmlblob", json_null());
  json_object_set_new(h, "flamegraph_html", json_null());
  add_sampling(h, cfg);
  /* polyprof extensions, after every gProfiler key */
  char t[32];
  pp_iso_time(a->start_time, t, sizeof(t));
  set_str(h, "start_time", t);
  pp_iso_time(a->end_time, t, sizeof(t));
  set_str(h, "end_time", t);
  if (a->plugin_stats) json_object_set_new(h, "polyprof", json_deep_copy(a->plugin_stats));
  return h;
}

char *pp_col_header_text(const struct pp_header_args *a) {
  json_t *h = pp_col_header(a);
  char *text = h ? pp_json_dumps_python(h) : NULL;
  json_decref(h);
  return text;
}
