/* SPDX-License-Identifier: Apache-2.0 */
/* Profile types: names, units, parsing, file names, per-type extraction. */
#include "profile_mode.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "profile_marker.h"

static const struct pp_profile_type_desc types[PP_PROFILE_TYPE_COUNT] = {
    [PP_PROFILE_CPU] = {"cpu", "cpu", "samples", "samples", "count", "cpu", "samples", 0},
    [PP_PROFILE_WALL] = {"wall", "wall", "samples", "wall", "count", "wall", "samples", 0},
    /* Pyroscope reads a count as 1/sampleRate s: a microsecond */
    [PP_PROFILE_OFFCPU] = {"offcpu", "offcpu", "microseconds", "off_cpu", "microseconds", "off_cpu",
                           "samples", 1000000},
    [PP_PROFILE_ALLOC] = {"alloc", "allocation", "bytes", "alloc_space", "bytes", "alloc_space",
                          "bytes", 0},
};

const struct pp_profile_type_desc *pp_profile_type(unsigned type) {
  return type < PP_PROFILE_TYPE_COUNT ? &types[type] : NULL;
}

static int type_of_word(const char *w, size_t len) {
  for (unsigned t = 0; t < PP_PROFILE_TYPE_COUNT; t++)
    if (strlen(types[t].name) == len && !strncmp(w, types[t].name, len)) return (int)t;
  /* gProfiler's word for Java allocation sampling */
  if (len == 10 && !strncmp(w, "allocation", len)) return PP_PROFILE_ALLOC;
  return -1;
}

int pp_profile_types_parse(const char *text, uint32_t *mask, char *err, size_t errlen) {
  *mask = 0;
  if (!text || !strcmp(text, "none")) return 0; /* gProfiler's "profile nothing" */
  const char *p = text;
  for (;;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    while (len && p[0] == ' ')
      p++, len--;
    while (len && p[len - 1] == ' ')
      len--;
    int t = type_of_word(p, len);
    if (t < 0) {
      snprintf(err, errlen,
               "unknown profile type '%.*s' in '%s' (expected cpu, wall, offcpu or alloc, "
               "comma-separated; or none)",
               (int)(len > 64 ? 64 : len), p, text);
      return -1;
    }
    *mask |= PP_TYPE_BIT(t);
    if (!end) break;
    p = end + 1;
  }
  return 0;
}

uint32_t pp_profile_types_session_flags(uint32_t mask) {
  uint32_t f = 0;
  if (!(mask & PP_TYPE_BIT(PP_PROFILE_CPU))) f |= PP_SESSION_NO_CPU;
  if (mask & PP_TYPE_BIT(PP_PROFILE_WALL)) f |= PP_SESSION_WALL;
  if (mask & PP_TYPE_BIT(PP_PROFILE_OFFCPU)) f |= PP_SESSION_OFFCPU;
  if (mask & PP_TYPE_BIT(PP_PROFILE_ALLOC)) f |= PP_SESSION_ALLOC;
  return f;
}

unsigned pp_profile_types_count(uint32_t mask) {
  unsigned n = 0;
  for (unsigned t = 0; t < PP_PROFILE_TYPE_COUNT; t++)
    n += (mask >> t) & 1u;
  return n;
}

const char *pp_profile_type_infix(uint32_t mask, unsigned type, char *buf, size_t len) {
  if (type == PP_PROFILE_CPU || type >= PP_PROFILE_TYPE_COUNT || pp_profile_types_count(mask) < 2)
    snprintf(buf, len, "%s", "");
  else
    snprintf(buf, len, ".%s", types[type].name);
  return buf;
}

void pp_profile_type_link(const char *link, const char *infix, char *buf, size_t len) {
  const char *dot = strchr(link, '.');
  if (!*infix || !dot) {
    snprintf(buf, len, "%s", link);
    return;
  }
  snprintf(buf, len, "%.*s%s%s", (int)(dot - link), link, infix, dot);
}

static uint32_t copy_str(struct pp_profile *dst, const struct pp_profile *src, uint32_t id,
                         bool *oom) {
  if (id == PP_NO_STR) return PP_NO_STR;
  uint32_t r = pp_profile_import_str(dst, src, id);
  if (r == PP_NO_STR) *oom = true;
  return r;
}

static int copy_pids(struct pp_profile *dst, const struct pp_profile *src) {
  bool oom = false;
  for (size_t i = 0; i < pp_profile_pid_count(src); i++) {
    const struct pp_pid_rec *s = pp_profile_pid_at(src, i);
    struct pp_pid_rec *d = pp_profile_pid_upsert(dst, s->pid);
    if (!d) return -ENOMEM;
    uint64_t total = d->total; /* maintained by add_stack, not copied */
    d->comm = copy_str(dst, src, s->comm, &oom);
    d->appid = copy_str(dst, src, s->appid, &oom);
    d->app_meta = copy_str(dst, src, s->app_meta, &oom);
    d->container = copy_str(dst, src, s->container, &oom);
    d->status = s->status;
    d->reason = copy_str(dst, src, s->reason, &oom);
    d->app_meta_index = s->app_meta_index;
    d->start_time = s->start_time;
    d->total = total;
  }
  for (size_t i = 0; i < pp_profile_counter_count(src); i++) {
    const struct pp_counter_rec *c = pp_profile_counter_at(src, i);
    if (pp_profile_add_counter(dst, pp_profile_str(src, c->name), c->value)) return -ENOMEM;
  }
  return oom ? -ENOMEM : 0;
}

int pp_profile_type_extract(struct pp_profile *dst, const struct pp_profile *src, unsigned type,
                            int untagged_as) {
  static uint32_t ids[PP_MAX_FRAMES]; /* the output stage runs on one thread */
  pp_profile_clear(dst);
  bool oom = false;
  for (size_t i = 0; i < pp_profile_stack_count(src); i++) {
    const struct pp_stack_rec *s = pp_profile_stack(src, i);
    uint32_t t = pp_type_of_stack(src, s);
    uint32_t skip = t != PP_PROFILE_CPU;
    if (t == PP_PROFILE_CPU && untagged_as >= 0) t = (uint32_t)untagged_as;
    if (t != type) continue;
    const uint32_t *fr = pp_profile_stack_frames(src, s);
    uint32_t n = 0;
    for (uint32_t k = skip; k < s->nframes && n < PP_MAX_FRAMES; k++) {
      const struct pp_frame_rec *f = pp_profile_frame(src, fr[k]);
      uint32_t name = copy_str(dst, src, f->name, &oom);
      uint32_t file = copy_str(dst, src, f->file, &oom);
      if (oom) return -ENOMEM;
      ids[n] = pp_profile_intern_frame(dst, name, file, f->line, f->kind);
      if (ids[n++] == UINT32_MAX) return -ENOMEM;
    }
    uint32_t comm = copy_str(dst, src, s->comm, &oom);
    if (oom || pp_profile_add_stack(dst, s->pid, comm, ids, n, s->count)) return -ENOMEM;
  }
  return copy_pids(dst, src);
}

void pp_profile_type_stamp_header(json_t *h, unsigned type) {
  const struct pp_profile_type_desc *d = pp_profile_type(type);
  if (!h || !d) return;
  json_t *md = json_object_get(h, "metadata");
  if (json_is_object(md)) json_object_set_new(md, "profiling_mode", json_string(d->gp_mode));
  json_object_set_new(h, "profiling_mode", json_string(d->gp_mode));
  json_object_set_new(h, "profile_type", json_string(d->name));
  json_object_set_new(h, "profile_unit", json_string(d->unit));
}

unsigned pp_profile_type_of_header(const char *header_json) {
  json_t *h = header_json ? json_loads(header_json, 0, NULL) : NULL;
  const char *name = json_string_value(json_object_get(h, "profile_type"));
  unsigned type = PP_PROFILE_CPU;
  for (unsigned t = 0; name && t < PP_PROFILE_TYPE_COUNT; t++)
    if (!strcmp(types[t].name, name)) type = t;
  json_decref(h);
  return type;
}
