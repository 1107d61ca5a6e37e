/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the nodejs plugin's cpuprofile collapse: a real-shaped
 * profile, and hostile ones (cycles, duplicate ids, wrong types, unknown
 * sample ids, depth bombs). The plugin source is compiled in. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../plugins/nodejs/cpuprofile.c"
#include "testlib.h"

struct got {
  char text[16][512];
  uint64_t count[16];
  int n;
  uint32_t max_frames;
};

static void collect(void *ctx, const struct pp_frame *f, uint32_t n, uint64_t count) {
  struct got *g = ctx;
  if (n > g->max_frames) g->max_frames = n;
  if (g->n >= 16) return;
  char *t = g->text[g->n];
  size_t at = 0;
  t[0] = '\0';
  /* root first, like a .col line */
  for (uint32_t i = n; i-- > 0;) {
    at += (size_t)snprintf(t + at, at < 512 ? 512 - at : 0, "%s%s@%s:%u/%u", i + 1 < n ? ";" : "",
                           f[i].name, f[i].file ? f[i].file : "-", f[i].line, f[i].kind);
    if (at >= 512) break;
  }
  g->count[g->n++] = count;
}

static int run(const char *json, const struct nodejs_collapse_opts *o, struct got *g,
               struct nodejs_collapse_stats *s) {
  memset(g, 0, sizeof(*g));
  json_error_t e;
  json_t *p = json_loads(json, 0, &e);
  if (!p) {
    fprintf(stderr, "bad test json: %s\n", e.text);
    return -999;
  }
  char err[200];
  int rc = nodejs_cpuprofile_collapse(p, o, collect, g, s, err, sizeof(err));
  json_decref(p);
  return rc;
}

/* distinct nodes may render the same: add them up */
static uint64_t count_of(const struct got *g, const char *text) {
  uint64_t c = 0;
  for (int i = 0; i < g->n; i++)
    if (strcmp(g->text[i], text) == 0) c += g->count[i];
  return c;
}

static const struct nodejs_collapse_opts opts = {.max_depth = 64, .max_nodes = 1000};

static void test_real_shape(void) {
  const char *p =
      "{\"nodes\":["
      "{\"id\":1,\"callFrame\":{\"functionName\":\"(root)\",\"url\":\"\",\"lineNumber\":-1},"
      "\"children\":[2,5,6,7]},"
      "{\"id\":2,\"callFrame\":{\"functionName\":\"main\",\"url\":\"file:///a.js\","
      "\"lineNumber\":9},\"children\":[3]},"
      "{\"id\":3,\"callFrame\":{\"functionName\":\"\",\"url\":\"file:///a.js\",\"lineNumber\":0},"
      "\"children\":[4]},"
      "{\"id\":4,\"callFrame\":{\"functionName\":\"spin\",\"url\":\"file:///a.js\","
      "\"lineNumber\":2}},"
      "{\"id\":5,\"callFrame\":{\"functionName\":\"(idle)\",\"url\":\"\",\"lineNumber\":-1}},"
      "{\"id\":6,\"callFrame\":{\"functionName\":\"(program)\",\"url\":\"\",\"lineNumber\":-1}},"
      "{\"id\":7,\"callFrame\":{\"functionName\":\"(garbage collector)\",\"url\":\"\"}}"
      "],\"samples\":[4,4,4,3,5,5,6,7,4,2],\"timeDeltas\":[1,1,1,1,1,1,1,1,1,1]}";
  struct got g;
  struct nodejs_collapse_stats s;
  CHECK_EQ_INT(run(p, &opts, &g, &s), 0);
  CHECK_EQ_INT(count_of(&g,
                        "main@file:///a.js:10/12;(anonymous)@file:///a.js:1/12;spin@file:///"
                        "a.js:3/12"),
               4);
  CHECK_EQ_INT(count_of(&g, "main@file:///a.js:10/12;(anonymous)@file:///a.js:1/12"), 1);
  CHECK_EQ_INT(count_of(&g, "main@file:///a.js:10/12"), 1);
  CHECK_EQ_INT(count_of(&g, "(program)@-:0/13"), 1);
  CHECK_EQ_INT(count_of(&g, "(garbage collector)@-:0/13"), 1);
  CHECK_EQ_INT(s.samples, 8);
  CHECK_EQ_INT(s.dropped, 2); /* idle */
  struct nodejs_collapse_opts idle = opts;
  idle.include_idle = 1;
  CHECK_EQ_INT(run(p, &idle, &g, &s), 0);
  CHECK_EQ_INT(count_of(&g, "(idle)@-:0/13"), 2);
}

static void test_hostile(void) {
  struct got g;
  struct nodejs_collapse_stats s;
  /* not a profile at all */
  CHECK_EQ_INT(run("{}", &opts, &g, &s), -EPROTO);
  CHECK_EQ_INT(run("{\"nodes\":{}}", &opts, &g, &s), -EPROTO);
  CHECK_EQ_INT(run("{\"nodes\":[],\"samples\":7}", &opts, &g, &s), -EPROTO);
  CHECK_EQ_INT(run("{\"nodes\":[1,2],\"samples\":[1]}", &opts, &g, &s), -EPROTO);
  CHECK_EQ_INT(run("{\"nodes\":[{\"id\":\"1\"}],\"samples\":[1]}", &opts, &g, &s), -EPROTO);
  /* duplicate ids */
  CHECK_EQ_INT(run("{\"nodes\":[{\"id\":1},{\"id\":1}],\"samples\":[1]}", &opts, &g, &s), -EPROTO);
  /* children of the wrong type */
  CHECK_EQ_INT(run("{\"nodes\":[{\"id\":1,\"children\":5}],\"samples\":[1]}", &opts, &g, &s),
               -EPROTO);
  /* too many nodes */
  struct nodejs_collapse_opts tiny = opts;
  tiny.max_nodes = 1;
  CHECK_EQ_INT(run("{\"nodes\":[{\"id\":1},{\"id\":2}],\"samples\":[1]}", &tiny, &g, &s), -E2BIG);
  /* a cycle 1 -> 2 -> 1 and a self-child: bounded walk, no hang */
  const char *cyc =
      "{\"nodes\":[{\"id\":1,\"callFrame\":{\"functionName\":\"a\"},\"children\":[2,1]},"
      "{\"id\":2,\"callFrame\":{\"functionName\":\"b\"},\"children\":[1]}],"
      "\"samples\":[1,2,2]}";
  CHECK_EQ_INT(run(cyc, &opts, &g, &s), 0);
  CHECK_EQ_INT(s.samples, 3);
  CHECK(g.max_frames <= opts.max_depth);
  /* unknown and non-integer sample ids, negative/huge line numbers,
   * callFrame fields of the wrong type */
  const char *odd =
      "{\"nodes\":[{\"id\":-5,\"callFrame\":{\"functionName\":7,\"url\":[],"
      "\"lineNumber\":99999999999}},"
      "{\"id\":9007199254740991,\"callFrame\":\"x\"}],"
      "\"samples\":[-5,\"-5\",42,null,9007199254740991]}";
  CHECK_EQ_INT(run(odd, &opts, &g, &s), 0);
  CHECK_EQ_INT(s.dropped, 3);
  CHECK_EQ_INT(count_of(&g, "(anonymous)@-:0/12"), 2);
  /* a node with two parents: the first one wins */
  const char *two =
      "{\"nodes\":[{\"id\":1,\"callFrame\":{\"functionName\":\"p\"},\"children\":[3]},"
      "{\"id\":2,\"callFrame\":{\"functionName\":\"q\"},\"children\":[3]},"
      "{\"id\":3,\"callFrame\":{\"functionName\":\"c\"}}],\"samples\":[3]}";
  CHECK_EQ_INT(run(two, &opts, &g, &s), 0);
  CHECK_EQ_INT(count_of(&g, "p@-:0/12;c@-:0/12"), 1);
}

static void test_depth(void) {
  /* a 3000-deep chain: stacks keep the leaf side, max_depth frames */
  size_t n = 3000;
  json_t *nodes = json_array();
  for (size_t i = 1; i <= n; i++) {
    json_t *nd = json_pack("{s:I, s:{s:s, s:s, s:i}}", "id", (json_int_t)i, "callFrame",
                           "functionName", i == n ? "leaf" : "f", "url", "u", "lineNumber", 0);
    if (i < n) json_object_set_new(nd, "children", json_pack("[I]", (json_int_t)(i + 1)));
    json_array_append_new(nodes, nd);
  }
  json_t *p = json_pack("{s:o, s:[I]}", "nodes", nodes, "samples", (json_int_t)n);
  struct got g;
  memset(&g, 0, sizeof(g));
  struct nodejs_collapse_stats s;
  struct nodejs_collapse_opts big = opts;
  big.max_nodes = 10000;
  int rc = nodejs_cpuprofile_collapse(p, &big, collect, &g, &s, NULL, 0);
  json_decref(p);
  CHECK_EQ_INT(rc, 0);
  CHECK_EQ_INT(g.max_frames, opts.max_depth);
  CHECK_EQ_INT(s.truncated, 1);
  CHECK_EQ_INT(s.samples, 1);
}

int main(void) {
  test_real_shape();
  test_hostile();
  test_depth();
  return pp_test_finish("test_nodejs_cpuprofile");
}
