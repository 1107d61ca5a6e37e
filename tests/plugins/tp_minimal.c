/* SPDX-License-Identifier: Apache-2.0 */
/* Test plugin: the least a plugin may be. System-wide (so no add_targets),
 * no options, no tick, no version or description. */
#include "polyprof/plugin.h"

static int x_init(const struct pp_host *h, void **s) {
  *s = (void *)h;
  return 0;
}
static int x_start(void *s, struct pp_session *ss) {
  return 0;
}
static int x_snapshot(void *s, struct pp_sink *k) {
  const struct pp_host *h = s;
  struct pp_frame f = {"minimal_frame", NULL, 0, PP_FRAME_KERNEL};
  struct pp_sample smp = {.pid = 1, .comm = "init", .frames = &f, .nframes = 1, .count = 3};
  return h->emit(k, &smp);
}
static int x_stop(void *s) {
  return 0;
}
static void x_fini(void *s) {}

static const struct pp_plugin plugin = {
    PP_PLUGIN_HEADER,
    .name = "tp_minimal",
    .capabilities = PP_CAP_SYSTEM_WIDE | PP_CAP_NEEDS_NOTHING,
    .init = x_init,
    .start = x_start,
    .snapshot = x_snapshot,
    .stop = x_stop,
    .fini = x_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &plugin;
}
