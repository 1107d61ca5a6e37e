/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Self-contained HTML flame graph: one file, zero network requests, drawn on
 * a canvas. The page embeds a compact encoding of the merged profile (string
 * table + frame table + stacks) and builds the tree in the browser.
 */
#ifndef PP_OUTPUT_HTML_H
#define PP_OUTPUT_HTML_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "profile.h"

struct pp_html_plugin_stat {
  const char *name;
  uint64_t samples;
  double rate_hz;     /* achieved samples per second over the session */
  const char *status; /* "ok", or why it lost data this session */
};

struct pp_html_info {
  const char *title;      /* e.g. "polyprof — host1" */
  const char *start_time; /* ISO 8601 UTC */
  const char *end_time;
  double duration_s;
  const char *hostname;
  const struct pp_html_plugin_stat *plugins;
  size_t plugin_count;
  const char *unit; /* what counts count: "samples" (NULL), "microseconds", "bytes" */
  /* A differential page (polyprof diff): the profile written is the new
   * one, base the one it is compared with; NULL for a flame graph. Stacks
   * are matched by process (pid, comm) and frame text, so the caller gives
   * a process the same pid in both. */
  const struct pp_profile *base;
  const char *base_name, *new_name;
  /* The line heatmap written next to this page (its file name), so a frame
   * with a source line links to it; NULL: none. */
  const char *heatmap_href;
};

int pp_html_write(FILE *f, const struct pp_profile *merged, const struct pp_html_info *info);

#endif
