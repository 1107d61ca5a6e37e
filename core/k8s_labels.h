/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pod labels selected by the operator (--k8s-labels KEY[,KEY],
 * enrichment.k8s_labels; none by default), as OpenTelemetry's k8sattributes
 * processor extracts them: only the named keys are kept, and they travel as
 * k8s.pod.label.<key> (OTLP resource attributes, pprof sample labels) and
 * pod_label_<key> (Pyroscope tags, whose names allow no '.' or '/').
 *
 * The labels of a pod are learnt from what the node has: CRI-O's sandbox
 * config.json (the infra container's io.kubernetes.cri-o.Labels), Docker's
 * pod sandbox container labels, or the Kubernetes API's pod list of this
 * node (k8s_api.h). They are kept per pod ("<namespace>/<pod>"), or per
 * container name for a container outside Kubernetes (Docker labels), in one
 * bounded table the writers read: the .col container field is unchanged.
 */
#ifndef PP_K8S_LABELS_H
#define PP_K8S_LABELS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define PP_K8S_LABELS_MAX_KEYS 16 /* keys an operator may select */
#define PP_K8S_LABEL_KEY_MAX 317  /* prefix (253) '/' name (63) */
#define PP_K8S_LABEL_VALUE_MAX 63
#define PP_K8S_LABELS_CAPACITY 1024   /* pods (or containers) remembered */
#define PP_K8S_POD_KEY_MAX (64 + 254) /* "<namespace>/<pod>" */

/* Select the label keys (comma-separated; NULL or "" selects none and
 * forgets every label). 0, or -EINVAL with why naming the bad key. */
int pp_k8s_labels_configure(const char *keys, char *why, size_t whylen);

/* The same check of a key list, selecting nothing. 0 or -EINVAL. */
int pp_k8s_labels_check(const char *keys, char *why, size_t whylen);

/* Whether any key is selected. */
bool pp_k8s_labels_wanted(void);

/* Whether a label key has the form Kubernetes allows. */
bool pp_k8s_label_key_valid(const char *key, size_t len);

/* The table key of a container name: "<namespace>/<pod>" for a CRI name
 * (k8s_meta.h), else the name itself. 0, or -1 if it does not fit. */
int pp_k8s_labels_key_of(const char *container, char *key, size_t len);

/* Remember the selected labels of a pod ("<namespace>/<pod>") or a container
 * name from a JSON object of string values (anything else in it is
 * ignored; labels is borrowed). A pod with none of the keys is remembered
 * too, so it is not asked about again. */
void pp_k8s_labels_put(const char *key, const json_t *labels);

/* Whether key was put (and not evicted since). */
bool pp_k8s_labels_known(const char *key);

/* The remembered labels of a container name (its pod's for a CRI name):
 * cb once per label, in the order the keys were selected; returns how many.
 * The table is locked during the calls: cb must not call back in. */
typedef void (*pp_k8s_label_cb)(void *ctx, const char *key, const char *value);
size_t pp_k8s_labels_each(const char *container, pp_k8s_label_cb cb, void *ctx);

#endif /* PP_K8S_LABELS_H */
