/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Command line, in two phases because the config file and the plugins must be
 * found before most flags can be applied:
 *
 *   1. pp_cli_parse(): argv -> subcommand + the flags in order. Only syntax is
 *      checked here (unknown flags, missing values); --config and
 *      --plugin-dir are available right away.
 *   2. pp_cli_apply(): the flags on top of a loaded pp_config (defaults <-
 *      file <- flags). Flags the core does not know but that look like a
 *      plugin's (--python-mode, --no-java, --java-line-numbers...) are handed
 *      to the config and resolved by pp_config_bind_plugin().
 *
 * Errors are one line ("polyprof: unknown flag --foo (did you mean --bar?)")
 * and usage errors return PP_CLI_EXIT_USAGE, the exit code of the agent.
 *
 *   struct pp_cli cli; struct pp_config cfg; char err[PP_MAX_ERR];
 *   int rc = pp_cli_parse(&cli, argc, argv, err);
 *   if (!rc) rc = pp_cli_configure(&cli, &cfg, err);  // 0, 1 or 2: exit code
 */
#ifndef PP_CLI_H
#define PP_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "config.h"
#include "polyprof/plugin.h"

#define PP_CLI_EXIT_CONFIG 1 /* the config file cannot be read */
#define PP_CLI_EXIT_USAGE 2  /* bad command line, or a mistake in the config file */

enum pp_command {
  PP_CMD_RUN = 0,     /* profile (default) */
  PP_CMD_PLUGINS,     /* list plugins and their options */
  PP_CMD_CHECK,       /* privileges and configuration, then exit */
  PP_CMD_HELP,        /* also -h/--help */
  PP_CMD_VERSION,     /* also --version */
  PP_CMD_UPLOAD_FILE, /* reserved: parsed (operands kept), not implemented yet */
  PP_CMD_CONVERT,
  PP_CMD_DIFF,
  PP_CMD_ATTACH, /* attach PID */
  PP_CMD_DUMP,   /* dump PID */
  PP_CMD_TOP,    /* top [PID...] */
};

struct pp_cli_arg; /* one parsed flag (private to cli.c) */

/* Strings point into argv, which must outlive the struct. */
struct pp_cli {
  enum pp_command command;
  const char *config_path; /* --config, NULL: PP_DEFAULT_CONFIG_PATH if present */
  const char *plugin_dir;  /* --plugin-dir, NULL if not given */
  const char **operands;   /* words after the subcommand (upload-file PATH...) */
  size_t operand_count;
  struct pp_cli_arg *args; /* flags in command-line order */
  size_t arg_count;
};

/* 0, or PP_CLI_EXIT_USAGE with a one-line message. -h/--help or --version
 * anywhere wins over any error (command HELP / VERSION, returns 0). cli must
 * be freed in both cases. */
int pp_cli_parse(struct pp_cli *cli, int argc, char **argv, char err[PP_MAX_ERR]);

/* The flags on top of c (which holds defaults + file). Repeated list flags
 * (--pids, --output-format, --app-id-args-filter) add up and replace the
 * file's list. 0, or PP_CLI_EXIT_USAGE with a message naming the flag. */
int pp_cli_apply(const struct pp_cli *cli, struct pp_config *c, char err[PP_MAX_ERR]);

/* pp_config_defaults + pp_config_load(--config or the default path) +
 * pp_cli_apply. 0, PP_CLI_EXIT_CONFIG or PP_CLI_EXIT_USAGE. c must be freed
 * with pp_config_free() in every case. */
int pp_cli_configure(const struct pp_cli *cli, struct pp_config *c, char err[PP_MAX_ERR]);

void pp_cli_free(struct pp_cli *cli);

/* --help, grouped by topic; then each plugin's flags from its descriptor
 * (plugins may be NULL, n 0 when none could be loaded). */
void pp_cli_help(FILE *out, const struct pp_plugin *const *plugins, size_t n);

const char *pp_cli_command_name(enum pp_command cmd);

/* The value of the last occurrence of a flag ("--format", or a plugin's
 * "--python-mode"), its fixed value for a flag that takes none, NULL if not
 * given. For the one-program flags, which are not configuration keys. */
const char *pp_cli_flag_value(const struct pp_cli *cli, const char *flag);

/* The core long flag (or one of `extra`, full "--x" strings) nearest to
 * `flag`, for "did you mean"; NULL if none is close. */
const char *pp_cli_suggest_flag(const char *flag, const char *const *extra, size_t n_extra);

#endif /* PP_CLI_H */
