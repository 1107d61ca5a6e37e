/* Cloud instance metadata probes (see cloud_metadata.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cloud_metadata.h"
#include "config.h"
#include "log.h"
#include "upload/http.h"

static const struct pp_http_opts imds_opts = {
    .verify = true, .connect_timeout_ms = 300, .timeout_ms = 1000};

/* GET base+path; the reply body if 200 (malloc'd), else NULL. */
static char *get(const char *base, const char *path, const char *const *headers) {
  char url[512];
  snprintf(url, sizeof(url), "%s%s", base, path);
  struct pp_http_result r;
  if (pp_http_get(url, headers, &imds_opts, &r) < 0 || r.status != 200) {
    pp_http_result_free(&r);
    return NULL;
  }
  return r.body;
}

static const char *str(json_t *o, const char *k) {
  const char *s = json_string_value(json_object_get(o, k));
  return s ? s : "";
}

/* "projects/1/zones/us-central1-a" -> "us-central1-a" */
static const char *last_part(const char *s) {
  const char *sl = strrchr(s, '/');
  return sl ? sl + 1 : s;
}

json_t *pp_cloud_parse_aws(const char *doc, const char *life_cycle) {
  json_t *d = doc ? json_loads(doc, 0, NULL) : NULL;
  if (!json_is_object(d) || !json_is_string(json_object_get(d, "instanceId"))) {
    json_decref(d);
    return NULL;
  }
  json_t *o =
      json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "region", str(d, "region"), "zone",
                str(d, "availabilityZone"), "instance_type", str(d, "instanceType"), "life_cycle",
                life_cycle ? life_cycle : "", "account_id", str(d, "accountId"), "image_id",
                str(d, "imageId"), "instance_id", str(d, "instanceId"));
  json_decref(d);
  return o;
}

json_t *pp_cloud_parse_gcp(const char *text) {
  json_t *d = text ? json_loads(text, 0, NULL) : NULL;
  if (!json_is_object(d) || !json_object_get(d, "id")) {
    json_decref(d);
    return NULL;
  }
  json_t *sched = json_object_get(d, "scheduling");
  const char *pre = str(sched, "preemptible");
  json_t *id = json_object_get(d, "id");
  char idbuf[32];
  if (json_is_integer(id))
    snprintf(idbuf, sizeof(idbuf), "%lld", (long long)json_integer_value(id));
  else
    snprintf(idbuf, sizeof(idbuf), "%.31s", str(d, "id"));
  json_t *o = json_pack(
      "{s:s,s:s,s:b,s:b,s:s,s:s,s:s}", "zone", last_part(str(d, "zone")), "instance_type",
      last_part(str(d, "machineType")), "preempted",
      json_is_true(json_object_get(d, "preempted")) || !strcasecmp(str(d, "preempted"), "TRUE"),
      "preemptible", !strcasecmp(pre, "TRUE"), "instance_id", idbuf, "image_id", str(d, "image"),
      "name", str(d, "name"));
  json_decref(d);
  return o;
}

json_t *pp_cloud_parse_azure(const char *text) {
  json_t *d = text ? json_loads(text, 0, NULL) : NULL;
  if (!json_is_object(d) || !json_is_string(json_object_get(d, "vmId"))) {
    json_decref(d);
    return NULL;
  }
  json_t *img = json_object_get(json_object_get(d, "storageProfile"), "imageReference");
  json_t *o = json_pack(
      "{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:O}", "instance_type", str(d, "vmSize"), "zone",
      str(d, "zone"), "region", str(d, "location"), "subscription_id", str(d, "subscriptionId"),
      "resource_group_name", str(d, "resourceGroupName"), "resource_id", str(d, "resourceId"),
      "instance_id", str(d, "vmId"), "name", str(d, "name"), "image_info", img ? img : json_null());
  json_decref(d);
  return o;
}

const char *pp_cloud_metadata_probe(const char *base, json_t **info) {
  *info = NULL;
  if (!base || !*base) base = PP_IMDS_DEFAULT_URL;
  /* AWS IMDSv2: a session token first, then the identity document */
  char url[512];
  snprintf(url, sizeof(url), "%s/latest/api/token", base);
  const char *ttl[] = {"X-aws-ec2-metadata-token-ttl-seconds: 60", NULL};
  struct pp_http_result r;
  int rc = pp_http_put(url, ttl, &imds_opts, &r);
  if (rc == 0 && r.status == 200 && r.body && r.body_len < 200) {
    char th[300];
    snprintf(th, sizeof(th), "X-aws-ec2-metadata-token: %s", r.body);
    const char *h[] = {th, NULL};
    char *doc = get(base, "/latest/dynamic/instance-identity/document", h);
    char *lc = get(base, "/latest/meta-data/instance-life-cycle", h);
    *info = pp_cloud_parse_aws(doc, lc);
    free(doc);
    free(lc);
  }
  bool reachable = rc == 0;
  pp_http_result_free(&r);
  if (*info) return "aws";
  if (!reachable) return "unknown"; /* nothing listens there: no cloud */
  const char *gh[] = {"Metadata-Flavor: Google", NULL};
  char *g = get(base, "/computeMetadata/v1/instance/?recursive=true", gh);
  *info = pp_cloud_parse_gcp(g);
  free(g);
  if (*info) return "gcp";
  const char *ah[] = {"Metadata: true", NULL};
  char *a = get(base, "/metadata/instance/compute/?api-version=2019-08-15", ah);
  *info = pp_cloud_parse_azure(a);
  free(a);
  if (*info) return "azure";
  return "unknown";
}

void pp_cloud_metadata_apply(const struct pp_config *cfg, json_t *md) {
  if (!md || !cfg->cloud_metadata || !cfg->metadata_collection) return;
  json_t *info = NULL;
  const char *provider = pp_cloud_metadata_probe(cfg->cloud_metadata_url, &info);
  json_object_set_new(md, "cloud_provider", json_string(provider));
  if (info) {
    json_object_set_new(md, "cloud_info", info);
    pp_log(PP_LOG_INFO, "polyprof", "cloud: %s", provider);
  } else {
    pp_log(PP_LOG_DEBUG, "polyprof", "cloud metadata: no cloud instance metadata service found");
  }
}
