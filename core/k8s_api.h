/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Kubernetes API, in-cluster, read-only: the pods of this node, for
 * their labels (containerd keeps none on the host). One
 *   GET https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
 *       /api/v1/pods?fieldSelector=spec.nodeName=<node>
 * with the pod's service-account token (Authorization: Bearer) and the
 * cluster CA from the service-account directory
 * (/var/run/secrets/kubernetes.io/serviceaccount). The node name comes from
 * enrichment.k8s_node_name or the NODE_NAME variable the DaemonSet sets
 * from the downward API (spec.nodeName). Needs RBAC "list" on pods.
 *
 * The reply is hostile: bounded in size and time, parsed with jansson,
 * every name checked against Kubernetes' own rules before it is used.
 */
#ifndef PP_K8S_API_H
#define PP_K8S_API_H

#include <jansson.h>
#include <stddef.h>

#define PP_K8S_API_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define PP_K8S_API_MAX_REPLY (32u << 20) /* a node's pods, managedFields and all */
#define PP_K8S_API_MAX_PODS 4096         /* more in one reply is refused */
#define PP_K8S_API_TIMEOUT_MS 3000       /* the whole request */

/* One pod of a list: namespace and name checked (DNS names), labels the
 * pod's metadata.labels object or NULL (borrowed, unchecked values). */
typedef void (*pp_k8s_pod_cb)(void *ctx, const char *ns, const char *name, const json_t *labels);

/* A PodList reply. 0 and cb per acceptable pod (items with a bad name are
 * skipped); -EPROTO if it is not a PodList object; -E2BIG beyond
 * PP_K8S_API_MAX_PODS items (nothing reported then). */
int pp_k8s_podlist_parse(const char *json, size_t len, pp_k8s_pod_cb cb, void *ctx);

struct pp_k8s_api_opts {
  const char *sa_dir; /* NULL: PP_K8S_API_SA_DIR */
  const char *node;   /* NULL: $NODE_NAME */
  const char *host;   /* NULL: $KUBERNETES_SERVICE_HOST */
  const char *port;   /* NULL: $KUBERNETES_SERVICE_PORT (default 443) */
  long timeout_ms;    /* 0: PP_K8S_API_TIMEOUT_MS */
  size_t max_reply;   /* 0: PP_K8S_API_MAX_REPLY */
};

/* Whether the agent runs in a pod that can ask the API (the service
 * host is set and the token is there). */
int pp_k8s_api_available(const struct pp_k8s_api_opts *o);

/* One listing of this node's pods. 0 and cb per pod, or -errno with why
 * (naming the URL, the HTTP status or the fault in the reply). */
int pp_k8s_api_list_pods(const struct pp_k8s_api_opts *o, pp_k8s_pod_cb cb, void *ctx, char *why,
                         size_t whylen);

#endif /* PP_K8S_API_H */
