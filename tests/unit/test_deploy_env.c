/* SPDX-License-Identifier: Apache-2.0 */
/* What a deployment's environment tells the agent: the pid namespace link
 * (docs/gprofiler-compat.md) and the Databricks parsers
 * (docs/configuration.md), on literal and hostile inputs. */
#include <stdlib.h>
#include <string.h>

#include "databricks.h"
#include "pidns.h"
#include "testlib.h"

static void test_pidns_link(void) {
  CHECK_EQ_INT(pp_pidns_link_is_init("pid:[4026531836]"), 1);
  CHECK_EQ_INT(pp_pidns_link_is_init("pid:[4026532451]"), 0);
  CHECK_EQ_INT(pp_pidns_link_is_init("pid:[]"), -1);
  CHECK_EQ_INT(pp_pidns_link_is_init("pid:[4026531836"), -1);
  CHECK_EQ_INT(pp_pidns_link_is_init("pid:[4026531836]x"), -1);
  CHECK_EQ_INT(pp_pidns_link_is_init("net:[4026531836]"), -1);
  CHECK_EQ_INT(pp_pidns_link_is_init("pid:[99999999999999999999999]"), -1);
}

static void expect_addr(const char *text, const char *want) {
  char *got = pp_databricks_webui_address(text);
  if (want)
    CHECK_EQ_STR(got ? got : "(null)", want);
  else
    CHECK(got == NULL);
  free(got);
}

static void test_webui_address(void) {
  expect_addr("*.sink.ganglia.class=x\n*.sink.ganglia.host=10.1.2.3\n", "10.1.2.3:40001");
  expect_addr("*.sink.ganglia.host=driver-host.local:41000\r\n", "driver-host.local:41000");
  expect_addr("*.sink.ganglia.host=[fd00::1]\n", "[fd00::1]:40001");
  expect_addr("*.sink.ganglia.port=8649\n", NULL);
  expect_addr("*.sink.ganglia.host=\n", NULL);
  /* nothing a URL could misread: no path, user or query */
  expect_addr("*.sink.ganglia.host=evil/../x\n", NULL);
  expect_addr("*.sink.ganglia.host=user@host\n", NULL);
  expect_addr("*.sink.ganglia.host=h?q=1\n", NULL);
  expect_addr("", NULL);
}

static void expect_name(const char *env, const char *want) {
  char *got = pp_databricks_name_from_environment(env);
  if (want)
    CHECK_EQ_STR(got ? got : "(null)", want);
  else
    CHECK(got == NULL);
  free(got);
}

static void test_name(void) {
  expect_name(
      "{\"sparkProperties\":[[\"spark.databricks.clusterUsageTags.clusterAllTags\","
      "\"[{\\\"key\\\":\\\"RunName\\\",\\\"value\\\":\\\"My Daily Job\\\"}]\"]]}",
      "databricks-job-my-daily-job");
  expect_name(
      "{\"sparkProperties\":[[\"spark.databricks.clusterUsageTags.clusterAllTags\","
      "\"[{\\\"key\\\":\\\"ClusterName\\\",\\\"value\\\":\\\"job-5-run-77-ETL\\\"}]\"]]}",
      "databricks-job-5-etl");
  expect_name(
      "{\"sparkProperties\":[[\"spark.databricks.clusterUsageTags.clusterAllTags\","
      "\"*****(redacted)\"],[\"spark.databricks.clusterUsageTags.clusterName\",\"Shared "
      "Analytics\"]]}",
      "databricks-shared-analytics");
  /* "run-" not followed by digits and a dash is part of the name */
  expect_name(
      "{\"sparkProperties\":[[\"spark.databricks.clusterUsageTags.clusterName\","
      "\"run-fast\"]]}",
      "databricks-run-fast");
  expect_name("{\"sparkProperties\":[[\"spark.master\",\"local\"]]}", NULL);
  expect_name(
      "{\"sparkProperties\":[[\"spark.databricks.clusterUsageTags.clusterAllTags\","
      "\"not json\"]]}",
      NULL);
  expect_name("{\"sparkProperties\":[[\"spark.databricks.clusterUsageTags.clusterName\",\"\"]]}",
              NULL);
  expect_name("{\"sparkProperties\":[[1,2],[\"a\"],\"x\",null]}", NULL);
  expect_name("[]", NULL);
  expect_name("", NULL);
  expect_name("{\"sparkProperties\":{}}", NULL);
}

int main(void) {
  test_pidns_link();
  test_webui_address();
  test_name();
  return pp_test_finish("test_deploy_env");
}
