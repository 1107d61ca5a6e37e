/*
 * Attaching to a PHP process: which ELF holds executor_globals (libphp*.so
 * for mod_php/embed, otherwise the executable), where it is at run time, and
 * which PHP version (hence struct layout) the process runs.
 *
 * Nothing is executed (phpspy runs objdump/strings/awk): symbols come from
 * the ELF's .symtab/.dynsym through the support library, the version from
 * the "X-Powered-By: PHP/M.m" string every build carries. Files are opened
 * through /proc/PID/root so containers work. Results per binary (device,
 * inode) are cached because an FPM pool is many processes of one binary.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "php.h"
#include "polyprof/kit/elf_lookup.h"
#include "polyprof/kit/remote.h"

#define BIN_CACHE 32
#define SCAN_CHUNK (1u << 20)
#define SCAN_MAX (512ull << 20) /* never read more of a file than this */

struct bin_fact {
  dev_t dev;
  ino_t ino;
  time_t mtime;
  int used;
  int err; /* negative errno: the binary cannot be profiled */
  uint64_t eg_vaddr;
  int major, minor;
  char reason[160];
};

static struct bin_fact cache[BIN_CACHE];
static unsigned cache_next;

static const char marker[] = "X-Powered-By: PHP/";

/* Finds "X-Powered-By: PHP/M.m" in the file. 0 or -ENOENT. */
static int scan_version(int fd, int *major, int *minor) {
  char *buf = malloc(SCAN_CHUNK + 64);
  if (!buf) return -ENOMEM;
  size_t keep = 0;
  uint64_t off = 0;
  int rc = -ENOENT;
  while (off < SCAN_MAX) {
    ssize_t got = pread(fd, buf + keep, SCAN_CHUNK, (off_t)off);
    if (got <= 0) break;
    size_t have = keep + (size_t)got;
    for (char *p = buf; (p = memmem(p, have - (size_t)(p - buf), marker, sizeof(marker) - 1));
         p++) {
      const char *v = p + sizeof(marker) - 1;
      if ((size_t)(v - buf) + 8 > have) break; /* may continue in the next chunk */
      int ma = 0, mi = 0;
      if (v[0] >= '5' && v[0] <= '9' && v[1] == '.' && v[2] >= '0' && v[2] <= '9') {
        ma = v[0] - '0';
        mi = v[2] - '0';
        if (v[3] >= '0' && v[3] <= '9') mi = mi * 10 + (v[3] - '0');
        *major = ma;
        *minor = mi;
        rc = 0;
        goto out;
      }
    }
    off += (uint64_t)got;
    /* keep a tail so a marker across the chunk border is found */
    keep = have < 40 ? have : 40;
    memmove(buf, buf + have - keep, keep);
  }
out:
  free(buf);
  return rc;
}

static void fill_fact(struct bin_fact *f, int fd, const char *path) {
  static const char *const names[] = {"executor_globals", "executor_globals_offset"};
  uint64_t vals[2] = {0, 0};
  int n = pp_elf_lookup_symbols(fd, names, 2, 0, vals, NULL);
  if (n < 0) {
    f->err = n;
    snprintf(f->reason, sizeof(f->reason), "cannot read ELF %.80s: %s", path, strerror(-n));
    return;
  }
  if (!vals[0]) {
    f->err = -ENOTSUP;
    if (vals[1])
      snprintf(f->reason, sizeof(f->reason),
               "ZTS (thread-safe) PHP build: executor_globals is per thread, not supported");
    else
      snprintf(f->reason, sizeof(f->reason),
               "executor_globals not found in %.80s (stripped binary or not PHP)", path);
    return;
  }
  f->eg_vaddr = vals[0];
  int rc = scan_version(fd, &f->major, &f->minor);
  if (rc < 0) {
    f->err = rc;
    snprintf(f->reason, sizeof(f->reason),
             "PHP version not found in %.80s (no X-Powered-By string)", path);
  }
}

static const struct bin_fact *lookup(int fd, const char *path) {
  struct stat st;
  if (fstat(fd, &st) < 0) return NULL;
  for (unsigned i = 0; i < BIN_CACHE; i++)
    if (cache[i].used && cache[i].dev == st.st_dev && cache[i].ino == st.st_ino &&
        cache[i].mtime == st.st_mtime)
      return &cache[i];
  struct bin_fact *f = &cache[cache_next++ % BIN_CACHE];
  memset(f, 0, sizeof(*f));
  f->used = 1;
  f->dev = st.st_dev;
  f->ino = st.st_ino;
  f->mtime = st.st_mtime;
  fill_fact(f, fd, path);
  return f;
}

int php_attach_process(uint32_t pid, const char *exe_basename, struct php_attach *out, char *reason,
                       size_t reason_len) {
  struct pp_module m;
  /* mod_php / embed SAPI: the interpreter lives in the library */
  char why[256] = "";
  int rc = pp_find_module(pid, "libphp*.so*", &m, why, sizeof(why));
  if (rc == -ENOENT) rc = pp_find_module(pid, exe_basename, &m, why, sizeof(why));
  if (rc < 0) {
    if (why[0])
      snprintf(reason, reason_len, "%s", why);
    else
      snprintf(reason, reason_len, "no PHP module mapped (%s)", strerror(-rc));
    return rc;
  }
  const struct bin_fact *f = lookup(m.fd, m.path);
  pp_module_close(&m);
  if (!f) {
    rc = -errno;
    snprintf(reason, reason_len, "cannot stat %.100s: %s", m.path, strerror(errno));
    return rc;
  }
  if (f->err) {
    snprintf(reason, reason_len, "%s", f->reason);
    return f->err;
  }
  const struct php_layout *l = php_layout_find(f->major, f->minor);
  if (!l) {
    snprintf(reason, reason_len, "PHP %d.%d not supported (known: %s)", f->major, f->minor,
             php_layout_versions());
    return -ENOTSUP;
  }
  out->eg_addr = f->eg_vaddr + m.bias;
  out->layout = l;
  out->major = f->major;
  out->minor = f->minor;
  snprintf(out->module, sizeof(out->module), "%.255s", m.path);
  return 0;
}
