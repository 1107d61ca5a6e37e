/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pp_profile -> OTLP ExportProfilesServiceRequest (see otlp.h). The field
 * numbers are those of the .proto files under third_party/opentelemetry-proto.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "k8s_labels.h"
#include "k8s_meta.h"
#include "upload/otlp.h"
#include "upload/otlp_pb.h"

/* ExportProfilesServiceRequest */
#define F_REQ_RESOURCE_PROFILES 1
#define F_REQ_DICTIONARY 2
/* ProfilesDictionary */
#define F_DICT_MAPPING 1
#define F_DICT_LOCATION 2
#define F_DICT_FUNCTION 3
#define F_DICT_LINK 4
#define F_DICT_STRING 5
#define F_DICT_ATTRIBUTE 6
#define F_DICT_STACK 7
/* ResourceProfiles / Resource / KeyValue / AnyValue */
#define F_RP_RESOURCE 1
#define F_RP_SCOPE_PROFILES 2
#define F_RES_ATTRIBUTES 1
#define F_KV_KEY 1
#define F_KV_VALUE 2
#define F_ANY_STRING 1
#define F_ANY_INT 3
/* ScopeProfiles / InstrumentationScope */
#define F_SP_SCOPE 1
#define F_SP_PROFILES 2
#define F_SCOPE_NAME 1
#define F_SCOPE_VERSION 2
/* Profile */
#define F_PROF_SAMPLE_TYPE 1
#define F_PROF_SAMPLES 2
#define F_PROF_TIME 3
#define F_PROF_DURATION 4
#define F_PROF_PERIOD_TYPE 5
#define F_PROF_PERIOD 6
#define F_PROF_ID 7
/* ValueType */
#define F_VT_TYPE 1
#define F_VT_UNIT 2
/* Sample */
#define F_SAMPLE_STACK 1
#define F_SAMPLE_ATTRS 2
#define F_SAMPLE_VALUES 4
/* Location / Line / Function / Stack / Link / KeyValueAndUnit */
#define F_LOC_LINES 3
#define F_LOC_ATTRS 4
#define F_LINE_FUNCTION 1
#define F_LINE_LINE 2
#define F_FN_NAME 1
#define F_FN_SYSTEM_NAME 2
#define F_FN_FILENAME 3
#define F_STACK_LOCATIONS 1
#define F_LINK_TRACE 1
#define F_LINK_SPAN 2
#define F_KVU_KEY 1
#define F_KVU_VALUE 2

/* A growable array of fixed-size records. */
struct vec {
  void *v;
  size_t n, cap, size;
};

static void *vec_push(struct vec *a) {
  if (a->n == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 64;
    void *nv = realloc(a->v, cap * a->size);
    if (!nv) return NULL;
    a->v = nv;
    a->cap = cap;
  }
  void *e = (char *)a->v + a->n * a->size;
  memset(e, 0, a->size);
  a->n++;
  return e;
}

struct fn_rec {
  int32_t name, file;
};
struct loc_rec {
  int32_t function, kind_attr;
  int64_t line;
};
struct attr_rec {
  int32_t key;
  bool is_int;
  int32_t str; /* string index */
  int64_t num;
};
struct stack_rec {
  uint32_t first, n; /* into the location-index pool */
};

/* Open-addressing map from a 64-bit key to an index (values > 0). */
struct map {
  uint64_t *keys; /* key + 1; 0 = empty */
  int32_t *vals;
  size_t cap, n;
};

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

static bool map_grow(struct map *m) {
  size_t cap = m->cap ? m->cap * 2 : 256;
  uint64_t *k = calloc(cap, sizeof(*k));
  int32_t *v = calloc(cap, sizeof(*v));
  if (!k || !v) {
    free(k);
    free(v);
    return false;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    size_t j = mix(m->keys[i]) & (cap - 1);
    while (k[j])
      j = (j + 1) & (cap - 1);
    k[j] = m->keys[i];
    v[j] = m->vals[i];
  }
  free(m->keys);
  free(m->vals);
  m->keys = k;
  m->vals = v;
  m->cap = cap;
  return true;
}

/* The slot of key (created with value 0 if absent); NULL when out of memory. */
static int32_t *map_slot(struct map *m, uint64_t key) {
  if ((m->n + 1) * 2 > m->cap && !map_grow(m)) return NULL;
  key++;
  size_t i = mix(key) & (m->cap - 1);
  while (m->keys[i] && m->keys[i] != key)
    i = (i + 1) & (m->cap - 1);
  if (!m->keys[i]) {
    m->keys[i] = key;
    m->vals[i] = 0;
    m->n++;
  }
  return &m->vals[i];
}

static void map_free(struct map *m) {
  free(m->keys);
  free(m->vals);
}

struct enc {
  const struct pp_profile *p;
  struct vec strs;     /* const char * (profile strings, literals, owned) */
  struct vec lens;     /* size_t per string */
  struct vec owned;    /* char * to free */
  int32_t *str_of;     /* profile string id -> index, 0 = not added */
  struct map lit_strs; /* literal pointer -> index */
  struct vec fns, locs, attrs, stacks;
  struct vec pool;      /* int32 location indices of the stacks */
  struct map fn_map;    /* (name, file) -> function index */
  struct map attr_map;  /* (kind, value) -> attribute index */
  struct map stack_map; /* hash of a stack -> first stack index with that hash (chained by probe) */
  int32_t *loc_of;      /* frame id -> location index, 0 = not yet */
  bool oom;
};

static int32_t add_string(struct enc *e, const char *s, size_t n) {
  const char **slot = vec_push(&e->strs);
  size_t *ls = vec_push(&e->lens);
  if (!slot || !ls) {
    e->oom = true;
    return 0;
  }
  *slot = s;
  *ls = n;
  return (int32_t)(e->strs.n - 1);
}

static int32_t str_id(struct enc *e, uint32_t id) {
  if (id == PP_NO_STR || id >= pp_profile_str_count(e->p)) return 0;
  if (e->str_of[id]) return e->str_of[id];
  uint32_t n = pp_profile_str_len(e->p, id);
  if (!n) return 0;
  return e->str_of[id] = add_string(e, pp_profile_str(e->p, id), n);
}

/* A string that outlives the encoding (a literal or a caller's string). */
static int32_t str_lit(struct enc *e, const char *s) {
  if (!s || !*s) return 0;
  int32_t *slot = map_slot(&e->lit_strs, (uint64_t)(uintptr_t)s);
  if (!slot) {
    e->oom = true;
    return 0;
  }
  if (!*slot) *slot = add_string(e, s, strlen(s));
  return *slot;
}

static int32_t str_copy(struct enc *e, const char *s, size_t n) {
  char *c = strndup(s, n);
  char **o = c ? vec_push(&e->owned) : NULL;
  if (!o) {
    free(c);
    e->oom = true;
    return 0;
  }
  *o = c;
  return add_string(e, c, n);
}

enum attr_kind { A_FRAME_TYPE, A_PID, A_COMM, A_APPID, A_KIND_COUNT };
static const char *const attr_keys[A_KIND_COUNT] = {"profile.frame.type", "process.pid",
                                                    "process.executable.name", "polyprof.appid"};

/* The attribute (kind, value) of the dictionary; a string value is an
 * index in the string table. */
static int32_t attr(struct enc *e, enum attr_kind k, bool is_int, int64_t value) {
  if (!is_int && value == 0) return 0;
  int32_t *slot = map_slot(&e->attr_map, (uint64_t)k << 40 ^ (uint64_t)value);
  if (!slot) {
    e->oom = true;
    return 0;
  }
  if (*slot) return *slot;
  struct attr_rec *a = vec_push(&e->attrs);
  if (!a) {
    e->oom = true;
    return 0;
  }
  a->key = str_lit(e, attr_keys[k]);
  a->is_int = is_int;
  if (is_int)
    a->num = value;
  else
    a->str = (int32_t)value;
  return *slot = (int32_t)(e->attrs.n - 1);
}

/* profile.frame.type values of the OpenTelemetry semantic conventions. */
static const char *frame_type(unsigned kind) {
  switch (kind) {
    case PP_FRAME_KERNEL:
      return "kernel";
    case PP_FRAME_PYTHON:
    case PP_FRAME_PYTHON_ERROR:
      return "cpython";
    case PP_FRAME_JAVA_JIT:
    case PP_FRAME_JAVA_INLINED:
    case PP_FRAME_JAVA_INTERPRETED:
    case PP_FRAME_JAVA_C1:
      return "jvm";
    case PP_FRAME_RUBY:
      return "ruby";
    case PP_FRAME_PHP:
      return "php";
    case PP_FRAME_DOTNET:
      return "dotnet";
    case PP_FRAME_JS:
    case PP_FRAME_JS_INTERPRETED:
    case PP_FRAME_JS_BASELINE:
    case PP_FRAME_JS_OPTIMIZED:
    case PP_FRAME_JS_INLINED:
    case PP_FRAME_JS_BUILTIN:
      return "v8js";
    default:
      return "native";
  }
}

/* "fn (file.py:12)" -> fn, file, 12 (frames whose file is in the name). */
static bool split_name(const char *s, size_t n, size_t *fn_len, const char **file, size_t *file_len,
                       uint32_t *line) {
  if (n < 6 || s[n - 1] != ')') return false;
  const char *open = NULL;
  for (size_t i = n - 1; i-- > 1;)
    if (s[i] == '(' && s[i - 1] == ' ') {
      open = s + i;
      break;
    }
  if (!open) return false;
  const char *colon = memrchr(open, ':', (size_t)(s + n - open));
  if (!colon || colon == open + 1 || colon + 1 >= s + n - 1) return false;
  uint32_t l = 0;
  for (const char *d = colon + 1; d < s + n - 1; d++) {
    if (*d < '0' || *d > '9' || l > 100000000u) return false;
    l = l * 10 + (uint32_t)(*d - '0');
  }
  *fn_len = (size_t)(open - 1 - s);
  *file = open + 1;
  *file_len = (size_t)(colon - open - 1);
  *line = l;
  return true;
}

static int32_t location(struct enc *e, uint32_t frame) {
  if (e->loc_of[frame]) return e->loc_of[frame];
  const struct pp_frame_rec *fr = pp_profile_frame(e->p, frame);
  int32_t name = str_id(e, fr->name), file = str_id(e, fr->file);
  int64_t line = fr->line;
  const char *ffile;
  size_t fnl, filel;
  uint32_t sline;
  if (fr->file == PP_NO_STR &&
      (fr->kind == PP_FRAME_PYTHON || strcmp(frame_type(fr->kind), "v8js") == 0) &&
      split_name(pp_profile_str(e->p, fr->name), pp_profile_str_len(e->p, fr->name), &fnl, &ffile,
                 &filel, &sline)) {
    name = str_copy(e, pp_profile_str(e->p, fr->name), fnl);
    file = str_copy(e, ffile, filel);
    line = sline;
  }
  int32_t *fslot = map_slot(&e->fn_map, (uint64_t)(uint32_t)name << 32 | (uint32_t)file);
  if (!fslot) {
    e->oom = true;
    return 0;
  }
  if (!*fslot) {
    struct fn_rec *f = vec_push(&e->fns);
    if (!f) {
      e->oom = true;
      return 0;
    }
    f->name = name;
    f->file = file;
    *fslot = (int32_t)(e->fns.n - 1);
  }
  struct loc_rec *l = vec_push(&e->locs);
  if (!l) {
    e->oom = true;
    return 0;
  }
  l->function = *fslot;
  l->line = line;
  l->kind_attr = attr(e, A_FRAME_TYPE, false, str_lit(e, frame_type(fr->kind)));
  return e->loc_of[frame] = (int32_t)(e->locs.n - 1);
}

/* The stack-table index of a sample's frames (leaf first), shared by every
 * sample with the same locations. */
static int32_t stack(struct enc *e, const struct pp_stack_rec *s) {
  const uint32_t *fr = pp_profile_stack_frames(e->p, s);
  size_t nfr = pp_profile_frame_count(e->p);
  uint32_t first = (uint32_t)e->pool.n, n = 0;
  uint64_t h = 0x9e3779b97f4a7c15ULL;
  for (uint32_t k = s->nframes; k-- > 0;) {
    if (fr[k] >= nfr) continue;
    int32_t li = location(e, fr[k]);
    int32_t *slot = vec_push(&e->pool);
    if (!slot || e->oom) {
      e->oom = true;
      return 0;
    }
    *slot = li;
    n++;
    h = mix(h ^ (uint64_t)li);
  }
  const int32_t *mine = (const int32_t *)e->pool.v + first;
  /* probe the chain of this hash for an equal stack */
  for (uint64_t probe = h;; probe = mix(probe + 1)) {
    int32_t *slot = map_slot(&e->stack_map, probe);
    if (!slot) {
      e->oom = true;
      return 0;
    }
    if (*slot) {
      const struct stack_rec *o = (const struct stack_rec *)e->stacks.v + *slot;
      if (o->n == n && !memcmp((const int32_t *)e->pool.v + o->first, mine, n * sizeof(int32_t))) {
        e->pool.n = first; /* a known stack: forget the copy */
        return *slot;
      }
      continue;
    }
    struct stack_rec *st = vec_push(&e->stacks);
    if (!st) {
      e->oom = true;
      return 0;
    }
    st->first = first;
    st->n = n;
    return *slot = (int32_t)(e->stacks.n - 1);
  }
}

static void kv_string(struct pp_pb *w, const char *key, const char *v, size_t vlen) {
  pp_pb_begin(w, F_RES_ATTRIBUTES);
  pp_pb_string_field(w, F_KV_KEY, key);
  pp_pb_begin(w, F_KV_VALUE);
  pp_pb_bytes_field(w, F_ANY_STRING, v, vlen);
  pp_pb_end(w);
  pp_pb_end(w);
}

/* A selected pod label as the resource attribute k8s.pod.label.<key>. */
static void pod_label(void *ctx, const char *key, const char *value) {
  char name[PP_K8S_LABEL_KEY_MAX + 16];
  snprintf(name, sizeof(name), "k8s.pod.label.%s", key);
  kv_string(ctx, name, value, strlen(value));
}

static void write_resource(struct pp_pb *w, const struct pp_otlp_info *info, const char *cont) {
  const char *host = info->hostname && *info->hostname ? info->hostname : "unknown";
  const char *svc = info->service && *info->service ? info->service : "polyprof";
  pp_pb_begin(w, F_RP_RESOURCE);
  kv_string(w, "host.name", host, strlen(host));
  kv_string(w, "service.name", svc, strlen(svc));
  if (cont && *cont) {
    const char *c, *pod, *ns;
    size_t cl, pl, nl;
    if (pp_k8s_name_split(cont, &c, &cl, &pod, &pl, &ns, &nl) == 0) {
      kv_string(w, "container.name", c, cl);
      kv_string(w, "k8s.pod.name", pod, pl);
      kv_string(w, "k8s.namespace.name", ns, nl);
      kv_string(w, "k8s.container.name", c, cl);
    } else {
      kv_string(w, "container.name", cont, strlen(cont));
    }
    pp_k8s_labels_each(cont, pod_label, w);
  }
  pp_pb_end(w);
}

static void value_type(struct pp_pb *w, uint32_t field, int32_t type, int32_t unit) {
  pp_pb_begin(w, field);
  pp_pb_varint_field(w, F_VT_TYPE, (uint64_t)type);
  pp_pb_varint_field(w, F_VT_UNIT, (uint64_t)unit);
  pp_pb_end(w);
}

static void write_dictionary(struct pp_pb *w, struct enc *e) {
  static const uint8_t zeros[16];
  pp_pb_begin(w, F_REQ_DICTIONARY);
  pp_pb_begin(w, F_DICT_MAPPING); /* only the zero mapping: frames carry their type */
  pp_pb_end(w);
  const struct loc_rec *locs = e->locs.v;
  for (size_t i = 0; i < e->locs.n; i++) {
    pp_pb_begin(w, F_DICT_LOCATION);
    if (i) {
      pp_pb_begin(w, F_LOC_LINES);
      pp_pb_varint_field(w, F_LINE_FUNCTION, (uint64_t)locs[i].function);
      pp_pb_varint_field(w, F_LINE_LINE, (uint64_t)locs[i].line);
      pp_pb_end(w);
      if (locs[i].kind_attr) {
        pp_pb_packed_begin(w, F_LOC_ATTRS);
        pp_pb_packed_value(w, (uint64_t)locs[i].kind_attr);
        pp_pb_packed_end(w);
      }
    }
    pp_pb_end(w);
  }
  const struct fn_rec *fns = e->fns.v;
  for (size_t i = 0; i < e->fns.n; i++) {
    pp_pb_begin(w, F_DICT_FUNCTION);
    pp_pb_varint_field(w, F_FN_NAME, (uint64_t)fns[i].name);
    pp_pb_varint_field(w, F_FN_SYSTEM_NAME, (uint64_t)fns[i].name);
    pp_pb_varint_field(w, F_FN_FILENAME, (uint64_t)fns[i].file);
    pp_pb_end(w);
  }
  pp_pb_begin(w, F_DICT_LINK); /* the zero link, with ids of their full length */
  pp_pb_bytes_field(w, F_LINK_TRACE, zeros, 16);
  pp_pb_bytes_field(w, F_LINK_SPAN, zeros, 8);
  pp_pb_end(w);
  const char *const *strs = e->strs.v;
  const size_t *lens = e->lens.v;
  for (size_t i = 0; i < e->strs.n; i++)
    pp_pb_bytes_field(w, F_DICT_STRING, strs[i], lens[i]);
  const struct attr_rec *attrs = e->attrs.v;
  for (size_t i = 0; i < e->attrs.n; i++) {
    pp_pb_begin(w, F_DICT_ATTRIBUTE);
    if (i) {
      pp_pb_varint_field(w, F_KVU_KEY, (uint64_t)attrs[i].key);
      pp_pb_begin(w, F_KVU_VALUE);
      if (attrs[i].is_int)
        pp_pb_varint_always(w, F_ANY_INT, (uint64_t)attrs[i].num);
      else
        pp_pb_bytes_field(w, F_ANY_STRING, strs[attrs[i].str], lens[attrs[i].str]);
      pp_pb_end(w);
    }
    pp_pb_end(w);
  }
  const struct stack_rec *stacks = e->stacks.v;
  const int32_t *pool = e->pool.v;
  for (size_t i = 0; i < e->stacks.n; i++) {
    pp_pb_begin(w, F_DICT_STACK);
    if (stacks[i].n) {
      pp_pb_packed_begin(w, F_STACK_LOCATIONS);
      for (uint32_t k = 0; k < stacks[i].n; k++)
        pp_pb_packed_value(w, (uint64_t)pool[stacks[i].first + k]);
      pp_pb_packed_end(w);
    }
    pp_pb_end(w);
  }
  pp_pb_end(w);
}

static void free_enc(struct enc *e) {
  char **owned = e->owned.v;
  for (size_t i = 0; i < e->owned.n; i++)
    free(owned[i]);
  free(e->owned.v);
  free(e->strs.v);
  free(e->lens.v);
  free(e->str_of);
  free(e->loc_of);
  free(e->fns.v);
  free(e->locs.v);
  free(e->attrs.v);
  free(e->stacks.v);
  free(e->pool.v);
  map_free(&e->lit_strs);
  map_free(&e->fn_map);
  map_free(&e->attr_map);
  map_free(&e->stack_map);
}

int pp_otlp_encode(const struct pp_profile *p, const struct pp_otlp_info *info, uint8_t **out,
                   size_t *len) {
  struct enc e = {.p = p};
  e.strs.size = sizeof(const char *);
  e.lens.size = sizeof(size_t);
  e.owned.size = sizeof(char *);
  e.fns.size = sizeof(struct fn_rec);
  e.locs.size = sizeof(struct loc_rec);
  e.attrs.size = sizeof(struct attr_rec);
  e.stacks.size = sizeof(struct stack_rec);
  e.pool.size = sizeof(int32_t);
  size_t nstr = pp_profile_str_count(p), nfr = pp_profile_frame_count(p);
  size_t nst = pp_profile_stack_count(p);
  struct pp_pb w = {0};
  uint32_t *group_of = NULL, *groups = NULL; /* per stack: its container string id */
  int rc = -ENOMEM;
  e.str_of = calloc(nstr + 1, sizeof(*e.str_of));
  e.loc_of = calloc(nfr + 1, sizeof(*e.loc_of));
  group_of = calloc(nst + 1, sizeof(*group_of));
  groups = calloc(nst + 1, sizeof(*groups));
  /* every table starts with its zero entry */
  if (!e.str_of || !e.loc_of || !group_of || !groups || add_string(&e, "", 0) != 0 ||
      !vec_push(&e.fns) || !vec_push(&e.locs) || !vec_push(&e.attrs) || !vec_push(&e.stacks))
    goto out;

  /* containers in order of first appearance */
  size_t ngroups = 0;
  for (size_t i = 0; i < nst; i++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, i);
    const struct pp_pid_rec *pr = pp_profile_pid(p, s->pid);
    uint32_t c = pr && pr->container != PP_NO_STR && pp_profile_str_len(p, pr->container)
                     ? pr->container
                     : PP_NO_STR;
    group_of[i] = c;
    if (!s->count) continue;
    size_t g = 0;
    while (g < ngroups && groups[g] != c)
      g++;
    if (g == ngroups) groups[ngroups++] = c;
  }

  bool typed = info->sample_type && info->sample_unit;
  /* a cpu sample stands for one period of CPU time; other types count
   * their own unit and have no period */
  int64_t period = !typed && info->frequency > 0 ? 1000000000LL / info->frequency : 0;
  int32_t s_samples = str_lit(&e, typed ? info->sample_type : "samples");
  int32_t s_count = str_lit(&e, typed ? info->sample_unit : "count");
  int32_t s_cpu = str_lit(&e, "cpu"), s_ns = str_lit(&e, "nanoseconds");
  for (size_t g = 0; g < ngroups && !e.oom; g++) {
    pp_pb_begin(&w, F_REQ_RESOURCE_PROFILES);
    write_resource(&w, info, groups[g] == PP_NO_STR ? NULL : pp_profile_str(p, groups[g]));
    pp_pb_begin(&w, F_RP_SCOPE_PROFILES);
    pp_pb_begin(&w, F_SP_SCOPE);
    pp_pb_string_field(&w, F_SCOPE_NAME, "polyprof");
    if (info->version) pp_pb_string_field(&w, F_SCOPE_VERSION, info->version);
    pp_pb_end(&w);
    pp_pb_begin(&w, F_SP_PROFILES);
    value_type(&w, F_PROF_SAMPLE_TYPE, s_samples, s_count);
    for (size_t i = 0; i < nst && !e.oom; i++) {
      const struct pp_stack_rec *s = pp_profile_stack(p, i);
      if (!s->count || group_of[i] != groups[g]) continue;
      const struct pp_pid_rec *pr = pp_profile_pid(p, s->pid);
      uint32_t comm = s->comm != PP_NO_STR ? s->comm : pr ? pr->comm : PP_NO_STR;
      int32_t a[3] = {attr(&e, A_PID, true, s->pid), attr(&e, A_COMM, false, str_id(&e, comm)),
                      attr(&e, A_APPID, false, pr ? str_id(&e, pr->appid) : 0)};
      int32_t si = stack(&e, s);
      pp_pb_begin(&w, F_PROF_SAMPLES);
      pp_pb_varint_field(&w, F_SAMPLE_STACK, (uint64_t)si);
      pp_pb_packed_begin(&w, F_SAMPLE_ATTRS);
      for (int k = 0; k < 3; k++)
        if (a[k]) pp_pb_packed_value(&w, (uint64_t)a[k]);
      pp_pb_packed_end(&w);
      pp_pb_packed_begin(&w, F_SAMPLE_VALUES);
      pp_pb_packed_value(&w, s->count > INT64_MAX ? INT64_MAX : s->count);
      pp_pb_packed_end(&w);
      pp_pb_end(&w);
    }
    if (info->start > 0) {
      pp_pb_fixed64_field(&w, F_PROF_TIME, (uint64_t)info->start * 1000000000ULL);
      if (info->end > info->start)
        pp_pb_varint_field(&w, F_PROF_DURATION,
                           (uint64_t)(info->end - info->start) * 1000000000ULL);
    }
    if (period) {
      value_type(&w, F_PROF_PERIOD_TYPE, s_cpu, s_ns);
      pp_pb_varint_field(&w, F_PROF_PERIOD, (uint64_t)period);
    }
    if (info->profile_id_seed) {
      uint8_t id[16];
      memcpy(id, info->profile_id_seed, 16);
      id[15] ^= (uint8_t)g, id[14] ^= (uint8_t)(g >> 8);
      id[0] |= 1; /* never all zeroes */
      pp_pb_bytes_field(&w, F_PROF_ID, id, 16);
    }
    pp_pb_end(&w); /* profile */
    pp_pb_end(&w); /* scope profiles */
    pp_pb_end(&w); /* resource profiles */
  }
  if (e.oom) goto out;
  write_dictionary(&w, &e);
  if (pp_pb_failed(&w) || e.oom) goto out;
  *out = w.b;
  *len = w.n;
  w.b = NULL;
  rc = 0;
out:
  pp_pb_free(&w);
  free(group_of);
  free(groups);
  free_enc(&e);
  return rc;
}
