/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bounded map from JIT/R2R code addresses to "Namespace.Type.Method", filled
 * from MethodLoadVerbose and R2RGetEntryPoint (live) and
 * MethodDC{Start,End}Verbose (rundown) events. One map per target process; it outlives sessions so
 * that code named by an earlier rundown stays named if a later stream is cut short.
 */
#ifndef DOTNET_METHODS_H
#define DOTNET_METHODS_H

#include <stddef.h>
#include <stdint.h>

struct dotnet_methods;

struct dotnet_methods *dotnet_methods_new(uint32_t max_methods, uint32_t max_name_bytes);
void dotnet_methods_free(struct dotnet_methods *m);
/* Decodes a MethodLoadVerbose / MethodDC*Verbose payload and records it.
 * Returns 0, or -EINVAL for a malformed payload. */
int dotnet_methods_add_event(struct dotnet_methods *m, const uint8_t *payload, uint32_t len);
int dotnet_methods_add(struct dotnet_methods *m, uint64_t start, uint32_t size, const char *name);
/* Decodes an R2RGetEntryPoint payload (ReadyToRun code bound on its first
 * call) and records its entry point. Returns 0, or -EINVAL if malformed. */
int dotnet_methods_add_r2r_event(struct dotnet_methods *m, const uint8_t *payload, uint32_t len);
/* A method known only by its start: it reaches to the next known start, at
 * most DOTNET_R2R_MAX_EXTENT bytes. */
#define DOTNET_R2R_MAX_EXTENT (32u * 1024)
int dotnet_methods_add_entry(struct dotnet_methods *m, uint64_t start, const char *name);
/* NULL if no method covers ip. Sorts lazily after additions. */
const char *dotnet_methods_lookup(struct dotnet_methods *m, uint64_t ip);
uint32_t dotnet_methods_count(const struct dotnet_methods *m);
/* How often the map hit its bound and was cleared. */
uint64_t dotnet_methods_resets(const struct dotnet_methods *m);

#endif
