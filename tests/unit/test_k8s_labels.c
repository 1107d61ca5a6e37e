/* SPDX-License-Identifier: Apache-2.0 */
/* Selected pod labels: the key rules of --k8s-labels, the Kubernetes API's
 * PodList parser on a real-shaped reply and on hostile ones, the bounded
 * table, and CRI-O's sandbox labels read from a root laid out like a host's
 * /run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "k8s_api.h"
#include "k8s_labels.h"
#include "k8s_meta.h"
#include "testlib.h"

#define SANDBOX "ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12"
#define CONTAINER "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void keys(void) {
  char why[256] = "";
  CHECK(pp_k8s_label_key_valid("app", 3));
  CHECK(pp_k8s_label_key_valid("app.kubernetes.io/name", 22));
  CHECK(!pp_k8s_label_key_valid("-app", 4));
  CHECK(!pp_k8s_label_key_valid("Example.com/x", 13)); /* a prefix is lower-case DNS */
  CHECK(!pp_k8s_label_key_valid("a/", 2));
  CHECK_EQ_INT(pp_k8s_labels_configure("app,bad key", why, sizeof(why)), -EINVAL);
  CHECK_CONTAINS(why, "'bad key' is not a Kubernetes label key");
  CHECK_EQ_INT(pp_k8s_labels_configure("a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", why, sizeof(why)),
               -EINVAL);
  CHECK_EQ_INT(pp_k8s_labels_configure(NULL, why, sizeof(why)), 0);
  CHECK(!pp_k8s_labels_wanted());
  pp_k8s_labels_put("prod/web", NULL); /* no keys: nothing kept */
  CHECK(!pp_k8s_labels_known("prod/web"));
}

struct seen {
  int pods;
  char last[128];
};

static void on_pod(void *ctx, const char *ns, const char *name, const json_t *labels) {
  struct seen *s = ctx;
  s->pods++;
  snprintf(s->last, sizeof(s->last), "%s/%s", ns, name);
  pp_k8s_labels_put(s->last, labels);
}

static void collect(void *ctx, const char *key, const char *value) {
  char *out = ctx;
  size_t n = strlen(out);
  snprintf(out + n, 512 - n, "%s=%s;", key, value);
}

static const char podlist[] =
    "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"9\"},"
    "\"items\":[{\"metadata\":{\"name\":\"web-7d9f8c-x2x4q\",\"namespace\":\"prod\","
    "\"uid\":\"5f0c\",\"labels\":{\"app\":\"web\",\"pod-template-hash\":\"7d9f8c\","
    "\"app.kubernetes.io/name\":\"shop\"},\"managedFields\":[{\"manager\":\"k\"}]},"
    "\"spec\":{\"nodeName\":\"node-1\"}},"
    /* hostile: a name no pod can have, a label value of another shape */
    "{\"metadata\":{\"name\":\"x;y\",\"namespace\":\"prod\"}},"
    "{\"metadata\":{\"name\":\"cache-0\",\"namespace\":\"data\","
    "\"labels\":{\"app\":[\"redis\"],\"team\":\"a b\"}}},"
    "{\"metadata\":{\"namespace\":\"nameless\"}}]}";

static void podlists(void) {
  char why[256] = "";
  CHECK_EQ_INT(pp_k8s_labels_configure("app.kubernetes.io/name,app,team", why, sizeof(why)), 0);
  CHECK(pp_k8s_labels_wanted());
  struct seen s = {0};
  CHECK_EQ_INT(pp_k8s_podlist_parse(podlist, strlen(podlist), on_pod, &s), 0);
  CHECK_EQ_INT(s.pods, 2);
  char out[512] = "";
  /* a CRI name finds its pod's labels, in the order the keys were selected */
  CHECK_EQ_INT((int)pp_k8s_labels_each("k8s_api_web-7d9f8c-x2x4q_prod_5f0c_0", collect, out), 2);
  CHECK_EQ_STR(out, "app.kubernetes.io/name=shop;app=web;");
  out[0] = '\0';
  CHECK_EQ_INT((int)pp_k8s_labels_each("k8s_redis_cache-0_data_u_1", collect, out), 0);
  CHECK(pp_k8s_labels_known("data/cache-0")); /* known, without labels */
  CHECK(!pp_k8s_labels_known("prod/x;y"));
  /* not a PodList, truncated, too many pods */
  CHECK_EQ_INT(pp_k8s_podlist_parse("{\"kind\":\"Status\",\"code\":403}", 29, on_pod, &s), -EPROTO);
  CHECK_EQ_INT(pp_k8s_podlist_parse(podlist, strlen(podlist) - 3, on_pod, &s), -EPROTO);
  size_t cap = 64 + (PP_K8S_API_MAX_PODS + 1) * 4;
  char *many = malloc(cap);
  CHECK(many != NULL);
  if (many) {
    size_t n = (size_t)snprintf(many, cap, "{\"items\":[");
    for (int i = 0; i <= PP_K8S_API_MAX_PODS; i++)
      n += (size_t)snprintf(many + n, cap - n, "%s{}", i ? "," : "");
    n += (size_t)snprintf(many + n, cap - n, "]}");
    s.pods = 0;
    CHECK_EQ_INT(pp_k8s_podlist_parse(many, n, on_pod, &s), -E2BIG);
    CHECK_EQ_INT(s.pods, 0);
    free(many);
  }
  /* the table stays bounded: the oldest pod goes */
  for (int i = 0; i < PP_K8S_LABELS_CAPACITY + 10; i++) {
    char key[64];
    snprintf(key, sizeof(key), "ns/pod-%d", i);
    pp_k8s_labels_put(key, NULL);
  }
  CHECK(!pp_k8s_labels_known("ns/pod-0"));
  CHECK(pp_k8s_labels_known("ns/pod-1033"));
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

/* CRI-O: the app container names its sandbox, whose bundle has the labels */
static void crio_sandbox(void) {
  char root[] = "/tmp/pp-k8s-labels-XXXXXX", path[512], cmd[600];
  CHECK(mkdtemp(root) != NULL);
  snprintf(cmd, sizeof(cmd), "mkdir -p %s/run/containers/storage/overlay-containers/%s/userdata",
           root, SANDBOX);
  CHECK_EQ_INT(system(cmd), 0);
  snprintf(path, sizeof(path),
           "%s/run/containers/storage/overlay-containers/%s/userdata/config.json", root, SANDBOX);
  write_file(path,
             "{\"annotations\":{\"io.kubernetes.cri-o.Labels\":"
             "\"{\\\"app\\\":\\\"redis\\\",\\\"io.kubernetes.pod.name\\\":\\\"cache-0\\\"}\"}}");
  const char *app = "{\"annotations\":{\"io.kubernetes.cri-o.SandboxID\":\"" SANDBOX
                    "\","
                    "\"io.kubernetes.cri-o.Labels\":\"{\\\"io.kubernetes.container.name\\\":"
                    "\\\"redis\\\",\\\"io.kubernetes.pod.name\\\":\\\"cache-0\\\","
                    "\\\"io.kubernetes.pod.namespace\\\":\\\"data\\\"}\"}}";
  struct pp_k8s_meta m;
  CHECK_EQ_INT(pp_k8s_meta_parse(app, strlen(app), &m), 0);
  CHECK_EQ_STR(m.sandbox, SANDBOX);
  json_t *labels = NULL;
  CHECK_EQ_INT(pp_k8s_sandbox_labels(root, m.sandbox, &labels), 0);
  CHECK_EQ_STR(json_string_value(json_object_get(labels, "app")), "redis");
  json_decref(labels);
  CHECK_EQ_INT(pp_k8s_sandbox_labels(root, CONTAINER, &labels), -ENOENT);
  CHECK_EQ_INT(pp_k8s_sandbox_labels(root, "../../etc", &labels), -EINVAL);
  write_file(path, "{\"annotations\":{\"io.kubernetes.cri-o.Labels\":\"[1]\"}}");
  CHECK_EQ_INT(pp_k8s_sandbox_labels(root, SANDBOX, &labels), -EPROTO);
  CHECK(labels == NULL);
  snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
  CHECK_EQ_INT(system(cmd), 0);
}

int main(void) {
  keys();
  podlists();
  crio_sandbox();
  return pp_test_finish("test_k8s_labels");
}
