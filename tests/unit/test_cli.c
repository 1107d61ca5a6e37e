/* SPDX-License-Identifier: Apache-2.0 */
/* Command line: parsing, precedence over the file, plugin flags, --help. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
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

/* argv must outlive the pp_cli: keep one per call site. */
struct args {
  char *v[64];
  int n;
};

static int parse_v(struct pp_cli *cli, struct args *a, char err[PP_MAX_ERR], va_list ap) {
  a->n = 0;
  a->v[a->n++] = "polyprof";
  for (const char *s; (s = va_arg(ap, const char *)) && a->n < 63;)
    a->v[a->n++] = (char *)s;
  a->v[a->n] = NULL;
  return pp_cli_parse(cli, a->n, a->v, err);
}

static int parse(struct pp_cli *cli, struct args *a, char err[PP_MAX_ERR], ...) {
  va_list ap;
  va_start(ap, err);
  int rc = parse_v(cli, a, err, ap);
  va_end(ap);
  return rc;
}

/* parse + apply on top of the defaults; returns the first non-zero code */
static int run(struct pp_config *c, char err[PP_MAX_ERR], ...) {
  struct pp_cli cli;
  struct args a;
  va_list ap;
  va_start(ap, err);
  int rc = parse_v(&cli, &a, err, ap);
  va_end(ap);
  pp_config_defaults(c);
  if (rc == 0) rc = pp_cli_apply(&cli, c, err);
  pp_cli_free(&cli);
  return rc;
}

static void test_every_flag(void) {
  struct pp_config c;
  char err[PP_MAX_ERR] = "";
  CHECK_EQ_INT(
      run(&c, err, "-f", "99", "--profiling-duration", "30", "-c", "--rotating-output",
          "--no-flamegraph", "--pids", "1,2", "--pids=3", "--disable-application-identifiers",
          "--disable-container-names", "--disable-application-metadata",
          "--disable-metadata-collection", "--disable-metrics-collection", "--disable-pidns-check",
          "--app-id-args-filter", "-Dx=.*", "--app-id-args-filter=a,b", "--pid-file", "/tmp/p.pid",
          "--log-file=/tmp/p.log", "--log-rotate-max-size", "1MiB", "--log-rotate-backup-count",
          "4", "-v", "-o", "/tmp/out", "--plugin-dir", "/tmp/plugins", "--isolation", "inline",
          "--output-format", "col,pprof", "--output-format", "speedscope", "-u", "--server-host",
          "http://localhost:1", "--token", "tok", "--service-name", "svc", "--mode", "cpu", NULL),
      0);
  CHECK_EQ_STR(err, "");
  CHECK_EQ_INT(c.frequency, 99);
  CHECK_EQ_INT(c.duration, 30);
  CHECK(c.continuous);
  CHECK(c.rotating_output);
  CHECK(!c.flamegraph);
  CHECK_EQ_INT(c.pid_count, 3);
  CHECK_EQ_INT(c.pids[0], 1);
  CHECK_EQ_INT(c.pids[2], 3);
  CHECK(!c.app_identifiers && !c.container_names && !c.application_metadata);
  CHECK(!c.metadata_collection && !c.metrics_collection && !c.pidns_check);
  CHECK_EQ_INT(c.app_id_args_filter_count, 2); /* regexes are never split at commas */
  CHECK_EQ_STR(c.app_id_args_filters[0], "-Dx=.*");
  CHECK_EQ_STR(c.app_id_args_filters[1], "a,b");
  CHECK_EQ_STR(c.pid_file, "/tmp/p.pid");
  CHECK_EQ_STR(c.log_file, "/tmp/p.log");
  CHECK_EQ_INT(c.log_max_bytes, 1024 * 1024);
  CHECK_EQ_INT(c.log_backups, 4);
  CHECK(c.verbose);
  CHECK_EQ_STR(c.output_dir, "/tmp/out");
  CHECK_EQ_STR(c.plugin_dir, "/tmp/plugins");
  CHECK_EQ_STR(c.isolation, "inline");
  CHECK_EQ_INT(c.output_format_count, 3);
  CHECK_EQ_STR(c.output_formats[2], "speedscope");
  CHECK(c.upload);
  CHECK_EQ_STR(c.server_host, "http://localhost:1");
  CHECK_EQ_STR(c.token, "tok");
  CHECK_EQ_STR(c.service_name, "svc");
  CHECK_EQ_STR(c.profiling_mode, "cpu");
  CHECK_EQ_INT(pp_config_check_run(&c, err), 0);
  pp_config_free(&c);

  /* long forms of the short flags, short forms with attached values */
  CHECK_EQ_INT(run(&c, err, "--profiling-frequency=7", "-d5", "--continuous", "--verbose",
                   "--output-dir", "/o", "--upload-results", "--flamegraph", NULL),
               0);
  CHECK_EQ_INT(c.frequency, 7);
  CHECK_EQ_INT(c.duration, 5);
  CHECK(c.continuous && c.verbose && c.upload && c.flamegraph);
  CHECK_EQ_STR(c.output_dir, "/o");
  pp_config_free(&c);

  /* clustered short flags: -cvf99 and -o/dir */
  CHECK_EQ_INT(run(&c, err, "-cvf99", "-o/dir", "-ud", "9", NULL), 0);
  CHECK(c.continuous && c.verbose && c.upload);
  CHECK_EQ_INT(c.frequency, 99);
  CHECK_EQ_INT(c.duration, 9);
  CHECK_EQ_STR(c.output_dir, "/dir");
  pp_config_free(&c);
}

static void test_precedence(void) {
  struct pp_cli cli;
  struct args a;
  struct pp_config c;
  char err[PP_MAX_ERR] = "";

  /* default < file < flag */
  CHECK_EQ_INT(parse(&cli, &a, err, "--config", fixture("good.yaml"), "-f", "500", "--pids", "7",
                     "--output-format", "html", "--isolation", "worker", NULL),
               0);
  CHECK_EQ_STR(cli.config_path, fixture("good.yaml"));
  CHECK_EQ_INT(pp_cli_configure(&cli, &c, err), 0);
  CHECK_EQ_INT(c.frequency, 500); /* flag over file (99) */
  CHECK_EQ_INT(c.duration, 30);   /* file over default (60) */
  CHECK_EQ_INT(c.log_backups, 3); /* file */
  CHECK_EQ_INT(c.pid_count, 1);   /* the flag's list replaces the file's */
  CHECK_EQ_INT(c.pids[0], 7);
  CHECK_EQ_INT(c.output_format_count, 1);
  CHECK_EQ_STR(c.output_formats[0], "html");
  CHECK_EQ_STR(c.isolation, "worker");
  CHECK_EQ_INT(c.worker_memory_limit_mb, 0); /* file */
  CHECK_EQ_INT(c.worker_timeout_s, 5);
  CHECK_EQ_INT(c.appid_cache_size, 1024);
  pp_config_free(&c);
  pp_cli_free(&cli);

  /* flags alone: defaults underneath (the default path may be absent) */
  CHECK_EQ_INT(parse(&cli, &a, err, "-d", "3", NULL), 0);
  CHECK(cli.config_path == NULL);
  CHECK_EQ_INT(pp_cli_configure(&cli, &c, err), 0);
  CHECK_EQ_INT(c.duration, 3);
  pp_config_free(&c);
  pp_cli_free(&cli);

  /* the /proc scan interval flag sets its key */
  CHECK_EQ_INT(parse(&cli, &a, err, "--proc-scan-interval-ms", "2500", NULL), 0);
  CHECK_EQ_INT(pp_cli_configure(&cli, &c, err), 0);
  CHECK_EQ_INT(c.proc_scan_interval_ms, 2500);
  pp_config_free(&c);
  pp_cli_free(&cli);

  /* an explicit --config that is missing is an error (exit 1) */
  CHECK_EQ_INT(parse(&cli, &a, err, "--config=/nonexistent.yaml", NULL), 0);
  CHECK_EQ_INT(pp_cli_configure(&cli, &c, err), PP_CLI_EXIT_CONFIG);
  CHECK_CONTAINS(err, "/nonexistent.yaml");
  pp_config_free(&c);
  pp_cli_free(&cli);

  /* a readable file with a mistake in it is an invalid value (exit 2) */
  CHECK_EQ_INT(parse(&cli, &a, err, "--config", fixture("bad_type.yaml"), NULL), 0);
  CHECK_EQ_INT(pp_cli_configure(&cli, &c, err), PP_CLI_EXIT_USAGE);
  CHECK_CONTAINS(err, "bad_type.yaml:4: profiling.frequency");
  pp_config_free(&c);
  pp_cli_free(&cli);

  /* a bad flag value over a good file */
  CHECK_EQ_INT(parse(&cli, &a, err, "--config", fixture("good.yaml"), "-f", "fast", NULL), 0);
  CHECK_EQ_INT(pp_cli_configure(&cli, &c, err), PP_CLI_EXIT_USAGE);
  CHECK_EQ_STR(err, "polyprof: -f: expected an integer, got 'fast'");
  pp_config_free(&c);
  pp_cli_free(&cli);

  /* --plugin-dir is known before anything is loaded, and applied */
  CHECK_EQ_INT(parse(&cli, &a, err, "--plugin-dir", "/pd", "--config", fixture("good.yaml"), NULL),
               0);
  CHECK_EQ_STR(cli.plugin_dir, "/pd");
  CHECK_EQ_INT(pp_cli_configure(&cli, &c, err), 0);
  CHECK_EQ_STR(c.plugin_dir, "/pd"); /* over the file's /opt/pp/plugins */
  pp_config_free(&c);
  pp_cli_free(&cli);
}

static void test_errors(void) {
  struct pp_cli cli;
  struct args a;
  struct pp_config c;
  char err[PP_MAX_ERR];
  static const struct {
    const char *arg1, *arg2, *message;
  } cases[] = {
      {"--profiling-frequncy", "5",
       "polyprof: unknown flag --profiling-frequncy (did you mean --profiling-frequency?)"},
      {"--output-formats", "col",
       "polyprof: unknown flag --output-formats (did you mean --output-format?)"},
      {"--foo", NULL, "polyprof: unknown flag --foo"},
      {"--verbsoe", NULL, "polyprof: unknown flag --verbsoe (did you mean --verbose?)"},
      {"-x", NULL, "polyprof: unknown flag -x"},
      {"-cx", NULL, "polyprof: unknown flag -x in -cx"},
      {"-f", NULL, "polyprof: -f needs a value (HZ)"},
      {"--output-dir", "--continuous", "polyprof: --output-dir needs a value (DIR)"},
      {"--continuous=yes", NULL, "polyprof: --continuous takes no value"},
      {"runn", NULL, "polyprof: unknown command 'runn' (did you mean 'run'?)"},
      {"check", "extra", "polyprof: unexpected argument 'extra' ('check' takes none)"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    err[0] = '\0';
    int rc = parse(&cli, &a, err, cases[i].arg1, cases[i].arg2, NULL);
    CHECK_EQ_INT(rc, PP_CLI_EXIT_USAGE);
    CHECK_EQ_STR(err, cases[i].message);
    pp_cli_free(&cli);
  }

  /* values are checked when applied, naming the flag as typed */
  static const struct {
    const char *arg1, *arg2, *message;
  } values[] = {
      {"-f", "0", "polyprof: -f: must be between 1 and 10000 (got 0)"},
      {"--profiling-frequency", "12abc",
       "polyprof: --profiling-frequency: expected an integer, got '12abc'"},
      {"-d", "-5", "polyprof: -d: must be between 1 and 86400 (got -5)"},
      {"--proc-scan-interval-ms", "50",
       "polyprof: --proc-scan-interval-ms: must be between 100 and 600000 (got 50)"},
      {"--pids", "1,x", "polyprof: --pids: invalid pid 'x'"},
      {"--output-format", "xml",
       "polyprof: --output-format: unknown format 'xml' (expected one of: col, html, pprof, "
       "speedscope, gecko, heatmap, table, collapsed)"},
      {"--isolation", "thread",
       "polyprof: --isolation: unknown isolation 'thread' (expected one of: worker, inline)"},
      {"--mode", "cpu,heap",
       "polyprof: --mode: unknown profile type 'heap' in 'cpu,heap' (expected cpu, wall, offcpu "
       "or alloc, comma-separated; or none)"},
      {"--log-rotate-backup-count", "many",
       "polyprof: --log-rotate-backup-count: expected an integer, got 'many'"},
      {"--log-rotate-max-size", "5 parsecs", "polyprof: --log-rotate-max-size: expected a size"},
      {"--app-id-args-filter", "[", "polyprof: --app-id-args-filter: invalid regular expression"},
  };
  for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
    err[0] = '\0';
    CHECK_EQ_INT(run(&c, err, values[i].arg1, values[i].arg2, NULL), PP_CLI_EXIT_USAGE);
    CHECK_CONTAINS(err, values[i].message);
    pp_config_free(&c);
  }
}

static void test_commands(void) {
  struct pp_cli cli;
  struct args a;
  char err[PP_MAX_ERR];

  CHECK_EQ_INT(parse(&cli, &a, err, NULL), 0);
  CHECK_EQ_INT(cli.command, PP_CMD_RUN);
  pp_cli_free(&cli);
  CHECK_EQ_INT(parse(&cli, &a, err, "-o", "/x", "plugins", "-v", NULL), 0);
  CHECK_EQ_INT(cli.command, PP_CMD_PLUGINS);
  CHECK_EQ_INT(cli.arg_count, 2);
  pp_cli_free(&cli);
  CHECK_EQ_INT(parse(&cli, &a, err, "check", NULL), 0);
  CHECK_EQ_INT(cli.command, PP_CMD_CHECK);
  pp_cli_free(&cli);
  CHECK_EQ_INT(parse(&cli, &a, err, "version", NULL), 0);
  CHECK_EQ_INT(cli.command, PP_CMD_VERSION);
  pp_cli_free(&cli);
  CHECK_EQ_INT(parse(&cli, &a, err, "help", NULL), 0);
  CHECK_EQ_INT(cli.command, PP_CMD_HELP);
  pp_cli_free(&cli);
  CHECK_EQ_INT(parse(&cli, &a, err, "upload-file", "a.col", "--", "-weird.col", NULL), 0);
  CHECK_EQ_INT(cli.command, PP_CMD_UPLOAD_FILE);
  CHECK_EQ_INT(cli.operand_count, 2);
  CHECK_EQ_STR(cli.operands[0], "a.col");
  CHECK_EQ_STR(cli.operands[1], "-weird.col");
  pp_cli_free(&cli);
  CHECK_EQ_STR(pp_cli_command_name(PP_CMD_CHECK), "check");
  CHECK_EQ_STR(pp_cli_command_name(PP_CMD_UPLOAD_FILE), "upload-file");

  /* help and version win, even over mistakes */
  CHECK_EQ_INT(parse(&cli, &a, err, "-h", NULL), 0);
  CHECK_EQ_INT(cli.command, PP_CMD_HELP);
  pp_cli_free(&cli);
  CHECK_EQ_INT(parse(&cli, &a, err, "--bogus", "--plugin-dir", "/p", "--help", NULL), 0);
  CHECK_EQ_INT(cli.command, PP_CMD_HELP);
  CHECK_EQ_STR(err, "");
  pp_cli_free(&cli);
  CHECK_EQ_INT(parse(&cli, &a, err, "--plugin-dir", "/p", "--help", "-f", "x", NULL), 0);
  CHECK_EQ_STR(cli.plugin_dir, "/p"); /* so --help can list that directory's plugins */
  pp_cli_free(&cli);
  CHECK_EQ_INT(parse(&cli, &a, err, "check", "--version", NULL), 0);
  CHECK_EQ_INT(cli.command, PP_CMD_VERSION);
  pp_cli_free(&cli);
}

static const char *const fake_modes[] = {"fast", "slow", NULL};
static const struct pp_option fake_opts[] = {
    {.key = "mode",
     .type = PP_OPT_ENUM,
     .default_value = "slow",
     .choices = fake_modes,
     .help = "how to sample"},
    {.key = "depth",
     .type = PP_OPT_INT,
     .default_value = "64",
     .min = 1,
     .max = 1024,
     .help = "max frames"},
    {.key = "verbose_stacks", .type = PP_OPT_BOOL, .default_value = "false", .help = "more detail"},
    {.key = "targets", .type = PP_OPT_LIST, .help = "which targets"},
    {.key = "proc_filter", .type = PP_OPT_STRING, .cli_flag = "fake-filter", .help = "filter"},
    {.key = "stack_walk", .type = PP_OPT_BOOL, .default_value = "true", .help = "walk stacks"},
    {.key = "memory_restart",
     .type = PP_OPT_BOOL,
     .default_value = "true",
     .cli_flag = "fake-no-memory-restart",
     .help = "restart on memory"},
};
static const struct pp_plugin fake = {
    PP_PLUGIN_HEADER,     .name = "fake",
    .version = "1.2",     .description = "a fake plugin",
    .options = fake_opts, .option_count = sizeof(fake_opts) / sizeof(fake_opts[0])};

static const char *bound(const struct pp_plugin_config *pc, const char *key) {
  for (size_t i = 0; pc && i < pc->option_count; i++)
    if (!strcmp(pc->options[i].opt->key, key)) return pc->options[i].scalar;
  return NULL;
}

static void test_plugin_flags(void) {
  struct pp_cli cli;
  struct args a;
  struct pp_config c;
  char err[PP_MAX_ERR] = "";
  const char *loaded[] = {"fake", NULL};

  CHECK_EQ_INT(parse(&cli, &a, err, "--fake-mode", "fast", "--fake-depth=9",
                     "--fake-verbose-stacks", "-o", "/x", "--fake-filter", "php-fpm",
                     "--fake-targets", "a,b", "--php-mode", "phpspy", "--no-dotnet", "check", NULL),
               0);
  CHECK_EQ_INT(cli.command, PP_CMD_CHECK); /* "check" was not taken as a value */
  pp_config_defaults(&c);
  CHECK_EQ_INT(pp_cli_apply(&cli, &c, err), 0);
  CHECK_EQ_INT(c.flag_count, 7);
  CHECK_EQ_STR(c.output_dir, "/x");
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), 0);
  const struct pp_plugin_config *pc = pp_config_plugin(&c, "fake");
  CHECK(pc && pc->enabled);
  CHECK_EQ_STR(pc->mode, "fast");
  CHECK_EQ_STR(bound(pc, "depth"), "9");
  CHECK_EQ_STR(bound(pc, "verbose_stacks"), "true");
  CHECK_EQ_STR(bound(pc, "proc_filter"), "php-fpm");
  CHECK_EQ_INT(pc->options[3].item_count, 2);
  /* php and dotnet are known runtimes that are not installed: fine */
  CHECK_EQ_INT(pp_config_check_orphans(&c, loaded, err), 0);
  pp_config_free(&c);
  pp_cli_free(&cli);

  /* --no-<name> and a mode over the file */
  CHECK_EQ_INT(parse(&cli, &a, err, "--config", fixture("plugin_fake.yaml"), "--no-fake", NULL), 0);
  CHECK_EQ_INT(pp_cli_configure(&cli, &c, err), 0);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), 0);
  CHECK(!pp_config_plugin(&c, "fake")->enabled);
  CHECK_EQ_STR(pp_config_plugin(&c, "fake")->disabled_by, "--no-fake");
  pp_config_free(&c);
  pp_cli_free(&cli);

  /* an unknown plugin-looking flag survives parsing and fails after binding */
  CHECK_EQ_INT(parse(&cli, &a, err, "--fake-dpeth", "3", "--fak-mode", "fast", NULL), 0);
  pp_config_defaults(&c);
  CHECK_EQ_INT(pp_cli_apply(&cli, &c, err), 0);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), 0);
  CHECK_EQ_INT(pp_config_check_orphans(&c, loaded, err), 2);
  CHECK_EQ_STR(err, "polyprof: unknown flag --fake-dpeth (did you mean --fake-depth?)");
  pp_config_free(&c);
  pp_cli_free(&cli);

  /* a bool plugin flag followed by a stray word */
  CHECK_EQ_INT(parse(&cli, &a, err, "--fake-verbose-stacks", "yes-please", NULL), 0);
  pp_config_defaults(&c);
  CHECK_EQ_INT(pp_cli_apply(&cli, &c, err), 0);
  CHECK_EQ_INT(pp_config_bind_plugin(&c, &fake, err), -1);
  CHECK_EQ_STR(err, "polyprof: --fake-verbose-stacks: takes no value (unexpected 'yes-please')");
  pp_config_free(&c);
  pp_cli_free(&cli);
}

static void test_help(void) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  const struct pp_plugin *plugins[] = {&fake};
  pp_cli_help(f, plugins, 1);
  fclose(f);
  static const char *const needles[] = {"Usage: polyprof",
                                        "Commands:",
                                        "Profiling:",
                                        "Output:",
                                        "Processes:",
                                        "Enrichment:",
                                        "Upload:",
                                        "Agent & logging:",
                                        "Plugins:",
                                        "-f, --profiling-frequency HZ",
                                        "--no-flamegraph",
                                        "--app-id-args-filter REGEX",
                                        "--<plugin>-mode MODE",
                                        "--no-<plugin>",
                                        "fake 1.2: a fake plugin",
                                        "--fake-mode MODE",
                                        "fast, slow, disabled (default slow)",
                                        "--no-fake",
                                        "--fake-depth N",
                                        "max frames (1-1024) [default 64]",
                                        "--fake-verbose-stacks ",
                                        "--fake-targets ITEM[,ITEM]",
                                        "--fake-filter VALUE"};
  for (size_t i = 0; i < sizeof(needles) / sizeof(needles[0]); i++)
    CHECK_CONTAINS(text, needles[i]);
  /* --help lists the groups in a fixed order, the most used first */
  CHECK(strstr(text, "Profiling:") < strstr(text, "Output:"));
  CHECK(strstr(text, "Output:") < strstr(text, "Processes:"));
  CHECK(strstr(text, "Upload:") < strstr(text, "Agent & logging:"));
  CHECK(strstr(text, "Agent & logging:") < strstr(text, "Plugins:"));
  free(text);

  text = NULL;
  f = open_memstream(&text, &len);
  pp_cli_help(f, NULL, 0);
  fclose(f);
  CHECK_CONTAINS(text, "No plugins loaded");
  free(text);

  CHECK_EQ_STR(pp_cli_suggest_flag("--servr-host", NULL, 0), "--server-host");
  const char *extra[] = {"--fake-depth"};
  CHECK_EQ_STR(pp_cli_suggest_flag("--fake-dept", extra, 1), "--fake-depth");
  CHECK(pp_cli_suggest_flag("--zzzzzzzzzz", NULL, 0) == NULL);
}

/* The token: taken out of the environment, refused over plain http://
 * without --insecure-http, refused from a token file others can read. */
static void test_secrets(void) {
  struct pp_cli cli;
  struct args a;
  struct pp_config c;
  char err[PP_MAX_ERR] = "";
  char dir[] = "/tmp/pp-cli-secrets-XXXXXX", tf[128], cfgf[128];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(cfgf, sizeof(cfgf), "%s/empty.yaml", dir);
  FILE *f = fopen(cfgf, "w");
  CHECK(f && fputs("{}\n", f) >= 0 && fclose(f) == 0);

  /* POLYPROF_TOKEN is used, then gone from the environment, and still
   * there for a reload that rebuilds the configuration */
  setenv("POLYPROF_TOKEN", "env-tok", 1);
  CHECK_EQ_INT(parse(&cli, &a, err, "--config", cfgf, NULL), 0);
  CHECK_EQ_INT(pp_cli_configure(&cli, &c, err), 0);
  CHECK_EQ_STR(c.token, "env-tok");
  CHECK(getenv("POLYPROF_TOKEN") == NULL);
  pp_config_free(&c);
  CHECK_EQ_INT(pp_cli_configure(&cli, &c, err), 0);
  CHECK_EQ_STR(c.token, "env-tok");
  pp_config_free(&c);
  pp_cli_free(&cli);

  /* plain http with a token: refused unless asked for */
  CHECK_EQ_INT(parse(&cli, &a, err, "--config", cfgf, "-u", "--service-name", "s", "--server-host",
                     "http://studio.example:8080", NULL),
               0);
  CHECK_EQ_INT(pp_cli_configure(&cli, &c, err), PP_CLI_EXIT_USAGE);
  CHECK_CONTAINS(err, "refusing to send the API token in clear text to http://studio.example:8080");
  CHECK_CONTAINS(err, "--insecure-http");
  pp_config_free(&c);
  pp_cli_free(&cli);
  CHECK_EQ_INT(parse(&cli, &a, err, "--config", cfgf, "-u", "--service-name", "s", "--server-host",
                     "https://studio.example", "--api-server", "HTTP://logs.example", NULL),
               0);
  CHECK_EQ_INT(pp_cli_configure(&cli, &c, err), PP_CLI_EXIT_USAGE);
  CHECK_CONTAINS(err, "HTTP://logs.example");
  pp_config_free(&c);
  pp_cli_free(&cli);
  CHECK_EQ_INT(parse(&cli, &a, err, "--config", cfgf, "-u", "--service-name", "s", "--server-host",
                     "http://studio.example:8080", "--insecure-http", NULL),
               0);
  CHECK_EQ_INT(pp_cli_configure(&cli, &c, err), 0);
  CHECK(c.insecure_http);
  pp_config_free(&c);
  pp_cli_free(&cli);
  /* without upload the token goes nowhere: nothing to refuse */
  CHECK_EQ_INT(parse(&cli, &a, err, "--config", cfgf, "--server-host", "http://s", NULL), 0);
  CHECK_EQ_INT(pp_cli_configure(&cli, &c, err), 0);
  pp_config_free(&c);
  pp_cli_free(&cli);
  unsetenv("POLYPROF_TOKEN");

  /* --token-file: readable by others is refused, private is read */
  snprintf(tf, sizeof(tf), "%s/token", dir);
  f = fopen(tf, "w");
  CHECK(f && fputs("  file-tok \n", f) >= 0 && fclose(f) == 0);
  CHECK(chmod(tf, 0644) == 0);
  CHECK_EQ_INT(parse(&cli, &a, err, "--config", cfgf, "--token-file", tf, NULL), 0);
  CHECK_EQ_INT(pp_cli_configure(&cli, &c, err), PP_CLI_EXIT_USAGE);
  CHECK_CONTAINS(err, tf);
  CHECK_CONTAINS(err, "readable by everyone");
  pp_config_free(&c);
  CHECK(chmod(tf, 0600) == 0);
  CHECK_EQ_INT(pp_cli_configure(&cli, &c, err), 0);
  CHECK_EQ_STR(c.token, "file-tok");
  pp_config_free(&c);
  pp_cli_free(&cli);
  unlink(tf);
  unlink(cfgf);
  rmdir(dir);
}

/* gProfiler flags without an equivalent: parsed with their values, kept from
 * the plugins, and never an error; mapped ones and GPROFILER_<FLAG> set keys. */
static void test_gprofiler_flags(void) {
  struct pp_cli cli;
  struct args a;
  struct pp_config c;
  char err[PP_MAX_ERR] = "";
  const char *loaded[] = {"perf", NULL};

  CHECK_EQ_INT(parse(&cli, &a, err, "--no-java-async-profiler-buildids", "--min-duration", "5",
                     "--databricks-job-name-as-service-name", "--java-safemode", "check", NULL),
               0);
  CHECK_EQ_INT(cli.command, PP_CMD_CHECK); /* an optional value is never a command */
  pp_config_defaults(&c);
  CHECK_EQ_INT(pp_cli_apply(&cli, &c, err), 0);
  CHECK_EQ_INT(c.flag_count, 0); /* nothing left for a plugin to refuse */
  CHECK_EQ_INT(pp_config_check_orphans(&c, loaded, err), 0);
  pp_config_free(&c);
  pp_cli_free(&cli);

  /* the optional value, attached or not, is the flag's, not an operand */
  CHECK_EQ_INT(run(&c, err, "--java-safemode", "all", "--java-safemode=hserr", NULL), 0);
  pp_config_free(&c);
  CHECK_EQ_INT(run(&c, err, "--min-duration", NULL), PP_CLI_EXIT_USAGE);
  CHECK_EQ_STR(err, "polyprof: --min-duration needs a value");
  pp_config_free(&c);
  CHECK_EQ_INT(run(&c, err, "--insert-dso-name=yes", NULL), PP_CLI_EXIT_USAGE);
  CHECK_EQ_STR(err, "polyprof: --insert-dso-name takes no value");
  pp_config_free(&c);

  CHECK_EQ_INT(run(&c, err, "--no-proc-events", "--profile-spawned-processes", NULL), 0);
  CHECK(c.proc_events);
  pp_config_free(&c);

  /* GPROFILER_<FLAG> between the file and the flags */
  setenv("GPROFILER_PROFILING_FREQUENCY", "7", 1);
  setenv("GPROFILER_SERVICE_NAME", "svc-env", 1);
  setenv("GPROFILER_CONTINUOUS", "false", 1);
  CHECK_EQ_INT(parse(&cli, &a, err, "--config", fixture("empty.yaml"), NULL), 0);
  CHECK_EQ_INT(pp_cli_configure(&cli, &c, err), 0);
  CHECK_EQ_INT(c.frequency, 7);
  CHECK_EQ_STR(c.service_name, "svc-env");
  CHECK(!c.continuous); /* "false" leaves a bare flag off */
  pp_config_free(&c);
  pp_cli_free(&cli);
  CHECK_EQ_INT(parse(&cli, &a, err, "--config", fixture("empty.yaml"), "-f", "9", NULL), 0);
  CHECK_EQ_INT(pp_cli_configure(&cli, &c, err), 0);
  CHECK_EQ_INT(c.frequency, 9); /* the flag wins */
  pp_config_free(&c);
  pp_cli_free(&cli);
  setenv("GPROFILER_PROFILING_FREQUENCY", "0", 1);
  CHECK_EQ_INT(parse(&cli, &a, err, "--config", fixture("empty.yaml"), NULL), 0);
  CHECK_EQ_INT(pp_cli_configure(&cli, &c, err), PP_CLI_EXIT_USAGE); /* a bad value is named */
  CHECK(strstr(err, "GPROFILER_PROFILING_FREQUENCY") != NULL);
  pp_config_free(&c);
  pp_cli_free(&cli);
  unsetenv("GPROFILER_PROFILING_FREQUENCY");
  unsetenv("GPROFILER_SERVICE_NAME");
  unsetenv("GPROFILER_CONTINUOUS");
}

int main(void) {
  test_every_flag();
  test_precedence();
  test_errors();
  test_commands();
  test_plugin_flags();
  test_help();
  test_secrets();
  test_gprofiler_flags();
  return pp_test_finish("test_cli");
}
