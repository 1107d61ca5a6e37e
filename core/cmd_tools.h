/* SPDX-License-Identifier: Apache-2.0 */
/* `polyprof upload-file`, `convert` and `diff` (docs/upload.md). Each
 * returns the process exit code: 0 success, 1 runtime failure, 2 usage
 * error. */
#ifndef PP_CMD_TOOLS_H
#define PP_CMD_TOOLS_H

#include <stddef.h>

#include "config.h"

/* Upload an existing .col (--file-path or the first operand). */
int pp_cmd_upload_file(struct pp_config *cfg, const char *const *operands, size_t n);
/* convert IN.col --to html|pprof|speedscope|col -o OUT */
int pp_cmd_convert(struct pp_config *cfg, const char *const *operands, size_t n);
/* diff BASE NEW [-o diff.html] [--format html|table]; BASE and NEW are
 * .col files or directories of sessions */
int pp_cmd_diff(struct pp_config *cfg, const char *const *operands, size_t n, const char *format);

/* top [PID...]: the live view (owns cfg, like the agent) */
int pp_cmd_top(struct pp_config *cfg, const char *const *operands, size_t n);

/* Read a whole file (bounded by max bytes). *out malloc'd, NUL-terminated.
 * 0 or -errno. */
int pp_read_whole_file(const char *path, size_t max, char **out, size_t *len);

struct pp_profile;
/* Parse a .col file into a new profile (NULL + message on stderr). */
struct pp_profile *pp_cmd_load_col(const char *path, char **header_json);

#endif
