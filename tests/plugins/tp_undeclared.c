/* SPDX-License-Identifier: Apache-2.0 */
/* Test plugin: a valid descriptor that declares none of the PP_CAP_NEEDS_*
 * bits, so the agent cannot know what its worker may hold: refused, with
 * its name. */
#include "polyprof/plugin.h"

static int x_init(const struct pp_host *h, void **s) {
  (void)h;
  *s = NULL;
  return 0;
}
static int x_start(void *s, struct pp_session *ss) {
  (void)s;
  (void)ss;
  return 0;
}
static int x_add(void *s, const struct pp_target *t, size_t n) {
  (void)s;
  (void)t;
  (void)n;
  return 0;
}
static int x_snapshot(void *s, struct pp_sink *k) {
  (void)s;
  (void)k;
  return 0;
}
static int x_stop(void *s) {
  (void)s;
  return 0;
}
static void x_fini(void *s) {
  (void)s;
}

static const struct pp_plugin plugin = {
    PP_PLUGIN_HEADER,
    .name = "tp_undeclared",
    .version = "1.0",
    .description = "declares no privileges",
    .capabilities = PP_CAP_RUNTIME,
    .init = x_init,
    .start = x_start,
    .add_targets = x_add,
    .snapshot = x_snapshot,
    .stop = x_stop,
    .fini = x_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &plugin;
}
