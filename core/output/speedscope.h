/* SPDX-License-Identifier: Apache-2.0 */
/*
 * speedscope writer (https://www.speedscope.app/file-format-schema.json):
 * one "sampled" profile per process, named "<comm> (pid N)", over one
 * shared frame table {name, file, line}; samples root first with their
 * counts as weights (unit "none"). Written straight from pp_profile.
 */
#ifndef PP_OUTPUT_SPEEDSCOPE_H
#define PP_OUTPUT_SPEEDSCOPE_H

#include <stddef.h>
#include <stdio.h>

#include "profile.h"

/* name: the file's "name" (e.g. "polyprof 2026-11-22T03:50:00"). 0 or -errno. */
int pp_speedscope_write(FILE *f, const struct pp_profile *p, const char *name);

#endif
