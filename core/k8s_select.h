/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --containers SELECTOR[,SELECTOR] (enrichment.containers): keep only the
 * processes of some containers in what a session writes and uploads.
 *
 * A selector is a shell glob (fnmatch) matched against a process's
 * container name, or for a Kubernetes container (the CRI name
 * k8s_<container>_<pod>_<namespace>_<uid>_<n>) against its container part;
 * "pod=GLOB", "namespace=GLOB" and "container=GLOB" match only that part of
 * a Kubernetes name. A process matching any selector is kept; processes
 * outside containers never match. The selection decides what is profiled:
 * a runtime plugin is handed only the selected processes (each judged when
 * the scan first meets it), and the system-wide profiler's samples of the
 * others are dropped before the merge; what is written and sent is cut to
 * the selected containers again after enrichment.
 */
#ifndef PP_K8S_SELECT_H
#define PP_K8S_SELECT_H

#include <jansson.h>
#include <stdbool.h>

#include "profile.h"

/* Whether a container name is selected by the comma-separated list. */
bool pp_container_selected(const char *selectors, const char *container);

/* Replace *p by a profile holding only the stacks (and pid records) of
 * selected processes; containers (the header's list, may be NULL) keeps only
 * the selected names. 0, or -ENOMEM with *p unchanged. */
int pp_containers_select(struct pp_profile **p, const char *selectors, json_t *containers);

/* Replace *p by a profile holding only the stacks (and pid records) of
 * the pids keep(ctx, pid, start_time) accepts: a profile not enriched yet.
 * 0, or -ENOMEM with *p unchanged. */
typedef bool (*pp_pid_keep_fn)(void *ctx, uint32_t pid, uint64_t start_time);
int pp_profile_keep_pids(struct pp_profile **p, pp_pid_keep_fn keep, void *ctx);

#endif /* PP_K8S_SELECT_H */
