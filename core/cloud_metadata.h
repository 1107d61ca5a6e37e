/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cloud metadata: which cloud the host runs on (AWS, GCP, Azure) and the
 * instance facts gProfiler puts in the header's "cloud_info", read from the
 * instance metadata service. The probes use short timeouts (connect 300 ms,
 * whole request 1 s) so a host outside any cloud pays about a second once
 * at start; enrichment.cloud_metadata: false (or
 * --disable-metadata-collection) skips them.
 */
#ifndef PP_CLOUD_METADATA_H
#define PP_CLOUD_METADATA_H

#include <jansson.h>

#define PP_IMDS_DEFAULT_URL "http://169.254.169.254"

/* base_url: PP_IMDS_DEFAULT_URL, or a fake for tests. Returns "aws", "gcp",
 * "azure" or "unknown"; *info gets a new cloud_info object (NULL when
 * unknown). */
const char *pp_cloud_metadata_probe(const char *base_url, json_t **info);

/* Probe (unless cfg turns it off) and set "cloud_provider" / "cloud_info"
 * in the static metadata object. An agent that does not upload probes in a
 * short-lived child process, so it never maps libcurl itself. Call it
 * before the agent starts any thread but the uploader's. */
struct pp_config;
void pp_cloud_metadata_apply(const struct pp_config *cfg, json_t *system_metadata);

/* Parsers of the providers' replies (exposed for unit tests). NULL if the
 * text is not a valid reply. */
json_t *pp_cloud_parse_aws(const char *identity_doc, const char *life_cycle);
json_t *pp_cloud_parse_gcp(const char *recursive_json);
json_t *pp_cloud_parse_azure(const char *compute_json);

#endif
