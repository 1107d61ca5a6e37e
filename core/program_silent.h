/* SPDX-License-Identifier: Apache-2.0 */
#ifndef POLYPROF_PROGRAM_SILENT_H
#define POLYPROF_PROGRAM_SILENT_H

#include <stdbool.h>
#include <stddef.h>

struct pp_agent;

/* Why plugin i of a one-program session gave no samples, as one short
 * clause for the closing line: a busy target that yields none must not
 * leave the user to guess (matched no process, a process's status, or
 * what the plugin was attached to). False when there is nothing worth
 * saying: the plugin matched nothing while others sampled the program
 * (any_samples), as every runtime plugin but the program's does. */
bool pp_program_why_silent(const struct pp_agent *a, size_t i, bool any_samples, char *buf,
                           size_t len);

#endif
