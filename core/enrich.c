/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-pid enrichment of the merged profile: comm, container name, appid and
 * the application-metadata index, plus the header tables they refer to, by
 * gProfiler's rules (docs/gprofiler-compat.md).
 *
 * What is known about each process comes from the process memory
 * (proc_memory.h), filled while the process lived: a process that exited
 * before its session is written keeps its comm, container and appid.
 */
#include "enrich.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "app_metadata.h"
#include "appid.h"
#include "container.h"
#include "k8s_labels.h"
#include "k8s_pods.h"
#include "k8s_select.h"
#include "log.h"
#include "lru.h"
#include "metadata.h"
#include "polyprof/kit/proc.h"
#include "proc_memory.h"

#define DEFAULT_CACHE 4096

struct pp_enricher {
  struct pp_enrich_opts opts; /* strings owned */
  struct pp_proc_memory *procs;
  struct pp_containers *containers;
  struct pp_k8s_pods *pods; /* NULL: no Kubernetes API to ask */
};

void pp_enricher_free(struct pp_enricher *e) {
  if (!e) return;
  for (size_t i = 0; i < e->opts.app_id_args_filter_count; i++)
    free((char *)e->opts.app_id_args_filters[i]);
  free((void *)e->opts.app_id_args_filters);
  free((char *)e->opts.docker_socket);
  free((char *)e->opts.k8s_runtime_root);
  pp_proc_memory_free(e->procs);
  pp_containers_free(e->containers);
  pp_k8s_pods_free(e->pods);
  free(e);
}

struct pp_enricher *pp_enricher_new(const struct pp_enrich_opts *opts) {
  struct pp_enricher *e = calloc(1, sizeof(*e));
  if (!e) return NULL;
  e->opts = *opts;
  e->opts.app_id_args_filters = NULL;
  e->opts.app_id_args_filter_count = 0;
  e->opts.docker_socket = NULL;
  e->opts.k8s_runtime_root = NULL;
  if (!e->opts.cache_size) e->opts.cache_size = DEFAULT_CACHE;
  size_t nf = opts->app_id_args_filter_count;
  if (nf) {
    char **f = calloc(nf, sizeof(*f));
    if (!f) goto oom;
    e->opts.app_id_args_filters = (const char *const *)f;
    for (size_t i = 0; i < nf; i++) {
      f[i] = strdup(opts->app_id_args_filters[i] ? opts->app_id_args_filters[i] : "");
      if (!f[i]) goto oom;
      e->opts.app_id_args_filter_count = i + 1;
    }
  }
  if (opts->docker_socket && !(e->opts.docker_socket = strdup(opts->docker_socket))) goto oom;
  e->procs = pp_proc_memory_new(&e->opts, e->opts.cache_size);
  if (!e->procs) goto oom;
  if (e->opts.containers) {
    e->containers = pp_containers_new(e->opts.docker_socket, e->opts.cache_size);
    if (!e->containers) goto oom;
    if (opts->k8s_runtime_root &&
        (!(e->opts.k8s_runtime_root = strdup(opts->k8s_runtime_root)) ||
         pp_containers_set_k8s_root(e->containers, e->opts.k8s_runtime_root) < 0))
      goto oom;
    if (opts->k8s_api && pp_k8s_labels_wanted()) {
      struct pp_k8s_api_opts ko = {.sa_dir = opts->k8s_sa_dir, .node = opts->k8s_node_name};
      e->pods = pp_k8s_pods_new(&ko);
    }
  }
  e->opts.k8s_node_name = e->opts.k8s_sa_dir = NULL; /* copied by the pods client */
  return e;
oom:
  pp_enricher_free(e);
  return NULL;
}

/* Index of `md` in the header table, appending it if new. Equal dicts share
 * one index, compared by value through a canonical dump. */
static uint32_t meta_index(json_t *list, struct pp_lru *seen, json_t *md) {
  char *canon = json_dumps(md, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
  if (!canon) return 0;
  void *v = NULL;
  uint32_t idx = 0;
  if (pp_lru_lookup_str(seen, canon, &v)) {
    idx = (uint32_t)(uintptr_t)v;
  } else if (json_array_append(list, md) == 0) {
    idx = (uint32_t)(json_array_size(list) - 1);
    pp_lru_put_str(seen, canon, (void *)(uintptr_t)idx);
  }
  free(canon);
  return idx;
}

static void add_container_name(json_t *containers, const char *name) {
  if (!containers || !name || !*name) return;
  for (size_t i = 0; i < json_array_size(containers); i++) {
    const char *s = json_string_value(json_array_get(containers, i));
    if (s && strcmp(s, name) == 0) return;
  }
  json_array_append_new(containers, pp_json_string_lossy(name, strlen(name)));
}

/* Container name for an id: the runtime's name, else (unless an empty name
 * was asked for, as gProfiler writes it) the 12-hex short id Docker itself
 * shows. */
static char *container_name(struct pp_enricher *en, const char *id) {
  if (!id[0]) return NULL;
  char *name = NULL;
  if (en->containers && pp_containers_name(en->containers, id, &name) == 0) return name;
  if (en->opts.container_empty_if_unnamed) return NULL;
  return strndup(id, 12);
}

static json_t *pid_metadata(struct pp_enricher *en, const struct pp_pid_rec *rec,
                            const struct pp_profile *p, struct pp_proc_facts *e, bool live) {
  const char *plugin_md = rec->app_meta != PP_NO_STR ? pp_profile_str(p, rec->app_meta) : NULL;
  bool runtime = e && e->rt != PP_RT_UNKNOWN && e->rt != PP_RT_PHP;
  if (e && !e->meta_done && live && (runtime || plugin_md)) {
    e->core_meta = pp_app_metadata_collect(rec->pid, e->rt, e->exe, true);
    e->meta_done = true;
  }
  const json_t *core = e && (runtime || plugin_md) ? e->core_meta : NULL;
  return pp_app_metadata_merge(core, plugin_md);
}

int pp_enrich(struct pp_enricher *en, struct pp_profile *merged, json_t *app_meta_list,
              json_t *containers) {
  if (!en || !merged) return -EINVAL;
  if (app_meta_list && json_array_size(app_meta_list) == 0)
    json_array_append_new(app_meta_list, json_null());
  size_t npids = pp_profile_pid_count(merged);
  struct pp_lru *seen = pp_lru_new(npids + json_array_size(app_meta_list) + 1, NULL);
  if (!seen) return -ENOMEM;
  /* entries already in the table keep their indexes */
  for (size_t i = 1; app_meta_list && i < json_array_size(app_meta_list); i++) {
    char *canon = json_dumps(json_array_get(app_meta_list, i),
                             JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
    if (canon) pp_lru_put_str(seen, canon, (void *)(uintptr_t)i);
    free(canon);
  }
  int rc = 0;
  for (size_t i = 0; i < npids; i++) {
    struct pp_pid_rec *rec = pp_profile_pid_at(merged, i);
    bool live;
    struct pp_proc_facts *e = pp_proc_memory_get(en->procs, rec->pid, rec->start_time, &live);
    uint32_t id;

    if (rec->comm == PP_NO_STR && e && e->comm) {
      id = pp_profile_intern_cstr(merged, e->comm);
      if (id == PP_NO_STR) rc = -ENOMEM;
      pp_profile_pid_at(merged, i)->comm = id;
    }

    rec = pp_profile_pid_at(merged, i);
    if (en->opts.containers && e && e->container_id[0]) {
      char *name = container_name(en, e->container_id);
      if (name) {
        id = pp_profile_intern_cstr(merged, name);
        if (id == PP_NO_STR) rc = -ENOMEM;
        pp_profile_pid_at(merged, i)->container = id;
        add_container_name(containers, name);
        pp_k8s_pods_need(en->pods, name);
        free(name);
      }
    } else if (en->opts.containers && rec->container != PP_NO_STR) {
      add_container_name(containers, pp_profile_str(merged, rec->container));
    }

    rec = pp_profile_pid_at(merged, i);
    if (en->opts.appids && rec->appid == PP_NO_STR && e && e->appid) {
      id = pp_profile_intern_cstr(merged, e->appid);
      if (id == PP_NO_STR) rc = -ENOMEM;
      pp_profile_pid_at(merged, i)->appid = id;
    }

    rec = pp_profile_pid_at(merged, i);
    rec->app_meta_index = 0;
    if (en->opts.app_metadata && app_meta_list) {
      json_t *md = pid_metadata(en, rec, merged, e, live);
      if (md) rec->app_meta_index = meta_index(app_meta_list, seen, md);
      json_decref(md);
    }
  }
  pp_lru_free(seen);
  pp_k8s_pods_refresh(en->pods);
  pp_proc_memory_end_session(en->procs);
  return rc;
}

void pp_enrich_remember(struct pp_enricher *en, uint32_t pid, uint64_t start_time) {
  if (en) pp_proc_memory_see(en->procs, pid, start_time);
}

bool pp_enrich_selected(struct pp_enricher *en, uint32_t pid, uint64_t start_time,
                        const char *selectors) {
  if (!en || !en->containers) return false;
  pp_proc_memory_see(en->procs, pid, start_time);
  bool live;
  struct pp_proc_facts *e = pp_proc_memory_get(en->procs, pid, start_time, &live);
  if (!e || !e->container_id[0]) return false;
  char *name = container_name(en, e->container_id);
  bool sel = pp_container_selected(selectors, name);
  free(name);
  return sel;
}
