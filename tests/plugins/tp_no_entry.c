/* SPDX-License-Identifier: Apache-2.0 */
/* Test plugin: a valid descriptor, but exported under the wrong name. */
#include "polyprof/plugin.h"

static int x_init(const struct pp_host *h, void **s) {
  *s = NULL;
  return 0;
}
static int x_start(void *s, struct pp_session *ss) {
  return 0;
}
static int x_add(void *s, const struct pp_target *t, size_t n) {
  return 0;
}
static int x_snapshot(void *s, struct pp_sink *k) {
  return 0;
}
static int x_stop(void *s) {
  return 0;
}
static void x_fini(void *s) {}

static const struct pp_plugin plugin = {
    PP_PLUGIN_HEADER, .name = "tp_no_entry", .version = "1.0",     .description = "no entry",
    .init = x_init,   .start = x_start,      .add_targets = x_add, .snapshot = x_snapshot,
    .stop = x_stop,   .fini = x_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry_v0(void) {
  return &plugin;
}
