/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Command line: gProfiler's flag names, a subcommand, and plugin flags kept
 * for later (see cli.h for the two phases).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "cli.h"
#include "cli_gprofiler.h"
#include "cloud_env.h"
#include "log.h"
#include "rootless.h"

#define FLAG_MAX 128

enum group {
  G_PROFILING,
  G_PROGRAM,
  G_OUTPUT,
  G_PROCESSES,
  G_ENRICHMENT,
  G_UPLOAD,
  G_AGENT,
  G_PLUGINS,
  G_N
};
static const char *const group_names[G_N] = {
    "Profiling",       "One program (run -- CMD, attach PID, dump PID)",
    "Output",          "Processes",
    "Enrichment",      "Upload",
    "Agent & logging", "Plugins"};

enum special { SP_NONE, SP_CONFIG, SP_PLUGIN_DIR, SP_HELP, SP_VERSION };

#define CF_LIST 1u      /* repeatable; occurrences add up */
#define CF_ANY_VALUE 2u /* the next word is the value even if it starts with '-' */
/* gProfiler named it after a runtime (--java-...) though the core does it:
 * its first word still leaves that runtime's other flags to the plugin */
#define CF_PLUGIN_WORD 4u

struct flag_spec {
  char short_name;     /* 0 if none */
  const char *name;    /* "--profiling-frequency" */
  const char *key;     /* config key it sets, NULL for specials */
  const char *fixed;   /* takes no value: the value it sets */
  const char *metavar; /* takes a value: its name in --help */
  unsigned flags;
  enum special special;
  enum group group;
  const char *help;
};

/* Order within a group is the order of --help. */
static const struct flag_spec specs[] = {
    {'f', "--profiling-frequency", "profiling.frequency", NULL, "HZ", 0, SP_NONE, G_PROFILING,
     "samples per second (1-10000, default 11)"},
    {'d', "--profiling-duration", "profiling.duration", NULL, "SECONDS", 0, SP_NONE, G_PROFILING,
     "length of one profiling session (1-86400, default 60)"},
    {'c', "--continuous", "profiling.continuous", "true", NULL, 0, SP_NONE, G_PROFILING,
     "run sessions forever instead of once"},
    {0, "--proc-scan-interval-ms", "profiling.proc_scan_interval_ms", NULL, "MS", 0, SP_NONE,
     G_PROFILING, "how often /proc is scanned for new processes (100-600000, default 1000)"},
    {0, "--no-proc-events", "profiling.proc_events", "false", NULL, 0, SP_NONE, G_PROFILING,
     "list /proc every scan interval instead of following the kernel's process events"},
    {0, "--profile-spawned-processes", "profiling.proc_events", "true", NULL, 0, SP_NONE,
     G_PROFILING, "follow new processes through the kernel's process events (default)"},
    {0, "--proc-rescan-interval-s", "profiling.proc_rescan_interval_s", NULL, "S", 0, SP_NONE,
     G_PROFILING, "with process events, list /proc this often as well (1-86400, default 30)"},
    {0, "--mode", "profiling.mode", NULL, "MODE", 0, SP_NONE, G_PROFILING,
     "profile types: cpu, wall, offcpu, alloc, comma-separated (default cpu; docs/modes.md)"},
    {0, "--alloc-interval", "profiling.alloc_interval", NULL, "BYTES", 0, SP_NONE, G_PROFILING,
     "--mode alloc: bytes between allocation samples of a thread (2mb, 512k; default 512 KiB)"},
    /* read by the one-program commands (pp_cli_flag_value), not config keys */
    {'i', "--interval", NULL, NULL, "MICROSECONDS", 0, SP_NONE, G_PROGRAM,
     "time between samples (100-1000000; -f in Hz works too; default: per runtime, 100 = 10 kHz "
     "where its plugin sustains it)"},
    {0, "--format", NULL, NULL, "FORMAT", 0, SP_NONE, G_PROGRAM,
     "what is printed at the end: table (default), collapsed, gecko, heatmap, html, pprof, "
     "speedscope or col"},
    {0, "--source-root", NULL, NULL, "DIR", 0, SP_NONE, G_PROGRAM,
     "heatmap: where relative source paths are read from (default: the current directory)"},
    {0, "--output", NULL, NULL, "FILE", 0, SP_NONE, G_PROGRAM,
     "write it to FILE instead of stdout (replaced whole at the end)"},
    {0, "--sort", NULL, NULL, "KEY", 0, SP_NONE, G_PROGRAM, "table: self (default), total or name"},
    {0, "--limit", NULL, NULL, "N", 0, SP_NONE, G_PROGRAM,
     "table: the first N functions (default 30, 0: all)"},
    {0, "--no-subprocesses", NULL, "true", NULL, 0, SP_NONE, G_PROGRAM,
     "run: profile the program only, not the processes it starts"},
    {0, "--subprocesses", NULL, "true", NULL, 0, SP_NONE, G_PROGRAM,
     "attach: profile the processes it starts too"},
    {0, "--json", NULL, "true", NULL, 0, SP_NONE, G_PROGRAM, "dump: JSON instead of text"},
    {'o', "--output-dir", "output.dir", NULL, "DIR", 0, SP_NONE, G_OUTPUT,
     "write profiles to DIR (no local output by default)"},
    {0, "--output-format", "output.formats", NULL, "FMT[,FMT]", CF_LIST, SP_NONE, G_OUTPUT,
     "col, html, pprof, speedscope (default col,html; repeatable)"},
    {0, "--rotating-output", "output.rotating", "true", NULL, 0, SP_NONE, G_OUTPUT,
     "keep only the last profile in DIR"},
    {0, "--flamegraph", "output.flamegraph", "true", NULL, 0, SP_NONE, G_OUTPUT,
     "write the HTML flame graph (default)"},
    {0, "--no-flamegraph", "output.flamegraph", "false", NULL, 0, SP_NONE, G_OUTPUT,
     "do not write the HTML flame graph"},
    {0, "--debug-plugin-totals", "output.debug_plugin_totals", "true", NULL, 0, SP_NONE, G_OUTPUT,
     "also write each plugin's unmerged per-pid totals (<stem>.plugins.json)"},
    {0, "--pids", "profiling.pids", NULL, "PID[,PID]", CF_LIST, SP_NONE, G_PROCESSES,
     "profile only these processes (repeatable; default: all)"},
    {0, "--disable-application-identifiers", "enrichment.application_identifiers", "false", NULL, 0,
     SP_NONE, G_ENRICHMENT, "no 'appid:' frames"},
    {0, "--app-id-args-filter", "enrichment.app_id_args_filters", NULL, "REGEX",
     CF_LIST | CF_ANY_VALUE, SP_NONE, G_ENRICHMENT,
     "JVM arguments matching REGEX join the Java appid (repeatable)"},
    {0, "--java-collect-spark-app-name-as-appid", "enrichment.java_spark_appid", "true", NULL,
     CF_PLUGIN_WORD, SP_NONE, G_ENRICHMENT,
     "Spark executors' Java appid ends with \", spark: <spark.app.name>\""},
    {0, "--containers", "enrichment.containers", NULL, "SELECTOR[,SELECTOR]", 0, SP_NONE,
     G_ENRICHMENT,
     "profile only these containers' processes: name globs, pod=GLOB, namespace=GLOB, "
     "container=GLOB"},
    {0, "--k8s-labels", "enrichment.k8s_labels", NULL, "KEY[,KEY]", 0, SP_NONE, G_ENRICHMENT,
     "pod labels to attach to profiles as k8s.pod.label.<KEY> (default none)"},
    {0, "--disable-container-names", "enrichment.container_names", "false", NULL, 0, SP_NONE,
     G_ENRICHMENT, "do not look up container names"},
    {0, "--disable-application-metadata", "enrichment.application_metadata", "false", NULL, 0,
     SP_NONE, G_ENRICHMENT, "no per-application metadata"},
    {0, "--disable-metadata-collection", "enrichment.metadata_collection", "false", NULL, 0,
     SP_NONE, G_ENRICHMENT, "minimal system metadata only"},
    {0, "--disable-metrics-collection", "enrichment.metrics_collection", "false", NULL, 0, SP_NONE,
     G_ENRICHMENT, "no CPU/memory metrics"},
    {'u', "--upload-results", "upload.enabled", "true", NULL, 0, SP_NONE, G_UPLOAD,
     "upload profiles (needs --token and --service-name)"},
    {0, "--server-host", "upload.server_host", NULL, "URL", 0, SP_NONE, G_UPLOAD,
     "upload server (default https://profiler.granulate.io)"},
    {0, "--token", "upload.token", NULL, "TOKEN", 0, SP_NONE, G_UPLOAD,
     "API token (visible in ps: prefer --token-file)"},
    {0, "--service-name", "upload.service_name", NULL, "NAME", 0, SP_NONE, G_UPLOAD,
     "service the profiles belong to"},
    {0, "--token-file", "upload.token_file", NULL, "FILE", 0, SP_NONE, G_UPLOAD,
     "read the API token from FILE (keeps it out of ps; env POLYPROF_TOKEN works too)"},
    {0, "--server-ca", "upload.server_ca", NULL, "PEM", 0, SP_NONE, G_UPLOAD,
     "CA bundle that signs the server's certificate (self-hosted servers)"},
    {0, "--insecure-skip-verify", "upload.tls_verify", "false", NULL, 0, SP_NONE, G_UPLOAD,
     "do not verify the server's TLS certificate (insecure)"},
    {0, "--no-verify", "upload.tls_verify", "false", NULL, 0, SP_NONE, G_UPLOAD,
     "same as --insecure-skip-verify (gProfiler's name)"},
    {0, "--insecure-http", "upload.insecure_http", "true", NULL, 0, SP_NONE, G_UPLOAD,
     "allow sending the token to a plain http:// server (trusted networks only)"},
    {0, "--server-upload-timeout", "upload.timeout_s", NULL, "SECONDS", 0, SP_NONE, G_UPLOAD,
     "timeout of one profile upload (default 120)"},
    {0, "--api-server", "upload.api_server", NULL, "URL", 0, SP_NONE, G_UPLOAD,
     "log shipping server (default https://api.granulate.io)"},
    {0, "--glogger-server", "upload.api_server", NULL, "URL", 0, SP_NONE, G_UPLOAD,
     "same as --api-server"},
    {0, "--dont-send-logs", "upload.send_logs", "false", NULL, 0, SP_NONE, G_UPLOAD,
     "do not ship the agent's log to the server (env GPROFILER_DONT_SEND_LOGS=1 too)"},
    {0, "--spool-dir", "upload.spool_dir", NULL, "DIR", 0, SP_NONE, G_UPLOAD,
     "keep profiles that failed to upload here (default /var/lib/polyprof/spool)"},
    {0, "--spool-max-size", "upload.spool_max_bytes", NULL, "BYTES", 0, SP_NONE, G_UPLOAD,
     "cap of the spool; oldest dropped first (default 64MiB)"},
    {0, "--databricks-job-name-as-service-name", "upload.databricks_service_name", "true", NULL, 0,
     SP_NONE, G_UPLOAD,
     "service name from the Databricks job or cluster (waits up to 120 s for its Spark UI)"},
    {0, "--pyroscope-url", "upload.pyroscope_url", NULL, "URL", 0, SP_NONE, G_UPLOAD,
     "also send each session to this Pyroscope server's /ingest"},
    {0, "--otlp-endpoint", "upload.otlp_endpoint", NULL, "URL", 0, SP_NONE, G_UPLOAD,
     "also export each session as OTLP profiles to this collector (http://host:4318)"},
    {0, "--file-path", "upload.file_path", NULL, "FILE", 0, SP_NONE, G_UPLOAD,
     "upload-file: the .col file to upload"},
    {0, "--to", "output.convert_to", NULL, "FORMAT", 0, SP_NONE, G_OUTPUT,
     "convert: output format (html, pprof, speedscope, col)"},
    {0, "--config", NULL, NULL, "FILE", 0, SP_CONFIG, G_AGENT,
     "configuration file (default " PP_DEFAULT_CONFIG_PATH " if present)"},
    {0, "--pid-file", "agent.pid_file", NULL, "FILE", 0, SP_NONE, G_AGENT,
     "where to write the agent's pid (default /run/polyprof.pid)"},
    {0, "--rootless", "agent.rootless", "true", NULL, 0, SP_NONE, G_AGENT,
     "run as an ordinary user, profiling only your own processes given with --pids"},
    {0, "--disable-pidns-check", "agent.pidns_check", "false", NULL, 0, SP_NONE, G_AGENT,
     "run even outside the init pid namespace"},
    {0, "--log-file", "logging.file", NULL, "FILE", 0, SP_NONE, G_AGENT,
     "log file (default /var/log/polyprof/polyprof.log, \"\" for none)"},
    {0, "--log-rotate-max-size", "logging.max_bytes", NULL, "BYTES", 0, SP_NONE, G_AGENT,
     "rotate the log at this size (default 5242880; 5MiB works too)"},
    {0, "--log-rotate-backup-count", "logging.backups", NULL, "N", 0, SP_NONE, G_AGENT,
     "rotated logs to keep (0-100, default 1)"},
    {'v', "--verbose", "logging.verbose", "true", NULL, 0, SP_NONE, G_AGENT,
     "debug messages on stderr"},
    {'h', "--help", NULL, "true", NULL, 0, SP_HELP, G_AGENT, "show this help"},
    {0, "--version", NULL, "true", NULL, 0, SP_VERSION, G_AGENT, "print the version"},
    {0, "--plugin-dir", "plugins.dir", NULL, "DIR", 0, SP_PLUGIN_DIR, G_PLUGINS,
     "where the plugins are (default " POLYPROF_PLUGIN_DIR ")"},
    {0, "--isolation", "plugins.isolation", NULL, "worker|inline", 0, SP_NONE, G_PLUGINS,
     "run plugins in worker processes (default) or inside the agent"},
};
#define NSPECS (sizeof(specs) / sizeof(specs[0]))

static const struct {
  const char *name;
  enum pp_command cmd;
  bool operands;
  const char *help;
} commands[] = {
    {"run", PP_CMD_RUN, true, "profile the system (default); run -- CMD: profile one program"},
    {"attach", PP_CMD_ATTACH, true, "attach PID: profile a running program for -d or until Ctrl-C"},
    {"dump", PP_CMD_DUMP, true, "dump PID: print every thread's current stack once"},
    {"top", PP_CMD_TOP, true, "top [PID...]: live view of where time goes, every second"},
    {"plugins", PP_CMD_PLUGINS, false, "list the plugins found and their options"},
    {"check", PP_CMD_CHECK, false, "check the configuration and privileges, then exit"},
    {"help", PP_CMD_HELP, false, "show this help"},
    {"version", PP_CMD_VERSION, false, "print the version"},
    {"upload-file", PP_CMD_UPLOAD_FILE, true, "upload an existing .col (--file-path FILE)"},
    {"convert", PP_CMD_CONVERT, true, "convert IN.col --to html|pprof|speedscope -o OUT"},
    {"diff", PP_CMD_DIFF, true,
     "diff BASE NEW [-o diff.html] [--format table]: differential flame graph (.col or dirs)"},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

struct pp_cli_arg {
  const struct flag_spec *spec;              /* NULL: not a core flag, kept for the plugins */
  const struct pp_gprofiler_flag *gprofiler; /* accepted, ignored, warned about */
  char *flag;                                /* as typed, without "=value" */
  const char *value;                         /* into argv; NULL if none */
  bool attached;                             /* --flag=value */
};

const char *pp_cli_command_name(enum pp_command cmd) {
  for (size_t i = 0; i < NCOMMANDS; i++)
    if (commands[i].cmd == cmd) return commands[i].name;
  return "?";
}

const char *pp_cli_flag_value(const struct pp_cli *cli, const char *flag) {
  const char *v = NULL;
  for (size_t i = 0; i < cli->arg_count; i++) {
    const struct pp_cli_arg *a = &cli->args[i];
    bool same = a->spec ? !strcmp(a->spec->name, flag) : !strcmp(a->flag, flag);
    if (same) v = a->spec && a->spec->fixed ? a->spec->fixed : (a->value ? a->value : "");
  }
  return v;
}

const char *pp_cli_suggest_flag(const char *flag, const char *const *extra, size_t n_extra) {
  const char **cands = malloc((NSPECS + n_extra + 1) * sizeof(*cands));
  if (!cands) return NULL;
  size_t n = 0;
  for (size_t i = 0; i < NSPECS; i++)
    if (strlen(specs[i].name) > 4) /* "--to" is two edits from any short typo */
      cands[n++] = specs[i].name;
  for (size_t i = 0; i < n_extra; i++)
    cands[n++] = extra[i];
  const char *s = pp_config_suggest(flag, cands, n);
  free(cands);
  return s;
}

static const struct flag_spec *find_long(const char *flag) {
  for (size_t i = 0; i < NSPECS; i++)
    if (strcmp(specs[i].name, flag) == 0) return &specs[i];
  return NULL;
}

static const struct flag_spec *find_short(char c) {
  for (size_t i = 0; i < NSPECS; i++)
    if (specs[i].short_name == c) return &specs[i];
  return NULL;
}

static bool is_command(const char *s) {
  for (size_t i = 0; i < NCOMMANDS; i++)
    if (strcmp(commands[i].name, s) == 0) return true;
  return false;
}

/* A word that is a flag rather than a value; "-5" is a (bad) value. */
static bool looks_like_flag(const char *s) {
  return s[0] == '-' && s[1] && !(s[1] >= '0' && s[1] <= '9');
}

/* Could a plugin own this flag? --no-<x>, or <word>-<rest> where <word> is
 * not the first word of a core flag: --profiling-frequncy is a typo to
 * report now, --java-line-numbers waits for the java plugin. */
static bool plugin_ish(const char *flag) {
  const char *name = flag + 2;
  if (strncmp(name, "no-", 3) == 0) return name[3] != '\0';
  size_t word = strcspn(name, "-");
  if (name[word] != '-' || word == 0 || name[word + 1] == '\0') return false;
  for (size_t i = 0; i < word; i++)
    if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
          name[i] == '_'))
      return false;
  for (size_t i = 0; i < NSPECS; i++) {
    const char *core = specs[i].name + 2;
    if (strncmp(core, "no-", 3) == 0 || (specs[i].flags & CF_PLUGIN_WORD)) continue;
    if (strncmp(core, name, word) == 0 && (core[word] == '-' || core[word] == '\0')) return false;
  }
  return true;
}

static void add_arg(struct pp_cli *cli, const struct flag_spec *spec, const char *flag,
                    const char *value, bool attached) {
  struct pp_cli_arg *a = realloc(cli->args, (cli->arg_count + 1) * sizeof(*a));
  if (!a) abort();
  cli->args = a;
  a = &cli->args[cli->arg_count++];
  a->spec = spec;
  a->gprofiler = NULL;
  a->flag = strdup(flag);
  if (!a->flag) abort();
  a->value = value;
  a->attached = attached;
  if (spec && spec->special == SP_CONFIG) cli->config_path = value;
  if (spec && spec->special == SP_PLUGIN_DIR) cli->plugin_dir = value;
}

/* The value of a flag that needs one: attached, or the next word. */
static int take_value(const struct flag_spec *spec, const char *flag, const char *attached,
                      int argc, char **argv, int *i, const char **value, char err[PP_MAX_ERR]) {
  if (attached) {
    *value = attached;
    return 0;
  }
  /* JVM argument filters start with "-D" */
  if (*i + 1 >= argc || (looks_like_flag(argv[*i + 1]) && !(spec->flags & CF_ANY_VALUE))) {
    snprintf(err, PP_MAX_ERR, "polyprof: %s needs a value (%s)", flag, spec->metavar);
    return PP_CLI_EXIT_USAGE;
  }
  *value = argv[++*i];
  return 0;
}

static int parse_long(struct pp_cli *cli, int argc, char **argv, int *i, char err[PP_MAX_ERR]) {
  const char *arg = argv[*i];
  const char *eq = strchr(arg, '=');
  size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
  char flag[FLAG_MAX];
  if (len >= sizeof(flag)) {
    snprintf(err, PP_MAX_ERR, "polyprof: unknown flag %.60s...", arg);
    return PP_CLI_EXIT_USAGE;
  }
  memcpy(flag, arg, len);
  flag[len] = '\0';
  const char *attached = eq ? eq + 1 : NULL;

  const struct flag_spec *spec = find_long(flag);
  if (spec) {
    const char *value = NULL;
    if (spec->fixed && attached) {
      snprintf(err, PP_MAX_ERR, "polyprof: %s takes no value", flag);
      return PP_CLI_EXIT_USAGE;
    }
    if (!spec->fixed && take_value(spec, flag, attached, argc, argv, i, &value, err))
      return PP_CLI_EXIT_USAGE;
    add_arg(cli, spec, flag, value, attached != NULL);
    return 0;
  }
  const struct pp_gprofiler_flag *gp = pp_gprofiler_flag_find(flag);
  if (gp) {
    const char *value = attached;
    if (gp->value == PP_GP_BARE && attached) {
      snprintf(err, PP_MAX_ERR, "polyprof: %s takes no value", flag);
      return PP_CLI_EXIT_USAGE;
    }
    bool next_is_value = *i + 1 < argc && !looks_like_flag(argv[*i + 1]);
    if (!value && gp->value == PP_GP_VALUE) {
      if (!next_is_value) {
        snprintf(err, PP_MAX_ERR, "polyprof: %s needs a value", flag);
        return PP_CLI_EXIT_USAGE;
      }
      value = argv[++*i];
    }
    if (!value && gp->value == PP_GP_OPTIONAL && next_is_value && !is_command(argv[*i + 1]))
      value = argv[++*i];
    add_arg(cli, NULL, flag, value, attached != NULL);
    cli->args[cli->arg_count - 1].gprofiler = gp;
    return 0;
  }
  if (plugin_ish(flag)) {
    /* Whether it takes a value is up to the plugin: take the next word
     * unless it is a flag or a command, and let binding check. */
    const char *value = attached;
    if (!value && *i + 1 < argc && !looks_like_flag(argv[*i + 1]) && !is_command(argv[*i + 1]))
      value = argv[++*i];
    add_arg(cli, NULL, flag, value, attached != NULL);
    return 0;
  }
  const char *s = pp_cli_suggest_flag(flag, NULL, 0);
  if (s)
    snprintf(err, PP_MAX_ERR, "polyprof: unknown flag %s (did you mean %s?)", flag, s);
  else
    snprintf(err, PP_MAX_ERR, "polyprof: unknown flag %s", flag);
  return PP_CLI_EXIT_USAGE;
}

/* -cv, -f99, -f 99, -o/tmp */
static int parse_short(struct pp_cli *cli, int argc, char **argv, int *i, char err[PP_MAX_ERR]) {
  const char *arg = argv[*i];
  for (size_t j = 1; arg[j]; j++) {
    char flag[3] = {'-', arg[j], '\0'};
    const struct flag_spec *spec = find_short(arg[j]);
    if (!spec) {
      snprintf(err, PP_MAX_ERR, "polyprof: unknown flag %s%s%s", flag, j > 1 ? " in " : "",
               j > 1 ? arg : "");
      return PP_CLI_EXIT_USAGE;
    }
    if (spec->fixed) {
      add_arg(cli, spec, flag, NULL, false);
      continue;
    }
    const char *value;
    if (take_value(spec, flag, arg[j + 1] ? arg + j + 1 : NULL, argc, argv, i, &value, err))
      return PP_CLI_EXIT_USAGE;
    add_arg(cli, spec, flag, value, arg[j + 1] != '\0');
    break;
  }
  return 0;
}

static int operand(struct pp_cli *cli, bool *have_command, const char *word, char err[PP_MAX_ERR]) {
  if (!*have_command) {
    for (size_t i = 0; i < NCOMMANDS; i++) {
      if (strcmp(commands[i].name, word) != 0) continue;
      cli->command = commands[i].cmd;
      *have_command = true;
      return 0;
    }
    const char *names[NCOMMANDS];
    for (size_t i = 0; i < NCOMMANDS; i++)
      names[i] = commands[i].name;
    const char *s = pp_config_suggest(word, names, NCOMMANDS);
    snprintf(err, PP_MAX_ERR, "polyprof: unknown command '%s'%s%s%s", word,
             s ? " (did you mean '"
               : " (commands: run, attach, dump, plugins, check, convert, diff, help, version)",
             s ? s : "", s ? "'?)" : "");
    return PP_CLI_EXIT_USAGE;
  }
  for (size_t i = 0; i < NCOMMANDS; i++) {
    if (commands[i].cmd == cli->command && !commands[i].operands) {
      snprintf(err, PP_MAX_ERR, "polyprof: unexpected argument '%s' ('%s' takes none)", word,
               commands[i].name);
      return PP_CLI_EXIT_USAGE;
    }
  }
  const char **ops = realloc(cli->operands, (cli->operand_count + 1) * sizeof(*ops));
  if (!ops) abort();
  cli->operands = ops;
  cli->operands[cli->operand_count++] = word;
  return 0;
}

/* The one-program flags (G_PROGRAM) mean nothing to the daemon and the
 * other commands: silently accepted, `--format table` would look as if it
 * had worked. */
static const char *program_flag_commands(const char *name) {
  if (!strcmp(name, "--format")) return "run -- CMD, attach and diff";
  if (!strcmp(name, "--sort") || !strcmp(name, "--limit")) return "run -- CMD and attach";
  if (!strcmp(name, "--no-subprocesses")) return "run -- CMD";
  if (!strcmp(name, "--subprocesses")) return "attach";
  if (!strcmp(name, "--json")) return "dump";
  if (!strcmp(name, "--source-root")) return "run -- CMD and attach";
  return "run -- CMD, attach and dump";
}

/* Whether command reads one-program flag `name`: run -- CMD, attach and
 * dump read them all (program.c), diff only --format. */
static bool reads_program_flag(const struct pp_cli *cli, const char *name) {
  switch (cli->command) {
    case PP_CMD_RUN:
      return cli->operand_count > 0;
    case PP_CMD_ATTACH:
    case PP_CMD_DUMP:
      return true;
    case PP_CMD_DIFF:
      return !strcmp(name, "--format");
    default:
      return false;
  }
}

static const char *command_name(const struct pp_cli *cli) {
  if (cli->command == PP_CMD_RUN) return "the agent (polyprof without a command)";
  for (size_t i = 0; i < NCOMMANDS; i++)
    if (commands[i].cmd == cli->command) return commands[i].name;
  return "this command";
}

static int refuse_program_flags(const struct pp_cli *cli, char err[PP_MAX_ERR]) {
  for (size_t i = 0; i < cli->arg_count; i++) {
    const struct flag_spec *s = cli->args[i].spec;
    if (!s || s->group != G_PROGRAM || reads_program_flag(cli, s->name)) continue;
    snprintf(err, PP_MAX_ERR, "%s is a flag of %s, not of %s", cli->args[i].flag,
             program_flag_commands(s->name), command_name(cli));
    return PP_CLI_EXIT_USAGE;
  }
  return 0;
}

int pp_cli_parse(struct pp_cli *cli, int argc, char **argv, char err[PP_MAX_ERR]) {
  memset(cli, 0, sizeof(*cli));
  err[0] = '\0';
  bool have_command = false, only_operands = false, help = false, version = false;
  int rc = 0;
  for (int i = 1; i < argc && !rc; i++) {
    const char *a = argv[i];
    if (only_operands || a[0] != '-' || a[1] == '\0') {
      bool was_command = have_command;
      rc = operand(cli, &have_command, a, err);
      /* run's first operand is the program: its flags are its own */
      if (!rc && was_command && cli->command == PP_CMD_RUN) only_operands = true;
    } else if (strcmp(a, "--") == 0)
      only_operands = true;
    else if (a[1] == '-')
      rc = parse_long(cli, argc, argv, &i, err);
    else
      rc = parse_short(cli, argc, argv, &i, err);
  }
  if (!rc) rc = refuse_program_flags(cli, err);
  /* Asking for help must work even on a command line with a mistake. */
  for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
    help |= !strcmp(argv[i], "-h") || !strcmp(argv[i], "--help");
    version |= !strcmp(argv[i], "--version");
  }
  if (help || version || cli->command == PP_CMD_HELP || cli->command == PP_CMD_VERSION) {
    if (help || version) cli->command = help ? PP_CMD_HELP : PP_CMD_VERSION;
    err[0] = '\0';
    return 0;
  }
  return rc;
}

int pp_cli_apply(const struct pp_cli *cli, struct pp_config *c, char err[PP_MAX_ERR]) {
  bool *done = calloc(cli->arg_count + 1, sizeof(bool));
  char **items = calloc(cli->arg_count + 1, sizeof(char *));
  if (!done || !items) abort();
  int rc = 0;
  for (size_t i = 0; i < cli->arg_count && !rc; i++) {
    const struct pp_cli_arg *a = &cli->args[i];
    if (a->gprofiler) continue;
    if (!a->spec) {
      pp_config_add_flag(c, a->flag, a->value, a->attached);
      continue;
    }
    if (!a->spec->key || done[i]) continue;
    struct pp_config_value v = {
        .key = (char *)a->spec->key, .origin = "command line", .flag = a->flag};
    if (a->spec->flags & CF_LIST) {
      /* all occurrences at once, so together they replace the file's list */
      size_t n = 0;
      for (size_t j = i; j < cli->arg_count; j++) {
        if (cli->args[j].spec != a->spec) continue;
        items[n++] = (char *)cli->args[j].value;
        done[j] = true;
      }
      items[n] = NULL;
      v.items = items;
      v.item_count = n;
    } else {
      v.scalar = (char *)(a->spec->fixed ? a->spec->fixed : a->value);
    }
    if (pp_config_set(c, &v, err) < 0) rc = PP_CLI_EXIT_USAGE;
  }
  free(done);
  free(items);
  return rc;
}

/* POLYPROF_TOKEN, taken out of the environment the first time it is read:
 * every worker and child (plugins' helpers, libcurl's resolver) inherits
 * the environment, and none of them needs the token. Kept here for the
 * reloads, which rebuild the configuration from scratch. */
static char *env_token;

static void take_env_token(void) {
  char *env = getenv("POLYPROF_TOKEN");
  if (!env) return;
  if (*env) {
    free(env_token);
    env_token = strdup(env);
  }
  /* the string itself stays in /proc/PID/environ unless overwritten */
  explicit_bzero(env, strlen(env));
  unsetenv("POLYPROF_TOKEN");
}

/* A token in a file others can read is as good as published. */
static void warn_readable_config_token(const struct pp_config *c, const char *path) {
  struct stat st;
  if (!c->token || !c->config_path || stat(path, &st) < 0 || !(st.st_mode & (S_IRGRP | S_IROTH)))
    return;
  pp_log(PP_LOG_WARNING, "polyprof",
         "%s holds upload.token and is readable by %s (mode %04o): chmod 600 it, or keep the "
         "token in a private upload.token_file",
         path, (st.st_mode & S_IROTH) ? "everyone" : "its group", (unsigned)(st.st_mode & 07777));
}

static bool token_flag_given(const struct pp_cli *cli) {
  for (size_t i = 0; i < cli->arg_count; i++)
    if (cli->args[i].spec && cli->args[i].spec->key &&
        strcmp(cli->args[i].spec->key, "upload.token") == 0)
      return true;
  return false;
}

/* gProfiler's parser takes every long flag from GPROFILER_<FLAG> too
 * (GPROFILER_SERVICE_NAME for --service-name). A bare flag is set by any
 * value but "", "0" and "false". The token leaves the environment as
 * POLYPROF_TOKEN does. */
static int apply_gprofiler_env(struct pp_config *c, char err[PP_MAX_ERR]) {
  char name[FLAG_MAX];
  for (size_t i = 0; i < NSPECS; i++) {
    const struct flag_spec *s = &specs[i];
    if (!s->key || s->special != SP_NONE) continue;
    int n = snprintf(name, sizeof(name), "GPROFILER_%s", s->name + 2);
    if (n < 0 || (size_t)n >= sizeof(name)) continue;
    for (char *p = name; *p; p++)
      *p = *p == '-' ? '_' : (*p >= 'a' && *p <= 'z') ? (char)(*p - 'a' + 'A') : *p;
    char *env = getenv(name);
    if (!env) continue;
    bool off = !*env || !strcmp(env, "0") || !strcasecmp(env, "false");
    if (s->fixed && off) continue;
    char *value = strdup(env);
    if (!value) abort();
    if (!strcmp(s->key, "upload.token")) {
      explicit_bzero(env, strlen(env));
      unsetenv(name);
      free(env_token);
      env_token = strdup(value); /* for the reloads, like POLYPROF_TOKEN */
    }
    char *items[2] = {value, NULL};
    struct pp_config_value v = {.key = (char *)s->key, .origin = "environment", .flag = name};
    if (s->flags & CF_LIST) {
      v.items = items;
      v.item_count = 1;
    } else {
      v.scalar = s->fixed ? (char *)s->fixed : value;
    }
    int rc = pp_config_set(c, &v, err);
    explicit_bzero(value, strlen(value));
    free(value);
    if (rc < 0) return PP_CLI_EXIT_USAGE;
  }
  return 0;
}

/* One line per distinct flag, however often it was repeated. */
static void warn_gprofiler_flags(const struct pp_cli *cli) {
  for (size_t i = 0; i < cli->arg_count; i++) {
    const struct pp_gprofiler_flag *gp = cli->args[i].gprofiler;
    bool seen = false;
    for (size_t j = 0; j < i && gp && !seen; j++)
      seen = cli->args[j].gprofiler == gp;
    if (gp && !seen) pp_gprofiler_flag_warn(gp);
  }
}

int pp_cli_configure(const struct pp_cli *cli, struct pp_config *c, char err[PP_MAX_ERR]) {
  pp_config_defaults(c);
  const char *path = cli->config_path ? cli->config_path : PP_DEFAULT_CONFIG_PATH;
  /* config_path is set once the file was read: after that, a failure is a
   * mistake in its contents, which is as much a usage error as a bad flag */
  if (pp_config_load(c, path, cli->config_path != NULL, err) < 0)
    return c->config_path ? PP_CLI_EXIT_USAGE : PP_CLI_EXIT_CONFIG;
  warn_readable_config_token(c, path);
  /* environment between the file and the flags, as gProfiler's GPROFILER_* */
  take_env_token();
  if (env_token) {
    free(c->token);
    c->token = strdup(env_token);
  }
  int rc = apply_gprofiler_env(c, err);
  if (rc == 0) rc = pp_cli_apply(cli, c, err);
  if (rc == 0) warn_gprofiler_flags(cli);
  if (rc == 0) pp_cloud_env_apply(c);
  if (rc == 0 && token_flag_given(cli))
    pp_log(PP_LOG_WARNING, "polyprof",
           "--token puts the API token on the command line, where every local user can read it "
           "(ps, /proc/PID/cmdline): prefer --token-file FILE (mode 600)");
  if (rc == 0 && c->token_file && pp_config_read_token(c, err) < 0) rc = PP_CLI_EXIT_USAGE;
  if (rc == 0 && (c->upload || cli->command == PP_CMD_UPLOAD_FILE) &&
      pp_config_check_token_transport(c, err) < 0)
    rc = PP_CLI_EXIT_USAGE;
  if (rc == 0) pp_rootless_apply_defaults(c); /* user-writable paths for what is unset */
  return rc;
}

void pp_cli_free(struct pp_cli *cli) {
  for (size_t i = 0; i < cli->arg_count; i++)
    free(cli->args[i].flag);
  free(cli->args);
  free(cli->operands);
  memset(cli, 0, sizeof(*cli));
}

/* ---- --help ------------------------------------------------------------- */

static void help_line(FILE *out, const char *left, const char *help) {
  if (strlen(left) <= 32)
    fprintf(out, "  %-32s %s\n", left, help);
  else
    fprintf(out, "  %s\n  %-32s %s\n", left, "", help);
}

static void plugin_help(FILE *out, const struct pp_plugin *p) {
  char name[FLAG_MAX], left[FLAG_MAX + 64], flag[FLAG_MAX], text[512];
  size_t nopts;
  const struct pp_option *opts = pp_config_plugin_options(p, &nopts);
  const struct pp_option *mode = NULL;
  snprintf(name, sizeof(name), "%s", p->name);
  for (char *s = name; *s; s++)
    if (*s == '_') *s = '-';
  for (size_t i = 0; i < nopts; i++)
    if (opts[i].key && !strcmp(opts[i].key, "mode") && opts[i].type == PP_OPT_ENUM) mode = &opts[i];

  fprintf(out, "\n%s %s%s%s\n", p->name, p->version ? p->version : "", p->description ? ": " : "",
          p->description ? p->description : "");
  size_t used = 0;
  text[0] = '\0';
  for (size_t i = 0; mode && mode->choices && mode->choices[i] && used < sizeof(text); i++)
    used += (size_t)snprintf(text + used, sizeof(text) - used, "%s, ", mode->choices[i]);
  if (used < sizeof(text))
    snprintf(text + used, sizeof(text) - used, "%s (default %s)",
             mode ? "disabled" : "enabled, disabled",
             mode ? (mode->default_value ? mode->default_value : "?") : "enabled");
  snprintf(left, sizeof(left), "--%s-mode MODE", name);
  help_line(out, left, text);
  snprintf(left, sizeof(left), "--no-%s", name);
  snprintf(text, sizeof(text), "disable the %s plugin", p->name);
  help_line(out, left, text);
  for (size_t i = 0; i < nopts; i++) {
    const struct pp_option *o = &opts[i];
    if (!o->key || o == mode) continue;
    static const char *const metavars[] = {"", "N", "VALUE", "CHOICE", "ITEM[,ITEM]"};
    const char *mv = o->type < 5 ? metavars[o->type] : "VALUE";
    pp_config_option_flag(p->name, o, flag, sizeof(flag));
    if (o->type == PP_OPT_BOOL) {
      /* a bare flag that sets the default does nothing: show how to flip it */
      bool sets = pp_config_bool_flag_sets(flag), def = false;
      if (o->default_value) pp_config_parse_bool(o->default_value, &def);
      mv = sets == def ? (def ? "=false" : "=true") : "";
      snprintf(left, sizeof(left), "--%s%s", flag, mv);
    } else {
      snprintf(left, sizeof(left), "--%s%s%s", flag, *mv ? " " : "", mv);
    }
    used = (size_t)snprintf(text, sizeof(text), "%s", o->help ? o->help : "");
    if (o->type == PP_OPT_ENUM && o->choices && used < sizeof(text)) {
      used += (size_t)snprintf(text + used, sizeof(text) - used, " (");
      for (size_t j = 0; o->choices[j] && used < sizeof(text); j++)
        used += (size_t)snprintf(text + used, sizeof(text) - used, "%s%s", j ? ", " : "",
                                 o->choices[j]);
      if (used < sizeof(text)) used += (size_t)snprintf(text + used, sizeof(text) - used, ")");
    }
    if (o->type == PP_OPT_INT && o->min <= o->max && used < sizeof(text))
      used += (size_t)snprintf(text + used, sizeof(text) - used, " (%lld-%lld)", (long long)o->min,
                               (long long)o->max);
    if (o->default_value && *o->default_value && used < sizeof(text))
      snprintf(text + used, sizeof(text) - used, " [default %s]", o->default_value);
    help_line(out, left, text);
  }
}

void pp_cli_help(FILE *out, const struct pp_plugin *const *plugins, size_t n) {
  char left[128];
  fprintf(out,
          "Usage: polyprof [COMMAND] [OPTIONS]\n"
          "\n"
          "A system-wide continuous profiler. Flags override the configuration file,\n"
          "which overrides the defaults.\n"
          "\n"
          "Commands:\n");
  for (size_t i = 0; i < NCOMMANDS; i++)
    if (commands[i].help) fprintf(out, "  %-32s %s\n", commands[i].name, commands[i].help);
  for (int g = 0; g < G_N; g++) {
    fprintf(out, "\n%s:\n", group_names[g]);
    for (size_t i = 0; i < NSPECS; i++) {
      const struct flag_spec *s = &specs[i];
      if ((int)s->group != g) continue;
      if (s->short_name)
        snprintf(left, sizeof(left), "-%c, %s%s%s", s->short_name, s->name, s->metavar ? " " : "",
                 s->metavar ? s->metavar : "");
      else
        snprintf(left, sizeof(left), "%s%s%s", s->name, s->metavar ? " " : "",
                 s->metavar ? s->metavar : "");
      help_line(out, left, s->help);
    }
    if (g == G_PLUGINS) {
      help_line(out, "--<plugin>-mode MODE", "choose a plugin's mode; 'disabled' turns it off");
      help_line(out, "--no-<plugin>", "disable a plugin");
      help_line(out, "--<plugin>-isolation worker|inline", "isolation of one plugin");
    }
  }
  if (n == 0) {
    fprintf(out,
            "\nNo plugins loaded: their flags are listed by `polyprof --plugin-dir DIR "
            "--help`.\n");
    return;
  }
  fprintf(out, "\nPlugin options:\n");
  for (size_t i = 0; i < n; i++)
    if (plugins[i] && plugins[i]->name) plugin_help(out, plugins[i]);
}
