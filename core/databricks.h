/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --databricks-job-name-as-service-name: the service name of a Databricks
 * cluster, found as gProfiler finds it. The driver's address is the
 * "*.sink.ganglia.host" of /databricks/spark/conf/metrics.properties; its
 * Spark UI (port 40001) lists the application, whose environment holds the
 * spark.databricks.clusterUsageTags.clusterAllTags JSON (the "RunName" tag
 * of a job run) and spark.databricks.clusterUsageTags.clusterName. The
 * service name is "databricks-job-<run name>", else
 * "databricks-<cluster name>" (a "run-N-" in it removed), lower case with
 * dashes for spaces, else "databricks". The cluster may still be starting:
 * missing file, address or application are retried once a second until a
 * timeout (gProfiler's 120 s); a reply that cannot be read ends the search.
 */
#ifndef PP_DATABRICKS_H
#define PP_DATABRICKS_H

#define PP_DATABRICKS_METRICS_PROPERTIES "/databricks/spark/conf/metrics.properties"
#define PP_DATABRICKS_WEBUI_PORT 40001

/* The service name (malloc'd, never NULL): searched for up to timeout_s
 * seconds, "databricks" if nothing was found. The properties file is read
 * as untrusted input. */
char *pp_databricks_service_name(const char *properties_path, int timeout_s);

/* Parsers, exposed for tests. */
/* "host:port" of the Spark UI from metrics.properties text (a host that
 * already names a port keeps it); NULL if the key is missing. malloc'd. */
char *pp_databricks_webui_address(const char *properties_text);
/* The service name from the text of a Spark application's /environment
 * reply; NULL if neither property is there or a value is malformed. */
char *pp_databricks_name_from_environment(const char *environment_json);

#endif
