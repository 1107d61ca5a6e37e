/* SPDX-License-Identifier: Apache-2.0 */
#include "cloud_env.h"

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "databricks.h"
#include "log.h"

bool pp_cloud_env_is_fargate(void) {
  const char *env = getenv("AWS_EXECUTION_ENV");
  return env && strcmp(env, "AWS_ECS_FARGATE") == 0;
}

/* Found once: a reload keeps the name rather than wait for Spark again. */
static char *databricks_name;

static void apply_databricks(struct pp_config *c) {
  if (!c->databricks_service_name) return;
  if (!databricks_name)
    databricks_name = pp_databricks_service_name(c->databricks_properties, c->databricks_timeout_s);
  free(c->service_name);
  c->service_name = strdup(databricks_name);
  if (!c->service_name) abort();
}

void pp_cloud_env_apply(struct pp_config *c) {
  apply_databricks(c);
  if (!pp_cloud_env_is_fargate()) return;
  c->pidns_check = false;
  /* appended after the user's flags, so it wins over a --perf-mode given
   * on the command line; a missing perf plugin only leaves a note */
  pp_config_add_flag(c, "--perf-mode", "disabled", false);
  pp_log(PP_LOG_INFO, "polyprof",
         "AWS ECS Fargate (AWS_EXECUTION_ENV=AWS_ECS_FARGATE): perf is off (a task cannot open "
         "perf events) and the pid namespace check is skipped; runtime stacks are concatenated "
         "unscaled");
}
