/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Line heatmap: a self-contained HTML page listing every source file that
 * frames of the profile name with a line (Python, Ruby, PHP, JavaScript,
 * and any frame a plugin gave a file and line), with per-line sample
 * counts over the file's source text, navigable from a file index.
 *
 * A line's "self" samples are those whose innermost line-bearing frame is
 * that line (a Python line calling into C keeps the time); its "total"
 * samples are those with the line anywhere on the stack, once per sample.
 *
 * The source text is read at write time and is what the file holds then.
 * File names come from profiled processes, so a file is embedded only when
 * it is a regular, world-readable file of bounded size holding text: the
 * agent runs as root, and a process naming /etc/shadow as its source must
 * not get it copied into a page. Otherwise the page shows the line counts
 * with the reason the text is absent.
 */
#ifndef PP_OUTPUT_HEATMAP_H
#define PP_OUTPUT_HEATMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "profile.h"

struct pp_heatmap_info {
  const char *title;
  /* Where a relative source path ("app.py", "lib/x.rb": a program started
   * from its own directory) is read from, or NULL to give such files no
   * text (the agent does not know the directory a process was in). The
   * same checks apply to the joined path. */
  const char *source_root;
};

/* 0 or -errno. */
int pp_heatmap_write(FILE *f, const struct pp_profile *p, const struct pp_heatmap_info *info);

/* The file and line a frame names, from its record or, for frames parsed
 * back from a .col, from its text ("name (file:line)", "name - file:line",
 * "name file:line"). False when it names none. *file points into the
 * profile's strings and is not NUL-terminated. */
bool pp_frame_source_line(const struct pp_profile *p, uint32_t frame_id, const char **file,
                          size_t *file_len, uint32_t *line);

#endif
