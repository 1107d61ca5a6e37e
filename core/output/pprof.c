/* SPDX-License-Identifier: Apache-2.0 */
/* pprof encoder (see pprof.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "k8s_labels.h"
#include "k8s_meta.h"
#include "output/col.h"
#include "output/pprof.h"
#include "output/profile.pb-c.h"
#include "support/gzip.h"

typedef Perftools__Profiles__Profile PProfile;
typedef Perftools__Profiles__Sample PSample;
typedef Perftools__Profiles__Location PLocation;
typedef Perftools__Profiles__Line PLine;
typedef Perftools__Profiles__Function PFunction;
typedef Perftools__Profiles__Mapping PMapping;
typedef Perftools__Profiles__Label PLabel;
typedef Perftools__Profiles__ValueType PValueType;

/* pprof string table built on demand from profile string ids. */
struct strtab {
  const struct pp_profile *p;
  int64_t *idx; /* per profile string id, 0 = not yet added */
  char **v;
  size_t n, cap;
};

static int64_t st_add_text(struct strtab *t, const char *s) {
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 256;
    char **nv = realloc(t->v, cap * sizeof(*nv));
    if (!nv) return -1;
    t->v = nv;
    t->cap = cap;
  }
  t->v[t->n] = (char *)s;
  return (int64_t)t->n++;
}

static int64_t st_id(struct strtab *t, uint32_t id) {
  if (id == PP_NO_STR) return 0;
  if (t->idx[id]) return t->idx[id];
  const char *s = pp_profile_str(t->p, id);
  if (!*s) return 0;
  int64_t i = st_add_text(t, s);
  if (i > 0) t->idx[id] = i;
  return i;
}

/* Strings made here (split names, mapping names), freed with the table. */
struct owned {
  char **v;
  size_t n, cap;
};

static int64_t st_add_owned(struct strtab *t, struct owned *o, const char *s, size_t n) {
  if (o->n == o->cap) {
    size_t cap = o->cap ? o->cap * 2 : 64;
    char **nv = realloc(o->v, cap * sizeof(*nv));
    if (!nv) return 0;
    o->v = nv;
    o->cap = cap;
  }
  char *c = strndup(s, n);
  if (!c) return 0;
  o->v[o->n++] = c;
  int64_t i = st_add_text(t, c);
  return i > 0 ? i : 0;
}

/* The selected pod labels of one container (k8s_labels.h) as pprof
 * label key/value string ids. */
struct labset {
  int n;
  int64_t kv[PP_K8S_LABELS_MAX_KEYS][2];
};

struct labset_ctx {
  struct strtab *st;
  struct owned *own;
  struct labset *set;
};

static void add_pod_label(void *vctx, const char *key, const char *value) {
  struct labset_ctx *c = vctx;
  char name[PP_K8S_LABEL_KEY_MAX + 16];
  int n = snprintf(name, sizeof(name), "k8s.pod.label.%s", key);
  if (c->set->n == PP_K8S_LABELS_MAX_KEYS || n < 0 || (size_t)n >= sizeof(name)) return;
  int64_t k = st_add_owned(c->st, c->own, name, (size_t)n);
  int64_t v = st_add_owned(c->st, c->own, value, strlen(value));
  if (k > 0 && v > 0) {
    c->set->kv[c->set->n][0] = k;
    c->set->kv[c->set->n++][1] = v;
  }
}

/* A frame read back from a .col has "fn (file.py:12)" as its name and no
 * file: split it so pprof gets function, file and line separately. */
static bool split_name(const char *s, size_t *fn_len, const char **file, size_t *file_len,
                       uint32_t *line) {
  size_t n = strlen(s);
  if (n < 6 || s[n - 1] != ')') return false;
  const char *open = NULL;
  for (size_t i = n; i-- > 1;)
    if (s[i] == '(' && s[i - 1] == ' ') {
      open = s + i;
      break;
    }
  if (!open) return false;
  const char *colon = memrchr(open, ':', (size_t)(s + n - open));
  if (!colon || colon == open + 1) return false;
  uint32_t l = 0;
  for (const char *d = colon + 1; d < s + n - 1; d++) {
    if (*d < '0' || *d > '9') return false;
    l = l * 10 + (uint32_t)(*d - '0');
  }
  *fn_len = (size_t)(open - 1 - s);
  *file = open + 1;
  *file_len = (size_t)(colon - open - 1);
  *line = l;
  return true;
}

/* Function table keyed by (name, file) with open addressing. */
struct fnmap {
  uint64_t *keys; /* (name+1) << 32 | (file+1); 0 = empty */
  uint32_t *vals;
  size_t cap;
};

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

static uint32_t *fn_slot(struct fnmap *m, uint64_t key) {
  size_t i = mix(key) & (m->cap - 1);
  while (m->keys[i] && m->keys[i] != key)
    i = (i + 1) & (m->cap - 1);
  m->keys[i] = key;
  return &m->vals[i];
}

int pp_pprof_encode(const struct pp_profile *p, const struct pp_pprof_info *info, uint8_t **out,
                    size_t *len) {
  size_t nstr = pp_profile_str_count(p), nfr = pp_profile_frame_count(p);
  size_t nst = pp_profile_stack_count(p);
  int rc = -ENOMEM;
  struct strtab st = {.p = p};
  struct fnmap fm = {0};
  struct owned own = {0};
  PLocation *locs = NULL, **locp = NULL;
  PLine *lines = NULL, **linep = NULL;
  PFunction *fns = NULL, **fnp = NULL;
  PSample *samples = NULL, **samplep = NULL;
  PLabel *labels = NULL, **labelp = NULL;
  int64_t *k8s_pod = NULL, *k8s_ns = NULL;
  int32_t *lab_of = NULL; /* per container string id: 0 not looked at, -1 none, else set + 1 */
  struct labset *labsets = NULL;
  size_t nlabsets = 0;
  uint64_t *locids = NULL;
  int64_t *values = NULL;
  uint32_t *locno = NULL; /* frame id -> location id (1-based), 0 = unused */
  size_t nloc = 0, nfn = 0, nsmp = 0, nlab = 0, total_frames = 0;
  PMapping maps[PP_FRAME_KIND_COUNT], *mapp[PP_FRAME_KIND_COUNT];

  st.idx = calloc(nstr ? nstr : 1, sizeof(*st.idx));
  locno = calloc(nfr ? nfr : 1, sizeof(*locno));
  if (!st.idx || !locno || st_add_text(&st, "") != 0) goto out;

  /* which frames are used, and how many frame slots the samples need */
  for (size_t i = 0; i < nst; i++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, i);
    if (!s->count) continue;
    nsmp++;
    total_frames += s->nframes;
    const uint32_t *fr = pp_profile_stack_frames(p, s);
    for (uint32_t k = 0; k < s->nframes; k++)
      if (fr[k] < nfr && !locno[fr[k]]) locno[fr[k]] = (uint32_t)++nloc;
  }
  fm.cap = 64;
  while (fm.cap < nloc * 2)
    fm.cap *= 2;
  fm.keys = calloc(fm.cap, sizeof(*fm.keys));
  fm.vals = calloc(fm.cap, sizeof(*fm.vals));
  locs = calloc(nloc + 1, sizeof(*locs));
  locp = calloc(nloc + 1, sizeof(*locp));
  lines = calloc(nloc + 1, sizeof(*lines));
  linep = calloc(nloc + 1, sizeof(*linep));
  fns = calloc(nloc + 1, sizeof(*fns));
  fnp = calloc(nloc + 1, sizeof(*fnp));
  samples = calloc(nsmp + 1, sizeof(*samples));
  samplep = calloc(nsmp + 1, sizeof(*samplep));
  labels = calloc(nsmp * (6 + PP_K8S_LABELS_MAX_KEYS) + 1, sizeof(*labels));
  labelp = calloc(nsmp * (6 + PP_K8S_LABELS_MAX_KEYS) + 1, sizeof(*labelp));
  lab_of = calloc(nstr ? nstr : 1, sizeof(*lab_of));
  /* per container string id: its pod and namespace label strings (0: not
   * yet looked at, -1: not a Kubernetes name) */
  k8s_pod = calloc(nstr ? nstr : 1, sizeof(*k8s_pod));
  k8s_ns = calloc(nstr ? nstr : 1, sizeof(*k8s_ns));
  locids = calloc(total_frames + 1, sizeof(*locids));
  values = calloc(nsmp * 2 + 1, sizeof(*values));
  if (!lab_of || !k8s_pod || !k8s_ns || !fm.keys || !fm.vals || !locs || !locp || !lines ||
      !linep || !fns || !fnp || !samples || !samplep || !labels || !labelp || !locids || !values)
    goto out;

  bool kind_used[PP_FRAME_KIND_COUNT] = {false};
  for (size_t f = 0; f < nfr; f++) {
    if (!locno[f]) continue;
    const struct pp_frame_rec *fr = pp_profile_frame(p, (uint32_t)f);
    size_t li = locno[f] - 1;
    uint64_t key = ((uint64_t)fr->name + 1) << 32 | (uint64_t)(fr->file + 1u);
    uint32_t *slot = fn_slot(&fm, key);
    if (!*slot) {
      PFunction *fn = &fns[nfn];
      perftools__profiles__function__init(fn);
      fn->id = nfn + 1;
      fn->name = st_id(&st, fr->name);
      fn->system_name = fn->name;
      fn->filename = st_id(&st, fr->file);
      fnp[nfn] = fn;
      *slot = (uint32_t)++nfn;
    }
    PLine *ln = &lines[li];
    perftools__profiles__line__init(ln);
    ln->function_id = *slot;
    ln->line = fr->line;
    const char *file;
    size_t fnl, filel;
    uint32_t line;
    if (fr->file == PP_NO_STR && (fr->kind == PP_FRAME_PYTHON || pp_frame_kind_is_js(fr->kind)) &&
        split_name(pp_profile_str(p, fr->name), &fnl, &file, &filel, &line)) {
      PFunction *fn = fnp[*slot - 1];
      if (fn->filename == 0) {
        fn->name = st_add_owned(&st, &own, pp_profile_str(p, fr->name), fnl);
        fn->system_name = fn->name;
        fn->filename = st_add_owned(&st, &own, file, filel);
      }
      ln->line = line;
    }
    linep[li] = ln;
    PLocation *lo = &locs[li];
    perftools__profiles__location__init(lo);
    lo->id = li + 1;
    unsigned kind = fr->kind < PP_FRAME_KIND_COUNT ? fr->kind : PP_FRAME_NATIVE;
    lo->mapping_id = kind + 1;
    kind_used[kind] = true;
    lo->n_line = 1;
    lo->line = &linep[li];
    locp[li] = lo;
  }
  size_t nmap = 0;
  for (unsigned k = 0; k < PP_FRAME_KIND_COUNT; k++) {
    if (!kind_used[k]) continue;
    PMapping *m = &maps[nmap];
    perftools__profiles__mapping__init(m);
    m->id = k + 1;
    char name[40];
    snprintf(name, sizeof(name), "[%s]", pp_frame_kind_name(k));
    m->filename = st_add_text(&st, strdup(name));
    m->has_functions = m->has_filenames = m->has_line_numbers = true;
    mapp[nmap++] = m;
  }

  int64_t k_comm = st_add_text(&st, "comm"), k_pid = st_add_text(&st, "pid");
  int64_t k_cont = st_add_text(&st, "container"), k_appid = st_add_text(&st, "appid");
  int64_t k_pod = st_add_text(&st, "pod"), k_ns = st_add_text(&st, "namespace");
  bool typed = info && info->sample_type && info->sample_unit;
  /* a cpu sample stands for one period of CPU time; other types count
   * their own unit and have no period */
  int64_t period = !typed && info && info->frequency > 0 ? 1000000000LL / info->frequency : 0;
  size_t si = 0, at = 0;
  for (size_t i = 0; i < nst; i++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, i);
    if (!s->count) continue;
    const struct pp_pid_rec *pr = pp_profile_pid(p, s->pid);
    PSample *sm = &samples[si];
    perftools__profiles__sample__init(sm);
    const uint32_t *fr = pp_profile_stack_frames(p, s);
    sm->location_id = &locids[at];
    for (uint32_t k = s->nframes; k-- > 0;) /* pprof wants the leaf first */
      if (fr[k] < nfr) locids[at + sm->n_location_id++] = locno[fr[k]];
    at += s->nframes;
    sm->value = &values[si * 2];
    sm->value[0] = (int64_t)s->count;
    sm->value[1] = (int64_t)s->count * period;
    sm->n_value = period ? 2 : 1;
    sm->label = &labelp[nlab];
    uint32_t comm = s->comm != PP_NO_STR ? s->comm : pr ? pr->comm : PP_NO_STR;
    struct {
      int64_t key;
      uint32_t str;
    } ls[3] = {{k_comm, comm},
               {k_cont, pr ? pr->container : PP_NO_STR},
               {k_appid, pr ? pr->appid : PP_NO_STR}};
    for (int k = 0; k < 3; k++) {
      if (ls[k].str == PP_NO_STR) continue;
      PLabel *l = &labels[nlab];
      perftools__profiles__label__init(l);
      l->key = ls[k].key;
      l->str = st_id(&st, ls[k].str);
      labelp[nlab++] = l;
      sm->n_label++;
    }
    uint32_t cont = pr ? pr->container : PP_NO_STR;
    if (cont != PP_NO_STR && cont < nstr && !k8s_pod[cont]) {
      const char *kc, *pod, *ns;
      size_t kcl, pl, nl;
      k8s_pod[cont] = k8s_ns[cont] = -1;
      if (pp_k8s_name_split(pp_profile_str(p, cont), &kc, &kcl, &pod, &pl, &ns, &nl) == 0) {
        k8s_pod[cont] = st_add_owned(&st, &own, pod, pl);
        k8s_ns[cont] = st_add_owned(&st, &own, ns, nl);
      }
    }
    for (int k = 0; cont != PP_NO_STR && cont < nstr && k8s_pod[cont] > 0 && k < 2; k++) {
      PLabel *kl = &labels[nlab];
      perftools__profiles__label__init(kl);
      kl->key = k ? k_ns : k_pod;
      kl->str = k ? k8s_ns[cont] : k8s_pod[cont];
      labelp[nlab++] = kl;
      sm->n_label++;
    }
    if (cont != PP_NO_STR && cont < nstr && !lab_of[cont]) {
      lab_of[cont] = -1;
      struct labset *grown = realloc(labsets, (nlabsets + 1) * sizeof(*labsets));
      if (grown) {
        labsets = grown;
        struct labset_ctx lc = {&st, &own, &labsets[nlabsets]};
        labsets[nlabsets].n = 0;
        if (pp_k8s_labels_each(pp_profile_str(p, cont), add_pod_label, &lc))
          lab_of[cont] = (int32_t)++nlabsets;
      }
    }
    for (int k = 0;
         cont != PP_NO_STR && cont < nstr && lab_of[cont] > 0 && k < labsets[lab_of[cont] - 1].n;
         k++) {
      PLabel *kl = &labels[nlab];
      perftools__profiles__label__init(kl);
      kl->key = labsets[lab_of[cont] - 1].kv[k][0];
      kl->str = labsets[lab_of[cont] - 1].kv[k][1];
      labelp[nlab++] = kl;
      sm->n_label++;
    }
    PLabel *l = &labels[nlab];
    perftools__profiles__label__init(l);
    l->key = k_pid;
    l->num = s->pid;
    labelp[nlab++] = l;
    sm->n_label++;
    samplep[si++] = sm;
  }

  PValueType vt[2], *vtp[2] = {&vt[0], &vt[1]}, ptype;
  perftools__profiles__value_type__init(&vt[0]);
  perftools__profiles__value_type__init(&vt[1]);
  perftools__profiles__value_type__init(&ptype);
  vt[0].type = st_add_text(&st, typed ? info->sample_type : "samples");
  vt[0].unit = st_add_text(&st, typed ? info->sample_unit : "count");
  vt[1].type = st_add_text(&st, "cpu");
  vt[1].unit = st_add_text(&st, "nanoseconds");
  ptype = vt[1];

  PProfile prof;
  perftools__profiles__profile__init(&prof);
  prof.n_sample_type = period ? 2 : 1;
  prof.sample_type = vtp;
  prof.n_sample = nsmp;
  prof.sample = samplep;
  prof.n_mapping = nmap;
  prof.mapping = mapp;
  prof.n_location = nloc;
  prof.location = locp;
  prof.n_function = nfn;
  prof.function = fnp;
  prof.n_string_table = st.n;
  prof.string_table = st.v;
  if (info && info->start) {
    prof.time_nanos = (int64_t)info->start * 1000000000LL;
    if (info->end > info->start)
      prof.duration_nanos = (int64_t)(info->end - info->start) * 1000000000LL;
  }
  if (period) {
    prof.period_type = &ptype;
    prof.period = period;
  }
  size_t need = perftools__profiles__profile__get_packed_size(&prof);
  uint8_t *buf = malloc(need ? need : 1);
  if (!buf) goto free_maps;
  *len = perftools__profiles__profile__pack(&prof, buf);
  *out = buf;
  rc = 0;
free_maps:
  for (size_t m = 0; m < nmap; m++)
    free(st.v[maps[m].filename]);
out:
  for (size_t i = 0; i < own.n; i++)
    free(own.v[i]);
  free(own.v);
  free(st.idx);
  free(st.v);
  free(fm.keys);
  free(fm.vals);
  free(locs);
  free(locp);
  free(lines);
  free(linep);
  free(fns);
  free(fnp);
  free(samples);
  free(samplep);
  free(labels);
  free(labelp);
  free(k8s_pod);
  free(k8s_ns);
  free(lab_of);
  free(labsets);
  free(locids);
  free(values);
  free(locno);
  return rc;
}

int pp_pprof_write(FILE *f, const struct pp_profile *p, const struct pp_pprof_info *info) {
  uint8_t *raw = NULL;
  size_t len = 0;
  int rc = pp_pprof_encode(p, info, &raw, &len);
  if (rc < 0) return rc;
  unsigned char *gz = NULL;
  size_t gzlen = 0;
  rc = pp_gzip(raw, len, 6, &gz, &gzlen);
  free(raw);
  if (rc < 0) return rc;
  if (fwrite(gz, 1, gzlen, f) != gzlen || fflush(f) != 0) rc = -EIO;
  free(gz);
  return rc;
}
