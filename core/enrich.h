/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-pid enrichment of a merged profile: comm (if missing), container name,
 * appid frame text, application metadata, and the header tables that
 * reference them (rules: docs/gprofiler-compat.md).
 * Results are cached per (pid, start time) in bounded LRU caches.
 */
#ifndef PP_ENRICH_H
#define PP_ENRICH_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "profile.h"

struct pp_enrich_opts {
  bool appids;                            /* compute appid where the plugin set none */
  bool containers;                        /* resolve container names */
  bool app_metadata;                      /* build the application_metadata table */
  const char *const *app_id_args_filters; /* regexes for Java appid args */
  size_t app_id_args_filter_count;
  size_t cache_size;            /* LRU entries per cache */
  const char *docker_socket;    /* NULL: /var/run/docker.sock via /proc/1/root */
  const char *k8s_runtime_root; /* NULL: /proc/1/root (containerd/CRI-O bundles, k8s_meta.h) */
  /* polyprof additions (enrich branch): */
  bool java_spark_appid; /* append "spark: <spark.app.name>" for Spark executors */
  /* A process in a container (64-hex id in its cgroup) that no container
   * runtime could name gets its 12-hex short id as container name (default,
   * false) or "" as in gProfiler (true). */
  bool container_empty_if_unnamed;
  /* Pod labels (k8s_labels.h, selected beforehand): also ask the
   * Kubernetes API when running in a pod (k8s_pods.h). */
  bool k8s_api;
  const char *k8s_node_name; /* NULL: $NODE_NAME */
  const char *k8s_sa_dir;    /* NULL: the service-account directory of a pod */
};

struct pp_enricher;

struct pp_enricher *pp_enricher_new(const struct pp_enrich_opts *opts);
void pp_enricher_free(struct pp_enricher *e);

/* Fill every pid record of `merged`: comm, container, appid, app_meta_index.
 * app_meta_list gets the header's "application_metadata" array (element 0
 * null, one entry per distinct metadata object); containers gets the
 * "containers" array (names seen this session). Both are json arrays owned by
 * the caller. 0 or -errno. Called once per session: it then forgets the
 * processes that had already exited at the previous call. */
int pp_enrich(struct pp_enricher *e, struct pp_profile *merged, json_t *app_meta_list,
              json_t *containers);

/* Learn a process now, while it is alive (the /proc scan calls this for
 * every new target), so a process that exits before the session ends still
 * gets its comm, container and appid in the profile. Bounded by the cache. */
void pp_enrich_remember(struct pp_enricher *e, uint32_t pid, uint64_t start_time);

/* Whether process (pid, start_time) is in a container that the
 * --containers selectors (k8s_select.h) select; remembers the process
 * first. A process whose container cannot be named (yet) is not. */
bool pp_enrich_selected(struct pp_enricher *e, uint32_t pid, uint64_t start_time,
                        const char *selectors);

/* Individual rules, exposed for tests. */
/* appid for a process from its argv (NUL-separated), cwd and root; NULL if
 * none. Returns malloc'd text without the "appid: " prefix. */
char *pp_appid_for(const char *exe, const char *argv, size_t argv_len, const char *cwd,
                   const char *root, const struct pp_enrich_opts *opts);
/* The last 64-hex container id in /proc/PID/cgroup text, or podman/CRI-O/
 * containerd/kubepods forms. 0 and id (65 bytes) or -ENOENT. */
int pp_container_id_from_cgroup(const char *cgroup_text, char id[65]);

#endif
