/* SPDX-License-Identifier: Apache-2.0 */
/* YAML loading, core keys, plugin binding and orphan sections. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "testlib.h"

static const char *fixture(const char *name) {
  static char buf[4][1024];
  static int slot;
  const char *src = getenv("PP_SOURCE_DIR");
  char *b = buf[slot++ % 4];
  snprintf(b, sizeof(buf[0]), "%s/tests/data/config/%s", src ? src : ".", name);
  return b;
}

static int load(struct pp_config *c, const char *name, char err[PP_MAX_ERR]) {
  pp_config_defaults(c);
  return pp_config_load(c, fixture(name), true, err);
}

/* A bad file: load fails and the message has every needle. */
static void expect_error(const char *name, const char *const *needles) {
  struct pp_config c;
  char err[PP_MAX_ERR] = "";
  int rc = load(&c, name, err);
  CHECK_EQ_INT(rc, -1);
  CHECK_CONTAINS(err, fixture(name));
  for (size_t i = 0; needles[i]; i++)
    CHECK_CONTAINS(err, needles[i]);
  CHECK(strchr(err, '\n') == NULL); /* one line */
  pp_config_free(&c);
}
#define EXPECT_ERROR(name, ...) expect_error(name, (const char *const[]){__VA_ARGS__, NULL})

static char *write_temp(const char *text, size_t len) {
  char *path = strdup("/tmp/pp_test_config_XXXXXX");
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  CHECK_EQ_INT(write(fd, text, len), (long long)len);
  close(fd);
  return path;
}

/* ---- fake plugins --------------------------------------------------------- */

static const char *const fake_modes[] = {"fast", "slow", NULL};
static const char *const fake_levels[] = {"low", "high", NULL};
static const struct pp_option fake_opts[] = {
    {.key = "mode",
     .type = PP_OPT_ENUM,
     .default_value = "slow",
     .choices = fake_modes,
     .help = "how"},
    {.key = "depth",
     .type = PP_OPT_INT,
     .default_value = "64",
     .min = 1,
     .max = 1024,
     .help = "max frames"},
    {.key = "verbose_stacks", .type = PP_OPT_BOOL, .default_value = "false", .help = "more"},
    {.key = "version_check",
     .type = PP_OPT_BOOL,
     .default_value = "true",
     .cli_flag = "fake-no-version-check",
     .help = "check versions"},
    {.key = "targets", .type = PP_OPT_LIST, .default_value = "a, b", .help = "which"},
    {.key = "label", .type = PP_OPT_STRING, .help = "a label"},
    {.key = "level",
     .type = PP_OPT_ENUM,
     .choices = fake_levels,
     .default_value = "low",
     .help = "level"},
};
static const struct pp_plugin fake = {
    PP_PLUGIN_HEADER,     .name = "fake",
    .version = "1.0",     .description = "a fake plugin",
    .options = fake_opts, .option_count = sizeof(fake_opts) / sizeof(fake_opts[0])};
/* no options: only enabled/disabled */
static const struct pp_plugin other = {PP_PLUGIN_HEADER, .name = "other", .version = "0.1"};
/* off unless asked for, like gProfiler's php */
static const char *const lazy_modes[] = {"spy", NULL};
static const struct pp_option lazy_opts[] = {
    {.key = "mode", .type = PP_OPT_ENUM, .default_value = "disabled", .choices = lazy_modes}};
static const struct pp_plugin lazy = {PP_PLUGIN_HEADER, .name = "lazy", .options = lazy_opts,
                                      .option_count = 1};

static const struct pp_bound_option *bound(const struct pp_plugin_config *pc, const char *key) {
  for (size_t i = 0; pc && i < pc->option_count; i++)
    if (strcmp(pc->options[i].opt->key, key) == 0) return &pc->options[i];
  return NULL;
}

/* ---- tests ---------------------------------------------------------------- */

static void test_defaults(void) {
  struct pp_config c;
  pp_config_defaults(&c);
  CHECK_EQ_INT(c.frequency, 11);
  CHECK_EQ_INT(c.duration, 60);
  CHECK_EQ_INT(c.proc_scan_interval_ms, 1000);
  CHECK(!c.continuous);
  CHECK_EQ_INT(c.pid_count, 0);
  CHECK_EQ_STR(c.profiling_mode, "cpu");
  CHECK(c.output_dir == NULL);
  CHECK(c.flamegraph);
  CHECK_EQ_INT(c.output_format_count, 2);
  CHECK_EQ_STR(c.output_formats[0], "col");
  CHECK_EQ_STR(c.output_formats[1], "html");
  CHECK(c.output_formats[2] == NULL);
  CHECK(c.app_identifiers && c.container_names && c.application_metadata);
  CHECK(c.metadata_collection && c.metrics_collection && c.pidns_check);
  CHECK_EQ_INT(c.appid_cache_size, 4096);
  CHECK_EQ_STR(c.pid_file, "/run/polyprof.pid");
  CHECK_EQ_STR(c.log_file, "/var/log/polyprof/polyprof.log");
  CHECK_EQ_INT(c.log_max_bytes, 5242880);
  CHECK_EQ_INT(c.log_backups, 1);
  CHECK_EQ_STR(c.plugin_dir, POLYPROF_PLUGIN_DIR);
  CHECK_EQ_STR(c.isolation, "worker");
  CHECK_EQ_INT(c.worker_memory_limit_mb, 256);
  CHECK_EQ_INT(c.worker_timeout_s, 10);
  CHECK_EQ_INT(c.worker_restart_backoff_max_s, 300);
  CHECK(!c.upload);
  CHECK_EQ_STR(c.server_host, "https://profiler.granulate.io");
  CHECK(c.token == NULL && c.service_name == NULL);
  pp_config_free(&c);
}

static void test_good_file(void) {
  struct pp_config c;
  char err[PP_MAX_ERR] = "";
  CHECK_EQ_INT(load(&c, "good.yaml", err), 0);
  CHECK_EQ_STR(err, "");
  CHECK_EQ_STR(c.config_path, fixture("good.yaml"));
  CHECK_EQ_INT(c.frequency, 99);
  CHECK_EQ_INT(c.duration, 30);
  CHECK(c.continuous);
  CHECK_EQ_INT(c.pid_count, 2);
  CHECK_EQ_INT(c.pids[0], 100);
  CHECK_EQ_INT(c.pids[1], 200);
  CHECK_EQ_STR(c.output_dir, "/tmp/pp-out");
  CHECK(c.rotating_output);
  CHECK(!c.flamegraph);
  CHECK_EQ_INT(c.output_format_count, 3); /* the repeated col counts once */
  CHECK_EQ_STR(c.output_formats[0], "col");
  CHECK_EQ_STR(c.output_formats[1], "pprof");
  CHECK_EQ_STR(c.output_formats[2], "speedscope");
  CHECK(c.output_formats[3] == NULL);
  CHECK(!c.app_identifiers && !c.container_names && !c.application_metadata);
  CHECK(!c.metadata_collection && !c.metrics_collection);
  CHECK_EQ_INT(c.app_id_args_filter_count, 2);
  CHECK_EQ_STR(c.app_id_args_filters[0], "-Dapp=.*");
  CHECK_EQ_STR(c.app_id_args_filters[1], "--name [a-z]+");
  CHECK_EQ_INT(c.appid_cache_size, 1024);
  CHECK_EQ_STR(c.pid_file, "/tmp/pp.pid");
  CHECK(!c.pidns_check);
  CHECK_EQ_STR(c.log_file, "");
  CHECK_EQ_INT(c.log_max_bytes, 2 * 1024 * 1024);
  CHECK_EQ_INT(c.log_backups, 3);
  CHECK(c.verbose);
  CHECK_EQ_STR(c.plugin_dir, "/opt/pp/plugins");
  CHECK_EQ_STR(c.isolation, "inline");
  CHECK_EQ_INT(c.worker_memory_limit_mb, 0);
  CHECK_EQ_INT(c.worker_timeout_s, 5);
  CHECK_EQ_INT(c.worker_restart_backoff_max_s, 60);
  CHECK(c.upload);
  CHECK_EQ_STR(c.server_host, "https://127.0.0.1:8080");
  CHECK_EQ_STR(c.token, "secret");
  CHECK_EQ_STR(c.service_name, "my-service");
  /* the plugin section is kept raw, with positions */
  CHECK_EQ_INT(c.section_count, 1);
  CHECK_EQ_STR(c.sections[0].name, "fake");
  CHECK_EQ_INT(c.sections[0].line, 40);
  CHECK_EQ_INT(c.sections[0].count, 5);
  CHECK_EQ_STR(c.sections[0].values[0].key, "mode");
  CHECK_EQ_STR(c.sections[0].values[0].scalar, "fast");
  CHECK_EQ_INT(c.sections[0].values[0].line, 41);
  CHECK_EQ_STR(c.sections[0].values[0].origin, fixture("good.yaml"));
  CHECK_EQ_STR(c.sections[0].values[3].key, "targets");
  CHECK(c.sections[0].values[3].scalar == NULL);
  CHECK_EQ_INT(c.sections[0].values[3].item_count, 2);
  CHECK_EQ_STR(c.sections[0].values[3].items[1], "b");

  /* and it binds */
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), 0);
  const struct pp_plugin_config *pc = pp_config_plugin(&c, "fake");
  CHECK(pc && pc->enabled);
  CHECK_EQ_STR(pc ? pc->mode : NULL, "fast");
  CHECK_EQ_STR(bound(pc, "depth")->scalar, "32");
  CHECK_EQ_STR(bound(pc, "label")->scalar, "hello");
  CHECK_EQ_STR(pc ? pc->isolation : NULL, "inline"); /* inherits plugins.isolation */
  pp_config_free(&c);
}

static void test_empty_files(void) {
  static const char *const names[] = {"empty.yaml", "comments.yaml", "nulls.yaml"};
  for (size_t i = 0; i < 3; i++) {
    struct pp_config c;
    char err[PP_MAX_ERR] = "";
    CHECK_EQ_INT(load(&c, names[i], err), 0);
    CHECK_EQ_STR(err, "");
    CHECK_EQ_INT(c.frequency, 11); /* "frequency:" keeps the default */
    CHECK_EQ_INT(c.pid_count, 0);
    CHECK_EQ_INT(c.section_count, 0);
    pp_config_free(&c);
  }
}

static void test_missing_file(void) {
  struct pp_config c;
  char err[PP_MAX_ERR] = "";
  pp_config_defaults(&c);
  /* the default path may be absent */
  CHECK_EQ_INT(pp_config_load(&c, "/nonexistent/polyprof.yaml", false, err), 0);
  CHECK(c.config_path == NULL);
  /* an explicit --config may not */
  CHECK_EQ_INT(pp_config_load(&c, "/nonexistent/polyprof.yaml", true, err), -1);
  CHECK_CONTAINS(err, "/nonexistent/polyprof.yaml");
  CHECK_CONTAINS(err, "No such file");
  /* a directory exists but cannot be read as a file, required or not */
  const char *dir = getenv("PP_SOURCE_DIR") ? getenv("PP_SOURCE_DIR") : ".";
  CHECK_EQ_INT(pp_config_load(&c, dir, false, err), -1);
  CHECK_CONTAINS(err, dir);
  CHECK_CONTAINS(err, "directory");
  pp_config_free(&c);
}

static void test_bad_files(void) {
  EXPECT_ERROR("bad_unknown_key.yaml", ":5:", "profiling.frequncy", "unknown key",
               "did you mean 'frequency'?");
  EXPECT_ERROR("bad_syntax.yaml", ":3:", "YAML syntax error");
  EXPECT_ERROR("bad_type.yaml", ":4:", "profiling.frequency: expected an integer, got 'fast'");
  EXPECT_ERROR("bad_range.yaml", ":2:", "profiling.frequency: must be between 1 and 10000");
  EXPECT_ERROR("bad_enum.yaml", ":2:",
               "output.formats: unknown format 'xml' (expected one of: col, html, pprof, "
               "speedscope, gecko, heatmap, table, collapsed)");
  EXPECT_ERROR("bad_kind.yaml", ":2:", "output.formats: expected a list, got a mapping");
  EXPECT_ERROR("bad_scalar_list.yaml",
               ":2:", "profiling.frequency: expected an integer, got a list");
  EXPECT_ERROR("bad_duplicate.yaml",
               ":4:", "profiling.frequency: duplicate key (first set on line 2)");
  EXPECT_ERROR("bad_duplicate_section.yaml", ":4:", "output: duplicate key (first set on line 1)");
  EXPECT_ERROR("bad_section_kind.yaml", ":1:", "logging: expected a mapping", "'verbose'");
  EXPECT_ERROR("bad_top.yaml", ":1:", "got a list");
  EXPECT_ERROR("bad_alias.yaml", ":3:", "aliases");
  EXPECT_ERROR("bad_bool.yaml", ":2:", "upload.enabled: expected true or false, got 'maybe'");
  EXPECT_ERROR("bad_pid.yaml", ":2:", "profiling.pids: invalid pid 'abc'");
  EXPECT_ERROR("bad_regex.yaml", ":2:", "enrichment.app_id_args_filters",
               "invalid regular expression '(unclosed'");
  EXPECT_ERROR("bad_plugin_nested.yaml", ":3:", "python.pyspy: expected a value or a list");
  EXPECT_ERROR("bad_two_docs.yaml", ":2:", "only one YAML document");
  EXPECT_ERROR("bad_section_name.yaml",
               ":1:", "Profiling: unknown section (did you mean 'profiling'?)");
}

static void test_limits(void) {
  struct pp_config c;
  char err[PP_MAX_ERR] = "";

  /* far deeper than any config: refused before it costs anything */
  char deep[512] = "a: ";
  for (int i = 0; i < 100; i++)
    strcat(deep, "[");
  char *path = write_temp(deep, strlen(deep));
  pp_config_defaults(&c);
  CHECK_EQ_INT(pp_config_load(&c, path, true, err), -1);
  CHECK_CONTAINS(err, path);
  CHECK_CONTAINS(err, "nested more than");
  pp_config_free(&c);
  unlink(path);
  free(path);

  /* over 1 MiB */
  size_t big = 1024 * 1024 + 10;
  char *text = malloc(big);
  memset(text, '#', big);
  path = write_temp(text, big);
  free(text);
  pp_config_defaults(&c);
  CHECK_EQ_INT(pp_config_load(&c, path, true, err), -1);
  CHECK_CONTAINS(err, "larger than 1024 KiB");
  pp_config_free(&c);
  unlink(path);
  free(path);

  /* many keys in one section: the duplicate check must stay fast */
  size_t n = 40000, cap = n * 24 + 64, used = 0;
  text = malloc(cap);
  used += (size_t)snprintf(text + used, cap - used, "many:\n");
  for (size_t i = 0; i < n; i++)
    used += (size_t)snprintf(text + used, cap - used, "  k%zu: 1\n", i);
  used += (size_t)snprintf(text + used, cap - used, "  k7: 2\n");
  path = write_temp(text, used);
  free(text);
  pp_config_defaults(&c);
  CHECK_EQ_INT(pp_config_load(&c, path, true, err), -1);
  CHECK_CONTAINS(err, "many.k7: duplicate key (first set on line 9)");
  pp_config_free(&c);
  unlink(path);
  free(path);

  /* invalid UTF-8 */
  path = write_temp("profiling:\n  mode: \xff\xfe\n", 22);
  pp_config_defaults(&c);
  CHECK_EQ_INT(pp_config_load(&c, path, true, err), -1);
  CHECK_CONTAINS(err, path);
  CHECK_CONTAINS(err, "UTF-8");
  pp_config_free(&c);
  unlink(path);
  free(path);
}

static void test_shipped_config(void) {
  struct pp_config c, d;
  char err[PP_MAX_ERR] = "";
  char path[1024];
  const char *src = getenv("PP_SOURCE_DIR");
  snprintf(path, sizeof(path), "%s/config/polyprof.yaml", src ? src : ".");
  pp_config_defaults(&c);
  pp_config_defaults(&d);
  CHECK_EQ_INT(pp_config_load(&c, path, true, err), 0);
  CHECK_EQ_STR(err, "");
  /* it documents the defaults, so loading it changes nothing */
  CHECK_EQ_INT(c.frequency, d.frequency);
  CHECK_EQ_INT(c.duration, d.duration);
  CHECK_EQ_INT(c.proc_scan_interval_ms, d.proc_scan_interval_ms);
  CHECK_EQ_INT(c.continuous, d.continuous);
  CHECK_EQ_INT(c.pid_count, d.pid_count);
  CHECK_EQ_STR(c.profiling_mode, d.profiling_mode);
  CHECK(c.output_dir == NULL);
  CHECK_EQ_INT(c.rotating_output, d.rotating_output);
  CHECK_EQ_INT(c.flamegraph, d.flamegraph);
  CHECK_EQ_INT(c.output_format_count, d.output_format_count);
  CHECK_EQ_STR(c.output_formats[1], d.output_formats[1]);
  CHECK_EQ_INT(c.app_identifiers, d.app_identifiers);
  CHECK_EQ_INT(c.metrics_collection, d.metrics_collection);
  CHECK_EQ_INT(c.app_id_args_filter_count, 0);
  CHECK_EQ_INT(c.appid_cache_size, d.appid_cache_size);
  CHECK_EQ_STR(c.pid_file, d.pid_file);
  CHECK_EQ_INT(c.pidns_check, d.pidns_check);
  CHECK_EQ_STR(c.log_file, d.log_file);
  CHECK_EQ_INT(c.log_max_bytes, d.log_max_bytes);
  CHECK_EQ_INT(c.log_backups, d.log_backups);
  CHECK_EQ_INT(c.verbose, d.verbose);
  CHECK_EQ_STR(c.plugin_dir, d.plugin_dir);
  CHECK_EQ_STR(c.isolation, d.isolation);
  CHECK_EQ_INT(c.worker_memory_limit_mb, d.worker_memory_limit_mb);
  CHECK_EQ_INT(c.worker_timeout_s, d.worker_timeout_s);
  CHECK_EQ_INT(c.worker_restart_backoff_max_s, d.worker_restart_backoff_max_s);
  CHECK_EQ_INT(c.upload, d.upload);
  CHECK_EQ_STR(c.server_host, d.server_host);
  CHECK(c.token == NULL && c.service_name == NULL);
  /* a section for every runtime polyprof ships */
  static const char *const runtimes[] = {"perf", "python", "java",   "php",
                                         "ruby", "nodejs", "dotnet", "example"};
  CHECK_EQ_INT(c.section_count, 8);
  for (size_t i = 0; i < 8; i++) {
    bool found = false;
    for (size_t j = 0; j < c.section_count; j++)
      found |= !strcmp(c.sections[j].name, runtimes[i]);
    CHECK(found);
  }
  /* no plugin installed: nothing to complain about */
  const char *none[] = {NULL};
  CHECK_EQ_INT(pp_config_check_orphans(&c, none, err), 0);
  pp_config_free(&c);
  pp_config_free(&d);
}

static void test_bind(void) {
  struct pp_config c;
  char err[PP_MAX_ERR] = "";

  /* no section at all: defaults */
  pp_config_defaults(&c);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), 0);
  const struct pp_plugin_config *pc = pp_config_plugin(&c, "fake");
  CHECK(pc && pc->enabled && pc->disabled_by == NULL);
  CHECK_EQ_STR(pc->mode, "slow");
  CHECK_EQ_INT(pc->option_count, 7);
  CHECK_EQ_STR(bound(pc, "mode")->scalar, "slow");
  CHECK_EQ_STR(bound(pc, "depth")->scalar, "64");
  CHECK_EQ_STR(bound(pc, "verbose_stacks")->scalar, "false");
  CHECK_EQ_INT(bound(pc, "targets")->item_count, 2);
  CHECK_EQ_STR(bound(pc, "targets")->items[1], "b");
  CHECK(bound(pc, "label")->scalar == NULL);
  CHECK_EQ_STR(pc->isolation, "worker");
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), -1); /* once per plugin */
  CHECK_CONTAINS(err, "fake");
  /* a plugin without a mode option has mode NULL */
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &other, err), 0);
  pc = pp_config_plugin(&c, "other");
  CHECK(pc && pc->enabled && pc->mode == NULL && pc->option_count == 0);
  /* a plugin whose default mode is disabled is off until configured on */
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &lazy, err), 0);
  pc = pp_config_plugin(&c, "lazy");
  CHECK(pc && !pc->enabled);
  CHECK_CONTAINS(pc->disabled_by, "lazy.mode defaults to disabled");
  CHECK(pp_config_plugin(&c, "nope") == NULL);
  pp_config_free(&c);

  /* values from the file */
  CHECK_EQ_INT(load(&c, "plugin_fake.yaml", err), 0);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), 0);
  pc = pp_config_plugin(&c, "fake");
  CHECK(pc && pc->enabled);
  CHECK_EQ_STR(pc->mode, "fast");
  CHECK_EQ_STR(bound(pc, "depth")->scalar, "32");
  CHECK_EQ_INT(bound(pc, "targets")->item_count, 2);
  CHECK_EQ_STR(bound(pc, "targets")->items[0], "x");
  pp_config_free(&c);

  /* unknown key: suggestion among the declared ones */
  CHECK_EQ_INT(load(&c, "plugin_errors.yaml", err), 0);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), -1);
  CHECK_CONTAINS(err, fixture("plugin_errors.yaml"));
  CHECK_CONTAINS(err, ":2: fake.depht: unknown key (did you mean 'depth'?)");
  CHECK(pp_config_plugin(&c, "fake") == NULL);
  pp_config_free(&c);

  CHECK_EQ_INT(load(&c, "plugin_range.yaml", err), 0);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), -1);
  CHECK_CONTAINS(err, ":4: fake.depth: must be between 1 and 1024 (got 5000)");
  pp_config_free(&c);

  CHECK_EQ_INT(load(&c, "plugin_mode.yaml", err), 0);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), -1);
  CHECK_CONTAINS(err,
                 ":2: fake.mode: unknown mode 'turbo' (expected one of: fast, slow, disabled)");
  pp_config_free(&c);
}

/* One value through pp_config_set, as if from a file line. */
static int set_plugin_value(struct pp_config *c, const char *section, const char *key,
                            const char *scalar) {
  (void)c;
  char text[256];
  snprintf(text, sizeof(text), "%s:\n  %s: %s\n", section, key, scalar);
  char *path = write_temp(text, strlen(text));
  char err[PP_MAX_ERR];
  int rc = pp_config_load(c, path, true, err);
  unlink(path);
  free(path);
  return rc;
}

static void test_bind_types(void) {
  static const struct {
    const char *key, *value, *error;
  } cases[] = {
      {"depth", "deep", "fake.depth: expected an integer, got 'deep'"},
      {"depth", "0", "must be between 1 and 1024 (got 0)"},
      {"verbose_stacks", "perhaps", "fake.verbose_stacks: expected true or false, got 'perhaps'"},
      {"level", "medium", "fake.level: unknown value 'medium' (expected one of: low, high)"},
      {"label", "[a, b]", "fake.label: expected a single value, got a list"},
      {"isolation", "thread", "fake.isolation: unknown isolation 'thread'"},
      {"enabled", "sure", "fake.enabled: expected true or false, got 'sure'"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct pp_config c;
    char err[PP_MAX_ERR] = "";
    pp_config_defaults(&c);
    CHECK_EQ_INT(set_plugin_value(&c, "fake", cases[i].key, cases[i].value), 0);
    CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), -1);
    CHECK_CONTAINS(err, ":2: ");
    CHECK_CONTAINS(err, cases[i].error);
    pp_config_free(&c);
  }
  /* accepted spellings are normalised */
  struct pp_config c;
  char err[PP_MAX_ERR] = "";
  pp_config_defaults(&c);
  set_plugin_value(&c, "fake", "verbose_stacks", "Yes");
  set_plugin_value(&c, "fake", "targets", "one");
  set_plugin_value(&c, "fake", "isolation", "inline");
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), 0);
  const struct pp_plugin_config *pc = pp_config_plugin(&c, "fake");
  CHECK_EQ_STR(bound(pc, "verbose_stacks")->scalar, "true");
  CHECK_EQ_INT(bound(pc, "targets")->item_count, 1);
  CHECK_EQ_STR(bound(pc, "targets")->items[0], "one");
  CHECK_EQ_STR(pc->isolation, "inline");
  pp_config_free(&c);
  /* "enabled" is the only mode of a plugin that declares none */
  pp_config_defaults(&c);
  set_plugin_value(&c, "other", "mode", "fast");
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &other, err), -1);
  CHECK_CONTAINS(err, "other.mode: unknown mode 'fast' (expected one of: enabled, disabled)");
  pp_config_free(&c);
  pp_config_defaults(&c);
  set_plugin_value(&c, "lazy", "mode", "spy");
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &lazy, err), 0);
  CHECK(pp_config_plugin(&c, "lazy")->enabled);
  CHECK_EQ_STR(pp_config_plugin(&c, "lazy")->mode, "spy");
  pp_config_free(&c);
}

static void test_disable_routes(void) {
  struct pp_config c;
  char err[PP_MAX_ERR] = "";
  const struct pp_plugin_config *pc;

  /* enabled: false, and the legacy mode "none" */
  CHECK_EQ_INT(load(&c, "plugin_disabled.yaml", err), 0);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), 0);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &other, err), 0);
  pc = pp_config_plugin(&c, "fake");
  CHECK(pc && !pc->enabled);
  CHECK_CONTAINS(pc->disabled_by, "fake.enabled: false (");
  CHECK_CONTAINS(pc->disabled_by, "plugin_disabled.yaml:3)");
  pc = pp_config_plugin(&c, "other");
  CHECK(pc && !pc->enabled);
  CHECK_CONTAINS(pc->disabled_by, "other.mode: none (");
  CHECK_CONTAINS(pc->disabled_by, "plugin_disabled.yaml:5)");
  pp_config_free(&c);

  /* mode: disabled, with the mode option showing it */
  pp_config_defaults(&c);
  set_plugin_value(&c, "fake", "mode", "disabled");
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), 0);
  pc = pp_config_plugin(&c, "fake");
  CHECK(!pc->enabled);
  CHECK_EQ_STR(pc->mode, "disabled");
  CHECK_CONTAINS(pc->disabled_by, "fake.mode: disabled (");
  pp_config_free(&c);

  /* --no-fake */
  pp_config_defaults(&c);
  pp_config_add_flag(&c, "--no-fake", NULL, false);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), 0);
  pc = pp_config_plugin(&c, "fake");
  CHECK(!pc->enabled);
  CHECK_EQ_STR(pc->disabled_by, "--no-fake");
  CHECK(c.flags[0].claimed);
  pp_config_free(&c);

  /* --fake-mode disabled beats the file's mode, and none == disabled */
  CHECK_EQ_INT(load(&c, "plugin_fake.yaml", err), 0);
  pp_config_add_flag(&c, "--fake-mode", "none", false);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), 0);
  pc = pp_config_plugin(&c, "fake");
  CHECK(!pc->enabled);
  CHECK_EQ_STR(pc->mode, "disabled");
  CHECK_EQ_STR(pc->disabled_by, "--fake-mode none");
  pp_config_free(&c);

  /* and a flag turns back on what the file turned off */
  CHECK_EQ_INT(load(&c, "plugin_disabled.yaml", err), 0);
  pp_config_add_flag(&c, "--other-mode", "enabled", true);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &other, err), 0);
  CHECK(pp_config_plugin(&c, "other")->enabled);
  pp_config_free(&c);
}

static void test_plugin_flags(void) {
  struct pp_config c;
  char err[PP_MAX_ERR] = "";
  const struct pp_plugin_config *pc;

  CHECK_EQ_INT(load(&c, "plugin_fake.yaml", err), 0);
  pp_config_add_flag(&c, "--fake-depth", "7", false);
  pp_config_add_flag(&c, "--fake-verbose-stacks", NULL, false);
  pp_config_add_flag(&c, "--fake-no-version-check", NULL, false);
  pp_config_add_flag(&c, "--fake-targets", "p,q", false);
  pp_config_add_flag(&c, "--fake-targets", "r", true);
  pp_config_add_flag(&c, "--fake-isolation", "inline", false);
  pp_config_add_flag(&c, "--java-line-numbers", "line-of-function", false); /* not ours */
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), 0);
  pc = pp_config_plugin(&c, "fake");
  CHECK_EQ_STR(bound(pc, "depth")->scalar, "7");             /* flag beats file (32) */
  CHECK_EQ_STR(bound(pc, "verbose_stacks")->scalar, "true"); /* bool flag: on */
  CHECK_EQ_STR(bound(pc, "version_check")->scalar, "false"); /* a "no-" flag: off */
  CHECK_EQ_INT(bound(pc, "targets")->item_count, 3);         /* flags add up, replace the file's */
  CHECK_EQ_STR(bound(pc, "targets")->items[0], "p");
  CHECK_EQ_STR(bound(pc, "targets")->items[2], "r");
  CHECK_EQ_STR(pc->isolation, "inline");
  CHECK_EQ_STR(pc->mode, "fast");
  CHECK(!c.flags[6].claimed);
  /* the flag values now sit in the section, after the file's */
  const struct pp_plugin_section *s = &c.sections[0];
  CHECK_EQ_STR(s->values[s->count - 1].flag, "--fake-isolation");
  CHECK_EQ_INT(s->values[s->count - 1].line, 0);
  pp_config_free(&c);

  /* explicit values for bool flags; a bool flag never takes the next word */
  pp_config_defaults(&c);
  pp_config_add_flag(&c, "--fake-verbose-stacks", "false", true);
  pp_config_add_flag(&c, "--no-fake", "false", true);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), 0);
  pc = pp_config_plugin(&c, "fake");
  CHECK_EQ_STR(bound(pc, "verbose_stacks")->scalar, "false");
  CHECK(pc->enabled);
  pp_config_free(&c);

  pp_config_defaults(&c);
  pp_config_add_flag(&c, "--fake-verbose-stacks", "run2", false);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), -1);
  CHECK_EQ_STR(err, "polyprof: --fake-verbose-stacks: takes no value (unexpected 'run2')");
  pp_config_free(&c);

  pp_config_defaults(&c);
  pp_config_add_flag(&c, "--fake-depth", NULL, false);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), -1);
  CHECK_EQ_STR(err, "polyprof: --fake-depth: needs a value");
  pp_config_free(&c);

  pp_config_defaults(&c);
  pp_config_add_flag(&c, "--fake-depth", "lots", false);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), -1);
  CHECK_EQ_STR(err, "polyprof: --fake-depth: expected an integer, got 'lots'");
  pp_config_free(&c);

  pp_config_defaults(&c);
  pp_config_add_flag(&c, "--fake-mode", "warp", true);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), -1);
  CHECK_EQ_STR(
      err, "polyprof: --fake-mode: unknown mode 'warp' (expected one of: fast, slow, disabled)");
  pp_config_free(&c);
}

static void test_orphans(void) {
  struct pp_config c;
  char err[PP_MAX_ERR] = "";
  const char *loaded[] = {"fake", NULL};

  /* php is a known runtime (just not installed); pyhton is a typo */
  CHECK_EQ_INT(load(&c, "orphans.yaml", err), 0);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), 0);
  CHECK_EQ_INT(pp_config_check_orphans(&c, loaded, err), 1);
  CHECK_CONTAINS(err, fixture("orphans.yaml"));
  CHECK_CONTAINS(err, ":4: pyhton: unknown section (did you mean 'python'?)");
  pp_config_free(&c);

  CHECK_EQ_INT(load(&c, "orphan_unknown.yaml", err), 0);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), 0);
  CHECK_EQ_INT(pp_config_check_orphans(&c, loaded, err), 1);
  CHECK_CONTAINS(err, ":2: custom_thing: unknown section (no plugin of that name is installed)");
  pp_config_free(&c);

  /* a typo of a core section is caught too */
  pp_config_defaults(&c);
  set_plugin_value(&c, "profilng", "frequency", "3");
  CHECK_EQ_INT(pp_config_check_orphans(&c, loaded, err), 1);
  CHECK_CONTAINS(err, "profilng: unknown section (did you mean 'profiling'?)");
  pp_config_free(&c);

  /* flags: a known runtime's are fine, a typo is not */
  pp_config_defaults(&c);
  pp_config_add_flag(&c, "--php-mode", "phpspy", false);
  pp_config_add_flag(&c, "--no-dotnet", NULL, false);
  pp_config_add_flag(&c, "--java-async-profiler-mode", "cpu", false);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), 0);
  CHECK_EQ_INT(pp_config_check_orphans(&c, loaded, err), 0);
  pp_config_add_flag(&c, "--fake-dept", "3", false);
  pp_config_add_flag(&c, "--pyton-mode", "auto", false);
  pp_config_add_flag(&c, "--no-flamegrap", NULL, false);
  CHECK_EQ_INT(pp_config_check_orphans(&c, loaded, err), 3);
  CHECK_EQ_STR(err, "polyprof: unknown flag --fake-dept (did you mean --fake-depth?)");
  pp_config_free(&c);

  pp_config_defaults(&c);
  pp_config_add_flag(&c, "--pyton-mode", "auto", false);
  CHECK_EQ_INT(pp_config_check_orphans(&c, loaded, err), 1);
  CHECK_EQ_STR(err, "polyprof: unknown flag --pyton-mode (did you mean --python-mode?)");
  pp_config_free(&c);

  pp_config_defaults(&c);
  pp_config_add_flag(&c, "--no-flamegrap", NULL, false);
  CHECK_EQ_INT(pp_config_check_orphans(&c, loaded, err), 1);
  CHECK_EQ_STR(err, "polyprof: unknown flag --no-flamegrap (did you mean --no-flamegraph?)");
  pp_config_free(&c);

  /* a loaded plugin's unknown option is an error even if the runtime is known */
  pp_config_defaults(&c);
  pp_config_add_flag(&c, "--python-foo", "1", false);
  const char *with_python[] = {"python", NULL};
  CHECK_EQ_INT(pp_config_check_orphans(&c, with_python, err), 1);
  CHECK_CONTAINS(err, "unknown flag --python-foo");
  pp_config_free(&c);
}

static void test_set_and_helpers(void) {
  struct pp_config c;
  char err[PP_MAX_ERR] = "";
  pp_config_defaults(&c);
  struct pp_config_value v = {.key = "profiling.duration", .scalar = "120", .origin = "test"};
  CHECK_EQ_INT(pp_config_set(&c, &v, err), 0);
  CHECK_EQ_INT(c.duration, 120);
  v.scalar = "12abc";
  CHECK_EQ_INT(pp_config_set(&c, &v, err), -1);
  CHECK_EQ_STR(err, "test: profiling.duration: expected an integer, got '12abc'");
  v.flag = "-d";
  v.scalar = "0";
  CHECK_EQ_INT(pp_config_set(&c, &v, err), -1);
  CHECK_EQ_STR(err, "polyprof: -d: must be between 1 and 86400 (got 0)");
  /* the /proc scan interval: a config key with its own flag and range */
  struct pp_config_value scan = {
      .key = "profiling.proc_scan_interval_ms", .scalar = "5000", .origin = "t"};
  CHECK_EQ_INT(pp_config_set(&c, &scan, err), 0);
  CHECK_EQ_INT(c.proc_scan_interval_ms, 5000);
  scan.flag = "--proc-scan-interval-ms";
  scan.scalar = "10";
  CHECK_EQ_INT(pp_config_set(&c, &scan, err), -1);
  CHECK_EQ_STR(err, "polyprof: --proc-scan-interval-ms: must be between 100 and 600000 (got 10)");
  CHECK_EQ_INT(c.proc_scan_interval_ms, 5000);
  struct pp_config_value pids = {.key = "profiling.pids", .scalar = " 1, 2 ,3", .origin = "t"};
  CHECK_EQ_INT(pp_config_set(&c, &pids, err), 0);
  CHECK_EQ_INT(c.pid_count, 3);
  CHECK_EQ_INT(c.pids[2], 3);
  struct pp_config_value size = {.key = "logging.max_bytes", .scalar = "512KiB", .origin = "t"};
  CHECK_EQ_INT(pp_config_set(&c, &size, err), 0);
  CHECK_EQ_INT(c.log_max_bytes, 512 * 1024);
  size.scalar = "2TiB";
  CHECK_EQ_INT(pp_config_set(&c, &size, err), -1);
  CHECK_CONTAINS(err, "expected a size in bytes");
  size.scalar = "2GiB";
  CHECK_EQ_INT(pp_config_set(&c, &size, err), -1);
  CHECK_CONTAINS(err, "must be between 0 and 1073741824");
  struct pp_config_value dir = {.key = "output.dir", .scalar = "", .origin = "t"};
  CHECK_EQ_INT(pp_config_set(&c, &dir, err), 0);
  CHECK(c.output_dir == NULL);
  struct pp_config_value pdir = {.key = "plugins.dir", .scalar = "", .origin = "t"};
  CHECK_EQ_INT(pp_config_set(&c, &pdir, err), -1);
  CHECK_CONTAINS(err, "plugins.dir: must not be empty");
  struct pp_config_value bogus = {.key = "profiling.nope", .scalar = "1", .origin = "t"};
  CHECK_EQ_INT(pp_config_set(&c, &bogus, err), -1);

  /* run needs an output, and upload needs credentials */
  CHECK_EQ_INT(pp_config_check_run(&c, err), -1);
  CHECK_CONTAINS(err, "-o/--output-dir");
  c.upload = true;
  CHECK_EQ_INT(pp_config_check_run(&c, err), -1);
  CHECK_CONTAINS(err, "a token (--token, upload.token) and a service name");
  c.token = strdup("t");
  c.service_name = strdup("s");
  CHECK_EQ_INT(pp_config_check_run(&c, err), 0);
  pp_config_free(&c);

  bool b;
  int64_t i;
  CHECK(pp_config_parse_bool("ON", &b) == 0 && b);
  CHECK(pp_config_parse_bool("no", &b) == 0 && !b);
  CHECK(pp_config_parse_bool("nope", &b) < 0);
  CHECK(pp_config_parse_int("-42", &i) == 0 && i == -42);
  CHECK(pp_config_parse_int(" 4", &i) < 0);
  CHECK(pp_config_parse_int("0x10", &i) < 0);
  CHECK(pp_config_parse_int("99999999999999999999", &i) < 0);
  CHECK(pp_config_parse_int("", &i) < 0);

  const char *words[] = {"frequency", "duration", "continuous", "pids", "mode"};
  CHECK_EQ_STR(pp_config_suggest("frequncy", words, 5), "frequency");
  CHECK_EQ_STR(pp_config_suggest("durtaion", words, 5), "duration");
  CHECK_EQ_STR(pp_config_suggest("pid", words, 5), "pids");
  CHECK(pp_config_suggest("zebra", words, 5) == NULL);
  CHECK(pp_config_suggest("mode", words, 5) == NULL); /* exact: nothing to suggest */

  CHECK(pp_config_bool_flag_sets("java-collect-thread-names"));
  CHECK(!pp_config_bool_flag_sets("no-python-versions"));
  CHECK(!pp_config_bool_flag_sets("perf-no-memory-restart"));
  CHECK(!pp_config_bool_flag_sets("x-disable-y"));
  CHECK(pp_config_bool_flag_sets("java-nodes")); /* "no" must be a whole word */

  char flag[64];
  CHECK_EQ_STR(pp_config_option_flag("my_plugin", &fake_opts[2], flag, sizeof(flag)),
               "my-plugin-verbose-stacks");
  CHECK_EQ_STR(pp_config_option_flag("fake", &fake_opts[3], flag, sizeof(flag)),
               "fake-no-version-check");
  /* an older, shorter descriptor has no options to read */
  struct pp_plugin old = fake;
  size_t n;
  old.struct_size = offsetof(struct pp_plugin, options);
  CHECK(pp_config_plugin_options(&old, &n) == NULL && n == 0);
  CHECK(pp_config_plugin_options(&fake, &n) == fake_opts && n == 7);
}

int main(void) {
  test_defaults();
  test_good_file();
  test_empty_files();
  test_missing_file();
  test_bad_files();
  test_limits();
  test_shipped_config();
  test_bind();
  test_bind_types();
  test_disable_routes();
  test_plugin_flags();
  test_orphans();
  test_set_and_helpers();
  return pp_test_finish("test_config");
}
