/* SPDX-License-Identifier: Apache-2.0 */
#include "databricks.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "appid.h"
#include "log.h"
#include "upload/http.h"

#define HOST_KEY "*.sink.ganglia.host"
#define ALL_TAGS_PROP "spark.databricks.clusterUsageTags.clusterAllTags"
#define CLUSTER_NAME_PROP "spark.databricks.clusterUsageTags.clusterName"
#define MAX_NAME 200 /* a service name longer than this is not a name */
#define PROPERTIES_MAX (64 * 1024)

char *pp_databricks_webui_address(const char *text) {
  const char *line = text;
  while (line && *line) {
    const char *eol = strchr(line, '\n');
    size_t len = eol ? (size_t)(eol - line) : strlen(line);
    size_t klen = strlen(HOST_KEY);
    if (len > klen + 1 && strncmp(line, HOST_KEY, klen) == 0 && line[klen] == '=') {
      const char *v = line + klen + 1;
      size_t vlen = len - klen - 1;
      while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == ' '))
        vlen--;
      if (vlen == 0 || vlen > 255) return NULL;
      for (size_t i = 0; i < vlen; i++) /* a host name or address, nothing a URL could misread */
        if (!isalnum((unsigned char)v[i]) && !strchr(".-:[]", v[i])) return NULL;
      char *out = malloc(vlen + 8);
      if (!out) return NULL;
      bool has_port = memchr(v, ':', vlen) != NULL && v[0] != '[';
      if (v[0] == '[') has_port = v[vlen - 1] != ']';
      if (has_port)
        snprintf(out, vlen + 8, "%.*s", (int)vlen, v);
      else
        snprintf(out, vlen + 8, "%.*s:%d", (int)vlen, v, PP_DATABRICKS_WEBUI_PORT);
      return out;
    }
    line = eol ? eol + 1 : NULL;
  }
  return NULL;
}

/* Spaces to dashes, lower case; a "run-<digits>-" removed first when asked
 * (job clusters are named after the run). NULL if empty or too long. */
static char *normalize(const char *s, bool strip_run_id) {
  size_t n = strlen(s);
  if (n == 0 || n > MAX_NAME) return NULL;
  char *out = malloc(n + 1);
  if (!out) return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    if (strip_run_id && strncmp(s + i, "run-", 4) == 0) {
      size_t j = i + 4;
      while (j < n && isdigit((unsigned char)s[j]))
        j++;
      if (j > i + 4 && j < n && s[j] == '-') {
        i = j;
        strip_run_id = false; /* the first one, as a single substitution would */
        continue;
      }
    }
    out[o++] = s[i] == ' ' ? '-' : (char)tolower((unsigned char)s[i]);
  }
  out[o] = '\0';
  if (o == 0) {
    free(out);
    return NULL;
  }
  return out;
}

static char *with_prefix(const char *prefix, char *name) {
  if (!name) return NULL;
  size_t n = strlen(prefix) + strlen(name) + 1;
  char *out = malloc(n);
  if (out) snprintf(out, n, "%s%s", prefix, name);
  free(name);
  return out;
}

char *pp_databricks_name_from_environment(const char *environment_json) {
  json_error_t jerr;
  json_t *env = json_loads(environment_json, JSON_REJECT_DUPLICATES, &jerr);
  json_t *props = json_is_object(env) ? json_object_get(env, "sparkProperties") : NULL;
  const char *all_tags = NULL, *cluster_name = NULL;
  size_t i;
  json_t *p;
  if (json_is_array(props)) {
    json_array_foreach(props, i, p) {
      if (!json_is_array(p) || json_array_size(p) != 2) continue;
      const char *k = json_string_value(json_array_get(p, 0));
      const char *v = json_string_value(json_array_get(p, 1));
      if (!k || !v) continue;
      if (strcmp(k, ALL_TAGS_PROP) == 0) all_tags = v;
      if (strcmp(k, CLUSTER_NAME_PROP) == 0) cluster_name = v;
    }
  }
  char *name = NULL;
  /* the tags first, unless Databricks redacted them */
  if (all_tags && !strstr(all_tags, "redacted")) {
    json_t *tags = json_loads(all_tags, 0, &jerr);
    const char *run = NULL, *cluster = NULL;
    json_t *t;
    json_array_foreach(json_is_array(tags) ? tags : NULL, i, t) {
      const char *k = json_string_value(json_object_get(t, "key"));
      const char *v = json_string_value(json_object_get(t, "value"));
      if (k && v && strcmp(k, "RunName") == 0) run = v;
      if (k && v && strcmp(k, "ClusterName") == 0) cluster = v;
    }
    if (run)
      name = with_prefix("databricks-job-", normalize(run, false));
    else if (cluster)
      name = with_prefix("databricks-", normalize(cluster, true));
    json_decref(tags);
  } else if (cluster_name) {
    name = with_prefix("databricks-", normalize(cluster_name, true));
  }
  json_decref(env);
  return name;
}

/* First application's id from the /applications reply; NULL if none yet. */
static char *first_app_id(const char *apps_json) {
  json_error_t jerr;
  json_t *apps = json_loads(apps_json, 0, &jerr);
  const char *id = json_is_array(apps)
                       ? json_string_value(json_object_get(json_array_get(apps, 0), "id"))
                       : NULL;
  char *out = NULL;
  if (id && *id && strlen(id) < 256 && !strpbrk(id, "/?#% \t\r\n")) out = strdup(id);
  json_decref(apps);
  return out;
}

enum step { RETRY, DONE };

static enum step try_once(const char *properties_path, char **name) {
  char *text = malloc(PROPERTIES_MAX);
  if (!text) return RETRY;
  size_t len = 0;
  int rc = pp_read_regular(properties_path, text, PROPERTIES_MAX, &len);
  char *addr = rc == 0 ? pp_databricks_webui_address(text) : NULL;
  free(text);
  if (!addr) return RETRY; /* the cluster is still being set up */
  char url[512];
  /* an environment lists the whole class path and every system property */
  struct pp_http_opts o = {
      .verify = true, .connect_timeout_ms = 2000, .timeout_ms = 5000, .max_response = 8 << 20};
  struct pp_http_result r = {0};
  snprintf(url, sizeof(url), "http://%s/api/v1/applications", addr);
  enum step step = RETRY;
  if (pp_http_get(url, NULL, &o, &r) == 0 && r.status == 200 && r.body) {
    char *id = first_app_id(r.body);
    if (id) {
      struct pp_http_result e = {0};
      snprintf(url, sizeof(url), "http://%s/api/v1/applications/%s/environment", addr, id);
      if (pp_http_get(url, NULL, &o, &e) == 0 && e.status == 200 && e.body) {
        *name = pp_databricks_name_from_environment(e.body);
        if (!*name)
          pp_log(PP_LOG_WARNING, "polyprof",
                 "databricks: %s has neither %s nor %s: service name \"databricks\"", url,
                 ALL_TAGS_PROP, CLUSTER_NAME_PROP);
      } else {
        pp_log(PP_LOG_WARNING, "polyprof", "databricks: %s: %s: service name \"databricks\"", url,
               e.error[0] ? e.error : "no environment");
      }
      pp_http_result_free(&e);
      step = DONE;
      free(id);
    }
  }
  pp_http_result_free(&r);
  free(addr);
  return step;
}

char *pp_databricks_service_name(const char *properties_path, int timeout_s) {
  pp_http_global_init();
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  char *name = NULL;
  for (;;) {
    if (try_once(properties_path, &name) == DONE) break;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec >= timeout_s) {
      pp_log(PP_LOG_WARNING, "polyprof",
             "databricks: no Spark application found through %s within %d s: service name "
             "\"databricks\"",
             properties_path, timeout_s);
      break;
    }
    sleep(1);
  }
  if (name) pp_log(PP_LOG_INFO, "polyprof", "databricks: service name %s", name);
  return name ? name : strdup("databricks");
}
