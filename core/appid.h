/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal helpers of the enrichment stage shared by appid.c,
 * app_metadata.c and enrich.c: which runtime a process runs, psutil-style
 * argv splitting, and resolving a path the way the process sees it.
 */
#ifndef PP_APPID_H
#define PP_APPID_H

#include <stdbool.h>
#include <stddef.h>

enum pp_runtime {
  PP_RT_UNKNOWN = 0,
  PP_RT_PYTHON,
  PP_RT_JAVA,
  PP_RT_NODE,
  PP_RT_RUBY,
  PP_RT_DOTNET,
  PP_RT_PHP,
};

/* Runtime from the exe path (basename of /proc/PID/exe, " (deleted)"
 * ignored) and, when that says nothing, argv[0] / argv[1] (shebang scripts
 * such as gunicorn or celery run as "python3 /venv/bin/gunicorn ..."). */
enum pp_runtime pp_runtime_detect(const char *exe, const char *argv, size_t argv_len);
const char *pp_runtime_name(enum pp_runtime rt);

/* Split raw /proc/PID/cmdline bytes into arguments exactly like psutil's
 * Process.cmdline() (which gProfiler's rules were written against): NUL
 * separated when the data ends with NUL, else space separated (processes
 * that rewrote their title), and a single NUL-terminated argument holding
 * spaces is split at the spaces. Returns the count (capped at max) and a
 * malloc'd buffer in *storage holding the strings that out[] points into. */
size_t pp_split_cmdline(const char *data, size_t len, char **storage, const char **out, size_t max);

/* Join `path` to `cwd` (unless absolute) and resolve symlinks component by
 * component under `root` ("/proc/PID/root"; NULL or "" = no resolution):
 * absolute link targets are re-rooted under `root` so they cannot escape it.
 * Returns the path as the process sees it (without the root prefix),
 * malloc'd, or NULL on a symlink loop, an over-long path or OOM. */
char *pp_resolve_proc_path(const char *root, const char *cwd, const char *path);

/* Open a path another process chose (its config files, its libraries) only
 * if it is a regular file: never a FIFO that would block us or a device
 * whose open has side effects. O_NONBLOCK covers a swap after the check.
 * fd or -errno (-EINVAL for a non-regular file). */
int pp_open_regular(const char *path);
/* Read at most cap-1 bytes of such a file, NUL-terminated. 0 or -errno. */
int pp_read_regular(const char *path, char *buf, size_t cap, size_t *len);

/* The [uwsgi] (or [DEFAULT]) `module` of ini text, parsed like Python's
 * ConfigParser(strict=False). 0 with *module (malloc'd, NULL if absent), or
 * -1 if ConfigParser would have rejected the file. */
int pp_ini_find_module(const char *text, char **module);

#endif /* PP_APPID_H */
