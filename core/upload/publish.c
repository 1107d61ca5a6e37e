/* SPDX-License-Identifier: Apache-2.0 */
/* Studio upload, Pyroscope push and log batch of one session. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "output/col.h"
#include "profile_mode.h"
#include "upload/otlp.h"
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

void pp_publish_session(const struct pp_publish_args *a) {
  const struct pp_config *cfg = a->cfg;
  if (!a->uploader) return;
  if (cfg->upload && a->profile_type == PP_PROFILE_CPU) { /* the studio takes cpu only */
    size_t len = 0;
    char *col = pp_publish_col_text(cfg, a->merged, a->header_text, &len);
    if (col)
      pp_uploader_submit(a->uploader, col, len, a->start, a->end, a->cpu_avg, a->mem_avg);
    else
      pp_log(PP_LOG_ERROR, "polyprof.upload", "cannot build the upload: out of memory");
    free(col);
  }
  if (cfg->pyroscope_url)
    pp_pyroscope_push(cfg, a->uploader, a->merged, a->start, a->end, a->profile_type);
  if (cfg->otlp_endpoint)
    pp_otlp_push(cfg, a->uploader, a->merged, a->start, a->end, a->profile_type);
  pp_uploader_ship_logs(a->uploader);
}
