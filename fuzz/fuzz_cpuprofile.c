/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: a V8 cpuprofile (the Profiler.stop reply of Node's
 * inspector, plugins/nodejs/cpuprofile.c) turned into stacks: node ids,
 * parent links (cycles, self-parents, unknown children), sample ids,
 * call frames of any type. The profile comes from the profiled process.
 * Collapsed with the plugin's options and with tight ones (depth 2, 8
 * nodes); every frame handed out must be a bounded, valid string.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cpuprofile.h"
#include "fuzz_input.h"

struct seen {
  uint32_t max_depth;
  uint64_t samples, sink;
};

static void on_stack(void *arg, const struct pp_frame *frames, uint32_t n, uint64_t count) {
  struct seen *s = arg;
  if (n == 0 || n > s->max_depth || count == 0) abort();
  for (uint32_t i = 0; i < n; i++) {
    if (!frames[i].name) abort();
    s->sink += strlen(frames[i].name) + (frames[i].file ? strlen(frames[i].file) : 0);
  }
  s->samples += count;
}

static void collapse(const json_t *profile, uint32_t depth, uint32_t nodes, int idle) {
  struct nodejs_collapse_opts o = {.max_depth = depth, .max_nodes = nodes, .include_idle = idle};
  struct nodejs_collapse_stats st;
  struct seen s = {.max_depth = depth ? depth : 1};
  char err[256];
  int rc = nodejs_cpuprofile_collapse(profile, &o, on_stack, &s, &st, err, sizeof(err));
  if (rc == 0 && s.samples != st.samples) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  json_t *doc = json_loadb((const char *)data, size, 0, NULL);
  if (!doc) return 0;
  /* the CDP reply's result ({"profile": {...}}), or a bare profile as
   * --cpu-prof writes it */
  json_t *profile = json_object_get(doc, "profile");
  if (!profile) profile = doc;
  collapse(profile, 128, 1u << 20, 0);
  collapse(profile, 2, 8, 1);
  collapse(profile, 0, 1u << 20, 1);
  json_decref(doc);
  return 0;
}
