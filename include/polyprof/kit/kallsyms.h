/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernel symbols from /proc/kallsyms (core kernel and loaded modules), as a
 * sorted table for address lookups by binary search.
 */
#ifndef POLYPROF_KIT_KALLSYMS_H
#define POLYPROF_KIT_KALLSYMS_H

#include <stddef.h>
#include <stdint.h>

struct pp_kallsyms;

/* Loads path (NULL: /proc/kallsyms). Only text symbols (t/T/w/W) are kept.
 * -EPERM if every address reads as zero (kernel.kptr_restrict without
 * CAP_SYSLOG), -ENOENT/-EACCES from open, -ENODATA if no symbol parsed. */
int pp_kallsyms_load(const char *path, struct pp_kallsyms **out);
void pp_kallsyms_free(struct pp_kallsyms *k);

/* Name of the symbol containing addr, or NULL below the first symbol or
 * more than max_gap bytes past the last symbol's start. *start (optional)
 * gets the symbol address; *module (optional) gets the module name or NULL
 * for the core kernel. A "__pfx_" name is rebuilt in a per-thread buffer,
 * valid until the thread's next lookup. */
const char *pp_kallsyms_lookup(const struct pp_kallsyms *k, uint64_t addr, uint64_t *start,
                               const char **module);

size_t pp_kallsyms_count(const struct pp_kallsyms *k);
size_t pp_kallsyms_bytes(const struct pp_kallsyms *k); /* memory held */

#endif
