/* SPDX-License-Identifier: Apache-2.0 */
/* Test plugin: its constructor crashes while the library is being loaded,
 * i.e. inside dlopen(), before the entry point could even be looked up. */
#include <stdint.h>

#include "polyprof/plugin.h"

__attribute__((constructor)) static void crash_on_load(void) {
  volatile uintptr_t addr = 16;
  *(volatile int *)addr = 1;
}

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
    PP_PLUGIN_HEADER,     .name = "tp_ctor_crash",
    .version = "1.0",     .description = "crashes on load",
    .init = x_init,       .start = x_start,
    .add_targets = x_add, .snapshot = x_snapshot,
    .stop = x_stop,       .fini = x_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &plugin;
}
