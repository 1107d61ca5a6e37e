/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading another process's memory, and finding a runtime's symbols in it.
 *
 * Out-of-process samplers (python, php, ruby) locate a few globals of the
 * interpreter (_PyRuntime, executor_globals, ruby_current_vm_ptr...) by name
 * in the ELF file the target mapped, add the load bias, then follow pointers
 * with pp_remote_read(). Every address and length there comes from the target
 * and is hostile: reads are bounded here as well as by the callers, and a
 * failed or partial read is an error, never a half-filled buffer.
 */
#ifndef POLYPROF_KIT_REMOTE_H
#define POLYPROF_KIT_REMOTE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "polyprof/kit/target_files.h"

#define PP_PATH_MAX 4096               /* PATH_MAX of Linux, without needing POSIX feature macros */
#define PP_REMOTE_MAX_READ (16u << 20) /* no single read is larger */

/* Exactly len bytes from addr in pid, or -errno (-EFAULT: unmapped or
 * partial, -ESRCH: gone, -EPERM: not allowed, -EINVAL: len too large). */
int pp_remote_read(pid_t pid, uint64_t addr, void *buf, size_t len);

/* Test and fuzzing seam: every read above (and so every walker built on
 * them) goes to fn instead of the process, which lets a test or a fuzz
 * target stand a recorded or made-up address space in for a target. fn
 * returns 0 with len bytes at buf, or -errno (-EFAULT: not mapped). NULL
 * restores the real reads. Set it before any read, from one thread: no
 * plugin calls this. */
typedef int (*pp_remote_reader_fn)(pid_t pid, uint64_t addr, void *buf, size_t len);
void pp_remote_set_reader(pp_remote_reader_fn fn);

/* Several reads in one system call; 0 only if every one was complete. */
struct pp_remote_iov {
  uint64_t addr;
  void *buf;
  size_t len;
};
int pp_remote_readv(pid_t pid, const struct pp_remote_iov *iov, size_t n);

/* A NUL-terminated string of at most cap-1 bytes (truncated, still
 * terminated). Reads page by page so a string near the end of a mapping
 * does not fail. Returns its length or -errno. */
ssize_t pp_remote_read_str(pid_t pid, uint64_t addr, char *buf, size_t cap);

/* A file mapped into a process, opened through the kit's safe target-root
 * access (target_files.h). */
struct pp_module {
  char path[PP_PATH_MAX]; /* as the target names it (from /proc/PID/maps) */
  uint64_t start, end;    /* lowest start, highest end of its mappings */
  uint64_t bias;          /* runtime address = ELF vaddr + bias */
  int is_exe;             /* it is /proc/PID/exe */
  int fd;                 /* the file, read-only; pp_module_close() closes it */
  struct pp_file_id id;   /* device and inode from the maps */
};

/* First mapped file whose basename matches the fnmatch pattern (pass the
 * exe's basename to get the executable): opened (m->fd) with the identity
 * check, its load bias computed from its program headers. 0, -ENOENT if
 * none, or -errno; reason (optional) says why a file was refused. */
int pp_find_module(uint32_t pid, const char *pattern, struct pp_module *m, char *reason,
                   size_t cap);
void pp_module_close(struct pp_module *m);

#endif
