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
#ifndef PP_SUPPORT_REMOTE_H
#define PP_SUPPORT_REMOTE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PP_REMOTE_MAX_READ (16u << 20) /* no single read is larger */

/* Exactly len bytes from addr in pid, or -errno (-EFAULT: unmapped or
 * partial, -ESRCH: gone, -EPERM: not allowed, -EINVAL: len too large). */
int pp_remote_read(pid_t pid, uint64_t addr, void *buf, size_t len);

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

/* A file mapped into a process. */
struct pp_module {
  char path[PATH_MAX];           /* as the target names it (from /proc/PID/maps) */
  char open_path[PATH_MAX + 64]; /* how the agent opens it: /proc/PID/root/... */
  uint64_t start, end;           /* lowest start, highest end of its mappings */
  uint64_t bias;                 /* runtime address = ELF vaddr + bias */
  int is_exe;                    /* it is /proc/PID/exe */
};

/* First mapped file whose basename matches the fnmatch pattern (pass the
 * exe's basename to get the executable). Computes the load bias from the
 * file's program headers. 0, -ENOENT if none, or -errno. */
int pp_find_module(uint32_t pid, const char *pattern, struct pp_module *m);

/* Looks up symbols by exact name in .symtab then .dynsym of an ELF file.
 * values[i] = st_value (0 if not found), sizes[i] = st_size (sizes may be
 * NULL). Returns how many were found, or -errno for an unreadable or
 * malformed file. */
int pp_elf_lookup_symbols(const char *path, const char *const *names, uint64_t *values,
                          uint64_t *sizes, size_t n);

/* vaddr and size of a named section (e.g. ".PyRuntime"). 0 or -ENOENT. */
int pp_elf_find_section(const char *path, const char *name, uint64_t *vaddr, uint64_t *size);

#endif
