/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rootless mode (--rootless, gProfiler's flag): the agent runs as an
 * ordinary user and profiles only processes that user owns, listed with
 * --pids. This file holds the rules of that mode: which pids are allowed,
 * where a user's log, pid file and spool go, and what will and will not work
 * without privileges (shown by `polyprof check --rootless` and logged once
 * when the agent starts).
 */
#ifndef PP_ROOTLESS_H
#define PP_ROOTLESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "config.h"

/* The user's private directory for the agent's files: $XDG_RUNTIME_DIR/polyprof
 * when XDG_RUNTIME_DIR is an absolute directory owned by us, else
 * $TMPDIR/polyprof-<uid> (default /tmp). Only computes the path. */
void pp_rootless_user_dir(char *out, size_t cap);

/* Creates the user directory (0700), refusing one that exists but is a
 * symlink or belongs to someone else (a shared /tmp). 0 or -errno. */
int pp_rootless_make_user_dir(const char *dir);

/* With c->rootless: pid file, log file and spool dir still at root's
 * defaults move under pp_rootless_user_dir(). No-op otherwise. */
void pp_rootless_apply_defaults(struct pp_config *c);

/* The rules of the mode for `run`: not root, --pids given, every pid alive
 * and owned by our real uid. 0, or -1 with a message naming the flag or the
 * pid. */
int pp_rootless_validate(const struct pp_config *c, char err[PP_MAX_ERR]);

/* One line per feature: what works without root and what does not, with the
 * reason (sysctls, missing capabilities). `sink` gets (ok, text) per line. */
typedef void (*pp_rootless_line_fn)(void *arg, bool ok, const char *text);
void pp_rootless_report(const struct pp_config *c, pp_rootless_line_fn sink, void *arg);

#endif
