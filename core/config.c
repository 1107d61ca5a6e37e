/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Core configuration: defaults, the table of core keys (the one place that
 * knows each key's field, type and range; YAML and the command line both go
 * through pp_config_set), and the cross-key checks of `run`.
 * The YAML reader is config_yaml.c; plugin sections are validated in
 * config_plugin.c, once plugins are loaded.
 */
#include <errno.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "config.h"
#include "config_alloc.h"
#include "databricks.h"
#include "k8s_labels.h"
#include "output/formats.h"
#include "profile_mode.h"

#ifndef POLYPROF_PLUGIN_DIR
#define POLYPROF_PLUGIN_DIR "/usr/lib/polyprof/plugins"
#endif

#define PID_MAX 4194304 /* PID_MAX_LIMIT on 64-bit Linux */

enum key_type {
  KT_INT,     /* int field */
  KT_COUNT,   /* size_t field */
  KT_BYTES,   /* size_t field, accepts 5MiB, 512K... */
  KT_BOOL,    /* bool field */
  KT_STRING,  /* char * field */
  KT_ENUM,    /* char * field, one of choices */
  KT_PIDS,    /* uint32_t * + count */
  KT_ENUMS,   /* char ** (NULL-terminated) + count, each one of choices */
  KT_REGEXES, /* char ** (NULL-terminated) + count; never split at commas */
};

#define KF_EMPTY_IS_NULL 1u /* "" means "none" (NULL) */
#define KF_NONEMPTY 2u

struct core_key {
  const char *name; /* "section.key" */
  enum key_type type;
  size_t off;       /* field in struct pp_config */
  size_t count_off; /* list length field */
  int64_t min, max;
  const char *const *choices;
  const char *noun; /* enums: "unknown <noun> 'x'" */
  unsigned flags;
};

#define FIELD(f) offsetof(struct pp_config, f)

static const char *const isolations[] = {"worker", "inline", NULL};
static const char *const pyroscope_formats[] = {"folded", "pprof", NULL};

static const struct core_key keys[] = {
    {"profiling.frequency", KT_INT, FIELD(frequency), 0, 1, 10000, NULL, NULL, 0},
    {"profiling.duration", KT_INT, FIELD(duration), 0, 1, 86400, NULL, NULL, 0},
    {"profiling.proc_scan_interval_ms", KT_INT, FIELD(proc_scan_interval_ms), 0, 100, 600000, NULL,
     NULL, 0},
    {"profiling.proc_events", KT_BOOL, FIELD(proc_events), 0, 0, 0, NULL, NULL, 0},
    {"profiling.proc_rescan_interval_s", KT_INT, FIELD(proc_rescan_interval_s), 0, 1, 86400, NULL,
     NULL, 0},
    {"profiling.continuous", KT_BOOL, FIELD(continuous), 0, 0, 0, NULL, NULL, 0},
    {"profiling.pids", KT_PIDS, FIELD(pids), FIELD(pid_count), 1, PID_MAX, NULL, NULL, 0},
    {"profiling.mode", KT_STRING, FIELD(profiling_mode), 0, 0, 0, NULL, NULL, KF_NONEMPTY},
    {"profiling.alloc_interval", KT_BYTES, FIELD(alloc_interval), 0, 1024, 1ll << 30, NULL, NULL,
     0},
    {"output.dir", KT_STRING, FIELD(output_dir), 0, 0, 0, NULL, NULL, KF_EMPTY_IS_NULL},
    {"output.rotating", KT_BOOL, FIELD(rotating_output), 0, 0, 0, NULL, NULL, 0},
    {"output.pending_max_bytes", KT_BYTES, FIELD(output_pending_max_bytes), 0, 0, 1ll << 40, NULL,
     NULL, 0},
    {"output.flamegraph", KT_BOOL, FIELD(flamegraph), 0, 0, 0, NULL, NULL, 0},
    {"output.debug_plugin_totals", KT_BOOL, FIELD(debug_plugin_totals), 0, 0, 0, NULL, NULL, 0},
    {"output.formats", KT_ENUMS, FIELD(output_formats), FIELD(output_format_count), 0, 0,
     pp_output_format_names, "format", 0},
    {"enrichment.application_identifiers", KT_BOOL, FIELD(app_identifiers), 0, 0, 0, NULL, NULL, 0},
    {"enrichment.container_names", KT_BOOL, FIELD(container_names), 0, 0, 0, NULL, NULL, 0},
    {"enrichment.application_metadata", KT_BOOL, FIELD(application_metadata), 0, 0, 0, NULL, NULL,
     0},
    {"enrichment.metadata_collection", KT_BOOL, FIELD(metadata_collection), 0, 0, 0, NULL, NULL, 0},
    {"enrichment.metrics_collection", KT_BOOL, FIELD(metrics_collection), 0, 0, 0, NULL, NULL, 0},
    {"enrichment.app_id_args_filters", KT_REGEXES, FIELD(app_id_args_filters),
     FIELD(app_id_args_filter_count), 0, 0, NULL, NULL, 0},
    {"enrichment.java_spark_appid", KT_BOOL, FIELD(java_spark_appid), 0, 0, 0, NULL, NULL, 0},
    {"enrichment.cache_size", KT_COUNT, FIELD(appid_cache_size), 0, 16, 1048576, NULL, NULL, 0},
    {"agent.pid_file", KT_STRING, FIELD(pid_file), 0, 0, 0, NULL, NULL, 0},
    {"agent.pidns_check", KT_BOOL, FIELD(pidns_check), 0, 0, 0, NULL, NULL, 0},
    {"agent.rootless", KT_BOOL, FIELD(rootless), 0, 0, 0, NULL, NULL, 0},
    {"logging.file", KT_STRING, FIELD(log_file), 0, 0, 0, NULL, NULL, 0},
    {"logging.max_bytes", KT_BYTES, FIELD(log_max_bytes), 0, 0, 1ll << 30, NULL, NULL, 0},
    {"logging.backups", KT_INT, FIELD(log_backups), 0, 0, 100, NULL, NULL, 0},
    {"logging.verbose", KT_BOOL, FIELD(verbose), 0, 0, 0, NULL, NULL, 0},
    {"plugins.dir", KT_STRING, FIELD(plugin_dir), 0, 0, 0, NULL, NULL, KF_NONEMPTY},
    {"plugins.isolation", KT_ENUM, FIELD(isolation), 0, 0, 0, isolations, "isolation", 0},
    {"plugins.memory_limit_mb", KT_INT, FIELD(worker_memory_limit_mb), 0, 0, 1048576, NULL, NULL,
     0},
    {"plugins.timeout_s", KT_INT, FIELD(worker_timeout_s), 0, 1, 3600, NULL, NULL, 0},
    {"plugins.restart_backoff_max_s", KT_INT, FIELD(worker_restart_backoff_max_s), 0, 1, 86400,
     NULL, NULL, 0},
    {"plugins.worker_path", KT_STRING, FIELD(worker_path), 0, 0, 0, NULL, NULL, KF_EMPTY_IS_NULL},
    {"upload.enabled", KT_BOOL, FIELD(upload), 0, 0, 0, NULL, NULL, 0},
    {"upload.server_host", KT_STRING, FIELD(server_host), 0, 0, 0, NULL, NULL, KF_NONEMPTY},
    {"upload.token", KT_STRING, FIELD(token), 0, 0, 0, NULL, NULL, KF_EMPTY_IS_NULL},
    {"upload.service_name", KT_STRING, FIELD(service_name), 0, 0, 0, NULL, NULL, KF_EMPTY_IS_NULL},
    {"upload.token_file", KT_STRING, FIELD(token_file), 0, 0, 0, NULL, NULL, KF_EMPTY_IS_NULL},
    {"upload.server_ca", KT_STRING, FIELD(server_ca), 0, 0, 0, NULL, NULL, KF_EMPTY_IS_NULL},
    {"upload.tls_verify", KT_BOOL, FIELD(tls_verify), 0, 0, 0, NULL, NULL, 0},
    {"upload.insecure_http", KT_BOOL, FIELD(insecure_http), 0, 0, 0, NULL, NULL, 0},
    {"upload.timeout_s", KT_INT, FIELD(upload_timeout_s), 0, 1, 3600, NULL, NULL, 0},
    {"upload.connect_timeout_s", KT_INT, FIELD(connect_timeout_s), 0, 1, 600, NULL, NULL, 0},
    {"upload.retries", KT_INT, FIELD(upload_retries), 0, 0, 100, NULL, NULL, 0},
    {"upload.retry_backoff_ms", KT_INT, FIELD(retry_backoff_ms), 0, 1, 3600000, NULL, NULL, 0},
    {"upload.spool_dir", KT_STRING, FIELD(spool_dir), 0, 0, 0, NULL, NULL, KF_EMPTY_IS_NULL},
    {"upload.spool_max_bytes", KT_BYTES, FIELD(spool_max_bytes), 0, 0, 1ll << 40, NULL, NULL, 0},
    {"upload.api_server", KT_STRING, FIELD(api_server), 0, 0, 0, NULL, NULL, KF_NONEMPTY},
    {"upload.send_logs", KT_BOOL, FIELD(send_logs), 0, 0, 0, NULL, NULL, 0},
    {"upload.databricks_service_name", KT_BOOL, FIELD(databricks_service_name), 0, 0, 0, NULL, NULL,
     0},
    {"upload.databricks_properties", KT_STRING, FIELD(databricks_properties), 0, 0, 0, NULL, NULL,
     KF_NONEMPTY},
    {"upload.databricks_timeout_s", KT_INT, FIELD(databricks_timeout_s), 0, 1, 3600, NULL, NULL, 0},
    {"upload.pyroscope_url", KT_STRING, FIELD(pyroscope_url), 0, 0, 0, NULL, NULL,
     KF_EMPTY_IS_NULL},
    {"upload.otlp_endpoint", KT_STRING, FIELD(otlp_endpoint), 0, 0, 0, NULL, NULL,
     KF_EMPTY_IS_NULL},
    {"upload.pyroscope_format", KT_ENUM, FIELD(pyroscope_format), 0, 0, 0, pyroscope_formats,
     "format", 0},
    {"upload.file_path", KT_STRING, FIELD(file_path), 0, 0, 0, NULL, NULL, KF_EMPTY_IS_NULL},
    {"enrichment.cloud_metadata", KT_BOOL, FIELD(cloud_metadata), 0, 0, 0, NULL, NULL, 0},
    {"enrichment.containers", KT_STRING, FIELD(containers_select), 0, 0, 0, NULL, NULL,
     KF_EMPTY_IS_NULL},
    {"enrichment.k8s_runtime_root", KT_STRING, FIELD(k8s_runtime_root), 0, 0, 0, NULL, NULL,
     KF_EMPTY_IS_NULL},
    {"enrichment.k8s_labels", KT_STRING, FIELD(k8s_labels), 0, 0, 0, NULL, NULL, KF_EMPTY_IS_NULL},
    {"enrichment.k8s_api", KT_BOOL, FIELD(k8s_api), 0, 0, 0, NULL, NULL, 0},
    {"enrichment.k8s_node_name", KT_STRING, FIELD(k8s_node_name), 0, 0, 0, NULL, NULL,
     KF_EMPTY_IS_NULL},
    {"enrichment.k8s_serviceaccount_dir", KT_STRING, FIELD(k8s_serviceaccount_dir), 0, 0, 0, NULL,
     NULL, KF_EMPTY_IS_NULL},
    {"enrichment.cloud_metadata_url", KT_STRING, FIELD(cloud_metadata_url), 0, 0, 0, NULL, NULL,
     KF_EMPTY_IS_NULL},
    {"output.convert_to", KT_ENUM, FIELD(convert_to), 0, 0, 0, pp_output_format_names, "format", 0},
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

const char *const pp_config_sections[] = {"profiling", "output",  "enrichment", "agent",
                                          "logging",   "plugins", "upload",     NULL};

static void set_str(char **field, const char *value) {
  free(*field);
  *field = value ? xstrdup(value) : NULL;
}

static char **strv_new(const char *const *items, size_t n) {
  char **v = xcalloc(n + 1, sizeof(*v));
  for (size_t i = 0; i < n; i++)
    v[i] = xstrdup(items[i]);
  return v;
}

void pp_config_defaults(struct pp_config *c) {
  static const char *const default_formats[] = {"col", "html"};
  memset(c, 0, sizeof(*c));
  c->frequency = 11;
  c->duration = 60;
  c->proc_scan_interval_ms = 1000;
  c->proc_events = true;
  c->proc_rescan_interval_s = 30;
  c->profiling_mode = xstrdup("cpu");
  c->profile_types = PP_TYPES_CPU_ONLY;
  c->flamegraph = true;
  c->output_formats = strv_new(default_formats, 2);
  c->output_format_count = 2;
  c->app_identifiers = true;
  c->container_names = true;
  c->application_metadata = true;
  c->metadata_collection = true;
  c->metrics_collection = true;
  c->app_id_args_filters = strv_new(NULL, 0);
  c->appid_cache_size = 4096;
  c->pidns_check = true;
  c->pid_file = xstrdup(PP_DEFAULT_PID_FILE);
  c->log_file = xstrdup(PP_DEFAULT_LOG_FILE);
  c->log_max_bytes = 5242880;
  c->log_backups = 1;
  c->plugin_dir = xstrdup(POLYPROF_PLUGIN_DIR);
  c->isolation = xstrdup("worker");
  c->worker_memory_limit_mb = 256;
  c->databricks_properties = xstrdup(PP_DATABRICKS_METRICS_PROPERTIES);
  c->databricks_timeout_s = 120;
  c->worker_timeout_s = 10;
  c->worker_restart_backoff_max_s = 300;
  c->server_host = xstrdup("https://profiler.granulate.io");
  c->tls_verify = true;
  c->upload_timeout_s = 120;
  c->connect_timeout_s = 10;
  c->upload_retries = 3;
  c->retry_backoff_ms = 2000;
  c->spool_dir = xstrdup(PP_DEFAULT_SPOOL_DIR);
  c->spool_max_bytes = 64u << 20;
  c->output_pending_max_bytes = 32u << 20;
  c->api_server = xstrdup("https://api.granulate.io");
  c->send_logs = true;
  c->pyroscope_format = xstrdup("folded");
  c->cloud_metadata = true;
  c->k8s_api = true;
}

static void free_value(struct pp_config_value *v) {
  free(v->key);
  free(v->scalar);
  strv_free(v->items);
  free(v->flag);
}

void pp_config_free(struct pp_config *c) {
  free(c->config_path);
  free(c->pids);
  free(c->profiling_mode);
  free(c->output_dir);
  strv_free(c->output_formats);
  strv_free(c->app_id_args_filters);
  free(c->pid_file);
  free(c->log_file);
  free(c->plugin_dir);
  free(c->isolation);
  free(c->worker_path);
  free(c->server_host);
  free(c->token);
  free(c->service_name);
  free(c->token_file);
  free(c->server_ca);
  free(c->spool_dir);
  free(c->api_server);
  free(c->pyroscope_url);
  free(c->databricks_properties);
  free(c->pyroscope_format);
  free(c->otlp_endpoint);
  free(c->file_path);
  free(c->convert_to);
  free(c->cloud_metadata_url);
  free(c->k8s_runtime_root);
  free(c->containers_select);
  free(c->k8s_labels);
  free(c->k8s_node_name);
  free(c->k8s_serviceaccount_dir);
  for (size_t i = 0; i < c->section_count; i++) {
    struct pp_plugin_section *s = &c->sections[i];
    for (size_t j = 0; j < s->count; j++)
      free_value(&s->values[j]);
    free(s->values);
    free(s->name);
  }
  free(c->sections);
  for (size_t i = 0; i < c->plugin_count; i++) {
    pp_plugin_config_clear(&c->plugins[i]);
  }
  free(c->plugins);
  for (size_t i = 0; i < c->flag_count; i++) {
    free(c->flags[i].flag);
    free(c->flags[i].value);
  }
  free(c->flags);
  for (size_t i = 0; i < c->file_count; i++)
    free(c->files[i]);
  free(c->files);
  memset(c, 0, sizeof(*c));
}

/* ---- setting one key ---------------------------------------------------- */

static void fail(char err[PP_MAX_ERR], const struct pp_config_value *v, const char *fmt, ...)
    PP_PRINTF(3, 4);

static void fail(char err[PP_MAX_ERR], const struct pp_config_value *v, const char *fmt, ...) {
  int n;
  if (v->flag)
    n = snprintf(err, PP_MAX_ERR, "polyprof: %s: ", v->flag);
  else if (v->origin && v->line > 0)
    n = snprintf(err, PP_MAX_ERR, "%s:%d: %s: ", v->origin, v->line, v->key);
  else
    n = snprintf(err, PP_MAX_ERR, "%s: %s: ", v->origin ? v->origin : "polyprof", v->key);
  if (n < 0 || n >= PP_MAX_ERR) return; /* a truncated message still names the key */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err + n, PP_MAX_ERR - (size_t)n, fmt, ap);
  va_end(ap);
}

static const char *type_text(const struct core_key *k) {
  switch (k->type) {
    case KT_INT:
    case KT_COUNT:
      return "an integer";
    case KT_BYTES:
      return "a size in bytes";
    case KT_BOOL:
      return "true or false";
    case KT_STRING:
      return "a string";
    case KT_ENUM:
      return "a single value";
    case KT_PIDS:
      return "a list of pids";
    case KT_ENUMS:
      return "a list";
    case KT_REGEXES:
      return "a list of regular expressions";
  }
  return "a value";
}

static void choices_text(const char *const *choices, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; choices[i] && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", choices[i]);
}

static bool in_choices(const char *const *choices, const char *s) {
  for (size_t i = 0; choices[i]; i++)
    if (strcmp(choices[i], s) == 0) return true;
  return false;
}

/* Integer with an optional binary unit: 5242880, 5M, 5MiB, 512k. */
static int parse_bytes(const char *s, int64_t *out) {
  static const struct {
    const char *suffix;
    int shift;
  } units[] = {{"", 0},    {"b", 0},    {"k", 10}, {"kb", 10}, {"kib", 10}, {"m", 20},
               {"mb", 20}, {"mib", 20}, {"g", 30}, {"gb", 30}, {"gib", 30}};
  char num[32];
  size_t n = 0;
  while (s[n] && (s[n] == '-' || s[n] == '+' || (s[n] >= '0' && s[n] <= '9')))
    n++;
  if (n == 0 || n >= sizeof(num)) return -1;
  memcpy(num, s, n);
  num[n] = '\0';
  int64_t v;
  if (pp_config_parse_int(num, &v) < 0) return -1;
  const char *unit = s + n;
  while (*unit == ' ')
    unit++;
  for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
    if (strcasecmp(unit, units[i].suffix) != 0) continue;
    if (v > (INT64_MAX >> units[i].shift) || v < (INT64_MIN >> units[i].shift)) return -1;
    *out = v * ((int64_t)1 << units[i].shift);
    return 0;
  }
  return -1;
}

/* The items of a list value: a YAML sequence as is, a scalar split at commas
 * ("--pids 1,2"), blanks around items ignored. */
static char **list_items(const struct pp_config_value *v, bool split, size_t *count) {
  size_t n = 0, cap = 4;
  char **out = xcalloc(cap + 1, sizeof(*out));
  const char *const *src = (const char *const *)v->items;
  size_t nsrc = v->items ? v->item_count : 1;
  for (size_t i = 0; i < nsrc; i++) {
    const char *s = v->items ? src[i] : v->scalar;
    while (s) {
      const char *end = split ? strchr(s, ',') : NULL;
      size_t len = end ? (size_t)(end - s) : strlen(s);
      const char *b = s;
      if (split) {
        while (len && (*b == ' ' || *b == '\t'))
          b++, len--;
        while (len && (b[len - 1] == ' ' || b[len - 1] == '\t'))
          len--;
      }
      if (len || !split) {
        if (n == cap) {
          cap *= 2;
          out = realloc(out, (cap + 1) * sizeof(*out));
          if (!out) abort();
        }
        out[n] = strndup(b, len);
        if (!out[n]) abort();
        out[++n] = NULL;
      }
      s = end ? end + 1 : NULL;
    }
  }
  *count = n;
  return out;
}

static int set_list(struct pp_config *c, const struct core_key *k, const struct pp_config_value *v,
                    char err[PP_MAX_ERR]) {
  size_t n;
  char **items = list_items(v, k->type != KT_REGEXES, &n);
  char ***field = (char ***)((char *)c + k->off);
  size_t *count = (size_t *)((char *)c + k->count_off);
  char choices[256];
  for (size_t i = 0; i < n; i++) {
    if (k->type == KT_ENUMS && !in_choices(k->choices, items[i])) {
      choices_text(k->choices, choices, sizeof(choices));
      fail(err, v, "unknown %s '%s' (expected one of: %s)", k->noun, items[i], choices);
      goto bad;
    }
    if (k->type == KT_REGEXES) {
      /* checked here so a typo stops start-up instead of silently never matching */
      regex_t re;
      int rc = regcomp(&re, items[i], REG_EXTENDED | REG_NOSUB);
      if (rc != 0) {
        char why[128];
        regerror(rc, &re, why, sizeof(why));
        fail(err, v, "invalid regular expression '%s': %s", items[i], why);
        goto bad;
      }
      regfree(&re);
    }
  }
  if (k->type == KT_ENUMS) { /* a format named twice is written once */
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
      bool dup = false;
      for (size_t j = 0; j < w; j++)
        dup |= strcmp(items[j], items[i]) == 0;
      if (dup)
        free(items[i]);
      else
        items[w++] = items[i];
    }
    items[w] = NULL;
    n = w;
  }
  strv_free(*field);
  *field = items;
  *count = n;
  return 0;
bad:
  strv_free(items);
  return -1;
}

static int set_pids(struct pp_config *c, const struct core_key *k, const struct pp_config_value *v,
                    char err[PP_MAX_ERR]) {
  size_t n;
  char **items = list_items(v, true, &n);
  uint32_t *pids = xcalloc(n, sizeof(*pids));
  for (size_t i = 0; i < n; i++) {
    int64_t pid;
    if (pp_config_parse_int(items[i], &pid) < 0 || pid < k->min || pid > k->max) {
      fail(err, v, "invalid pid '%s' (expected a number between %lld and %lld)", items[i],
           (long long)k->min, (long long)k->max);
      strv_free(items);
      free(pids);
      return -1;
    }
    pids[i] = (uint32_t)pid;
  }
  strv_free(items);
  free(c->pids);
  c->pids = n ? pids : NULL;
  c->pid_count = n;
  if (!n) free(pids);
  return 0;
}

static const struct core_key *find_key(const char *name) {
  for (size_t i = 0; i < NKEYS; i++)
    if (strcmp(keys[i].name, name) == 0) return &keys[i];
  return NULL;
}

static int set_scalar(struct pp_config *c, const struct core_key *k,
                      const struct pp_config_value *v, char err[PP_MAX_ERR]) {
  void *field = (char *)c + k->off;
  const char *s = v->scalar;
  int64_t num;
  bool b;
  char choices[256];
  switch (k->type) {
    case KT_INT:
    case KT_COUNT:
    case KT_BYTES:
      if ((k->type == KT_BYTES ? parse_bytes(s, &num) : pp_config_parse_int(s, &num)) < 0) {
        fail(err, v, "expected %s, got '%s'", type_text(k), s);
        return -1;
      }
      if (num < k->min || num > k->max) {
        fail(err, v, "must be between %lld and %lld (got %s)", (long long)k->min, (long long)k->max,
             s);
        return -1;
      }
      if (k->type == KT_INT)
        *(int *)field = (int)num;
      else
        *(size_t *)field = (size_t)num;
      return 0;
    case KT_BOOL:
      if (pp_config_parse_bool(s, &b) < 0) {
        fail(err, v, "expected true or false, got '%s'", s);
        return -1;
      }
      *(bool *)field = b;
      return 0;
    case KT_STRING:
      if (!*s && (k->flags & KF_NONEMPTY)) {
        fail(err, v, "must not be empty");
        return -1;
      }
      set_str((char **)field, !*s && (k->flags & KF_EMPTY_IS_NULL) ? NULL : s);
      return 0;
    case KT_ENUM:
      if (!in_choices(k->choices, s)) {
        choices_text(k->choices, choices, sizeof(choices));
        fail(err, v, "unknown %s '%s' (expected one of: %s)", k->noun, s, choices);
        return -1;
      }
      set_str((char **)field, s);
      return 0;
    default:
      break;
  }
  return -1;
}

/* "profiling.frequncy: unknown key (did you mean 'frequency'?)" */
static void unknown_key(const struct pp_config_value *v, char err[PP_MAX_ERR]) {
  const char *names[NKEYS];
  char list[400];
  size_t n = 0, used = 0;
  const char *dot = strchr(v->key, '.');
  size_t slen = dot ? (size_t)(dot - v->key) : 0;
  list[0] = '\0';
  for (size_t i = 0; dot && i < NKEYS; i++) {
    if (strncmp(keys[i].name, v->key, slen) != 0 || keys[i].name[slen] != '.') continue;
    names[n++] = keys[i].name + slen + 1;
    if (used < sizeof(list))
      used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", n > 1 ? ", " : "",
                               names[n - 1]);
  }
  const char *s = dot ? pp_config_suggest(dot + 1, names, n) : NULL;
  if (s)
    fail(err, v, "unknown key (did you mean '%s'?)", s);
  else if (n)
    fail(err, v, "unknown key (valid keys: %s)", list);
  else
    fail(err, v, "unknown key");
}

const char *pp_config_key_type(const char *key) {
  const struct core_key *k = find_key(key);
  return k ? type_text(k) : NULL;
}

int pp_config_set(struct pp_config *c, const struct pp_config_value *v, char err[PP_MAX_ERR]) {
  const struct core_key *k = v->key ? find_key(v->key) : NULL;
  if (!k) {
    unknown_key(v, err);
    return -1;
  }
  if (!v->scalar && !v->items) return 0; /* "key:" with no value keeps the default */
  switch (k->type) {
    case KT_PIDS:
      return set_pids(c, k, v, err);
    case KT_ENUMS:
    case KT_REGEXES:
      return set_list(c, k, v, err);
    default:
      if (v->items) {
        fail(err, v, "expected %s, got a list", type_text(k));
        return -1;
      }
      if (set_scalar(c, k, v, err) < 0) return -1;
      if (k->off == FIELD(k8s_labels)) {
        char why[PP_MAX_ERR / 2];
        if (pp_k8s_labels_check(c->k8s_labels, why, sizeof(why)) < 0) {
          fail(err, v, "%s", why);
          return -1;
        }
      }
      if (k->off == FIELD(profiling_mode)) {
        char why[PP_MAX_ERR / 2];
        if (pp_profile_types_parse(c->profiling_mode, &c->profile_types, why, sizeof(why)) < 0) {
          fail(err, v, "%s", why);
          return -1;
        }
      }
      return 0;
  }
}

int pp_config_read_token(struct pp_config *c, char err[PP_MAX_ERR]) {
  FILE *f = fopen(c->token_file, "re");
  if (!f) {
    snprintf(err, PP_MAX_ERR, "polyprof: --token-file %s: %s", c->token_file, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) {
    fclose(f);
    snprintf(err, PP_MAX_ERR, "polyprof: --token-file %s: not a regular file", c->token_file);
    return -1;
  }
  if (st.st_mode & S_IROTH) {
    fclose(f);
    snprintf(err, PP_MAX_ERR,
             "polyprof: --token-file %s: readable by everyone (mode %04o): refused, chmod 600 it",
             c->token_file, (unsigned)(st.st_mode & 07777));
    return -1;
  }
  char buf[1024] = "";
  if (!fgets(buf, sizeof(buf), f)) buf[0] = '\0';
  fclose(f);
  size_t n = strcspn(buf, "\r\n");
  while (n && (buf[n - 1] == ' ' || buf[n - 1] == '\t'))
    n--;
  buf[n] = '\0';
  char *b = buf + strspn(buf, " \t");
  if (!*b) {
    snprintf(err, PP_MAX_ERR, "polyprof: --token-file %s: empty", c->token_file);
    return -1;
  }
  set_str(&c->token, b);
  explicit_bzero(buf, sizeof(buf));
  return 0;
}

static bool plain_http(const char *url) {
  return url && strncasecmp(url, "http://", 7) == 0;
}

int pp_config_check_token_transport(const struct pp_config *c, char err[PP_MAX_ERR]) {
  if (!c->token || c->insecure_http) return 0;
  /* the logs API gets the token too, so its host counts as much */
  const char *url = plain_http(c->server_host)  ? c->server_host
                    : plain_http(c->api_server) ? c->api_server
                                                : NULL;
  if (!url) return 0;
  snprintf(err, PP_MAX_ERR,
           "polyprof: refusing to send the API token in clear text to %.200s: use an https:// "
           "server, or pass --insecure-http (upload.insecure_http: true) if the network to it is "
           "trusted",
           url);
  return -1;
}

int pp_config_check_run(const struct pp_config *c, char err[PP_MAX_ERR]) {
  if (!c->output_dir && !c->upload) {
    snprintf(err, PP_MAX_ERR,
             "polyprof: nothing to do with the profiles: give an output directory "
             "(-o/--output-dir, output.dir) and/or upload them (-u/--upload-results, "
             "upload.enabled)");
    return -1;
  }
  if (c->upload && (!c->token || !c->service_name)) {
    snprintf(err, PP_MAX_ERR, "polyprof: uploading (-u/--upload-results) needs %s%s%s",
             c->token ? "" : "a token (--token, upload.token)",
             !c->token && !c->service_name ? " and " : "",
             c->service_name ? "" : "a service name (--service-name, upload.service_name)");
    return -1;
  }
  return 0;
}
