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
 * outside containers never match. The runtime profilers still sample the
 * other processes (container names are known only after a session), so the
 * selection costs nothing less; it decides what is shown and sent.
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

#endif /* PP_K8S_SELECT_H */
