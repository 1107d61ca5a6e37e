/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The model and screen of `polyprof top` (core/cmd_top.c drives it):
 * functions, source lines or threads by self and total share of the last
 * tick, with cumulative times, filterable by process and by runtime,
 * sortable, pausable.
 *
 * Each tick's profile is folded into entries keyed by (view, pid, runtime,
 * text): a function is a frame's name and file without its line, a line
 * the same with its line, a thread its name and process.
 * The tables are bounded (functions, processes, name bytes); what does not
 * fit is counted under one "[more functions than top keeps]" entry, so the
 * totals stay right. No terminal I/O here: render() fills a buffer with the
 * escape sequences of one frame.
 */
#ifndef PP_TOP_VIEW_H
#define PP_TOP_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profile.h"

struct pp_top;

struct pp_top *pp_top_new(int requested_hz);
void pp_top_free(struct pp_top *t);

/* One tick: the profile of the last `seconds`, and the samples the plugins
 * reported missing in it. Ignored while paused. */
void pp_top_add_tick(struct pp_top *t, const struct pp_profile *p, double seconds, uint64_t missed);

/* A key typed by the user. Returns true when the screen must be redrawn;
 * *quit is set for q. */
bool pp_top_key(struct pp_top *t, int key, bool *quit);

/* One frame for a rows x cols terminal, into buf (NUL-terminated, cut at
 * cap). Returns its length. */
size_t pp_top_render(const struct pp_top *t, char *buf, size_t cap, int rows, int cols);

/* The smallest terminal the view fits in. */
#define PP_TOP_MIN_COLS 60
#define PP_TOP_MIN_ROWS 10

#endif
