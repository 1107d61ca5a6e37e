/* SPDX-License-Identifier: Apache-2.0 */
/* Pyroscope /ingest client (see pyroscope.h). */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "k8s_labels.h"
#include "k8s_meta.h"
#include "log.h"
#include "output/col.h"
#include "output/pprof.h"
#include "profile_mode.h"
#include "upload/http.h"
#include "upload/pyroscope.h"
#include "upload/uploader.h"

#define MAX_GROUPS 64

const char *pp_pyroscope_runtime(unsigned k) {
  switch (k) {
    case PP_FRAME_PYTHON:
    case PP_FRAME_PYTHON_NATIVE:
    case PP_FRAME_PYTHON_ERROR:
      return "python";
    case PP_FRAME_JAVA_JIT:
    case PP_FRAME_JAVA_INLINED:
    case PP_FRAME_JAVA_INTERPRETED:
    case PP_FRAME_JAVA_C1:
      return "java";
    case PP_FRAME_RUBY:
      return "ruby";
    case PP_FRAME_PHP:
      return "php";
    case PP_FRAME_DOTNET:
      return "dotnet";
    case PP_FRAME_JS:
    case PP_FRAME_JS_INTERPRETED:
    case PP_FRAME_JS_BASELINE:
    case PP_FRAME_JS_OPTIMIZED:
    case PP_FRAME_JS_INLINED:
    case PP_FRAME_JS_BUILTIN:
      return "nodejs";
    default:
      return "native";
  }
}

/* Pyroscope label values may not hold the name syntax characters. */
static void label_value(const char *in, char *out, size_t len) {
  size_t o = 0;
  for (; *in && o + 1 < len; in++)
    out[o++] = (strchr("{}=,\" ", *in) || (unsigned char)*in < 0x20) ? '_' : *in;
  out[o] = '\0';
}

struct tag_buf {
  char *buf;
  size_t cap, len;
};

/* A selected pod label as the tag pod_label_<key>: Pyroscope's tag names
 * take letters, digits and '_' only. A tag that does not fit is left out. */
static void pod_label_tag(void *ctx, const char *key, const char *value) {
  struct tag_buf *t = ctx;
  char tag[PP_K8S_LABEL_KEY_MAX + 16];
  size_t n = (size_t)snprintf(tag, sizeof(tag), ",pod_label_");
  for (const char *k = key; *k && n < sizeof(tag) - 1; k++)
    tag[n++] = (isalnum((unsigned char)*k) || *k == '_') ? *k : '_';
  tag[n] = '\0';
  int w = t->len < t->cap ? snprintf(t->buf + t->len, t->cap - t->len, "%s=%s", tag, value) : -1;
  if (w > 0 && (size_t)w < t->cap - t->len - 2) /* room left for the closing brace */
    t->len += (size_t)w;
  else if (t->len < t->cap)
    t->buf[t->len] = '\0';
}

static char *ingest_url(const struct pp_config *cfg, const struct pp_profile_type_desc *td,
                        const char *container, const char *runtime, time_t start, time_t end,
                        const char *format) {
  char host[256] = "", h[256], c[256], app[256], name[1024];
  if (gethostname(host, sizeof(host) - 1) != 0) snprintf(host, sizeof(host), "unknown");
  label_value(host, h, sizeof(h));
  label_value(cfg->service_name ? cfg->service_name : "polyprof", app, sizeof(app));
  int n = snprintf(name, sizeof(name), "%s.%s{hostname=%s", app, td->pyroscope, h);
  if (container && *container) {
    label_value(container, c, sizeof(c));
    n += snprintf(name + n, sizeof(name) - (size_t)n, ",container=%s", c);
    const char *kc, *pod, *ns;
    size_t kcl, pl, nl;
    if (pp_k8s_name_split(container, &kc, &kcl, &pod, &pl, &ns, &nl) == 0) {
      char pv[256], nv[128];
      snprintf(pv, sizeof(pv), "%.*s", (int)pl, pod);
      snprintf(nv, sizeof(nv), "%.*s", (int)nl, ns);
      label_value(pv, c, sizeof(c));
      n += snprintf(name + n, sizeof(name) - (size_t)n, ",pod=%s", c);
      label_value(nv, c, sizeof(c));
      n += snprintf(name + n, sizeof(name) - (size_t)n, ",namespace=%s", c);
    }
    struct tag_buf tb = {name, sizeof(name), (size_t)n};
    pp_k8s_labels_each(container, pod_label_tag, &tb);
    n = (int)tb.len;
  }
  if (runtime) n += snprintf(name + n, sizeof(name) - (size_t)n, ",runtime=%s", runtime);
  snprintf(name + n, sizeof(name) - (size_t)n, "}");
  char *esc = pp_url_escape(name);
  char *url = NULL;
  size_t bl = strlen(cfg->pyroscope_url);
  while (bl && cfg->pyroscope_url[bl - 1] == '/')
    bl--;
  if (esc && asprintf(&url,
                      "%.*s/ingest?name=%s&from=%lld&until=%lld&format=%s&sampleRate=%u"
                      "&spyName=polyprof&units=%s&aggregationType=sum",
                      (int)bl, cfg->pyroscope_url, esc, (long long)start, (long long)end, format,
                      td->pyro_rate ? td->pyro_rate : (unsigned)cfg->frequency, td->pyro_units) < 0)
    url = NULL;
  free(esc);
  return url;
}

static const char *pid_runtime(const struct pp_profile *p, const struct pp_stack_rec *s) {
  const uint32_t *fr = pp_profile_stack_frames(p, s);
  for (uint32_t k = 0; k < s->nframes; k++) {
    const char *r = pp_pyroscope_runtime(pp_profile_frame(p, fr[k])->kind);
    if (strcmp(r, "native") != 0) return r;
  }
  return "native";
}

void pp_pyroscope_push(const struct pp_config *cfg, struct pp_uploader *u,
                       const struct pp_profile *p, time_t start, time_t end, unsigned type) {
  const struct pp_profile_type_desc *td = pp_profile_type(type);
  if (!u || !cfg->pyroscope_url || !td) return;
  if (cfg->pyroscope_format && strcmp(cfg->pyroscope_format, "pprof") == 0) {
    struct pp_pprof_info info = {.start = start, .end = end, .frequency = cfg->frequency};
    if (type != PP_PROFILE_CPU) {
      info.sample_type = td->pprof_type;
      info.sample_unit = td->pprof_unit;
    }
    uint8_t *raw = NULL;
    size_t len = 0;
    char *url = ingest_url(cfg, td, NULL, NULL, start, end, "pprof");
    if (!url || pp_pprof_encode(p, &info, &raw, &len) < 0) {
      free(url);
      return;
    }
    pp_uploader_submit_pyroscope(u, url, raw, len, "application/octet-stream");
    return;
  }
  /* folded: group stacks by (container, runtime) */
  struct group {
    uint32_t container;
    const char *runtime;
    FILE *f;
    char *buf;
    size_t len;
  } g[MAX_GROUPS];
  size_t ng = 0;
  char text[2048];
  size_t nst = pp_profile_stack_count(p);
  for (size_t i = 0; i < nst; i++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, i);
    if (!s->count) continue;
    const struct pp_pid_rec *pr = pp_profile_pid(p, s->pid);
    uint32_t cont = pr ? pr->container : PP_NO_STR;
    const char *rt = pid_runtime(p, s);
    size_t gi = 0;
    while (gi < ng && !(g[gi].container == cont && strcmp(g[gi].runtime, rt) == 0))
      gi++;
    if (gi == ng) {
      if (ng == MAX_GROUPS)
        gi = 0; /* too many: fold the rest into the first group */
      else {
        g[ng] = (struct group){.container = cont, .runtime = rt};
        g[ng].f = open_memstream(&g[ng].buf, &g[ng].len);
        if (!g[ng].f) break;
        ng++;
      }
    }
    uint32_t comm = s->comm != PP_NO_STR ? s->comm : pr ? pr->comm : PP_NO_STR;
    FILE *f = g[gi].f;
    const char *cs = pp_profile_str(p, comm);
    for (; *cs; cs++)
      putc(*cs == ';' || *cs == ' ' || *cs == '\n' ? '_' : *cs, f);
    const uint32_t *fr = pp_profile_stack_frames(p, s);
    for (uint32_t k = 0; k < s->nframes; k++) {
      size_t n = pp_frame_format(p, fr[k], text, sizeof(text), true);
      putc(';', f);
      /* folded lines end with " <count>": a space inside a frame would be
       * read as the separator by strict parsers only at the end, but be safe */
      fwrite(text, 1, n, f);
    }
    fprintf(f, " %llu\n", (unsigned long long)s->count);
  }
  for (size_t i = 0; i < ng; i++) {
    fclose(g[i].f);
    const char *cont = g[i].container != PP_NO_STR ? pp_profile_str(p, g[i].container) : NULL;
    char *url = ingest_url(cfg, td, cont, g[i].runtime, start, end, "folded");
    if (!url) {
      free(g[i].buf);
      continue;
    }
    pp_uploader_submit_pyroscope(u, url, (unsigned char *)g[i].buf, g[i].len, "text/plain");
  }
}
