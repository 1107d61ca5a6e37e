/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A plugin's option values, with each default written once: in its
 * options[] table. The host validates the YAML and the flags against that
 * table and applies the defaults; these getters ask the host and, should it
 * not answer (an older host, a key it does not know), fall back to the
 * table's own default_value, so init() never repeats a default.
 *
 *   static const struct pp_option options[] = {{.key = "max_entries", ...}};
 *   st->max = pp_opt_int(host, PP_OPTIONS(options), "max_entries");
 */
#ifndef POLYPROF_KIT_OPTIONS_H
#define POLYPROF_KIT_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "polyprof/plugin.h"

#define PP_OPTIONS(table) (table), (sizeof(table) / sizeof((table)[0]))

/* The value of `key`; 0 / false / NULL when neither the host nor the table
 * has one (a key missing from the table is a bug: it is logged). */
int64_t pp_opt_int(const struct pp_host *host, const struct pp_option *opts, size_t n,
                   const char *key);
bool pp_opt_bool(const struct pp_host *host, const struct pp_option *opts, size_t n,
                 const char *key);
/* Lives until fini() (the host's) or forever (the table's). */
const char *pp_opt_string(const struct pp_host *host, const struct pp_option *opts, size_t n,
                          const char *key);

#endif
