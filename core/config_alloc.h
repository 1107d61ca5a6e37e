/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Allocation helpers private to the config files (config.c, config_yaml.c,
 * config_plugin.c). Configuration is loaded at start-up and on SIGHUP only,
 * where running out of memory has no sensible recovery, so they abort.
 */
#ifndef PP_CONFIG_ALLOC_H
#define PP_CONFIG_ALLOC_H

#include <stdlib.h>
#include <string.h>

#include "config.h"

static inline char *xstrdup(const char *s) {
  char *d = strdup(s);
  if (!d) abort();
  return d;
}

static inline void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) abort();
  return p;
}

static inline void *xrealloc(void *p, size_t size) {
  p = realloc(p, size ? size : 1);
  if (!p) abort();
  return p;
}

/* Frees a NULL-terminated string vector. */
static inline void strv_free(char **v) {
  if (!v) return;
  for (char **p = v; *p; p++)
    free(*p);
  free(v);
}

/* Frees what a bound plugin config owns (config_plugin.c). */
void pp_plugin_config_clear(struct pp_plugin_config *pc);

#endif
