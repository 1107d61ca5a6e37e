/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The per-session hand-off from the output stage (session_output.c) to the
 * remote destinations: the studio upload, the Pyroscope push and the log
 * batch. Called after the local files are written; never fails the session
 * (problems are logged).
 */
#ifndef PP_UPLOAD_PUBLISH_H
#define PP_UPLOAD_PUBLISH_H

#include <time.h>

#include "config.h"
#include "profile.h"

struct pp_uploader;

struct pp_publish_args {
  const struct pp_config *cfg;
  struct pp_uploader *uploader; /* may be NULL */
  const struct pp_profile *merged;
  const char *header_text; /* .col line-0 JSON */
  time_t start, end;
  double cpu_avg, mem_avg; /* < 0: not collected */
  unsigned profile_type;   /* enum pp_profile_type: the studio takes cpu only */
};

void pp_publish_session(const struct pp_publish_args *a);

/* The .col text of a profile in memory (malloc'd, *len set); NULL on OOM. */
char *pp_publish_col_text(const struct pp_config *cfg, const struct pp_profile *p,
                          const char *header_text, size_t *len);

#endif
