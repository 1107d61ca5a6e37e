/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Settings the environment the agent runs in forces, as gProfiler does:
 * on AWS ECS Fargate (AWS_EXECUTION_ENV=AWS_ECS_FARGATE) a task can neither
 * open perf events nor share the host's pid namespace, so the perf plugin
 * is turned off and the init-pid-namespace check skipped. On Databricks,
 * --databricks-job-name-as-service-name takes the service name from the
 * cluster's Spark UI (databricks.h).
 */
#ifndef PP_CLOUD_ENV_H
#define PP_CLOUD_ENV_H

#include <stdbool.h>

struct pp_config;

/* True when AWS_EXECUTION_ENV says the agent runs as an ECS Fargate task. */
bool pp_cloud_env_is_fargate(void);

/* Apply what the environment forces over the file, the variables and the
 * flags (logged once at info level). Called after the command line. */
void pp_cloud_env_apply(struct pp_config *c);

#endif
