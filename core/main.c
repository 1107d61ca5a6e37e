/* SPDX-License-Identifier: Apache-2.0 */
/*
 * polyprof entry point: parse the command line, build the configuration
 * (defaults <- YAML file <- flags) and dispatch to a subcommand.
 *
 * Exit codes: 0 success, 1 runtime or configuration-file problem, 2 bad
 * command line or invalid configuration values.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd_tools.h"
#include "commands.h"
#include "log.h"
#include "program.h"
#include "session.h"

static void print_error(const char *err) {
  /* messages from the parsers may already carry the program name */
  if (strncmp(err, "polyprof: ", 10) == 0)
    fprintf(stderr, "%s\n", err);
  else
    fprintf(stderr, "polyprof: %s\n", err);
}

/* SIGHUP: rebuild the configuration from the same command line. */
static int reload_config(void *ctx, struct pp_config *out, char err[PP_MAX_ERR]) {
  const struct pp_cli *cli = ctx;
  return pp_cli_configure(cli, out, err) == 0 ? 0 : -1;
}

static int print_help(const struct pp_cli *cli) {
  /* best effort: list the installed plugins' flags too */
  struct pp_config cfg;
  char err[PP_MAX_ERR] = "";
  const struct pp_plugin *descs[64];
  size_t n = 0;
  struct pp_plugin_info *infos = NULL;
  size_t ninfos = 0;
  if (pp_cli_configure(cli, &cfg, err) == 0 && cfg.plugin_dir &&
      pp_registry_scan(cfg.plugin_dir, &infos, &ninfos) == 0) {
    for (size_t i = 0; i < ninfos && n < 64; i++)
      if (!infos[i].error) descs[n++] = &infos[i].desc;
  }
  pp_cli_help(stdout, descs, n);
  pp_registry_free(infos, ninfos);
  pp_config_free(&cfg);
  return 0;
}

int main(int argc, char **argv) {
  struct pp_cli cli;
  char err[PP_MAX_ERR] = "";
  int rc = pp_cli_parse(&cli, argc, argv, err);
  if (rc != 0) {
    print_error(err);
    pp_cli_free(&cli);
    return rc;
  }
  switch (cli.command) {
    case PP_CMD_VERSION:
      printf("polyprof %s (plugin ABI %d.%d)\n", POLYPROF_VERSION, PP_ABI_MAJOR, PP_ABI_MINOR);
      pp_cli_free(&cli);
      return 0;
    case PP_CMD_HELP:
      pp_log_set_stderr_level(PP_LOG_ERROR); /* no plugin-probe chatter in --help */
      rc = print_help(&cli);
      pp_cli_free(&cli);
      return rc;
    default:
      break;
  }

  struct pp_config *cfg = calloc(1, sizeof(*cfg));
  if (!cfg) return 1;
  rc = pp_cli_configure(&cli, cfg, err);
  if (rc != 0) {
    print_error(err);
    pp_config_free(cfg);
    free(cfg);
    pp_cli_free(&cli);
    return rc;
  }
  pp_log_set_stderr_level(cfg->verbose ? PP_LOG_DEBUG : PP_LOG_INFO);

  switch (cli.command) {
    case PP_CMD_PLUGINS:
      rc = pp_cmd_plugins(cfg, cfg->verbose, stdout);
      break;
    case PP_CMD_CHECK:
      rc = pp_cmd_check(cfg, stdout);
      break;
    case PP_CMD_UPLOAD_FILE:
      rc = pp_cmd_upload_file(cfg, cli.operands, cli.operand_count);
      break;
    case PP_CMD_CONVERT:
      rc = pp_cmd_convert(cfg, cli.operands, cli.operand_count);
      break;
    case PP_CMD_TOP:
      rc = pp_cmd_top(cfg, cli.operands, cli.operand_count);
      cfg = NULL;
      break;
    case PP_CMD_DIFF:
      rc = pp_cmd_diff(cfg, cli.operands, cli.operand_count, pp_cli_flag_value(&cli, "--format"));
      break;
    case PP_CMD_RUN:
      /* run -- CMD; both own cfg from here on */
      if (cli.operand_count) {
        rc = pp_cmd_run_program(cfg, &cli);
        cfg = NULL;
        break;
      }
      rc = pp_agent_run(cfg, reload_config, &cli);
      cfg = NULL;
      break;
    case PP_CMD_ATTACH:
      rc = pp_cmd_attach(cfg, &cli);
      cfg = NULL;
      break;
    case PP_CMD_DUMP:
      rc = pp_cmd_dump(cfg, &cli);
      cfg = NULL;
      break;
    default:
      fprintf(stderr, "polyprof: '%s' is not available in this version\n",
              pp_cli_command_name(cli.command));
      rc = 2;
      break;
  }
  if (cfg) {
    pp_config_free(cfg);
    free(cfg);
  }
  pp_cli_free(&cli);
  return rc;
}
