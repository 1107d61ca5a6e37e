/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Agent configuration: defaults <- YAML file <- command line.
 *
 * pp_config_load() parses the YAML file into a pp_config; pp_cli_parse()
 * (cli.h) applies flags on top. Plugin sections (top-level keys named after
 * a plugin) are kept as generic key/value trees with their file positions and
 * validated once the plugins are loaded (pp_config_bind_plugin), because only
 * the plugin's descriptor knows its keys.
 */
#ifndef PP_CONFIG_H
#define PP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "polyprof/plugin.h"

#define PP_DEFAULT_CONFIG_PATH "/etc/polyprof/polyprof.yaml"
/* Root's defaults; --rootless replaces the ones still at these values by
 * paths under the user's runtime directory (core/rootless.h). */
#define PP_DEFAULT_PID_FILE "/run/polyprof.pid"
#define PP_DEFAULT_LOG_FILE "/var/log/polyprof/polyprof.log"
#define PP_DEFAULT_SPOOL_DIR "/var/lib/polyprof/spool"
#define PP_MAX_ERR 512

/* A scalar or list value from YAML or the CLI, with where it came from. */
struct pp_config_value {
  char *key;    /* key inside the section */
  char *scalar; /* scalar text, NULL for a list */
  char **items; /* list items (NULL-terminated), NULL for a scalar */
  size_t item_count;
  const char *origin; /* file path or "command line" (not owned) */
  int line;           /* 1-based YAML line, 0 for the command line */
  char *flag;         /* the CLI flag that set it, NULL if from the file */
};

/* One plugin's section: "python:" in YAML plus --python-* flags. */
struct pp_plugin_section {
  char *name;
  int line;                       /* line of the section key, 0 if only CLI */
  struct pp_config_value *values; /* later entries override earlier ones */
  size_t count;
  const char *origin; /* file of the section key, NULL if only CLI (not owned) */
};

/* A command-line flag the core does not know (--java-line-numbers...), kept
 * until the plugins are loaded: pp_config_bind_plugin() claims the flags a
 * plugin declares, pp_config_check_orphans() reports the rest. */
struct pp_config_flag {
  char *flag;          /* as typed, without "=value": "--java-line-numbers" */
  char *value;         /* NULL if none */
  bool value_attached; /* "--flag=value"; otherwise the value is the next word,
                          which a flag that takes no value must not swallow */
  bool claimed;        /* set by pp_config_bind_plugin() */
};

/* Resolved plugin option values (after binding to a descriptor). */
struct pp_bound_option {
  const struct pp_option *opt;
  char *scalar; /* textual value (NULL: unset) */
  char **items; /* lists */
  size_t item_count;
};

struct pp_plugin_config {
  char *name;
  bool enabled;
  char *mode;        /* NULL if the plugin declares no mode */
  char *disabled_by; /* why disabled: "--no-python", "python.enabled: false (file:line)"... */
  char *isolation;   /* "worker" | "inline" (per plugin override) */
  struct pp_bound_option *options;
  size_t option_count;
};

struct pp_config {
  char *config_path; /* file actually read, NULL if none */

  /* profiling */
  int frequency;   /* -f, Hz (default 11) */
  int duration;    /* -d, seconds (default 60) */
  bool continuous; /* -c */
  uint32_t *pids;  /* --pids, NULL/0 = all */
  size_t pid_count;
  char *profiling_mode;   /* --mode text: "cpu", "cpu,offcpu"... */
  uint32_t profile_types; /* parsed: PP_TYPE_BIT(enum pp_profile_type)s (profile_mode.h) */
  size_t alloc_interval;  /* --alloc-interval: bytes between allocation samples; 0: plugin's */
  /* how often /proc is listed for new processes, ms (default 1000) */
  int proc_scan_interval_ms;
  /* learn of new processes from the kernel's process events (default on);
   * /proc is then listed only every proc_rescan_interval_s (default 30) */
  bool proc_events;
  int proc_rescan_interval_s;

  /* output */
  char *output_dir; /* -o, NULL = no local output */
  bool rotating_output;
  bool flamegraph;       /* --no-flamegraph clears */
  char **output_formats; /* "col", "html", ... NULL-terminated */
  size_t output_format_count;
  /* bytes of session files kept in memory while output_dir refuses them */
  size_t output_pending_max_bytes;
  /* --debug-plugin-totals: <stem>.plugins.json per session (session_debug.c) */
  bool debug_plugin_totals;

  /* enrichment */
  bool app_identifiers;       /* --disable-application-identifiers clears */
  bool container_names;       /* --disable-container-names clears */
  bool application_metadata;  /* --disable-application-metadata clears */
  bool metadata_collection;   /* --disable-metadata-collection clears */
  bool metrics_collection;    /* --disable-metrics-collection clears */
  char **app_id_args_filters; /* regexes */
  size_t app_id_args_filter_count;
  size_t appid_cache_size; /* LRU entries (default 4096) */
  bool java_spark_appid;   /* Spark executors: ", spark: <spark.app.name>" in the appid */

  /* agent */
  bool pidns_check;     /* --disable-pidns-check clears */
  char *pid_file;       /* default /run/polyprof.pid */
  char *log_file;       /* default /var/log/polyprof/polyprof.log, "" = none */
  size_t log_max_bytes; /* default 5 MiB */
  int log_backups;      /* default 1 */
  bool verbose;         /* -v */
  bool rootless;        /* --rootless: an ordinary user profiling its own --pids */

  /* plugins */
  char *plugin_dir;                 /* --plugin-dir */
  char *isolation;                  /* "worker" (default) | "inline" */
  int worker_memory_limit_mb;       /* RSS cap per worker (default 256) */
  int worker_timeout_s;             /* a reply slower than this = hung (default 10) */
  int worker_restart_backoff_max_s; /* default 300 */
  char *worker_path;                /* polyprof-worker; NULL: found (worker_exe.h) */

  /* upload: the flags (the client is in core/upload/) */
  bool upload;
  char *server_host;
  char *token;
  char *service_name;
  /* upload client settings (core/upload/) */
  char *token_file;       /* --token-file: token read from this file */
  char *server_ca;        /* --server-ca: PEM bundle for self-hosted servers */
  bool tls_verify;        /* --insecure-skip-verify / --no-verify clear */
  bool insecure_http;     /* --insecure-http: allow the token over plain http:// */
  int upload_timeout_s;   /* --server-upload-timeout (default 120) */
  int connect_timeout_s;  /* upload.connect_timeout_s (default 10) */
  int upload_retries;     /* attempts after the first (default 3) */
  int retry_backoff_ms;   /* first backoff, doubled each retry (default 2000) */
  char *spool_dir;        /* failed uploads kept here (default /var/lib/polyprof/spool) */
  size_t spool_max_bytes; /* cap of the spool (default 64 MiB) */
  char *api_server;       /* --api-server: logs endpoint host */
  bool send_logs;         /* --dont-send-logs / GPROFILER_DONT_SEND_LOGS clear */
  char *pyroscope_url;    /* --pyroscope-url: also push to Pyroscope /ingest */
  /* --databricks-job-name-as-service-name: the service name from Databricks */
  bool databricks_service_name;
  char *databricks_properties; /* metrics.properties naming the driver (default Databricks') */
  int databricks_timeout_s;    /* how long the cluster may take to show its job (default 120) */
  char *pyroscope_format;      /* folded | pprof */
  char *otlp_endpoint;         /* --otlp-endpoint: also export OTLP profiles to this collector */
  bool cloud_metadata;         /* enrichment.cloud_metadata: probe AWS/GCP/Azure IMDS */
  char *cloud_metadata_url;    /* IMDS base URL (default http://169.254.169.254; tests) */
  char *k8s_runtime_root;  /* host root holding containerd/CRI-O bundles (default /proc/1/root) */
  char *containers_select; /* --containers: comma-separated selectors (k8s_select.h) */
  char *k8s_labels;        /* --k8s-labels: pod label keys to keep (k8s_labels.h) */
  bool k8s_api;            /* enrichment.k8s_api: ask the Kubernetes API in a pod (default on) */
  char *k8s_node_name;     /* enrichment.k8s_node_name (default $NODE_NAME) */
  char *k8s_serviceaccount_dir; /* enrichment.k8s_serviceaccount_dir (default a pod's) */
  char *file_path;              /* upload-file --file-path */
  char *convert_to;             /* convert --to */

  /* per-plugin raw sections from YAML/CLI, then bound configs */
  struct pp_plugin_section *sections;
  size_t section_count;
  struct pp_plugin_config *plugins;
  size_t plugin_count;

  /* command-line flags waiting for a plugin (see struct pp_config_flag) */
  struct pp_config_flag *flags;
  size_t flag_count;
  /* every file loaded, in order; value origins point into these */
  char **files;
  size_t file_count;
};

void pp_config_defaults(struct pp_config *c);
void pp_config_free(struct pp_config *c);

/* Parse `path` into c (on top of whatever c holds). 0 on success; on error
 * -1 with a one-line message in err naming file, line and key. A missing
 * file is an error only if `required` (an explicit --config). */
int pp_config_load(struct pp_config *c, const char *path, bool required, char err[PP_MAX_ERR]);

/* Validate the section of `plugin` (if any) against its descriptor and fill
 * c->plugins[...] for it: enabled/mode/options with defaults applied.
 * 0, or -1 with a message naming file, line and key (suggesting the nearest
 * valid key for unknown ones). */
int pp_config_bind_plugin(struct pp_config *c, const struct pp_plugin *plugin,
                          char err[PP_MAX_ERR]);

/* Sections that named no loaded plugin: each gets a message if the name is
 * not a known runtime either. Returns the number of problems found. */
int pp_config_check_orphans(const struct pp_config *c, const char *const *loaded_names,
                            char err[PP_MAX_ERR]);

const struct pp_plugin_config *pp_config_plugin(const struct pp_config *c, const char *name);

/* Edit distance helper used for "did you mean" suggestions. */
const char *pp_config_suggest(const char *word, const char *const *candidates, size_t n);

/* Set one core key from text, as the YAML loader does: v->key is the dotted
 * name ("profiling.frequency"), v->scalar or v->items the value (a list key
 * takes either; a scalar is split at commas except for regex lists; the new
 * list replaces the old one). Errors name v->flag if set ("polyprof: -f: ..."),
 * else origin:line and key. 0, or -1 with a message. */
int pp_config_set(struct pp_config *c, const struct pp_config_value *v, char err[PP_MAX_ERR]);

/* What core key `key` ("profiling.frequency") takes, for messages: "an
 * integer", "a list"...; NULL if it is not a core key. */
const char *pp_config_key_type(const char *key);

/* Names of the core sections ("profiling", ...), NULL-terminated. Any other
 * top-level key of the file is a plugin section. */
extern const char *const pp_config_sections[];

/* Keep an unknown command-line flag for the plugins (see pp_config_flag). */
void pp_config_add_flag(struct pp_config *c, const char *flag, const char *value,
                        bool value_attached);

/* Cross-key checks for the `run` command: at least one output (-o or -u),
 * and -u needs a token and a service name. 0, or -1 with a message. */
int pp_config_check_run(const struct pp_config *c, char err[PP_MAX_ERR]);

/* The token is about to travel: refuse a plain http:// server (studio or
 * logs API) unless c->insecure_http says the network is trusted. 0, or -1
 * with a message. */
int pp_config_check_token_transport(const struct pp_config *c, char err[PP_MAX_ERR]);

/* Replace c->token by the first line of c->token_file (blanks trimmed). The
 * file should be readable by root only; a world-readable one is refused.
 * 0, or -1 with a message naming the file. */
int pp_config_read_token(struct pp_config *c, char err[PP_MAX_ERR]);

/* Text -> value, as every config value is parsed. 0, or -1 if malformed.
 * Booleans: true/false, yes/no, on/off, 1/0 (any case). Integers: decimal,
 * optional sign, no trailing garbage, no overflow. */
int pp_config_parse_bool(const char *s, bool *out);
int pp_config_parse_int(const char *s, int64_t *out);

/* A plugin's declared options, honouring the descriptor's struct_size. */
const struct pp_option *pp_config_plugin_options(const struct pp_plugin *p, size_t *count);

/* The long flag of a plugin option, without "--": o->cli_flag or
 * "<plugin>-<key>" with '_' -> '-'. Returns buf. */
const char *pp_config_option_flag(const char *plugin, const struct pp_option *o, char *buf,
                                  size_t len);

/* What the bare flag (without "--") of a bool option sets: false if its name
 * has a "no-" or "disable-" word (perf-no-memory-restart), else true. */
bool pp_config_bool_flag_sets(const char *flag);

#endif /* PP_CONFIG_H */
