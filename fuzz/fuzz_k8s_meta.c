/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: a container runtime's OCI bundle config.json
 * (core/k8s_meta.c), whose annotations come from the pod spec a cluster
 * user wrote. An accepted one must give names that fit a .col field and the
 * dockershim name form.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "k8s_meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *copy = malloc(size ? size : 1); /* exact size: ASan sees any overread */
  if (!copy) abort();
  memcpy(copy, data, size);
  struct pp_k8s_meta m;
  if (pp_k8s_meta_parse(copy, size, &m) == 0) {
    char name[PP_K8S_NAME_MAX];
    pp_k8s_meta_name(&m, name, sizeof(name));
    if (!m.container[0] || !m.pod[0] || !m.ns[0] || strpbrk(name, ";\n\r /") ||
        strlen(name) >= sizeof(name) - 1)
      abort();
    if (strchr(m.container, '_') || strchr(m.pod, '_') || strchr(m.ns, '_')) abort();
  }
  free(copy);
  return 0;
}
