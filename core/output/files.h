/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Output files: profile_<UTC end>.<ext> written through a temp file and
 * rename, symlinks last_profile.col / last_flamegraph.html re-pointed
 * atomically (link to a temp name, rename over), --rotating-output deleting
 * the previous target.
 */
#ifndef PP_OUTPUT_FILES_H
#define PP_OUTPUT_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

/* Create dir if needed and prove it is writable (creates and removes a
 * probe file). 0, or -errno with err naming the directory and the cause. */
int pp_output_check_dir(const char *dir, char *err, size_t errlen);

/* "profile_2026-11-22T03:50:00" for end time t (UTC). */
void pp_output_stem(time_t end, char *buf, size_t len);

/* The stem of a session's files: pp_output_stem, with "_2", "_3"... added
 * when a file of any output format already has that stem, so a session ending in the
 * same second as the previous one (a signal right after a session end)
 * never overwrites it. */
void pp_output_session_stem(const char *dir, time_t end, char *buf, size_t len);

typedef int (*pp_output_write_fn)(FILE *f, void *ctx);

/* Write <dir>/<stem><ext> with fn, then point <dir>/<link_name> at it (if
 * link_name). With rotating, the file the link pointed to before is removed.
 * 0 or -errno with err set; on failure no partial file is left behind. */
int pp_output_publish(const char *dir, const char *stem, const char *ext, const char *link_name,
                      bool rotating, pp_output_write_fn fn, void *ctx, char *err, size_t errlen);

#endif
