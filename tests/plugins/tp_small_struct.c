/* SPDX-License-Identifier: Apache-2.0 */
/* Test plugin: declares a descriptor smaller than ABI 1.0's; the registry
 * must refuse it and never read past the declared size. */
#include <stddef.h>

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
    .abi_major = PP_ABI_MAJOR,
    .abi_minor = 0,
    .struct_size = offsetof(struct pp_plugin, init),
    .name = "tp_small_struct",
    .version = "1.0",
    .description = "truncated",
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  (void)x_init;
  (void)x_start;
  (void)x_add;
  (void)x_snapshot;
  (void)x_stop;
  (void)x_fini;
  return &plugin;
}
