/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kubernetes facts of a container (pod, namespace, container name, pod
 * uid) for runtimes the Docker API does not cover: containerd's CRI plugin
 * and CRI-O. Both keep each running container's OCI bundle on the host with
 * its config.json, whose annotations carry what the kubelet asked for:
 *
 *   containerd  <root>/run/containerd/io.containerd.runtime.v2.task/k8s.io/<id>/config.json
 *               io.kubernetes.cri.container-name, .sandbox-name,
 *               .sandbox-namespace, .sandbox-uid
 *   CRI-O       <root>/run/containers/storage/overlay-containers/<id>/userdata/config.json
 *               (also under /var/lib/containers/storage)
 *               io.kubernetes.container.name, io.kubernetes.pod.name,
 *               io.kubernetes.pod.namespace, io.kubernetes.pod.uid,
 *               io.kubernetes.container.restartCount, or the same keys inside
 *               the JSON strings io.kubernetes.cri-o.Labels / .Annotations
 *
 * Reading a file is read-only and needs no socket or gRPC client; <root> is
 * the host's root as the agent sees it (/proc/1/root). The name given to a
 * container is the dockershim form gProfiler builds from the same facts:
 * k8s_<container>_<pod>_<namespace>_<pod-uid>_<restart count>.
 */
#ifndef PP_K8S_META_H
#define PP_K8S_META_H

#include <jansson.h>
#include <stddef.h>

#define PP_K8S_CONFIG_MAX (4u << 20) /* larger config.json files are refused */
#define PP_K8S_NAME_MAX 512

struct pp_k8s_meta {
  char container[128];
  char pod[254]; /* a DNS subdomain: at most 253 characters */
  char ns[64];
  char uid[64];
  unsigned restart;
  char sandbox[65]; /* the pod sandbox's container id, "" if not given */
};

/* Facts from a config.json text (len bytes, need not be terminated).
 * 0; -ENOENT if it has no Kubernetes container name, pod and namespace;
 * -EPROTO if it is not a JSON object; -EINVAL if a value is too long or
 * holds a byte a .col field cannot ('_' is allowed only in the uid). */
int pp_k8s_meta_parse(const char *json, size_t len, struct pp_k8s_meta *m);

/* Facts of container id (64 hex digits) from the bundles under root
 * ("/proc/1/root" when NULL). 0, -ENOENT (no bundle of either runtime),
 * or another -errno from reading or parsing it. */
int pp_k8s_meta_lookup(const char *root, const char *id, struct pp_k8s_meta *m);

/* The pod labels CRI-O keeps in the sandbox (infra) container's bundle,
 * under root as for pp_k8s_meta_lookup: 0 and *labels (a JSON object to
 * json_decref) from its io.kubernetes.cri-o.Labels annotation, else
 * -ENOENT or another -errno. containerd keeps no pod labels on the host. */
int pp_k8s_sandbox_labels(const char *root, const char *sandbox_id, json_t **labels);

/* "k8s_<container>_<pod>_<namespace>_<uid>_<restart>" into buf. */
void pp_k8s_meta_name(const struct pp_k8s_meta *m, char *buf, size_t len);

/* A container name of that form (from here or from the kubelet's Docker
 * shim) split into its Kubernetes parts: 0 and pointers/lengths into name,
 * else -1. */
int pp_k8s_name_split(const char *name, const char **container, size_t *clen, const char **pod,
                      size_t *plen, const char **ns, size_t *nslen);

#endif /* PP_K8S_META_H */
