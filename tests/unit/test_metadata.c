/* SPDX-License-Identifier: Apache-2.0 */
/* The .col header, its metadata and metrics (docs/gprofiler-compat.md):
 * Python-json.dumps-identical serialization checked against the real
 * /usr/bin/python3 on thousands of values, key order, the minimal form,
 * token redaction, and host metrics. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "metadata.h"
#include "output/col_header.h"
#include "testlib.h"

static const char *python(void) {
  return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

/* Python's json.dumps of each element of `arr`, one per line (newlines
 * inside values are escaped by json.dumps, so lines are safe). */
static char **python_dumps_each(const json_t *arr, size_t *n) {
  char in[] = "/tmp/pp_test_metadata.XXXXXX";
  int fd = mkstemp(in);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, "w");
  /* jansson writes reals with 17 significant digits: they read back exactly */
  json_dumpf(arr, f, JSON_COMPACT | JSON_ENSURE_ASCII);
  fclose(f);
  char cmd[512];
  snprintf(cmd, sizeof(cmd),
           "%s -c 'import json,sys\n"
           "for v in json.load(open(sys.argv[1])): print(json.dumps(v))' %s",
           python(), in);
  FILE *p = popen(cmd, "r");
  size_t cap = json_array_size(arr) + 1, k = 0;
  char **lines = calloc(cap, sizeof(char *));
  char *line = NULL;
  size_t lcap = 0;
  ssize_t len;
  while (p && (len = getline(&line, &lcap, p)) > 0 && k < cap) {
    if (line[len - 1] == '\n') line[len - 1] = '\0';
    lines[k++] = strdup(line);
  }
  free(line);
  if (p) pclose(p);
  unlink(in);
  *n = k;
  return lines;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static void test_json_vs_python(void) {
  json_t *arr = json_array();
  /* floats: hand-picked, every power of two, random bit patterns, decimals */
  const double picked[] = {12.5,
                           1e-05,
                           3.0,
                           0.1,
                           1.0 / 3,
                           1e16,
                           1e15,
                           123456789.123,
                           5e-324,
                           1.7976931348623157e308,
                           -0.0,
                           0.0,
                           1e22,
                           1e-7,
                           0.0001,
                           0.001,
                           9007199254740993.0,
                           100.0,
                           40.1,
                           2.5e-05,
                           1234567890123456.7,
                           12345678901234567.0,
                           1e100,
                           -1.5e-300,
                           0.30000000000000004};
  for (size_t i = 0; i < sizeof(picked) / sizeof(picked[0]); i++)
    json_array_append_new(arr, json_real(picked[i]));
  for (int e = -1074; e <= 1023; e += 1)
    json_array_append_new(arr, json_real(ldexp(1.0, e)));
  for (int i = 0; i < 3000; i++) {
    uint64_t bits = rng();
    double d;
    memcpy(&d, &bits, sizeof(d));
    if (isfinite(d)) json_array_append_new(arr, json_real(d));
  }
  for (int i = 0; i < 1000; i++)
    json_array_append_new(arr, json_real((double)(int64_t)(rng() % 2000001 - 1000000) / 1000.0));
  for (int i = 0; i < 300; i++)
    json_array_append_new(arr, json_real(ldexp((double)(rng() % 1000), (int)(rng() % 80) - 40)));
  /* integers */
  const json_int_t ints[] = {0, 1, -1, 42, INT64_MAX, INT64_MIN, 1000000000000ll};
  for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
    json_array_append_new(arr, json_integer(ints[i]));
  /* strings: escapes, control characters, DEL, Latin-1, BMP, astral, NUL */
  const char *strs[] = {"",
                        "plain",
                        "quote\" backslash\\ slash/",
                        "\n\r\t\b\f",
                        "\x01\x1f\x7f",
                        "caf\xc3\xa9",
                        "\xe4\xb8\xad\xe6\x96\x87",
                        "emoji \xf0\x9f\x98\x80!",
                        "\xef\xbf\xbf\xee\x80\x80",
                        "mixed \xc2\xa0nbsp \xe2\x80\xa8ls",
                        "<>&'"};
  for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
    json_array_append_new(arr, json_string(strs[i]));
  json_array_append_new(arr, json_stringn("nul\0inside", 10));
  /* containers and constants */
  json_t *obj = json_object();
  json_object_set_new(obj, "b", json_integer(1));
  json_object_set_new(obj, "a", json_array());
  json_object_set_new(obj, "\xc3\xa9t\xc3\xa9", json_object());
  json_object_set_new(obj, "n", json_null());
  json_object_set_new(obj, "t", json_true());
  json_object_set_new(obj, "f", json_false());
  json_t *nested = json_pack("[i, [s, {s: [f, n]}], {}]", 1, "x", "k", 2.5);
  json_object_set_new(obj, "nested", nested);
  json_array_append_new(arr, obj);
  json_array_append_new(arr, json_array());
  json_array_append_new(arr, json_object());
  json_array_append_new(arr, json_true());
  json_array_append_new(arr, json_null());

  size_t n = 0;
  char **py = python_dumps_each(arr, &n);
  CHECK_EQ_INT(n, json_array_size(arr));
  int mismatches = 0;
  for (size_t i = 0; py && i < n && i < json_array_size(arr); i++) {
    char *ours = pp_json_dumps_python(json_array_get(arr, i));
    if (!ours || strcmp(ours, py[i]) != 0) {
      if (mismatches < 10) fprintf(stderr, "  json mismatch: ours %s python %s\n", ours, py[i]);
      mismatches++;
    }
    free(ours);
  }
  CHECK_EQ_INT(mismatches, 0);
  printf("compared %zu values with %s\n", n, python());
  for (size_t i = 0; py && i < n; i++)
    free(py[i]);
  free(py);

  /* the whole array at once too (", " separators between elements) */
  char *all = pp_json_dumps_python(arr);
  json_t *wrap = json_array();
  json_array_append(wrap, arr);
  py = python_dumps_each(wrap, &n);
  CHECK_EQ_INT(n, 1);
  if (n == 1) CHECK(all && strcmp(all, py[0]) == 0);
  if (n == 1) free(py[0]);
  free(py);
  free(all);
  json_decref(wrap);
  json_decref(arr);
}

static void test_json_special(void) {
  char buf[64];
  CHECK_EQ_STR(pp_json_real_repr(NAN, buf, sizeof(buf)), "NaN");
  CHECK_EQ_STR(pp_json_real_repr(INFINITY, buf, sizeof(buf)), "Infinity");
  CHECK_EQ_STR(pp_json_real_repr(-INFINITY, buf, sizeof(buf)), "-Infinity");
  CHECK_EQ_STR(pp_json_real_repr(12.5, buf, sizeof(buf)), "12.5");
  CHECK_EQ_STR(pp_json_real_repr(1e-05, buf, sizeof(buf)), "1e-05");
  CHECK_EQ_STR(pp_json_real_repr(3.0, buf, sizeof(buf)), "3.0");
  CHECK_EQ_STR(pp_json_real_repr(1e16, buf, sizeof(buf)), "1e+16");
  /* invalid UTF-8 as Python's surrogateescape would show it */
  json_t *s = json_stringn_nocheck("a\xff\xc3(b", 5);
  char *out = pp_json_dumps_python(s);
  CHECK_EQ_STR(out, "\"a\\udcff\\udcc3(b\"");
  free(out);
  json_decref(s);
  /* ...while strings built from hostile bytes are made valid */
  s = pp_json_string_lossy("x\xffy", 3);
  CHECK_EQ_STR(json_string_value(s), "x\xef\xbf\xbdy");
  json_decref(s);
  s = pp_json_string_lossy("ok \xc3\xa9", 5);
  CHECK_EQ_STR(json_string_value(s), "ok \xc3\xa9");
  json_decref(s);
  out = pp_json_dumps_python(NULL);
  CHECK_EQ_STR(out, "null");
  free(out);
  char iso[32];
  pp_iso_time(0, iso, sizeof(iso));
  CHECK_EQ_STR(iso, "1970-01-01T00:00:00");
  pp_iso_time(1795319400, iso, sizeof(iso));
  CHECK_EQ_STR(iso, "2026-11-22T03:50:00");
}

static void check_keys(const json_t *o, const char *const *keys, size_t n, const char *what) {
  size_t i = 0;
  const char *k;
  json_t *v;
  bool ok = json_object_size(o) == n;
  json_object_foreach((json_t *)o, k, v) {
    if (i >= n || strcmp(k, keys[i]) != 0) ok = false;
    i++;
  }
  CHECK(ok);
  if (!ok) {
    char *d = pp_json_dumps_python(o);
    fprintf(stderr, "  %s keys differ: %.600s\n", what, d);
    free(d);
  }
}

static void base_config(struct pp_config *c) {
  memset(c, 0, sizeof(*c));
  c->frequency = 11;
  c->duration = 60;
  c->profiling_mode = "cpu";
  c->app_identifiers = c->container_names = c->application_metadata = true;
  c->metadata_collection = c->metrics_collection = c->flamegraph = true;
  c->pidns_check = true;
  c->token = "SECRET-TOKEN-123";
  c->server_host = "https://user:hunter2@studio.example.com/api";
  c->service_name = "svc";
  c->appid_cache_size = 4096;
}

static void test_system_metadata(void) {
  struct pp_config cfg;
  base_config(&cfg);
  json_t *m = pp_metadata_system(&cfg, 1795319400);
  static const char *const keys[] = {"cloud_provider",
                                     "agent_version",
                                     "spawn_time",
                                     "python_version",
                                     "run_mode",
                                     "deployment_type",
                                     "kernel_release",
                                     "kernel_version",
                                     "system_name",
                                     "hypervisor",
                                     "processors",
                                     "cpu_model_name",
                                     "cpu_arch_codename",
                                     "cpu_flags",
                                     "memory_capacity_mb",
                                     "hostname",
                                     "system",
                                     "os_name",
                                     "os_release",
                                     "os_codename",
                                     "libc_type",
                                     "libc_version",
                                     "hardware_type",
                                     "pid",
                                     "mac_address",
                                     "private_ip",
                                     "spawn_uptime_ms",
                                     "run_arguments",
                                     "big_data",
                                     "external_metadata",
                                     "agent"};
  check_keys(m, keys, sizeof(keys) / sizeof(keys[0]), "metadata");
  CHECK_EQ_STR(json_string_value(json_object_get(m, "cloud_provider")), "unknown");
  CHECK_EQ_STR(json_string_value(json_object_get(m, "agent_version")), POLYPROF_VERSION);
  CHECK_EQ_STR(json_string_value(json_object_get(m, "spawn_time")), "2026-11-22T03:50:00");
  CHECK(json_is_null(json_object_get(m, "python_version")));
  CHECK_EQ_STR(json_string_value(json_object_get(m, "system")), "Linux");
  CHECK(json_integer_value(json_object_get(m, "processors")) >= 1);
  CHECK(json_integer_value(json_object_get(m, "memory_capacity_mb")) > 0);
  CHECK(json_is_real(json_object_get(m, "spawn_uptime_ms")));
  CHECK(json_real_value(json_object_get(m, "spawn_uptime_ms")) > 0);
  CHECK_EQ_INT(json_integer_value(json_object_get(m, "pid")), getpid());
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  CHECK_EQ_STR(json_string_value(json_object_get(m, "hostname")), host);
  CHECK_EQ_STR(json_string_value(json_object_get(m, "libc_type")), "glibc");
  CHECK(json_string_length(json_object_get(m, "libc_version")) > 0);
  CHECK(json_string_length(json_object_get(m, "hypervisor")) > 0);
  CHECK(json_string_length(json_object_get(m, "kernel_release")) > 0);
  const char *mode = json_string_value(json_object_get(m, "run_mode"));
  CHECK(mode && (!strcmp(mode, "standalone_executable") || !strcmp(mode, "container") ||
                 !strcmp(mode, "k8s")));
  json_t *ra = json_object_get(m, "run_arguments");
  CHECK_EQ_STR(json_string_value(json_object_get(ra, "server_token")), "<redacted>");
  CHECK_EQ_STR(json_string_value(json_object_get(ra, "server_host")),
               "https://<redacted>@studio.example.com/api");
  CHECK_EQ_INT(json_integer_value(json_object_get(ra, "frequency")), 11);
  char *text = pp_json_dumps_python(m);
  CHECK(text && !strstr(text, "SECRET-TOKEN-123") && !strstr(text, "hunter2"));
  free(text);
  json_decref(m);
  cfg.token = NULL;
  cfg.server_host = "https://studio.example.com";
  m = pp_metadata_system(&cfg, 0);
  ra = json_object_get(m, "run_arguments");
  CHECK(json_is_null(json_object_get(ra, "server_token")));
  CHECK_EQ_STR(json_string_value(json_object_get(ra, "server_host")), "https://studio.example.com");
  json_decref(m);
}

/* the agent's real defaults (config.c) serialize cleanly and keep secrets out */
static void test_defaults_config(void) {
  struct pp_config c;
  memset(&c, 0, sizeof(c));
  pp_config_defaults(&c);
  c.token = strdup("tok-0123456789-secret");
  json_t *m = pp_metadata_system(&c, 0);
  json_t *ra = json_object_get(m, "run_arguments");
  CHECK_EQ_INT(json_integer_value(json_object_get(ra, "frequency")), c.frequency);
  CHECK_EQ_INT(json_integer_value(json_object_get(ra, "duration")), c.duration);
  CHECK(json_is_boolean(json_object_get(ra, "collect_appids")));
  char *text = pp_json_dumps_python(m);
  CHECK(text && !strstr(text, "tok-0123456789-secret"));
  free(text);
  json_decref(m);
  pp_config_free(&c);
}

static void test_header(void) {
  struct pp_config cfg;
  base_config(&cfg);
  json_t *sys = pp_metadata_system(&cfg, 1795319400);
  json_t *containers = json_pack("[s, s]", "web", "db");
  json_t *am = json_pack("[n, {s: s, s: s, s: s}]", "exe", "/usr/bin/java", "execfn",
                         "/usr/bin/java", "arch", "x86_64");
  json_t *stats = json_pack("{s: {s: s}}", "perf", "status", "ok");
  struct pp_header_args a = {.cfg = &cfg,
                             .system_metadata = sys,
                             .containers = containers,
                             .app_meta_list = am,
                             .cpu_avg = 12.5,
                             .mem_avg = -1,
                             .start_time = 1795319340,
                             .end_time = 1795319400,
                             .plugin_stats = stats};
  json_t *h = pp_col_header(&a);
  static const char *const keys[] = {"containers",
                                     "container_names_enabled",
                                     "metadata",
                                     "metrics",
                                     "application_metadata",
                                     "application_metadata_enabled",
                                     "profiling_mode",
                                     "hwmetrics",
                                     "htmlblob",
                                     "flamegraph_html",
                                     "sampling_event",
                                     "sampling_mode",
                                     "sampling_frequency",
                                     "start_time",
                                     "end_time",
                                     "polyprof"};
  check_keys(h, keys, sizeof(keys) / sizeof(keys[0]), "header");
  char *text = pp_json_dumps_python(h);
  /* the text the .col writer gets is that object, dumped the same way */
  char *line = pp_col_header_text(&a);
  CHECK_EQ_STR(line, text);
  free(line);
  CHECK_CONTAINS(text,
                 "{\"containers\": [\"web\", \"db\"], \"container_names_enabled\": true, "
                 "\"metadata\": {\"cloud_provider\": \"unknown\", \"agent_version\": \"");
  CHECK_CONTAINS(text,
                 "\"metrics\": {\"cpu_avg\": 12.5, \"mem_avg\": null}, "
                 "\"application_metadata\": [null, {\"exe\": \"/usr/bin/java\", \"execfn\": "
                 "\"/usr/bin/java\", \"arch\": \"x86_64\"}], \"application_metadata_enabled\": "
                 "true, \"profiling_mode\": \"cpu\", \"hwmetrics\": null, \"htmlblob\": null, "
                 "\"flamegraph_html\": null, \"sampling_event\": \"cpu-time\", "
                 "\"sampling_mode\": \"frequency\", \"sampling_frequency\": 11, "
                 "\"start_time\": \"2026-11-22T03:49:00\", \"end_time\": "
                 "\"2026-11-22T03:50:00\", \"polyprof\": {\"perf\": {\"status\": \"ok\"}}}");
  CHECK(text && !strstr(text, "SECRET-TOKEN-123"));
  /* per-session keys at the end of metadata, as gProfiler adds them */
  json_t *md = json_object_get(h, "metadata");
  CHECK_CONTAINS(text,
                 "\"external_metadata\": {}, \"agent\": \"polyprof\", \"current_time\": "
                 "\"2026-11-22T03:50:00\", \"profiling_mode\": \"cpu\", \"sampling_event\": "
                 "\"cpu-time\", \"sampling_mode\": \"frequency\", \"sampling_frequency\": 11}");
  CHECK(json_object_get(md, "current_time") != NULL);
  /* the borrowed inputs are untouched */
  CHECK(json_object_get(sys, "current_time") == NULL);
  /* Python reads it back and writes the very same text */
  json_t *one = json_array();
  json_array_append(one, h);
  size_t n = 0;
  char **py = python_dumps_each(one, &n);
  CHECK_EQ_INT(n, 1);
  if (n == 1) CHECK(strcmp(py[0], text) == 0);
  if (n == 1) free(py[0]);
  free(py);
  json_decref(one);
  free(text);
  json_decref(h);

  /* metadata collection off: the minimal form; names and app metadata off */
  cfg.metadata_collection = false;
  cfg.container_names = false;
  cfg.application_metadata = false;
  a.cpu_avg = -1;
  a.plugin_stats = NULL;
  a.app_meta_list = NULL;
  h = pp_col_header(&a);
  text = pp_json_dumps_python(h);
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  char expect[1024];
  snprintf(expect, sizeof(expect),
           "{\"containers\": [], \"container_names_enabled\": false, \"metadata\": {\"hostname\": "
           "\"%s\", \"profiling_mode\": \"cpu\", \"sampling_event\": \"cpu-time\", "
           "\"sampling_mode\": \"frequency\", \"sampling_frequency\": 11}, \"metrics\": "
           "{\"cpu_avg\": null, \"mem_avg\": null}, \"application_metadata\": [null], "
           "\"application_metadata_enabled\": false, ",
           host);
  CHECK_CONTAINS(text, expect);
  CHECK(!strstr(text, "\"polyprof\""));
  free(text);
  json_decref(h);
  json_decref(sys);
  json_decref(containers);
  json_decref(am);
  json_decref(stats);
}

/* The sampling keys follow the perf plugin's event options (--perf-event,
 * --perf-event-period), in the header and in its metadata copy. */
static json_t *header_with_perf(const char *event, const char *period, bool enabled) {
  static const struct pp_option opts[] = {{.key = "event", .type = PP_OPT_STRING},
                                          {.key = "event_period", .type = PP_OPT_INT}};
  struct pp_bound_option bound[2] = {{.opt = &opts[0], .scalar = (char *)event},
                                     {.opt = &opts[1], .scalar = (char *)period}};
  struct pp_plugin_config perf = {
      .name = "perf", .enabled = enabled, .options = bound, .option_count = 2};
  struct pp_config cfg;
  base_config(&cfg);
  cfg.frequency = 99;
  cfg.plugins = &perf;
  cfg.plugin_count = 1;
  struct pp_header_args a = {.cfg = &cfg, .cpu_avg = -1, .mem_avg = -1};
  return pp_col_header(&a);
}

static void check_sampling(json_t *h, const char *event, const char *mode, const char *num_key,
                           long long num) {
  for (int pass = 0; pass < 2; pass++) {
    json_t *o = pass ? json_object_get(h, "metadata") : h;
    CHECK_EQ_STR(json_string_value(json_object_get(o, "sampling_event")), event);
    CHECK_EQ_STR(json_string_value(json_object_get(o, "sampling_mode")), mode);
    CHECK_EQ_INT(json_integer_value(json_object_get(o, num_key)), num);
    const char *other =
        strcmp(num_key, "sampling_period") ? "sampling_period" : "sampling_frequency";
    CHECK(json_object_get(o, other) == NULL);
  }
}

static void test_sampling_event(void) {
  json_t *h = header_with_perf("cycles", "0", true);
  check_sampling(h, "cycles", "frequency", "sampling_frequency", 99);
  json_decref(h);
  h = header_with_perf("instructions", "100000", true);
  check_sampling(h, "instructions", "period", "sampling_period", 100000);
  json_decref(h);
  /* the default software clock is gProfiler's "cpu-time" */
  h = header_with_perf("cpu-clock", "0", true);
  check_sampling(h, "cpu-time", "frequency", "sampling_frequency", 99);
  json_decref(h);
  /* perf disabled: nothing samples that event */
  h = header_with_perf("cycles", "1000", false);
  check_sampling(h, "cpu-time", "frequency", "sampling_frequency", 99);
  json_decref(h);
}

static void burn_cpu(double seconds) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  volatile double x = 0;
  do {
    for (int i = 0; i < 100000; i++)
      x += i * 0.5;
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
}

static void test_metrics(void) {
  struct pp_metrics *m = pp_metrics_new();
  CHECK(m != NULL);
  pp_metrics_sample(m);
  burn_cpu(0.3);
  pp_metrics_sample(m);
  double cpu, mem;
  pp_metrics_session(m, &cpu, &mem);
  CHECK(cpu > 0 && cpu <= 100);
  CHECK(mem > 0 && mem <= 100);
  CHECK(fabs(cpu * 10 - round(cpu * 10)) < 1e-9); /* one decimal, like psutil */
  printf("cpu_avg %.1f mem_avg %.2f\n", cpu, mem);
  /* a session without samples has no memory average */
  pp_metrics_session(m, &cpu, &mem);
  CHECK(cpu >= 0 && cpu <= 100);
  CHECK(mem < 0);
  pp_metrics_free(m);
  pp_metrics_session(NULL, &cpu, &mem);
  CHECK(cpu < 0 && mem < 0);
}

int main(void) {
  test_json_special();
  test_json_vs_python();
  test_system_metadata();
  test_header();
  test_sampling_event();
  test_defaults_config();
  test_metrics();
  return pp_test_finish("test_metadata");
}
