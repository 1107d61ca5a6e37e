/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Option getters with the options table's defaults as the fallback.
 */
#include "polyprof/kit/options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const struct pp_option *find(const struct pp_host *host, const struct pp_option *opts,
                                    size_t n, const char *key) {
  for (size_t i = 0; i < n; i++)
    if (opts[i].key && strcmp(opts[i].key, key) == 0) return &opts[i];
  host->log(host, PP_LOG_ERROR, "option '%s' is not in the plugin's options table", key);
  return NULL;
}

int64_t pp_opt_int(const struct pp_host *host, const struct pp_option *opts, size_t n,
                   const char *key) {
  int64_t v = 0;
  if (host->config_int && host->config_int(host, key, &v) == 0) return v;
  const struct pp_option *o = find(host, opts, n, key);
  return o && o->default_value ? strtoll(o->default_value, NULL, 0) : 0;
}

bool pp_opt_bool(const struct pp_host *host, const struct pp_option *opts, size_t n,
                 const char *key) {
  int v = 0;
  if (host->config_bool && host->config_bool(host, key, &v) == 0) return v != 0;
  const struct pp_option *o = find(host, opts, n, key);
  const char *d = o ? o->default_value : NULL;
  return d && (!strcmp(d, "true") || !strcmp(d, "yes") || !strcmp(d, "on") || !strcmp(d, "1"));
}

const char *pp_opt_string(const struct pp_host *host, const struct pp_option *opts, size_t n,
                          const char *key) {
  const char *v = NULL;
  if (host->config_string && host->config_string(host, key, &v) == 0) return v;
  const struct pp_option *o = find(host, opts, n, key);
  return o ? o->default_value : NULL;
}
