/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The selected labels of this node's pods from the Kubernetes API
 * (k8s_api.h), for the pods the runtimes left unlabelled (containerd).
 * Enrichment says which pods it met (pp_k8s_pods_need); once per session
 * (pp_k8s_pods_refresh) the node's pod list is fetched if one of them is
 * not in the labels table yet. A failed listing is logged and not tried
 * again for PP_K8S_PODS_RETRY_S; a pod the API does not list is
 * remembered without labels. Never more than one request per session, each
 * bounded in time (PP_K8S_API_TIMEOUT_MS) and size.
 */
#ifndef PP_K8S_PODS_H
#define PP_K8S_PODS_H

#include "k8s_api.h"

#define PP_K8S_PODS_RETRY_S 300
#define PP_K8S_PODS_NEED_MAX 256 /* unknown pods remembered per session */

struct pp_k8s_pods;

/* NULL if the agent does not run in a pod that can ask the API (said once
 * at info level) or out of memory. The options' strings are copied. */
struct pp_k8s_pods *pp_k8s_pods_new(const struct pp_k8s_api_opts *o);
void pp_k8s_pods_free(struct pp_k8s_pods *p);

/* A container name met this session: its pod, if it is a CRI name whose
 * labels are not known, is to be asked about. */
void pp_k8s_pods_need(struct pp_k8s_pods *p, const char *container);

/* At most one listing, if a needed pod is unknown and no failure is recent. */
void pp_k8s_pods_refresh(struct pp_k8s_pods *p);

#endif /* PP_K8S_PODS_H */
