/* SPDX-License-Identifier: Apache-2.0 */
/* Pod labels from the Kubernetes API, once per session (see k8s_pods.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "k8s_labels.h"
#include "k8s_meta.h"
#include "k8s_pods.h"
#include "log.h"

#define LOG_TAG "k8s"

struct pp_k8s_pods {
  struct pp_k8s_api_opts o; /* strings owned */
  char (*need)[PP_K8S_POD_KEY_MAX + 1];
  size_t nneed;
  time_t failed_at;   /* monotonic seconds of the last failed listing, 0: none */
  char last_why[512]; /* as long as the reason it remembers */
};

static time_t now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec;
}

static char *dup_or_null(const char *s) {
  return s ? strdup(s) : NULL;
}

void pp_k8s_pods_free(struct pp_k8s_pods *p) {
  if (!p) return;
  free((char *)p->o.sa_dir);
  free((char *)p->o.node);
  free((char *)p->o.host);
  free((char *)p->o.port);
  free(p->need);
  free(p);
}

struct pp_k8s_pods *pp_k8s_pods_new(const struct pp_k8s_api_opts *o) {
  if (!pp_k8s_api_available(o)) {
    pp_log(PP_LOG_INFO, LOG_TAG,
           "not in a Kubernetes pod (no KUBERNETES_SERVICE_HOST or service-account token): pod "
           "labels come only from the container runtimes");
    return NULL;
  }
  struct pp_k8s_pods *p = calloc(1, sizeof(*p));
  if (!p) return NULL;
  p->o = *o;
  p->o.sa_dir = dup_or_null(o->sa_dir);
  p->o.node = dup_or_null(o->node);
  p->o.host = dup_or_null(o->host);
  p->o.port = dup_or_null(o->port);
  p->need = calloc(PP_K8S_PODS_NEED_MAX, sizeof(*p->need));
  if (!p->need || (o->sa_dir && !p->o.sa_dir) || (o->node && !p->o.node) ||
      (o->host && !p->o.host) || (o->port && !p->o.port)) {
    pp_k8s_pods_free(p);
    return NULL;
  }
  return p;
}

void pp_k8s_pods_need(struct pp_k8s_pods *p, const char *container) {
  const char *c, *pod, *ns;
  size_t cl, pl, nl;
  char key[PP_K8S_POD_KEY_MAX + 1];
  if (!p || !container || p->nneed == PP_K8S_PODS_NEED_MAX ||
      pp_k8s_name_split(container, &c, &cl, &pod, &pl, &ns, &nl) < 0 ||
      pp_k8s_labels_key_of(container, key, sizeof(key)) < 0 || pp_k8s_labels_known(key))
    return;
  for (size_t i = 0; i < p->nneed; i++)
    if (strcmp(p->need[i], key) == 0) return;
  strcpy(p->need[p->nneed++], key);
}

struct listing {
  size_t pods;
};

static void on_pod(void *ctx, const char *ns, const char *name, const json_t *labels) {
  struct listing *l = ctx;
  char key[PP_K8S_POD_KEY_MAX + 1];
  if (snprintf(key, sizeof(key), "%s/%s", ns, name) >= (int)sizeof(key)) return;
  pp_k8s_labels_put(key, labels);
  l->pods++;
}

void pp_k8s_pods_refresh(struct pp_k8s_pods *p) {
  if (!p || !p->nneed) return;
  time_t now = now_s();
  if (p->failed_at && now - p->failed_at < PP_K8S_PODS_RETRY_S) {
    p->nneed = 0;
    return;
  }
  struct listing l = {0};
  char why[512] = "";
  int rc = pp_k8s_api_list_pods(&p->o, on_pod, &l, why, sizeof(why));
  if (rc < 0) {
    p->failed_at = now;
    /* the same failure every few minutes is said once */
    bool again = strncmp(p->last_why, why, sizeof(p->last_why) - 1) == 0;
    pp_log(again ? PP_LOG_DEBUG : PP_LOG_WARNING, LOG_TAG,
           "pod labels from the Kubernetes API: %s (asked again in %d s)", why,
           PP_K8S_PODS_RETRY_S);
    snprintf(p->last_why, sizeof(p->last_why), "%s", why);
  } else {
    p->failed_at = 0;
    p->last_why[0] = '\0';
    /* a pod the API does not list (gone already) is not asked about again */
    for (size_t i = 0; i < p->nneed; i++)
      if (!pp_k8s_labels_known(p->need[i])) pp_k8s_labels_put(p->need[i], NULL);
    pp_log(PP_LOG_DEBUG, LOG_TAG, "pod labels: %zu pods of this node listed", l.pods);
  }
  p->nneed = 0;
}
