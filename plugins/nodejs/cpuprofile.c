/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Collapses a V8 cpuprofile into stacks.
 *
 * The profile is a call tree (nodes with ids and children) plus one node id
 * per sample. Counting samples per node and walking each sampled node up to
 * the root gives one stack per node, so the work is O(nodes + samples) with
 * a handful of arrays sized by the node count and no per-sample allocation.
 *
 * The profile comes from the target: ids may be duplicated, missing,
 * negative or form cycles; a node may claim several parents; fields may
 * have the wrong types. Each of these is either rejected or neutralised
 * (first parent wins, walks are bounded by the node count and max_depth).
 */
#include "cpuprofile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_NODE UINT32_MAX

/* id -> index, open addressing on a power-of-two table */
struct idmap {
  int64_t *keys;
  uint32_t *vals;
  size_t mask;
};

static int idmap_init(struct idmap *m, size_t n) {
  size_t cap = 16;
  while (cap < n * 2)
    cap *= 2;
  m->keys = malloc(cap * sizeof(*m->keys));
  m->vals = malloc(cap * sizeof(*m->vals));
  if (!m->keys || !m->vals) return -ENOMEM;
  for (size_t i = 0; i < cap; i++)
    m->vals[i] = NO_NODE;
  m->mask = cap - 1;
  return 0;
}

static size_t idmap_slot(const struct idmap *m, int64_t id) {
  uint64_t h = (uint64_t)id * 0x9E3779B97F4A7C15ull;
  size_t i = (size_t)(h >> 17) & m->mask;
  while (m->vals[i] != NO_NODE && m->keys[i] != id)
    i = (i + 1) & m->mask;
  return i;
}

static uint32_t idmap_get(const struct idmap *m, int64_t id) {
  return m->vals[idmap_slot(m, id)];
}

static void idmap_free(struct idmap *m) {
  free(m->keys);
  free(m->vals);
}

static int fail(char *err, size_t errlen, const char *why) {
  if (err) snprintf(err, errlen, "malformed cpuprofile: %s", why);
  return -EPROTO;
}

static const char *call_frame_str(const json_t *node, const char *key) {
  const char *s = json_string_value(json_object_get(json_object_get(node, "callFrame"), key));
  return s ? s : "";
}

int nodejs_cpuprofile_collapse(const json_t *profile, const struct nodejs_collapse_opts *opts,
                               nodejs_stack_fn fn, void *ctx, struct nodejs_collapse_stats *stats,
                               char *err, size_t errlen) {
  memset(stats, 0, sizeof(*stats));
  const json_t *nodes = json_object_get(profile, "nodes");
  const json_t *samples = json_object_get(profile, "samples");
  if (!json_is_array(nodes)) return fail(err, errlen, "no nodes array");
  if (samples && !json_is_array(samples)) return fail(err, errlen, "samples is not an array");
  size_t n = json_array_size(nodes);
  if (n > opts->max_nodes) {
    if (err) snprintf(err, errlen, "cpuprofile has %zu nodes (max_nodes %u)", n, opts->max_nodes);
    return -E2BIG;
  }
  stats->nodes = (uint32_t)n;
  size_t ns = json_array_size(samples);
  if (n == 0 || ns == 0) return 0;

  struct idmap map = {0};
  uint32_t *parent = malloc(n * sizeof(*parent));
  uint64_t *count = calloc(n, sizeof(*count));
  uint32_t depth_cap = opts->max_depth ? opts->max_depth : 1;
  struct pp_frame *frames = malloc(depth_cap * sizeof(*frames));
  int rc = 0;
  if (!parent || !count || !frames || idmap_init(&map, n) < 0) {
    rc = -ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    const json_t *nd = json_array_get(nodes, i);
    const json_t *jid = json_object_get(nd, "id");
    if (!json_is_object(nd) || !json_is_integer(jid)) {
      rc = fail(err, errlen, "node without an integer id");
      goto out;
    }
    size_t s = idmap_slot(&map, json_integer_value(jid));
    if (map.vals[s] != NO_NODE) {
      rc = fail(err, errlen, "duplicate node id");
      goto out;
    }
    map.keys[s] = json_integer_value(jid);
    map.vals[s] = (uint32_t)i;
    parent[i] = NO_NODE;
  }
  for (size_t i = 0; i < n; i++) {
    const json_t *kids = json_object_get(json_array_get(nodes, i), "children");
    if (!kids) continue;
    if (!json_is_array(kids)) {
      rc = fail(err, errlen, "children is not an array");
      goto out;
    }
    size_t k;
    const json_t *kid;
    json_array_foreach(kids, k, kid) {
      if (!json_is_integer(kid)) continue;
      uint32_t ci = idmap_get(&map, json_integer_value(kid));
      /* first parent wins; a self-parent would loop */
      if (ci != NO_NODE && ci != i && parent[ci] == NO_NODE) parent[ci] = (uint32_t)i;
    }
  }
  size_t k;
  const json_t *sid;
  json_array_foreach(samples, k, sid) {
    uint32_t idx = json_is_integer(sid) ? idmap_get(&map, json_integer_value(sid)) : NO_NODE;
    if (idx == NO_NODE) {
      stats->dropped++;
      continue;
    }
    count[idx]++;
  }
  for (size_t i = 0; i < n; i++) {
    if (!count[i]) continue;
    const json_t *leaf = json_array_get(nodes, i);
    const char *lname = call_frame_str(leaf, "functionName");
    if ((!opts->include_idle && strcmp(lname, "(idle)") == 0) || strcmp(lname, "(root)") == 0) {
      stats->dropped += count[i];
      continue;
    }
    uint32_t nf = 0;
    size_t steps = 0;
    int truncated = 0;
    for (uint32_t at = (uint32_t)i; at != NO_NODE && steps <= n; at = parent[at], steps++) {
      const json_t *nd = json_array_get(nodes, at);
      const char *name = call_frame_str(nd, "functionName");
      if (strcmp(name, "(root)") == 0 && parent[at] == NO_NODE) break;
      if (nf == depth_cap) {
        truncated = 1;
        break;
      }
      const char *url = call_frame_str(nd, "url");
      const json_t *ln = json_object_get(json_object_get(nd, "callFrame"), "lineNumber");
      json_int_t line = json_is_integer(ln) ? json_integer_value(ln) : -1;
      uint32_t kind = PP_FRAME_JS;
      /* V8's synthetic entries, e.g. "(program)", "(garbage collector)" */
      if (name[0] == '(' && !url[0]) kind = PP_FRAME_PSEUDO;
      frames[nf++] = (struct pp_frame){
          .name = name[0] ? name : "(anonymous)",
          .file = url[0] ? url : NULL,
          .line = line >= 0 && line < (json_int_t)UINT32_MAX ? (uint32_t)line + 1 : 0,
          .kind = kind,
      };
    }
    if (truncated) stats->truncated++;
    if (nf == 0) {
      stats->dropped += count[i];
      continue;
    }
    fn(ctx, frames, nf, count[i]);
    stats->samples += count[i];
  }
out:
  idmap_free(&map);
  free(parent);
  free(count);
  free(frames);
  return rc;
}
