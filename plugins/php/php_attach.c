/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Attaching to a PHP process (the target table's attach callback): whether
 * it is one of ours, which ELF holds executor_globals (libphp*.so for
 * mod_php/embed, otherwise the executable), where it is at run time, and
 * which PHP version (hence struct layout) the process runs.
 *
 * Nothing is executed (phpspy runs objdump/strings/awk): symbols come from
 * the ELF's .symtab/.dynsym through the kit, the version from the
 * "X-Powered-By: PHP/M.m" string every build carries. The file is the one
 * the process maps, opened by pp_find_module inside the process's root with
 * its identity (device, inode from the maps) checked, so a container's
 * binary is found and a link, FIFO, device or mount planted at its path is
 * never opened. Results per binary (device, inode, mtime) are cached
 * because an FPM pool is many processes of one binary.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "php.h"

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

/* phpspy -P in gProfiler's fork: a substring of comm, then of the command
 * line (its NULs read as spaces). */
static bool filter_match(const char *filter, uint32_t pid) {
  char buf[4096];
  size_t n = 0;
  if (pp_proc_comm(pid, buf, sizeof(buf)) == 0 && strstr(buf, filter)) return true;
  if (pp_proc_cmdline(pid, buf, sizeof(buf), &n) < 0 || n == 0) return false;
  if (n >= sizeof(buf)) n = sizeof(buf) - 1;
  for (size_t i = 0; i < n; i++)
    if (buf[i] == '\0') buf[i] = ' ';
  buf[n] = '\0';
  return strstr(buf, filter) != NULL;
}

static bool exe_matches(const char *base) {
  for (size_t i = 0; php_match_exe[i]; i++)
    if (fnmatch(php_match_exe[i], base, 0) == 0) return true;
  return false;
}

/* Which PHP a process runs and whether this repository ever checked that
 * version's struct layout on a live process: once per version, at info for
 * a checked layout and at warning for one taken from phpspy's headers alone
 * (its stacks may be garbage). An FPM pool is many pids of one version. */
static void report_version(struct php_state *st, uint32_t pid, const struct php_attach *a) {
  unsigned key = (unsigned)a->major * 100u + (unsigned)a->minor;
  for (size_t i = 0; i < st->nreported; i++)
    if (st->reported_versions[i] == key) return;
  if (st->nreported < sizeof(st->reported_versions) / sizeof(st->reported_versions[0]))
    st->reported_versions[st->nreported++] = key;
  if (a->layout->tested)
    PP_INFO(st->host, "pid %u: PHP %d.%d (%s): struct layout tested on a live PHP %d.%d process",
            pid, a->major, a->minor, a->module, a->major, a->minor);
  else
    PP_WARNING(st->host,
               "pid %u: PHP %d.%d (%s): struct layout UNTESTED (offsets from phpspy's headers, "
               "never checked on a live PHP %d.%d process); stacks may be wrong",
               pid, a->major, a->minor, a->module, a->major, a->minor);
}

/* Finds executor_globals and the version in the module holding them.
 * Returns 0, PP_ATTACH_* or a negative errno, with reason. */
static int locate(uint32_t pid, struct php_attach *out, char *reason, size_t cap) {
  char exe[4096] = "";
  const char *base = NULL;
  if (pp_proc_exe(pid, exe, sizeof(exe)) == 0) {
    const char *slash = strrchr(exe, '/');
    base = slash ? slash + 1 : exe;
  }
  struct pp_module m;
  /* mod_php / embed SAPI: the interpreter lives in the library */
  char why[256] = "";
  int rc = pp_find_module(pid, "libphp*.so*", &m, why, sizeof(why));
  if (rc == -ENOENT && !why[0]) {
    /* an exec into something else, or a process handed by pid alone:
     * not ours, like the core's own matching */
    if (!base || !exe_matches(base)) return PP_ATTACH_IGNORE;
    /* the name taken literally: it is the target's to choose */
    char pat[1024];
    size_t k = 0;
    for (const char *c = base; *c && k + 2 < sizeof(pat); c++) {
      if (strchr("*?[\\", *c)) pat[k++] = '\\';
      pat[k++] = *c;
    }
    pat[k] = '\0';
    why[0] = '\0';
    rc = pp_find_module(pid, pat, &m, why, sizeof(why));
  }
  if (rc == -ESRCH) {
    snprintf(reason, cap, "process exited");
    return rc;
  }
  if (rc < 0) {
    if (why[0]) {
      /* the file at the mapped path was refused (not the inode mapped, not
       * a regular file...) and the mapping's own file could not be opened */
      snprintf(reason, cap, "%s", why);
      return PP_ATTACH_FAIL;
    }
    snprintf(reason, cap, "cannot open the PHP module: %s", strerror(-rc));
    return rc; /* still starting: retried */
  }
  const struct bin_fact *f = lookup(m.fd, m.path);
  int e = errno;
  pp_module_close(&m);
  if (!f) {
    snprintf(reason, cap, "cannot stat %.100s: %s", m.path, strerror(e));
    return PP_ATTACH_FAIL;
  }
  if (f->err) {
    snprintf(reason, cap, "%s", f->reason);
    return PP_ATTACH_SKIP; /* this binary will not change its mind */
  }
  const struct php_layout *l = php_layout_find(f->major, f->minor);
  if (!l) {
    snprintf(reason, cap, "PHP %d.%d not supported (known: %s)", f->major, f->minor,
             php_layout_versions());
    return PP_ATTACH_SKIP;
  }
  out->eg_addr = f->eg_vaddr + m.bias;
  out->layout = l;
  out->major = f->major;
  out->minor = f->minor;
  snprintf(out->module, sizeof(out->module), "%.255s", m.path);
  return 0;
}

uint64_t php_image_start(uint32_t pid) {
  char path[48], buf[1024];
  snprintf(path, sizeof(path), "/proc/%u/stat", pid);
  if (pp_read_file(path, buf, sizeof(buf), NULL) < 0) return 0;
  /* the comm in parentheses may hold anything: fields start after the last ')' */
  const char *p = strrchr(buf, ')');
  if (!p) return 0;
  /* field 3 (state) follows; startcode is field 26 */
  for (int field = 2; field < 26; field++) {
    p = strchr(p + 1, ' ');
    if (!p) return 0;
  }
  return strtoull(p + 1, NULL, 10);
}

int php_attach_process(void *plugin, struct pp_target_entry *t) {
  struct php_state *st = plugin;
  if (st->proc_filter && !filter_match(st->proc_filter, t->pid)) return PP_ATTACH_IGNORE;
  struct php_target *pt = calloc(1, sizeof(*pt));
  if (!pt) {
    snprintf(t->reason, sizeof(t->reason), "out of memory");
    return -ENOMEM;
  }
  int rc = locate(t->pid, &pt->at, t->reason, sizeof(t->reason));
  if (rc != 0) {
    free(pt);
    if (rc != PP_ATTACH_IGNORE && rc != -ESRCH)
      PP_INFO(st->host, "pid %u: not profiling PHP: %s", t->pid, t->reason);
    return rc;
  }
  if (pp_proc_comm(t->pid, pt->comm, sizeof(pt->comm)) < 0) pt->comm[0] = '\0';
  pt->image_start = php_image_start(t->pid);
  pt->image_checked_ns = pp_clock_ns();
  /* a new process or image at this pid: nothing cached is its */
  php_walker_forget_pid(st->walker, t->pid);
  t->data = pt;
  report_version(st, t->pid, &pt->at);
  PP_DEBUG(st->host, "pid %u: PHP %d.%d, executor_globals at 0x%llx in %s", t->pid, pt->at.major,
           pt->at.minor, (unsigned long long)pt->at.eg_addr, pt->at.module);
  return 0;
}

void php_release_target(void *plugin, struct pp_target_entry *t) {
  struct php_state *st = plugin;
  /* cached names belong to this image: a reused pid must not see them */
  php_walker_forget_pid(st->walker, t->pid);
  free(t->data); /* no descriptor is held: the module's fd is closed at attach */
  t->data = NULL;
}
