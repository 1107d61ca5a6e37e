/* SPDX-License-Identifier: Apache-2.0 */
/* Test plugin: built for a future ABI major; the registry must refuse it
 * without reading anything past the header. */
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
    .abi_major = PP_ABI_MAJOR + 1,
    .abi_minor = 0,
    .struct_size = sizeof(struct pp_plugin),
    .name = "tp_abi_major",
    .version = "9.0",
    .description = "from the future",
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
