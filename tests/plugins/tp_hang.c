/* SPDX-License-Identifier: Apache-2.0 */
/* Test plugin: never returns from snapshot() (or from the call named by
 * option hang_on: init | start | snapshot). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "polyprof/plugin.h"

static char hang_on[16] = "snapshot";

static void maybe_hang(const char *where) {
  if (strcmp(hang_on, where) != 0) return;
  for (;;)
    sleep(3600);
}

static int h_init(const struct pp_host *host, void **state) {
  const char *v;
  if (host->config_string(host, "hang_on", &v) == 0) strncpy(hang_on, v, sizeof(hang_on) - 1);
  *state = (void *)host;
  maybe_hang("init");
  return 0;
}

static int h_start(void *state, struct pp_session *session) {
  maybe_hang("start");
  return 0;
}

static int h_add_targets(void *state, const struct pp_target *t, size_t n) {
  return 0;
}

static int h_snapshot(void *state, struct pp_sink *sink) {
  maybe_hang("snapshot");
  return 0;
}

static int h_stop(void *state) {
  return 0;
}

static void h_fini(void *state) {}

static const char *const hang_choices[] = {"init", "start", "snapshot", "never", NULL};
static const struct pp_option options[] = {
    {.key = "hang_on", .type = PP_OPT_ENUM, .default_value = "snapshot", .choices = hang_choices},
};

static const struct pp_plugin plugin = {
    PP_PLUGIN_HEADER,
    .name = "tp_hang",
    .version = "1.0",
    .description = "hangs on purpose",
    .capabilities = PP_CAP_RUNTIME | PP_CAP_NEEDS_NOTHING,
    .options = options,
    .option_count = 1,
    .init = h_init,
    .start = h_start,
    .add_targets = h_add_targets,
    .snapshot = h_snapshot,
    .stop = h_stop,
    .fini = h_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &plugin;
}
