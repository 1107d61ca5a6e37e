/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test plugin: misbehaves towards the protocol from inside its worker, as
 * memory corruption in a real plugin might. Option `evil` picks what
 * snapshot() does:
 *   garbage - write a header announcing a 4 GiB message to the socket (fd 3)
 *   bogus   - write a well-formed REPLY where a PROFILE is due
 *   close   - close the socket, then keep running
 *   exit    - exit(3)
 *   abort   - abort()
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "polyprof/plugin.h"

static char evil[16] = "garbage";

static int e_init(const struct pp_host *host, void **state) {
  const char *v;
  if (host->config_string(host, "evil", &v) == 0) strncpy(evil, v, sizeof(evil) - 1);
  *state = NULL;
  return 0;
}

static int e_start(void *state, struct pp_session *session) {
  return 0;
}

static int e_add_targets(void *state, const struct pp_target *t, size_t n) {
  return 0;
}

static int e_snapshot(void *state, struct pp_sink *sink) {
  if (strcmp(evil, "garbage") == 0) {
    uint32_t hdr[2] = {66, 0xffffffffu};
    if (write(3, hdr, sizeof(hdr)) < 0) return -errno;
  } else if (strcmp(evil, "bogus") == 0) {
    uint32_t msg[4] = {65, 8, 0, 0}; /* REPLY rc=0, message "" */
    if (write(3, msg, sizeof(msg)) < 0) return -errno;
    for (;;)
      sleep(3600);
  } else if (strcmp(evil, "close") == 0) {
    close(3);
    for (;;)
      sleep(3600);
  } else if (strcmp(evil, "exit") == 0) {
    exit(3);
  } else if (strcmp(evil, "abort") == 0) {
    abort();
  }
  return 0;
}

static int e_stop(void *state) {
  return 0;
}

static void e_fini(void *state) {}

static const char *const choices[] = {"garbage", "bogus", "close", "exit", "abort", NULL};
static const struct pp_option options[] = {
    {.key = "evil", .type = PP_OPT_ENUM, .default_value = "garbage", .choices = choices},
};

static const struct pp_plugin plugin = {
    PP_PLUGIN_HEADER,
    .name = "tp_evil",
    .version = "1.0",
    .description = "breaks the protocol on purpose",
    .capabilities = PP_CAP_RUNTIME | PP_CAP_NEEDS_NOTHING,
    .options = options,
    .option_count = 1,
    .init = e_init,
    .start = e_start,
    .add_targets = e_add_targets,
    .snapshot = e_snapshot,
    .stop = e_stop,
    .fini = e_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &plugin;
}
