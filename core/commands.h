/* SPDX-License-Identifier: Apache-2.0 */
/* `polyprof plugins` and `polyprof check`. Both return an exit code. */
#ifndef PP_COMMANDS_H
#define PP_COMMANDS_H

#include <stdbool.h>
#include <stdio.h>

#include "config.h"
#include "supervisor.h"

int pp_cmd_plugins(struct pp_config *cfg, bool verbose, FILE *out);
int pp_cmd_check(struct pp_config *cfg, FILE *out);
/* Part of check: each plugin worker's capabilities, no_new_privs, seccomp
 * allow-list and mount view (cmd_privileges.c). */
void pp_cmd_print_worker_privileges(const struct pp_config *cfg, const struct pp_plugin_info *infos,
                                    size_t n, FILE *out);

#endif
