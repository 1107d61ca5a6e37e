/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Creating the agent's own files when the directory may hold something
 * planted by someone else (docs/security.md, "Files the agent writes").
 *
 * The agent runs as root, so a path it opens with O_CREAT on a name someone
 * could predict (a fixed "<out>.tmp", a pid file in a shared directory) lets
 * a planted symlink or hard link redirect the write onto any host file.
 * Everything the agent creates goes through here instead:
 *   - new data is written to a fresh file under an unpredictable name in
 *     the destination directory, created with O_CREAT|O_EXCL|O_NOFOLLOW
 *     (never an existing file, never through a symlink), then renamed over
 *     the final name (rename replaces a planted symlink itself, never its
 *     target) and the directory is fsynced so the new name survives a crash;
 *   - the temp names share one prefix, so a crash's leftovers are ours to
 *     recognise and sweep;
 *   - a file that is kept open and appended to (log, pid file) is opened
 *     only if it is a regular file owned by the agent's user, and created
 *     complete under a temp name and linked into place when missing;
 *   - reads of our own files are exact: a short read is an error, never
 *     a shorter file.
 */
#ifndef PP_SUPPORT_SAFE_FILE_H
#define PP_SUPPORT_SAFE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* Every temp file the agent creates is named PP_SAFE_TEMP_PREFIX + a name
 * hint + "." + 16 random hex digits. */
#define PP_SAFE_TEMP_PREFIX ".pp-tmp-"

/* Create a fresh temp file in dir (hint: a few characters of the final
 * name, for whoever looks at the directory). fd (O_RDWR, close-on-exec)
 * or -errno; tmp receives its path. */
int pp_safe_create_temp(const char *dir, const char *hint, mode_t mode, char *tmp, size_t tmplen);

/* rename(tmp, final), then fsync of final's directory. On failure tmp is
 * removed. 0 or -errno. */
int pp_safe_rename_into_place(const char *tmp, const char *final);

/* fsync the directory holding path (path itself when is_dir). 0 or -errno. */
int pp_safe_fsync_dir_of(const char *path, bool is_dir);

typedef int (*pp_safe_write_fn)(FILE *f, void *ctx);

/* Write final (a path) with fn through a temp file of its directory and
 * rename it into place. fn returns 0 or a negative errno; write errors
 * (ENOSPC at flush or close) are caught. On failure nothing is left behind
 * and final is untouched. 0 or -errno. */
int pp_safe_write_file(const char *final, mode_t mode, pp_safe_write_fn fn, void *ctx);

/* Point dir/link_name at target by creating a symlink under a temp name and
 * renaming it over link_name. 0 or -errno. */
int pp_safe_replace_symlink(const char *dir, const char *target, const char *link_name);

/* Remove our temp files (PP_SAFE_TEMP_PREFIX names, regular files or
 * symlinks owned by the agent's user) older than min_age_s seconds: what a
 * crash left. Returns how many were removed. */
size_t pp_safe_sweep_temps(const char *dir, unsigned min_age_s);

/* True for a name this module creates as a temp file. */
bool pp_safe_is_temp_name(const char *name);

/* dir must be a directory (not a symlink) owned by the agent's user or
 * root and not writable by group or others: otherwise anyone who can write
 * there could swap files under the agent. 0, or -errno with err naming dir
 * and the reason. */
int pp_safe_check_dir(const char *dir, char *err, size_t errlen);

/* Open path for reading and writing (appending with append; close-on-exec)
 * if it is a regular file owned by the agent's user with one link; when missing,
 * create it through a temp file linked into place. Never follows a symlink
 * and never opens a file someone else created. fd or -errno (-EPERM: the
 * existing file is not ours or not a plain file). */
int pp_safe_open_own(const char *path, bool append, mode_t mode);

/* Read exactly len bytes (EINTR retried). 0, -EIO on a short read (end of
 * file first), or -errno. */
int pp_safe_read_exact(int fd, void *buf, size_t len);

/* Write all len bytes (EINTR retried). 0 or -errno. */
int pp_safe_write_all(int fd, const void *buf, size_t len);

#endif
