/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the YAML config loader and its validation, as `polyprof
 * --config FILE` runs them: pp_config_load (syntax, core keys, plugin
 * sections), then binding a plugin section against a descriptor that
 * declares one option of every type, the orphan-section check and the
 * cross-key checks of `run`. Every error must come back as a message, never
 * a crash, a leak or undefined behaviour.
 */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz_input.h"

static const char *const modes[] = {"disabled", "sampling", "attach", NULL};

static const struct pp_option options[] = {
    {.key = "mode", .type = PP_OPT_ENUM, .default_value = "sampling", .choices = modes},
    {.key = "flag", .type = PP_OPT_BOOL, .default_value = "true"},
    {.key = "count", .type = PP_OPT_INT, .default_value = "10", .min = 1, .max = 1000},
    {.key = "unbounded", .type = PP_OPT_INT, .default_value = "0", .min = 1, .max = 0},
    {.key = "name", .type = PP_OPT_STRING, .default_value = NULL},
    {.key = "pids", .type = PP_OPT_LIST, .default_value = NULL},
};

/* Named after a real runtime so sections such as "python:" in the shipped
 * config bind to it. */
static const struct pp_plugin plugin = {
    PP_PLUGIN_HEADER,
    .name = "python",
    .version = "0",
    .description = "fuzz descriptor",
    .capabilities = PP_CAP_RUNTIME | PP_CAP_NEEDS_NOTHING,
    .options = options,
    .option_count = sizeof(options) / sizeof(options[0]),
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64], err[PP_MAX_ERR];
  if (pp_fuzz_memfd(data, size, path, sizeof(path)) < 0) abort();
  struct pp_config c;
  pp_config_defaults(&c);
  if (pp_config_load(&c, path, true, err) == 0) {
    if (pp_config_bind_plugin(&c, &plugin, err) < 0 && !err[0])
      abort(); /* error without a reason */
    const char *const loaded[] = {"python", NULL};
    pp_config_check_orphans(&c, loaded, err);
    pp_config_check_run(&c, err);
    (void)pp_config_plugin(&c, "python");
  } else if (!err[0]) {
    abort(); /* a refused file must say why */
  }
  pp_config_free(&c);
  return 0;
}
