/* SPDX-License-Identifier: Apache-2.0 */
/* Container selection of a session's profile (see k8s_select.h). */
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "k8s_select.h"

/* The parts of a CRI name; false for any other name. */
static bool k8s_parts(const char *name, char part[3][256]) {
  if (strncmp(name, "k8s_", 4) != 0) return false;
  const char *s = name + 4;
  for (int i = 0; i < 3; i++) {
    const char *u = strchr(s, '_');
    if (!u || u == s || (size_t)(u - s) >= 256) return false;
    memcpy(part[i], s, (size_t)(u - s));
    part[i][u - s] = '\0';
    s = u + 1;
  }
  return true;
}

static bool one(const char *sel, size_t len, const char *name) {
  char pat[512];
  if (!len || len >= sizeof(pat)) return false;
  memcpy(pat, sel, len);
  pat[len] = '\0';
  char part[3][256]; /* container, pod, namespace */
  bool k8s = k8s_parts(name, part);
  static const char *const keys[3] = {"container=", "pod=", "namespace="};
  for (int i = 0; i < 3; i++) {
    size_t kl = strlen(keys[i]);
    if (strncmp(pat, keys[i], kl) == 0) return k8s && fnmatch(pat + kl, part[i], 0) == 0;
  }
  return fnmatch(pat, name, 0) == 0 || (k8s && fnmatch(pat, part[0], 0) == 0);
}

bool pp_container_selected(const char *selectors, const char *container) {
  if (!container || !*container) return false;
  for (const char *s = selectors; s && *s;) {
    const char *c = strchr(s, ',');
    size_t len = c ? (size_t)(c - s) : strlen(s);
    if (one(s, len, container)) return true;
    s = c ? c + 1 : NULL;
  }
  return false;
}

static uint32_t copy_str(struct pp_profile *dst, const struct pp_profile *src, uint32_t id,
                         bool *oom) {
  if (id == PP_NO_STR) return PP_NO_STR;
  uint32_t r = pp_profile_import_str(dst, src, id);
  if (r == PP_NO_STR) *oom = true;
  return r;
}

struct keep {
  bool (*fn)(const struct keep *k, const struct pp_profile *src, const struct pp_pid_rec *pr);
  const char *selectors;
  pp_pid_keep_fn pid_fn;
  void *ctx;
};

static bool by_container(const struct keep *k, const struct pp_profile *src,
                         const struct pp_pid_rec *pr) {
  return pr->container != PP_NO_STR &&
         pp_container_selected(k->selectors, pp_profile_str(src, pr->container));
}

static bool by_pid(const struct keep *k, const struct pp_profile *src,
                   const struct pp_pid_rec *pr) {
  (void)src;
  return k->pid_fn(k->ctx, pr->pid, pr->start_time);
}

static int filter(struct pp_profile **pp, const struct keep *kp) {
  const struct pp_profile *src = *pp;
  /* one verdict per process, not per stack */
  size_t npid = pp_profile_pid_count(src);
  bool *kept = calloc(npid ? npid : 1, sizeof(*kept));
  struct pp_profile *dst = kept ? pp_profile_new() : NULL;
  if (!dst) {
    free(kept);
    return -ENOMEM;
  }
  const struct pp_pid_rec *first = npid ? pp_profile_pid_at(src, 0) : NULL;
  for (size_t i = 0; i < npid; i++)
    kept[i] = kp->fn(kp, src, pp_profile_pid_at(src, i));
  static uint32_t ids[PP_MAX_FRAMES]; /* the output stage runs on one thread */
  bool oom = false;
  for (size_t i = 0; i < pp_profile_stack_count(src) && !oom; i++) {
    const struct pp_stack_rec *s = pp_profile_stack(src, i);
    const struct pp_pid_rec *pr = pp_profile_pid(src, s->pid);
    if (!s->count || !pr || !kept[pr - first]) continue;
    const uint32_t *fr = pp_profile_stack_frames(src, s);
    uint32_t n = 0;
    for (uint32_t k = 0; k < s->nframes && n < PP_MAX_FRAMES && !oom; k++) {
      const struct pp_frame_rec *f = pp_profile_frame(src, fr[k]);
      uint32_t name = copy_str(dst, src, f->name, &oom);
      uint32_t file = copy_str(dst, src, f->file, &oom);
      ids[n] = pp_profile_intern_frame(dst, name, file, f->line, f->kind);
      oom |= ids[n++] == UINT32_MAX;
    }
    uint32_t comm = copy_str(dst, src, s->comm, &oom);
    oom |= !oom && pp_profile_add_stack(dst, s->pid, comm, ids, n, s->count) < 0;
  }
  /* the pid records of the kept processes, with everything learnt about them */
  for (size_t i = 0; i < pp_profile_pid_count(src) && !oom; i++) {
    const struct pp_pid_rec *r = pp_profile_pid_at(src, i);
    if (!pp_profile_pid(dst, r->pid)) continue;
    struct pp_pid_rec v = *r;
    v.comm = copy_str(dst, src, r->comm, &oom);
    v.appid = copy_str(dst, src, r->appid, &oom);
    v.app_meta = copy_str(dst, src, r->app_meta, &oom);
    v.container = copy_str(dst, src, r->container, &oom);
    v.reason = copy_str(dst, src, r->reason, &oom);
    struct pp_pid_rec *d = oom ? NULL : pp_profile_pid_upsert(dst, r->pid);
    if (!d) {
      oom = true;
      break;
    }
    v.total = d->total; /* maintained by add_stack */
    *d = v;
  }
  for (size_t i = 0; i < pp_profile_counter_count(src) && !oom; i++) {
    const struct pp_counter_rec *c = pp_profile_counter_at(src, i);
    oom |= pp_profile_add_counter(dst, pp_profile_str(src, c->name), c->value) < 0;
  }
  free(kept);
  if (oom) {
    pp_profile_free(dst);
    return -ENOMEM;
  }
  pp_profile_free(*pp);
  *pp = dst;
  return 0;
}

int pp_profile_keep_pids(struct pp_profile **pp, pp_pid_keep_fn keep, void *ctx) {
  struct keep k = {.fn = by_pid, .pid_fn = keep, .ctx = ctx};
  return filter(pp, &k);
}

int pp_containers_select(struct pp_profile **pp, const char *selectors, json_t *containers) {
  struct keep k = {.fn = by_container, .selectors = selectors};
  int rc = filter(pp, &k);
  if (rc < 0) return rc;
  if (json_is_array(containers))
    for (size_t i = json_array_size(containers); i-- > 0;) {
      const char *n = json_string_value(json_array_get(containers, i));
      if (!pp_container_selected(selectors, n)) json_array_remove(containers, i);
    }
  return 0;
}
