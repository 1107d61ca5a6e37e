/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Remote memory reads and runtime symbol lookup (see remote.h).
 */
#include "polyprof/kit/remote.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "polyprof/kit/elf_lookup.h"
#include "polyprof/kit/maps.h"
#include "polyprof/kit/proc.h"

#define PAGE 4096u /* a string is read page by page */

static pp_remote_reader_fn reader; /* NULL: the process itself */

void pp_remote_set_reader(pp_remote_reader_fn fn) {
  reader = fn;
}

int pp_remote_read(pid_t pid, uint64_t addr, void *buf, size_t len) {
  if (len == 0) return 0;
  if (len > PP_REMOTE_MAX_READ || addr == 0 || addr + len < addr) return -EINVAL;
  if (reader) return reader(pid, addr, buf, len);
  struct iovec local = {.iov_base = buf, .iov_len = len};
  struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
  ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (n < 0) return -errno;
  return (size_t)n == len ? 0 : -EFAULT;
}

int pp_remote_readv(pid_t pid, const struct pp_remote_iov *iov, size_t n) {
  struct iovec local[64], remote[64];
  if (n > 64) return -EINVAL;
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    if (iov[i].len > PP_REMOTE_MAX_READ || iov[i].addr == 0) return -EINVAL;
    local[i] = (struct iovec){.iov_base = iov[i].buf, .iov_len = iov[i].len};
    remote[i] = (struct iovec){.iov_base = (void *)(uintptr_t)iov[i].addr, .iov_len = iov[i].len};
    total += iov[i].len;
  }
  for (size_t i = 0; reader && i < n; i++) {
    int rc = iov[i].len ? reader(pid, iov[i].addr, iov[i].buf, iov[i].len) : 0;
    if (rc < 0) return rc;
  }
  if (reader) return 0;
  ssize_t got = process_vm_readv(pid, local, (unsigned long)n, remote, (unsigned long)n, 0);
  if (got < 0) return -errno;
  return (size_t)got == total ? 0 : -EFAULT;
}

ssize_t pp_remote_read_str(pid_t pid, uint64_t addr, char *buf, size_t cap) {
  if (cap == 0) return -EINVAL;
  size_t at = 0;
  while (at + 1 < cap) {
    /* never cross a page boundary: the next page may be unmapped */
    uint64_t a = addr + at;
    size_t chunk = PAGE - (size_t)(a % PAGE);
    if (chunk > cap - 1 - at) chunk = cap - 1 - at;
    int rc = pp_remote_read(pid, a, buf + at, chunk);
    if (rc < 0) {
      buf[at] = '\0';
      return rc;
    }
    char *nul = memchr(buf + at, '\0', chunk);
    if (nul) return (ssize_t)(nul - buf);
    at += chunk;
  }
  buf[at] = '\0';
  return (ssize_t)at;
}

/* --- modules ------------------------------------------------------------ */

int pp_find_module(uint32_t pid, const char *pattern, struct pp_module *m, char *reason,
                   size_t cap) {
  memset(m, 0, sizeof(*m));
  m->fd = -1;
  struct pp_map *maps = NULL;
  size_t n = 0;
  int rc = pp_maps_read(pid, 0, 0, &maps, &n);
  if (rc < 0) return rc == -ENOENT ? -ESRCH : rc;
  const struct pp_map *first = NULL, *off0 = NULL;
  for (size_t i = 0; i < n; i++) {
    const struct pp_map *p = &maps[i];
    if (!p->path || p->path[0] != '/') continue;
    if (first) {
      if (strcmp(p->path, first->path) != 0) continue;
    } else {
      const char *base = strrchr(p->path, '/') + 1;
      if (fnmatch(pattern, base, 0) != 0) continue;
      first = p;
      snprintf(m->path, sizeof(m->path), "%s", p->path);
      m->start = p->start;
      m->id = (struct pp_file_id){p->dev_major, p->dev_minor, p->inode};
    }
    if (p->start < m->start) m->start = p->start;
    if (p->end > m->end) m->end = p->end;
    if (p->offset == 0 && !off0) off0 = p;
  }
  if (!first) {
    pp_maps_free(maps, n);
    return -ENOENT;
  }
  char exe[PATH_MAX] = "";
  pp_proc_exe(pid, exe, sizeof(exe));
  m->is_exe = strcmp(m->path, exe) == 0;
  const struct pp_map *at = off0 ? off0 : first;
  m->fd = pp_target_open_mapped(pid, m->path, &m->id, at->start, at->end, reason, cap);
  uint64_t map0 = at->start;
  pp_maps_free(maps, n);
  if (m->fd < 0) return m->fd;
  rc = pp_elf_load_bias(m->fd, map0, &m->bias);
  if (rc < 0) pp_module_close(m);
  return rc;
}

void pp_module_close(struct pp_module *m) {
  if (m->fd >= 0) close(m->fd);
  m->fd = -1;
}
