/* SPDX-License-Identifier: Apache-2.0 */
/* The selected pod labels, one bounded table (see k8s_labels.h). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8s_labels.h"
#include "k8s_meta.h"

struct entry {
  char key[PP_K8S_POD_KEY_MAX + 1]; /* "" = free */
  uint64_t used;                    /* last put or read: the oldest is evicted */
  uint32_t present;                 /* bit k: values[k] is set */
  char values[PP_K8S_LABELS_MAX_KEYS][PP_K8S_LABEL_VALUE_MAX + 1];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char keys[PP_K8S_LABELS_MAX_KEYS][PP_K8S_LABEL_KEY_MAX + 1];
static size_t nkeys;
static struct entry *table; /* PP_K8S_LABELS_CAPACITY entries, only while keys are selected */
static uint64_t tick;

static bool alnum(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* A label name or value: [A-Za-z0-9._-], alphanumeric at both ends. */
static bool name_valid(const char *s, size_t n, bool allow_empty) {
  if (!n) return allow_empty;
  if (n > 63 || !alnum((unsigned char)s[0]) || !alnum((unsigned char)s[n - 1])) return false;
  for (size_t i = 0; i < n; i++)
    if (!alnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-') return false;
  return true;
}

bool pp_k8s_label_key_valid(const char *key, size_t len) {
  const char *slash = memchr(key, '/', len);
  if (!slash) return name_valid(key, len, false);
  size_t plen = (size_t)(slash - key);
  if (!plen || plen > 253) return false;
  for (size_t i = 0; i < plen; i++) /* a DNS subdomain */
    if (!((key[i] >= 'a' && key[i] <= 'z') || (key[i] >= '0' && key[i] <= '9') || key[i] == '.' ||
          key[i] == '-'))
      return false;
  return name_valid(slash + 1, len - plen - 1, false);
}

static int parse_keys(const char *list, char parsed[][PP_K8S_LABEL_KEY_MAX + 1], size_t *count,
                      char *why, size_t whylen) {
  size_t n = 0;
  for (const char *s = list; s && *s;) {
    const char *c = strchr(s, ',');
    size_t len = c ? (size_t)(c - s) : strlen(s);
    if (len) {
      if (!pp_k8s_label_key_valid(s, len)) {
        snprintf(why, whylen, "'%.*s' is not a Kubernetes label key", (int)(len > 80 ? 80 : len),
                 s);
        return -EINVAL;
      }
      if (n == PP_K8S_LABELS_MAX_KEYS) {
        snprintf(why, whylen, "more than %d label keys", PP_K8S_LABELS_MAX_KEYS);
        return -EINVAL;
      }
      memcpy(parsed[n], s, len);
      parsed[n++][len] = '\0';
    }
    s = c ? c + 1 : NULL;
  }
  *count = n;
  return 0;
}

int pp_k8s_labels_check(const char *list, char *why, size_t whylen) {
  char parsed[PP_K8S_LABELS_MAX_KEYS][PP_K8S_LABEL_KEY_MAX + 1];
  size_t n;
  return parse_keys(list, parsed, &n, why, whylen);
}

int pp_k8s_labels_configure(const char *list, char *why, size_t whylen) {
  char parsed[PP_K8S_LABELS_MAX_KEYS][PP_K8S_LABEL_KEY_MAX + 1];
  size_t n = 0;
  int rc = parse_keys(list, parsed, &n, why, whylen);
  if (rc < 0) return rc;
  struct entry *t = n ? calloc(PP_K8S_LABELS_CAPACITY, sizeof(*t)) : NULL;
  if (n && !t) {
    snprintf(why, whylen, "out of memory");
    return -ENOMEM;
  }
  pthread_mutex_lock(&lock);
  free(table);
  table = t;
  memcpy(keys, parsed, sizeof(parsed[0]) * n);
  nkeys = n;
  pthread_mutex_unlock(&lock);
  return 0;
}

bool pp_k8s_labels_wanted(void) {
  pthread_mutex_lock(&lock);
  bool w = nkeys > 0;
  pthread_mutex_unlock(&lock);
  return w;
}

int pp_k8s_labels_key_of(const char *container, char *key, size_t len) {
  const char *c, *pod, *ns;
  size_t cl, pl, nl;
  int n;
  if (pp_k8s_name_split(container, &c, &cl, &pod, &pl, &ns, &nl) == 0)
    n = snprintf(key, len, "%.*s/%.*s", (int)nl, ns, (int)pl, pod);
  else
    n = snprintf(key, len, "%s", container);
  return n < 0 || (size_t)n >= len || n > PP_K8S_POD_KEY_MAX ? -1 : 0;
}

static struct entry *find(const char *key) {
  for (size_t i = 0; i < PP_K8S_LABELS_CAPACITY; i++)
    if (table[i].key[0] && strcmp(table[i].key, key) == 0) return &table[i];
  return NULL;
}

void pp_k8s_labels_put(const char *key, const json_t *labels) {
  if (!key || !*key || strlen(key) > PP_K8S_POD_KEY_MAX) return;
  pthread_mutex_lock(&lock);
  if (!table) goto out;
  struct entry *e = find(key);
  if (!e) { /* a free slot, else the least recently used one */
    e = &table[0];
    for (size_t i = 0; i < PP_K8S_LABELS_CAPACITY && e->key[0]; i++)
      if (!table[i].key[0] || table[i].used < e->used) e = &table[i];
    memset(e, 0, sizeof(*e));
    strcpy(e->key, key);
  }
  e->used = ++tick;
  e->present = 0;
  for (size_t k = 0; k < nkeys && json_is_object(labels); k++) {
    const json_t *v = json_object_get(labels, keys[k]);
    const char *s = json_string_value(v);
    size_t n = s ? json_string_length(v) : 0;
    /* a value of another shape is a reply not to be believed */
    if (!s || strlen(s) != n || !name_valid(s, n, true)) continue;
    memcpy(e->values[k], s, n + 1);
    e->present |= 1u << k;
  }
out:
  pthread_mutex_unlock(&lock);
}

bool pp_k8s_labels_known(const char *key) {
  pthread_mutex_lock(&lock);
  bool known = table && key && find(key) != NULL;
  pthread_mutex_unlock(&lock);
  return known;
}

size_t pp_k8s_labels_each(const char *container, pp_k8s_label_cb cb, void *ctx) {
  char key[PP_K8S_POD_KEY_MAX + 1];
  if (!container || !*container || pp_k8s_labels_key_of(container, key, sizeof(key)) < 0) return 0;
  size_t n = 0;
  pthread_mutex_lock(&lock);
  struct entry *e = table ? find(key) : NULL;
  if (e) {
    e->used = ++tick;
    for (size_t k = 0; k < nkeys; k++)
      if (e->present & (1u << k)) {
        cb(ctx, keys[k], e->values[k]);
        n++;
      }
  }
  pthread_mutex_unlock(&lock);
  return n;
}
