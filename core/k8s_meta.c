/* SPDX-License-Identifier: Apache-2.0 */
/* Kubernetes facts from OCI bundle annotations (see k8s_meta.h). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "k8s_meta.h"

enum fact { F_CONTAINER, F_POD, F_NS, F_UID, F_RESTART, F_SANDBOX, F_N };

/* Annotation keys per fact: containerd's CRI plugin, then the kubelet's
 * own labels and annotations (CRI-O). */
static const char *const keys[F_N][2] = {
    [F_CONTAINER] = {"io.kubernetes.cri.container-name", "io.kubernetes.container.name"},
    [F_POD] = {"io.kubernetes.cri.sandbox-name", "io.kubernetes.pod.name"},
    [F_NS] = {"io.kubernetes.cri.sandbox-namespace", "io.kubernetes.pod.namespace"},
    [F_UID] = {"io.kubernetes.cri.sandbox-uid", "io.kubernetes.pod.uid"},
    [F_RESTART] = {NULL, "io.kubernetes.container.restartCount"},
    [F_SANDBOX] = {"io.kubernetes.cri.sandbox-id", "io.kubernetes.cri-o.SandboxID"},
};

/* Kubernetes names are DNS labels/subdomains: anything else (';', '_',
 * spaces, control bytes) would break the .col line or the name's form. */
static bool clean(const char *s, bool allow_underscore) {
  if (!*s) return false;
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || (allow_underscore && c == '_');
    if (!ok) return false;
  }
  return true;
}

static const char *lookup(json_t *ann, json_t *embedded[2], enum fact f) {
  for (int k = 0; k < 2; k++) {
    if (!keys[f][k]) continue;
    const char *v = json_string_value(json_object_get(ann, keys[f][k]));
    if (v) return v;
    for (int e = 0; e < 2; e++) {
      v = json_string_value(json_object_get(embedded[e], keys[f][k]));
      if (v) return v;
    }
  }
  return NULL;
}

static int copy(char *dst, size_t cap, const char *v, bool allow_underscore) {
  if (!v) return -ENOENT;
  if (strlen(v) >= cap || !clean(v, allow_underscore)) return -EINVAL;
  memcpy(dst, v, strlen(v) + 1);
  return 0;
}

static bool is_id(const char *id) {
  size_t n = 0;
  for (; id[n]; n++)
    if (!((id[n] >= '0' && id[n] <= '9') || (id[n] >= 'a' && id[n] <= 'f'))) return false;
  return n == 64;
}

int pp_k8s_meta_parse(const char *json, size_t len, struct pp_k8s_meta *m) {
  memset(m, 0, sizeof(*m));
  json_error_t err;
  json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &err);
  if (!root || !json_is_object(root)) {
    json_decref(root);
    return -EPROTO;
  }
  json_t *ann = json_object_get(root, "annotations");
  /* CRI-O keeps the kubelet's labels and annotations as JSON text */
  json_t *embedded[2] = {NULL, NULL};
  static const char *const embedded_keys[2] = {"io.kubernetes.cri-o.Labels",
                                               "io.kubernetes.cri-o.Annotations"};
  for (int e = 0; e < 2; e++) {
    json_t *t = json_object_get(ann, embedded_keys[e]);
    if (json_is_string(t))
      embedded[e] =
          json_loadb(json_string_value(t), json_string_length(t), JSON_REJECT_DUPLICATES, &err);
    if (embedded[e] && !json_is_object(embedded[e])) {
      json_decref(embedded[e]);
      embedded[e] = NULL;
    }
  }
  int rc = copy(m->container, sizeof(m->container), lookup(ann, embedded, F_CONTAINER), false);
  int rc2 = copy(m->pod, sizeof(m->pod), lookup(ann, embedded, F_POD), false);
  int rc3 = copy(m->ns, sizeof(m->ns), lookup(ann, embedded, F_NS), false);
  if (rc == 0) rc = rc2;
  if (rc == 0) rc = rc3;
  if (rc == 0) {
    const char *uid = lookup(ann, embedded, F_UID);
    if (uid && copy(m->uid, sizeof(m->uid), uid, true) < 0) rc = -EINVAL;
    const char *rs = lookup(ann, embedded, F_RESTART);
    if (rs) {
      char *end;
      unsigned long v = strtoul(rs, &end, 10);
      if (*rs >= '0' && *rs <= '9' && !*end && v < 1000000) m->restart = (unsigned)v;
    }
    const char *sb = lookup(ann, embedded, F_SANDBOX);
    if (sb && is_id(sb)) memcpy(m->sandbox, sb, 65);
  }
  json_decref(embedded[0]);
  json_decref(embedded[1]);
  json_decref(root);
  if (rc < 0) memset(m, 0, sizeof(*m));
  return rc;
}

/* The whole of a regular file, at most PP_K8S_CONFIG_MAX bytes. */
static int read_small(const char *path, char **out, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return -errno;
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return -EINVAL;
  }
  if (st.st_size > (off_t)PP_K8S_CONFIG_MAX) {
    close(fd);
    return -EFBIG;
  }
  size_t cap = (size_t)st.st_size + 1, n = 0;
  char *buf = malloc(cap);
  if (!buf) {
    close(fd);
    return -ENOMEM;
  }
  /* the file may change under us: read what is there, up to the size seen */
  while (n < cap - 1) {
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += (size_t)r;
  }
  close(fd);
  *out = buf;
  *len = n;
  return 0;
}

/* Bundle directories and the config.json path inside one, per runtime:
 * containerd's first, then CRI-O's (which also holds pod sandboxes). */
static const char *const bundle_dirs[][2] = {
    {"/run/containerd/io.containerd.runtime.v2.task/k8s.io/", "/config.json"},
    {"/run/containers/storage/overlay-containers/", "/userdata/config.json"},
    {"/var/lib/containers/storage/overlay-containers/", "/userdata/config.json"},
};
#define CRIO_BUNDLE_DIRS 1 /* the first of CRI-O's in bundle_dirs */
#define NBUNDLE_DIRS (sizeof(bundle_dirs) / sizeof(bundle_dirs[0]))

/* The config.json of bundle `id` under root, from the first of dirs[from..]
 * that has one `parse` accepts (0 from it); otherwise the last error, or
 * -ENOENT when no bundle exists. */
static int read_bundle_config(const char *root, size_t from, const char *id,
                              int (*parse)(const char *text, size_t len, void *arg), void *arg) {
  int rc = -ENOENT;
  for (size_t i = from; i < NBUNDLE_DIRS; i++) {
    char path[4096];
    if (snprintf(path, sizeof(path), "%s%s%s%s", root, bundle_dirs[i][0], id, bundle_dirs[i][1]) >=
        (int)sizeof(path))
      return -ENAMETOOLONG;
    char *text = NULL;
    size_t len = 0;
    int r = read_small(path, &text, &len);
    if (r == -ENOENT || r == -ENOTDIR) continue;
    if (r < 0) {
      rc = r;
      continue;
    }
    r = parse(text, len, arg);
    free(text);
    if (r == 0) return 0;
    rc = r;
  }
  return rc;
}

static int parse_meta(const char *text, size_t len, void *m) {
  return pp_k8s_meta_parse(text, len, m);
}

int pp_k8s_meta_lookup(const char *root, const char *id, struct pp_k8s_meta *m) {
  if (!id || !is_id(id)) return -EINVAL;
  return read_bundle_config(root ? root : "/proc/1/root", 0, id, parse_meta, m);
}

void pp_k8s_meta_name(const struct pp_k8s_meta *m, char *buf, size_t len) {
  snprintf(buf, len, "k8s_%s_%s_%s_%s_%u", m->container, m->pod, m->ns, m->uid, m->restart);
}

int pp_k8s_name_split(const char *name, const char **container, size_t *clen, const char **pod,
                      size_t *plen, const char **ns, size_t *nslen) {
  if (strncmp(name, "k8s_", 4) != 0) return -1;
  const char *part[6];
  size_t len[6], np = 0;
  const char *s = name + 4;
  while (np < 6) {
    const char *u = strchr(s, '_');
    part[np] = s;
    len[np] = u ? (size_t)(u - s) : strlen(s);
    np++;
    if (!u) break;
    s = u + 1;
  }
  /* container, pod, namespace, uid, attempt; the pod name never has '_' */
  if (np != 5 || !len[0] || !len[1] || !len[2]) return -1;
  *container = part[0], *clen = len[0];
  *pod = part[1], *plen = len[1];
  *ns = part[2], *nslen = len[2];
  return 0;
}

/* A CRI-O sandbox's labels: a JSON object in a string annotation. */
static int parse_sandbox_labels(const char *text, size_t len, void *arg) {
  json_t **labels = arg;
  json_error_t err;
  json_t *cfg = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
  json_t *t = json_object_get(json_object_get(cfg, "annotations"), "io.kubernetes.cri-o.Labels");
  json_t *l = json_is_string(t) ? json_loadb(json_string_value(t), json_string_length(t),
                                             JSON_REJECT_DUPLICATES, &err)
                                : NULL;
  json_decref(cfg);
  if (!json_is_object(l)) {
    json_decref(l);
    return -EPROTO;
  }
  *labels = l;
  return 0;
}

int pp_k8s_sandbox_labels(const char *root, const char *sandbox_id, json_t **labels) {
  *labels = NULL;
  if (!sandbox_id || !is_id(sandbox_id)) return -EINVAL;
  return read_bundle_config(root ? root : "/proc/1/root", CRIO_BUNDLE_DIRS, sandbox_id,
                            parse_sandbox_labels, labels);
}
