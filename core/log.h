/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Agent logging: stderr (INFO, or DEBUG with -v) plus a log file (always
 * DEBUG, size-rotated). Line format follows gProfiler's:
 *   [2026-11-22 03:50:00,123] INFO: polyprof.python: message
 * Plugin workers install a forwarder so their lines reach the agent's log
 * through the supervisor instead of writing the file themselves.
 */
#ifndef PP_LOG_H
#define PP_LOG_H

#include <stdarg.h>
#include <stddef.h>

#include "polyprof/plugin.h" /* PP_LOG_* levels, PP_PRINTF */

/* Replace the destinations (used by plugin workers). NULL restores the
 * default stderr + file output. */
typedef void (*pp_log_forward_fn)(int level, const char *tag, const char *msg, void *ctx);
void pp_log_set_forward(pp_log_forward_fn fn, void *ctx);

/* An extra observer of every message written by this process (the log
 * shipper, core/upload/logship.c), called after the line is written and
 * outside the log lock; messages logged from inside the tap are not tapped
 * again. NULL removes it. */
typedef void (*pp_log_tap_fn)(int level, const char *tag, const char *msg, void *ctx);
void pp_log_set_tap(pp_log_tap_fn fn, void *ctx);

void pp_log_set_stderr_level(int level);
/* Open (append) the log file; creates its directory. 0 or -errno. */
int pp_log_open_file(const char *path, size_t max_bytes, int backups);
void pp_log_close_file(void);

void pp_log(int level, const char *tag, const char *fmt, ...) PP_PRINTF(3, 4);
void pp_vlog(int level, const char *tag, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* Write an already formatted message (no printf expansion). */
void pp_log_msg(int level, const char *tag, const char *msg);

const char *pp_log_level_name(int level);

#define PP_DEBUG(...) pp_log(PP_LOG_DEBUG, "polyprof", __VA_ARGS__)
#define PP_INFO(...) pp_log(PP_LOG_INFO, "polyprof", __VA_ARGS__)
#define PP_WARN(...) pp_log(PP_LOG_WARNING, "polyprof", __VA_ARGS__)
#define PP_ERROR(...) pp_log(PP_LOG_ERROR, "polyprof", __VA_ARGS__)

#endif
