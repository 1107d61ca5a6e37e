/* SPDX-License-Identifier: Apache-2.0 */
/* Kubernetes facts from OCI bundles: containerd's and CRI-O's annotation
 * forms as their runtimes write them, refusals, and the lookup under a
 * root directory laid out like a host's /run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "k8s_meta.h"
#include "testlib.h"

#define ID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* what containerd 1.7's CRI plugin writes (trimmed to the annotations) */
static const char containerd_cfg[] =
    "{\"ociVersion\":\"1.1.0\",\"process\":{\"args\":[\"/app\"]},\"annotations\":{"
    "\"io.kubernetes.cri.container-name\":\"api\","
    "\"io.kubernetes.cri.container-type\":\"container\","
    "\"io.kubernetes.cri.image-name\":\"registry.local/api:1.2\","
    "\"io.kubernetes.cri.sandbox-id\":\"" ID
    "\","
    "\"io.kubernetes.cri.sandbox-name\":\"web-7d9f8c-x2x4q\","
    "\"io.kubernetes.cri.sandbox-namespace\":\"prod\","
    "\"io.kubernetes.cri.sandbox-uid\":\"5f0c1c6e-1b2a-4c3d-9e8f-0a1b2c3d4e5f\"}}";

/* CRI-O: the kubelet's labels and annotations as JSON text */
static const char crio_cfg[] =
    "{\"annotations\":{"
    "\"io.kubernetes.cri-o.ContainerName\":\"k8s_redis_cache-0_data_u-1_3\","
    "\"io.kubernetes.cri-o.Labels\":\"{\\\"io.kubernetes.container.name\\\":\\\"redis\\\","
    "\\\"io.kubernetes.pod.name\\\":\\\"cache-0\\\",\\\"io.kubernetes.pod.namespace\\\":"
    "\\\"data\\\",\\\"io.kubernetes.pod.uid\\\":\\\"u-1\\\"}\","
    "\"io.kubernetes.cri-o.Annotations\":\"{\\\"io.kubernetes.container.restartCount\\\":"
    "\\\"3\\\"}\"}}";

static void parse(void) {
  struct pp_k8s_meta m;
  char name[PP_K8S_NAME_MAX];
  CHECK_EQ_INT(pp_k8s_meta_parse(containerd_cfg, strlen(containerd_cfg), &m), 0);
  pp_k8s_meta_name(&m, name, sizeof(name));
  CHECK_EQ_STR(name, "k8s_api_web-7d9f8c-x2x4q_prod_5f0c1c6e-1b2a-4c3d-9e8f-0a1b2c3d4e5f_0");
  CHECK_EQ_INT(pp_k8s_meta_parse(crio_cfg, strlen(crio_cfg), &m), 0);
  pp_k8s_meta_name(&m, name, sizeof(name));
  CHECK_EQ_STR(name, "k8s_redis_cache-0_data_u-1_3");
  /* not Kubernetes, not JSON, not an object, a name that would break a .col line */
  const char *plain = "{\"annotations\":{\"org.opencontainers.image.title\":\"x\"}}";
  CHECK_EQ_INT(pp_k8s_meta_parse(plain, strlen(plain), &m), -ENOENT);
  CHECK_EQ_INT(pp_k8s_meta_parse("{\"annotations\":", 15, &m), -EPROTO);
  CHECK_EQ_INT(pp_k8s_meta_parse("[]", 2, &m), -EPROTO);
  const char *semi =
      "{\"annotations\":{\"io.kubernetes.cri.container-name\":\"a;b\","
      "\"io.kubernetes.cri.sandbox-name\":\"p\","
      "\"io.kubernetes.cri.sandbox-namespace\":\"n\"}}";
  CHECK_EQ_INT(pp_k8s_meta_parse(semi, strlen(semi), &m), -EINVAL);
  CHECK_EQ_STR(m.container, ""); /* nothing half-filled */
  char longpod[600];
  int n = snprintf(longpod, sizeof(longpod),
                   "{\"annotations\":{\"io.kubernetes.cri.container-name\":\"a\","
                   "\"io.kubernetes.cri.sandbox-namespace\":\"n\","
                   "\"io.kubernetes.cri.sandbox-name\":\"%0300d\"}}",
                   0);
  CHECK_EQ_INT(pp_k8s_meta_parse(longpod, (size_t)n, &m), -EINVAL);
  /* an embedded Labels text that is not an object is ignored, not trusted */
  const char *bad_embedded = "{\"annotations\":{\"io.kubernetes.cri-o.Labels\":\"[1,2]\"}}";
  CHECK_EQ_INT(pp_k8s_meta_parse(bad_embedded, strlen(bad_embedded), &m), -ENOENT);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

static void lookup(void) {
  char root[] = "/tmp/pp-k8s-XXXXXX";
  CHECK(mkdtemp(root) != NULL);
  char cmd[512], path[512];
  snprintf(cmd, sizeof(cmd),
           "mkdir -p %s/run/containerd/io.containerd.runtime.v2.task/k8s.io/" ID
           " %s/var/lib/containers/storage/overlay-containers/" ID "/userdata",
           root, root);
  CHECK_EQ_INT(system(cmd), 0);
  struct pp_k8s_meta m;
  CHECK_EQ_INT(pp_k8s_meta_lookup(root, ID, &m), -ENOENT);
  CHECK_EQ_INT(pp_k8s_meta_lookup(root, "../../etc", &m), -EINVAL);
  snprintf(path, sizeof(path),
           "%s/var/lib/containers/storage/overlay-containers/" ID "/userdata/config.json", root);
  write_file(path, crio_cfg);
  CHECK_EQ_INT(pp_k8s_meta_lookup(root, ID, &m), 0);
  CHECK_EQ_STR(m.pod, "cache-0");
  snprintf(path, sizeof(path),
           "%s/run/containerd/io.containerd.runtime.v2.task/k8s.io/" ID "/config.json", root);
  write_file(path, containerd_cfg);
  CHECK_EQ_INT(pp_k8s_meta_lookup(root, ID, &m), 0);
  CHECK_EQ_STR(m.pod, "web-7d9f8c-x2x4q"); /* containerd's bundle comes first */
  /* a symlink in place of config.json is not followed */
  unlink(path);
  CHECK_EQ_INT(symlink("/etc/hostname", path), 0);
  CHECK_EQ_INT(pp_k8s_meta_lookup(root, ID, &m), 0);
  CHECK_EQ_STR(m.pod, "cache-0");
  snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
  CHECK_EQ_INT(system(cmd), 0);
}

int main(void) {
  parse();
  lookup();
  return pp_test_finish("test_k8s_meta");
}
