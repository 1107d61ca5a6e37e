/* SPDX-License-Identifier: Apache-2.0 */
/* This node's pods from the Kubernetes API (see k8s_api.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "k8s_api.h"
#include "upload/http.h"

#define TOKEN_MAX 16384

/* Namespaces are DNS labels, pod names DNS subdomains; anything else in a
 * reply is not a pod the agent could have named. */
static bool dns_name(const char *s, size_t len, size_t max) {
  if (!len || len > max) return false;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '.'))
      return false;
  }
  return true;
}

static const char *checked(const json_t *v, size_t max) {
  const char *s = json_string_value(v);
  if (!s) return NULL;
  size_t n = json_string_length(v);
  return strlen(s) == n && dns_name(s, n, max) ? s : NULL;
}

int pp_k8s_podlist_parse(const char *json, size_t len, pp_k8s_pod_cb cb, void *ctx) {
  json_error_t err;
  json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &err);
  json_t *items = json_object_get(root, "items");
  int rc = 0;
  if (!json_is_object(root) || !json_is_array(items))
    rc = -EPROTO;
  else if (json_array_size(items) > PP_K8S_API_MAX_PODS)
    rc = -E2BIG;
  size_t i;
  json_t *pod;
  if (rc == 0) json_array_foreach(items, i, pod) {
      json_t *md = json_object_get(pod, "metadata");
      const char *ns = checked(json_object_get(md, "namespace"), 63);
      const char *name = checked(json_object_get(md, "name"), 253);
      json_t *labels = json_object_get(md, "labels");
      if (!ns || !name) continue;
      cb(ctx, ns, name, json_is_object(labels) ? labels : NULL);
    }
  json_decref(root);
  return rc;
}

static const char *env_or(const char *v, const char *name) {
  if (v && *v) return v;
  const char *e = getenv(name);
  return e && *e ? e : NULL;
}

/* The service-account token: one line of printable bytes. */
static int read_token(const char *dir, char *tok, size_t cap) {
  char path[4096];
  if (snprintf(path, sizeof(path), "%s/token", dir) >= (int)sizeof(path)) return -ENAMETOOLONG;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -errno;
  struct stat st;
  ssize_t n = -1;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) n = read(fd, tok, cap - 1);
  int e = errno;
  close(fd);
  if (n < 0) return n == -1 && e ? -e : -EINVAL;
  if ((size_t)n == cap - 1) return -EFBIG;
  while (n > 0 && (tok[n - 1] == '\n' || tok[n - 1] == '\r' || tok[n - 1] == ' '))
    n--;
  tok[n] = '\0';
  if (!n) return -ENODATA;
  for (ssize_t i = 0; i < n; i++)
    if (tok[i] < 0x21 || tok[i] > 0x7e) return -EINVAL;
  return 0;
}

int pp_k8s_api_available(const struct pp_k8s_api_opts *o) {
  const char *dir = o->sa_dir ? o->sa_dir : PP_K8S_API_SA_DIR;
  char path[4096];
  snprintf(path, sizeof(path), "%s/token", dir);
  return env_or(o->host, "KUBERNETES_SERVICE_HOST") && access(path, R_OK) == 0;
}

static bool host_ok(const char *h) {
  for (; *h; h++)
    if (!((*h >= 'a' && *h <= 'z') || (*h >= 'A' && *h <= 'Z') || (*h >= '0' && *h <= '9') ||
          *h == '.' || *h == '-' || *h == ':'))
      return false;
  return true;
}

int pp_k8s_api_list_pods(const struct pp_k8s_api_opts *o, pp_k8s_pod_cb cb, void *ctx, char *why,
                         size_t whylen) {
  const char *dir = o->sa_dir ? o->sa_dir : PP_K8S_API_SA_DIR;
  const char *host = env_or(o->host, "KUBERNETES_SERVICE_HOST");
  const char *port = env_or(o->port, "KUBERNETES_SERVICE_PORT");
  const char *node = env_or(o->node, "NODE_NAME");
  if (!port) port = "443";
  if (!host || !host_ok(host) || strspn(port, "0123456789") != strlen(port) || strlen(port) > 5) {
    snprintf(why, whylen, "KUBERNETES_SERVICE_HOST/PORT unset or not a host and port");
    return -EINVAL;
  }
  if (!node || !dns_name(node, strlen(node), 253)) {
    snprintf(why, whylen,
             "the node name is unknown or not a DNS name (set NODE_NAME from spec.nodeName, or "
             "enrichment.k8s_node_name)");
    return -EINVAL;
  }
  char tok[TOKEN_MAX];
  int rc = read_token(dir, tok, sizeof(tok));
  if (rc < 0) {
    snprintf(why, whylen, "service-account token %s/token unreadable: %s", dir, strerror(-rc));
    return rc;
  }
  char url[1024], ca[4096], auth[TOKEN_MAX + 32];
  bool v6 = strchr(host, ':') != NULL;
  snprintf(url, sizeof(url), "https://%s%s%s:%s/api/v1/pods?fieldSelector=spec.nodeName%%3D%s",
           v6 ? "[" : "", host, v6 ? "]" : "", port, node);
  snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
  snprintf(auth, sizeof(auth), "Authorization: Bearer %s", tok);
  const char *headers[] = {auth, "Accept: application/json", NULL};
  struct pp_http_opts ho = {
      .ca_file = access(ca, R_OK) == 0 ? ca : NULL,
      .verify = true,
      .connect_timeout_ms = 1000,
      .timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : PP_K8S_API_TIMEOUT_MS,
      .max_response = o->max_reply ? o->max_reply : PP_K8S_API_MAX_REPLY,
  };
  struct pp_http_result res = {0};
  pp_http_global_init();
  rc = pp_http_get(url, headers, &ho, &res);
  memset(auth, 0, sizeof(auth));
  memset(tok, 0, sizeof(tok));
  if (rc < 0) {
    snprintf(why, whylen, "GET %s: %s", url, res.error);
    rc = -EIO;
  } else if (res.status == 401 || res.status == 403) {
    snprintf(why, whylen,
             "GET %s: HTTP %ld: the service account may not list pods (needs a ClusterRole "
             "with get/list on pods)",
             url, res.status);
    rc = -EACCES;
  } else if (res.status != 200) {
    snprintf(why, whylen, "GET %s: HTTP %ld", url, res.status);
    rc = -EPROTO;
  } else {
    rc = pp_k8s_podlist_parse(res.body, res.body_len, cb, ctx);
    if (rc == -E2BIG)
      snprintf(why, whylen, "GET %s: more than %d pods in the reply: refused", url,
               PP_K8S_API_MAX_PODS);
    else if (rc < 0)
      snprintf(why, whylen, "GET %s: the reply is not a PodList", url);
  }
  pp_http_result_free(&res);
  return rc;
}
