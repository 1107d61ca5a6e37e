/* Extra output formats, studio upload and Pyroscope push of one session. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "output/col.h"
#include "output/files.h"
#include "output/pprof.h"
#include "output/speedscope.h"
#include "upload/publish.h"
#include "upload/pyroscope.h"
#include "upload/uploader.h"

char *pp_publish_col_text(const struct pp_config *cfg, const struct pp_profile *p,
                          const char *header_text, size_t *len) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  if (!f) return NULL;
  struct pp_col_opts o = {
      .app_metadata_prefix = cfg->application_metadata,
      .container_prefix = true,
      .appids = cfg->app_identifiers,
  };
  int rc = pp_col_write(f, p, header_text, &o);
  if (fclose(f) != 0 || rc < 0) {
    free(buf);
    return NULL;
  }
  *len = n;
  return buf;
}

static bool format_on(const struct pp_config *cfg, const char *name) {
  for (size_t i = 0; i < cfg->output_format_count; i++)
    if (strcmp(cfg->output_formats[i], name) == 0) return true;
  return false;
}

struct fmt_ctx {
  const struct pp_publish_args *a;
};

static int write_pprof(FILE *f, void *vctx) {
  const struct pp_publish_args *a = ((struct fmt_ctx *)vctx)->a;
  struct pp_pprof_info info = {.start = a->start, .end = a->end, .frequency = a->cfg->frequency};
  return pp_pprof_write(f, a->merged, &info);
}

static int write_speedscope(FILE *f, void *vctx) {
  const struct pp_publish_args *a = ((struct fmt_ctx *)vctx)->a;
  char name[128], iso[32];
  pp_speedscope_time(a->end, iso, sizeof(iso));
  snprintf(name, sizeof(name), "polyprof %s", iso);
  return pp_speedscope_write(f, a->merged, name);
}

void pp_publish_session(const struct pp_publish_args *a) {
  const struct pp_config *cfg = a->cfg;
  if (cfg->output_dir) {
    char stem[64], err[512];
    struct fmt_ctx fc = {.a = a};
    if (a->stem)
      snprintf(stem, sizeof(stem), "%s", a->stem);
    else
      pp_output_stem(a->end, stem, sizeof(stem));
    if (format_on(cfg, "pprof")) {
      if (pp_output_publish(cfg->output_dir, stem, ".pb.gz", "last_profile.pb.gz",
                            cfg->rotating_output, write_pprof, &fc, err, sizeof(err)) < 0)
        pp_log(PP_LOG_ERROR, "polyprof", "writing the pprof file failed: %s", err);
      else
        pp_log(PP_LOG_INFO, "polyprof", "wrote %s/%s.pb.gz", cfg->output_dir, stem);
    }
    if (format_on(cfg, "speedscope")) {
      if (pp_output_publish(cfg->output_dir, stem, ".speedscope.json",
                            "last_profile.speedscope.json", cfg->rotating_output, write_speedscope,
                            &fc, err, sizeof(err)) < 0)
        pp_log(PP_LOG_ERROR, "polyprof", "writing the speedscope file failed: %s", err);
      else
        pp_log(PP_LOG_INFO, "polyprof", "wrote %s/%s.speedscope.json", cfg->output_dir, stem);
    }
  }
  if (!a->uploader) return;
  if (cfg->upload) {
    size_t len = 0;
    char *col = pp_publish_col_text(cfg, a->merged, a->header_text, &len);
    if (col)
      pp_uploader_submit(a->uploader, col, len, a->start, a->end, a->cpu_avg, a->mem_avg);
    else
      pp_log(PP_LOG_ERROR, "polyprof.upload", "cannot build the upload: out of memory");
    free(col);
  }
  if (cfg->pyroscope_url) pp_pyroscope_push(cfg, a->uploader, a->merged, a->start, a->end);
  pp_uploader_ship_logs(a->uploader);
}
