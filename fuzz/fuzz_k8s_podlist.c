/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: a Kubernetes API PodList reply (core/k8s_api.c), whose pod
 * names and labels come from cluster users, fed into the selected-labels
 * table (core/k8s_labels.c). Every pod the parser accepts must have names
 * that fit a pod key; every label read back must be one of the selected keys
 * with a value of Kubernetes' label form.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8s_api.h"
#include "k8s_labels.h"

static void check_label(void *ctx, const char *key, const char *value) {
  (void)ctx;
  if (strcmp(key, "app") && strcmp(key, "app.kubernetes.io/name") && strcmp(key, "team")) abort();
  if (strlen(value) > PP_K8S_LABEL_VALUE_MAX || strpbrk(value, ";,=\n\r /{}\"")) abort();
}

static void on_pod(void *ctx, const char *ns, const char *name, const json_t *labels) {
  (void)ctx;
  if (!*ns || !*name || strlen(ns) > 63 || strlen(name) > 253 || strpbrk(ns, "/;_ ") ||
      strpbrk(name, "/;_ "))
    abort();
  char key[PP_K8S_POD_KEY_MAX + 1], cname[PP_K8S_POD_KEY_MAX + 64];
  snprintf(key, sizeof(key), "%s/%s", ns, name);
  pp_k8s_labels_put(key, labels);
  if (!pp_k8s_labels_known(key)) abort();
  snprintf(cname, sizeof(cname), "k8s_c_%s_%s_uid_0", name, ns);
  pp_k8s_labels_each(cname, check_label, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int configured;
  if (!configured) {
    char why[128];
    if (pp_k8s_labels_configure("app,app.kubernetes.io/name,team", why, sizeof(why)) < 0) abort();
    configured = 1;
  }
  char *copy = malloc(size ? size : 1); /* exact size: ASan sees any overread */
  if (!copy) abort();
  memcpy(copy, data, size);
  pp_k8s_podlist_parse(copy, size, on_pod, NULL);
  free(copy);
  return 0;
}
