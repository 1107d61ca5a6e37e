/* SPDX-License-Identifier: Apache-2.0 */
/* Cloud instance metadata probes (see cloud_metadata.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

#define CHILD_MAX_REPLY (256u << 10)
#define CHILD_DEADLINE_MS 15000 /* the probes' own timeouts add up to ~5 s */

static long long mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs the probe in a child process. The probe needs libcurl, which with
 * its dependencies (TLS, Kerberos, LDAP...) is ~8 MiB of resident memory
 * that an agent that never uploads would otherwise carry for its whole
 * life. Only called while the agent is single-threaded (no uploader), so
 * the child may use malloc and dlopen. The reply, "<provider>\n<json>", is
 * checked like any other input. NULL if the child failed: then nothing is
 * known, as if no cloud answered. */
static const char *probe_in_child(const char *base_url, json_t **info) {
  static const char *const providers[] = {"aws", "gcp", "azure", "unknown"};
  *info = NULL;
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0) return NULL;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]);
    close(p[1]);
    return NULL;
  }
  if (pid == 0) {
    close(p[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    json_t *found = NULL;
    const char *prov = pp_cloud_metadata_probe(base_url, &found);
    char *text = found ? json_dumps(found, JSON_COMPACT) : NULL;
    FILE *f = fdopen(p[1], "w");
    if (f) {
      fprintf(f, "%s\n%s", prov, text ? text : "");
      fclose(f);
    }
    _exit(0); /* not exit(): the agent's atexit handlers are not ours */
  }
  close(p[1]);
  char *buf = malloc(CHILD_MAX_REPLY + 1);
  size_t len = 0;
  long long deadline = mono_ms() + CHILD_DEADLINE_MS;
  bool done = false;
  while (buf && !done && len < CHILD_MAX_REPLY) {
    struct pollfd pfd = {.fd = p[0], .events = POLLIN};
    long long left = deadline - mono_ms();
    if (left <= 0) break;
    int n = poll(&pfd, 1, (int)left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    ssize_t r = read(p[0], buf + len, CHILD_MAX_REPLY - len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      done = r == 0;
    else
      len += (size_t)r;
  }
  close(p[0]);
  if (!done) kill(pid, SIGKILL); /* too slow or too much: give up on it */
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
  }
  const char *provider = NULL;
  if (buf && done) {
    buf[len] = 0;
    char *nl = memchr(buf, '\n', len);
    for (size_t i = 0; nl && i < sizeof(providers) / sizeof(providers[0]); i++)
      if ((size_t)(nl - buf) == strlen(providers[i]) && !memcmp(buf, providers[i], nl - buf))
        provider = providers[i];
    if (provider && nl[1]) {
      *info = json_loads(nl + 1, JSON_REJECT_DUPLICATES, NULL);
      if (*info && !json_is_object(*info)) {
        json_decref(*info);
        *info = NULL;
      }
    }
  }
  free(buf);
  return provider;
}

void pp_cloud_metadata_apply(const struct pp_config *cfg, json_t *md) {
  if (!md || !cfg->cloud_metadata || !cfg->metadata_collection) return;
  json_t *info = NULL;
  /* An agent that uploads has libcurl (and threads) anyway. */
  bool in_child = !cfg->upload && !cfg->pyroscope_url && !cfg->otlp_endpoint;
  const char *provider = in_child ? probe_in_child(cfg->cloud_metadata_url, &info)
                                  : pp_cloud_metadata_probe(cfg->cloud_metadata_url, &info);
  if (!provider) {
    pp_log(PP_LOG_DEBUG, "polyprof", "cloud metadata: the probe process failed");
    provider = "unknown";
  }
  json_object_set_new(md, "cloud_provider", json_string(provider));
  if (info) {
    json_object_set_new(md, "cloud_info", info);
    pp_log(PP_LOG_INFO, "polyprof", "cloud: %s", provider);
  } else {
    pp_log(PP_LOG_DEBUG, "polyprof", "cloud metadata: no cloud instance metadata service found");
  }
}
