/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Collapsed-stacks (.col) writer and parser, byte-compatible with gProfiler
 * (docs/gprofiler-compat.md): line 0 is "# " + JSON header, then
 * "<appmeta-idx>;<container>;<comm>;[appid: X;]<root>;...;<leaf> <count>"
 * lines, root first, joined by '\n', no trailing newline.
 */
#ifndef PP_OUTPUT_COL_H
#define PP_OUTPUT_COL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "profile.h"

/* Frame text as gProfiler writes it, e.g. "fn (f.py:3)_[p]", "do_sys_open_[k]",
 * "Foo.bar(Ljava/lang/String|)V_[j]". ';' and '\n' are replaced. Returns the
 * length written (truncated to cap-1, always NUL-terminated). */
size_t pp_frame_format(const struct pp_profile *p, uint32_t frame_id, char *buf, size_t cap,
                       bool with_suffix);
/* Suffix of a kind without brackets' text, e.g. "_[k]" or "" */
const char *pp_frame_kind_suffix(unsigned kind);
/* Whether a kind is a JavaScript frame (PP_FRAME_JS or one of its tiers). */
bool pp_frame_kind_is_js(unsigned kind);
/* Short kind name for legends and pprof: "native", "kernel", "python"... */
const char *pp_frame_kind_name(unsigned kind);

struct pp_col_opts {
  bool app_metadata_prefix; /* emit "<idx>;" (default true) */
  bool container_prefix;    /* emit "<container>;" (default true; false = API v1) */
  bool appids;              /* emit "appid: X;" frames */
};

/* header_json: the JSON object text for line 0 (without "# "). Stacks are
 * written in the profile's stack order. 0 or -errno. */
int pp_col_write(FILE *f, const struct pp_profile *merged, const char *header_json,
                 const struct pp_col_opts *opts);

/* Parse .col text. Frames get their kind back from their suffix (and lose
 * it); "appid: X" frames set the pid's appid. Stack lines carry no pid, so
 * each distinct (idx, container, comm, appid) prefix gets a synthetic pid
 * (1, 2, ...) with that comm/container/appid. *header_json gets a malloc'd
 * copy of the line-0 JSON text (NULL if none). On a malformed line: -EINVAL
 * and err says which line and why. */
int pp_col_parse(const char *text, size_t len, struct pp_profile *out, char **header_json,
                 char *err, size_t errlen);

#endif
