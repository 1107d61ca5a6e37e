/* SPDX-License-Identifier: Apache-2.0 */
/* Test plugin: allocates and touches memory in every tick (step_mb per tick,
 * up to total_mb, 1 GiB by default) and never frees it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "polyprof/plugin.h"

#define MAX_CHUNKS 4096

struct st {
  int64_t step_mb, total_mb, done_mb;
  char *chunks[MAX_CHUNKS];
  size_t nchunks;
};

static int l_init(const struct pp_host *host, void **state) {
  struct st *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  s->step_mb = 16;
  s->total_mb = 1024;
  host->config_int(host, "step_mb", &s->step_mb);
  host->config_int(host, "total_mb", &s->total_mb);
  *state = s;
  return 0;
}

static int l_start(void *state, struct pp_session *session) {
  session->tick_interval_ns = 10000000; /* 10 ms */
  return 0;
}

static int l_add_targets(void *state, const struct pp_target *t, size_t n) {
  return 0;
}

static int l_tick(void *state, uint64_t now) {
  struct st *s = state;
  if (s->done_mb >= s->total_mb) return 0;
  size_t n = (size_t)s->step_mb << 20;
  char *p = malloc(n);
  if (!p) return -ENOMEM;
  memset(p, 0xa5, n); /* touch every page: RSS, not just address space */
  /* Keep the compiler from proving the block unused and dropping both the
   * malloc and the memset. */
  __asm__ volatile("" : : "r"(p) : "memory");
  s->chunks[s->nchunks++ % MAX_CHUNKS] = p; /* kept, never freed */
  s->done_mb += s->step_mb;
  return 0;
}

static int l_snapshot(void *state, struct pp_sink *sink) {
  return 0;
}

static int l_stop(void *state) {
  return 0;
}

static void l_fini(void *state) {
  free(state);
}

static const struct pp_option options[] = {
    {.key = "step_mb", .type = PP_OPT_INT, .default_value = "16", .min = 1, .max = 1024},
    {.key = "total_mb", .type = PP_OPT_INT, .default_value = "1024", .min = 1, .max = 65536},
};

static const struct pp_plugin plugin = {
    PP_PLUGIN_HEADER,
    .name = "tp_leak",
    .version = "1.0",
    .description = "leaks memory on purpose",
    .capabilities = PP_CAP_RUNTIME | PP_CAP_NEEDS_NOTHING,
    .options = options,
    .option_count = 2,
    .init = l_init,
    .start = l_start,
    .add_targets = l_add_targets,
    .tick = l_tick,
    .snapshot = l_snapshot,
    .stop = l_stop,
    .fini = l_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &plugin;
}
