/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Mapped objects (executables, shared libraries, the vDSO).
 *
 * An object is identified by the device and inode the kernel reports for
 * the mapping, so the same libc seen by 500 processes is loaded once. Its
 * file is opened through the process that maps it, with the kit's safe
 * access (pp_target_open_mapped): its path in the process's root if that
 * is still the mapped inode, else /proc/PID/map_files (exactly the mapped
 * file, even deleted or hidden by a mount); once the process has exited,
 * the host path only if it is the same device and inode. A file that
 * cannot be opened leaves its frames unknown ("(path)").
 *
 * ELF facts (build-id, segments, Go version) are small and kept; symbol
 * tables and unwind tables are the heavy part and are released least
 * recently used first when their total passes the configured budget.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "perf.h"
#include "polyprof/kit/log.h"
#include "polyprof/kit/maps.h"
#include "polyprof/kit/pe_r2r.h"
#include "polyprof/kit/target_files.h"
#include "polyprof/kit/unwind.h"

#define VDSO_KEY 0xfffffffffffffff1ull
#define NAME_FILES_MAX 512        /* descriptors held for symbol names */
#define R2R_TABLES_MAX 64         /* .NET images with a ReadyToRun table at once */
#define R2R_READ_MAX (128u << 20) /* read from one image to build its table */

static uint64_t path_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h | (1ull << 63);
}

static uint64_t dso_key(uint64_t dev, uint64_t ino, const char *path) {
  if (ino == 0) return path_hash(path ? path : "");
  return (ino * 0x9E3779B97F4A7C15ull) ^ (dev << 1) ^ 0x5bd1e995ull;
}

void perf_dsos_init(struct perf_dsos *d, size_t budget, bool debug_files) {
  memset(d, 0, sizeof(*d));
  d->budget = budget;
  d->debug_files = debug_files;
  d->next_id = 1;
  /* A table that reads its names from the file holds a descriptor: at most
   * a quarter of the fd limit go to that; tables past it copy their names
   * (the old way, more memory, no fd). */
  struct rlimit rl;
  size_t lim = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                   ? (size_t)rl.rlim_cur
                   : 1024;
  d->max_name_files = lim / 4 < NAME_FILES_MAX ? lim / 4 : NAME_FILES_MAX;
}

static void dso_drop_heavy(struct perf_dsos *d, struct perf_dso *dso) {
  if (pp_elf_symtab_has_file(dso->symtab)) d->name_files--;
  if (dso->symtab) pp_elf_symtab_free(dso->symtab);
  dso->symtab = NULL;
  if (dso->sym_state == 1) dso->sym_state = 0;
  if (dso->r2r) {
    pp_r2r_free(dso->r2r);
    dso->r2r = NULL;
    d->r2r_tables--;
  }
  if (dso->r2r_state == 1) dso->r2r_state = 0;
  if (dso->unw_state == 1) {
    /* the vDSO's tables point into our own image */
    if (dso->key != VDSO_KEY) {
      free(dso->eh_hdr);
      free(dso->eh_frame);
    }
    dso->eh_hdr = dso->eh_frame = NULL;
    free(dso->dbg.data);
    memset(&dso->dbg, 0, sizeof(dso->dbg));
    dso->unw_state = 0;
  }
  d->bytes -= dso->bytes;
  dso->bytes = 0;
}

static void dso_free(struct perf_dsos *d, struct perf_dso *dso) {
  dso_drop_heavy(d, dso);
  free(dso->path);
  free(dso->build_id_hex);
  free(dso);
}

void perf_dsos_fini(struct perf_dsos *d) {
  for (size_t i = 0; i < d->map.cap; i++)
    if (d->map.slots[i].val) dso_free(d, d->map.slots[i].val);
  perf_idmap_free(&d->map);
  pp_elf_symtab_free(d->vdso_symtab);
  d->vdso_symtab = NULL;
}

struct perf_dso *perf_dso_get(struct perf_dsos *d, uint32_t maj, uint32_t min, uint64_t ino,
                              const char *path) {
  bool special = path && path[0] == '[';
  uint64_t dev = makedev(maj, min);
  uint64_t key = special && strcmp(path, "[vdso]") == 0 ? VDSO_KEY : dso_key(dev, ino, path);
  struct perf_dso *dso = perf_idmap_get(&d->map, key);
  if (dso && dso->dev == dev && dso->ino == ino && (ino || strcmp(dso->path, path) == 0)) {
    dso->refs++;
    return dso;
  }
  dso = calloc(1, sizeof(*dso));
  if (!dso) return NULL;
  dso->path = strdup(path ? path : "");
  if (!dso->path) {
    free(dso);
    return NULL;
  }
  dso->id = d->next_id++;
  dso->dev = dev;
  dso->ino = ino;
  dso->key = key;
  dso->special = special;
  dso->refs = 1;
  /* on a key collision the newcomer stays out of the table: correct, only
   * not shared */
  if (!perf_idmap_get(&d->map, key))
    perf_idmap_put(&d->map, key, dso);
  else
    dso->key = 0;
  return dso;
}

void perf_dso_put(struct perf_dsos *d, struct perf_dso *dso) {
  if (!dso) return;
  if (dso->refs) dso->refs--;
  if (dso->refs == 0 && dso->key == 0) dso_free(d, dso); /* unshared: nobody can find it */
}

size_t perf_dsos_collect(struct perf_dsos *d) {
  size_t dropped = 0;
  for (size_t i = 0; i < d->map.cap;) {
    struct perf_dso *dso = d->map.slots[i].val;
    if (dso && dso->refs == 0) {
      if (dso->bytes) {
        dropped++;
        if (d->host)
          PP_DEBUG(d->host, "tables of %s dropped (%zu KiB): no process maps it", dso->path,
                   dso->bytes / 1024);
      }
      perf_idmap_del(&d->map, dso->key); /* shifts later slots into i: re-check i */
      dso_free(d, dso);
      continue;
    }
    i++;
  }
  d->dropped += dropped;
  return dropped;
}

size_t perf_dsos_with_tables(const struct perf_dsos *d) {
  size_t n = 0;
  for (size_t i = 0; i < d->map.cap; i++) {
    const struct perf_dso *dso = d->map.slots[i].val;
    if (dso && dso->bytes) n++;
  }
  return n;
}

/* Path without the " (deleted)" tag the kernel appends to unlinked files. */
static void file_path(const char *path, char *out, size_t cap) {
  snprintf(out, cap, "%s", path);
  size_t n = strlen(out);
  static const char tag[] = " (deleted)";
  if (n > sizeof(tag) - 1 && strcmp(out + n - (sizeof(tag) - 1), tag) == 0)
    out[n - (sizeof(tag) - 1)] = '\0';
}

/* The host file at path, only if it is the very inode (device and inode)
 * the process mapped. Safe although the path may be the process's to
 * change: the lookup is an O_PATH handle, which opens nothing (no FIFO
 * wait, no device open), and the file is opened only once its identity is
 * the mapped one; a link, a mount or a replacement planted at the path is
 * another inode and is refused unopened. Reading the mapped file itself
 * shows the agent nothing the process did not map. */
static int open_host_identical(const char *path, const struct perf_dso *dso) {
  if (!dso->ino) return -ESTALE;
  struct stat same = {.st_dev = dso->dev, .st_ino = dso->ino};
  int fd = pp_open_host_file(path, &same, NULL);
  return fd == -EINVAL ? -ESTALE : fd;
}

/* Opens the object's file as the process p sees it: for a live process
 * through the kit (its path in the process's root with the mapping's
 * identity, else the mapping's own file in /proc/PID/map_files); once the
 * process is gone, the host file of the same identity. */
static int dso_open(struct perf_dsos *d, struct perf_dso *dso, const struct perf_proc *p,
                    const struct perf_map *m) {
  if (dso->special || dso->path[0] != '/') return -ENOENT;
  if (p && p->pid && !p->exited && m) {
    struct pp_file_id id = {major(dso->dev), minor(dso->dev), dso->ino};
    char why[256] = "";
    int fd = pp_target_open_mapped(p->pid, dso->path, &id, m->start, m->end, why, sizeof(why));
    if (fd >= 0 || fd == -ENOMEM || fd == -EMFILE || fd == -ENFILE) return fd;
    if (d->host && !dso->logged_open) {
      dso->logged_open = true;
      PP_DEBUG(d->host, "%s (pid %u) not opened in its root: %s", dso->path, p->pid,
               why[0] ? why : strerror(-fd));
    }
    /* gone meanwhile, or its path no longer the mapped file in its root
     * and no map_files access: the host file, if it is the mapped one */
  }
  char fp[4096];
  file_path(dso->path, fp, sizeof(fp));
  return open_host_identical(fp, dso);
}

static int load_vdso(struct perf_dsos *d, struct perf_dso *dso, unsigned flags) {
  const void *image = (const void *)getauxval(AT_SYSINFO_EHDR);
  if (!image) return -ENOENT;
  struct pp_map *maps = NULL;
  size_t n = 0;
  size_t size = 0;
  if (pp_maps_read((uint32_t)getpid(), 1, 0, &maps, &n) == 0) {
    for (size_t i = 0; i < n; i++)
      if (maps[i].path && strcmp(maps[i].path, "[vdso]") == 0 &&
          maps[i].start == (uint64_t)(uintptr_t)image)
        size = (size_t)(maps[i].end - maps[i].start);
    pp_maps_free(maps, n);
  }
  if (!size) return -ENOENT;
  struct pp_elf_symtab *t = NULL;
  int rc = pp_elf_load_memory(image, size, flags, &dso->info, flags ? &t : NULL);
  if (rc < 0) return rc;
  if (flags) {
    dso->symtab = t;
    size_t b = pp_elf_symtab_bytes(t);
    dso->bytes += b;
    d->bytes += b;
  }
  return 0;
}

int perf_dso_need_info(struct perf_dsos *d, struct perf_dso *dso, const struct perf_proc *p,
                       const struct perf_map *m) {
  if (dso->info_state == 1) return 0;
  if (dso->info_state < 0) return dso->info_state;
  int rc;
  if (dso->key == VDSO_KEY) {
    rc = load_vdso(d, dso, 0);
  } else if (dso->special) {
    rc = -ENOENT;
  } else {
    int fd = dso_open(d, dso, p, m);
    if (fd < 0) {
      /* the file may still appear (we raced a process start): retry later
       * only if the process is alive */
      d->open_errors++;
      if (p && !p->exited && fd != -ESTALE) return fd;
      dso->info_state = fd;
      return fd;
    }
    rc = pp_elf_load(fd, 0, &dso->info, NULL);
    /* a .NET assembly: the runtime maps its sections from the file */
    if (rc == -ENOEXEC && pp_r2r_probe(fd) == 0) dso->is_pe = true;
    close(fd);
  }
  dso->info_state = rc < 0 ? rc : 1;
  if (rc == 0 && dso->info.build_id_len) {
    char hex[2 * PP_ELF_BUILD_ID_MAX + 1];
    dso->build_id_hex = strdup(pp_elf_build_id_hex(&dso->info, hex, sizeof(hex)));
  }
  return rc;
}

int perf_dso_need_symbols(struct perf_dsos *d, struct perf_dso *dso, const struct perf_proc *p,
                          const struct perf_map *m) {
  dso->lru = d->clock;
  if (dso->sym_state == 1) return 0;
  if (dso->sym_state < 0) return dso->sym_state;
  int rc = perf_dso_need_info(d, dso, p, m);
  if (rc < 0) return rc;
  if (dso->key == VDSO_KEY) {
    rc = load_vdso(d, dso, PP_ELF_WANT_SYMTAB | PP_ELF_WANT_DYNSYM);
    dso->sym_state = rc < 0 ? rc : 1;
    return rc;
  }
  int fd = dso_open(d, dso, p, m);
  if (fd < 0) {
    d->open_errors++;
    /* a live process that maps it will let us in later */
    if (!(p && p->exited)) dso->sym_state = fd;
    return fd;
  }
  struct pp_elf_info info;
  struct pp_elf_symtab *t = NULL;
  unsigned names = d->name_files < d->max_name_files ? PP_ELF_NAMES_IN_FILE : 0;
  rc = pp_elf_load(fd, PP_ELF_WANT_SYMTAB | PP_ELF_WANT_DYNSYM | names, &info, &t);
  close(fd);
  if (rc < 0) {
    dso->sym_state = rc;
    return rc;
  }
  if (!info.has_symtab && d->debug_files) {
    /* stripped: a separate debug file has the full .symtab (the kit looks
     * in the process's root safely and takes only a file of the object's
     * build-id) */
    char fp[4096];
    file_path(dso->path, fp, sizeof(fp));
    int dfd = pp_elf_open_debug_file(p ? p->pid : 0, fp, &info);
    if (dfd >= 0) {
      struct pp_elf_info dinfo;
      struct pp_elf_symtab *dt = NULL;
      if (pp_elf_load(dfd, PP_ELF_WANT_SYMTAB | names, &dinfo, &dt) == 0 && dt) {
        pp_elf_symtab_free(t);
        t = dt;
      }
      close(dfd);
    }
  }
  dso->symtab = t;
  if (pp_elf_symtab_has_file(t)) d->name_files++;
  size_t b = pp_elf_symtab_bytes(t);
  dso->bytes += b;
  d->bytes += b;
  dso->sym_state = 1;
  d->loads++;
  if (d->host)
    PP_DEBUG(d->host, "symbol table of %s loaded: %zu symbols, %zu KiB", dso->path,
             pp_elf_symtab_count(t), b / 1024);
  return 0;
}

int perf_dso_need_unwind(struct perf_dsos *d, struct perf_dso *dso, const struct perf_proc *p,
                         const struct perf_map *m) {
  dso->lru = d->clock;
  if (dso->unw_state == 1) return 0;
  if (dso->unw_state < 0) return dso->unw_state;
  int rc = perf_dso_need_info(d, dso, p, m);
  if (rc < 0) return rc;
  const struct pp_elf_info *in = &dso->info;
  bool have_eh = in->eh_frame_hdr_size && in->eh_frame_size;
  if (!have_eh && !in->debug_frame_size) {
    dso->unw_state = -ENOENT;
    return -ENOENT;
  }
  if (dso->key == VDSO_KEY) {
    if (!have_eh) {
      dso->unw_state = -ENOENT;
      return -ENOENT;
    }
    const uint8_t *image = (const uint8_t *)getauxval(AT_SYSINFO_EHDR);
    /* the image is mapped with file offset == image offset */
    dso->eh_hdr = (uint8_t *)(uintptr_t)(image + in->eh_frame_hdr_offset);
    dso->eh_frame = (uint8_t *)(uintptr_t)(image + in->eh_frame_offset);
    dso->eh_frame_hdr_size = in->eh_frame_hdr_size;
    dso->eh_frame_size = in->eh_frame_size;
    dso->unw_state = 1;
    return 0;
  }
  int fd = dso_open(d, dso, p, m);
  if (fd < 0) {
    d->open_errors++;
    return fd; /* retried with the next sample */
  }
  /* .eh_frame checked (CFI that would make libunwind index its register
   * table out of bounds is refused), and .debug_frame converted: code
   * built without unwind tables is described only there, while the
   * .eh_frame of such a binary covers just the C runtime's start files.
   * Both are kept: unwind.c tries .eh_frame first. */
  struct pp_unwind_tables t;
  rc = pp_unwind_tables_load(fd, in, &t);
  close(fd);
  if (rc < 0) {
    dso->unw_state = rc;
    return rc;
  }
  dso->eh_hdr = t.eh_hdr;
  dso->eh_frame = t.eh_frame;
  dso->eh_frame_hdr_size = t.eh_hdr_size;
  dso->eh_frame_size = t.eh_frame_size;
  dso->dbg = t.dbg;
  size_t b = (size_t)(dso->eh_frame_hdr_size + dso->eh_frame_size) + dso->dbg.size;
  dso->bytes += b;
  d->bytes += b;
  dso->unw_state = 1;
  return 0;
}

/* The table that names a .NET image's precompiled methods, built from
 * the file once (System.Private.CoreLib: about 2 MiB, 0.1 s) and counted
 * against the budget like a symbol table; at most R2R_TABLES_MAX images
 * hold one, the least recently used gives its table up first. */
int perf_dso_need_r2r(struct perf_dsos *d, struct perf_dso *dso, const struct perf_proc *p,
                      const struct perf_map *m) {
  dso->lru = d->clock;
  if (dso->r2r_state == 1) return 0;
  if (dso->r2r_state < 0) return dso->r2r_state;
  if (!dso->is_pe) return -ENOEXEC;
  while (d->r2r_tables >= R2R_TABLES_MAX) {
    struct perf_dso *victim = NULL;
    for (size_t i = 0; i < d->map.cap; i++) {
      struct perf_dso *x = d->map.slots[i].val;
      if (x && x->r2r && (!victim || x->lru < victim->lru)) victim = x;
    }
    if (!victim) break;
    dso_drop_heavy(d, victim);
    d->evictions++;
  }
  int fd = dso_open(d, dso, p, m);
  if (fd < 0) {
    d->open_errors++;
    if (!(p && p->exited)) dso->r2r_state = fd;
    return fd;
  }
  char why[256];
  struct pp_r2r *t = NULL;
  int rc = pp_r2r_load(fd, R2R_READ_MAX, &t, why, sizeof(why));
  close(fd);
  if (rc < 0) {
    dso->r2r_state = rc;
    if (d->host)
      PP_DEBUG(d->host, "%s: its precompiled .NET code stays unnamed: %s", dso->path,
               why[0] ? why : strerror(-rc));
    return rc;
  }
  dso->r2r = t;
  dso->r2r_state = 1;
  d->r2r_tables++;
  size_t b = pp_r2r_bytes(t);
  dso->bytes += b;
  d->bytes += b;
  d->loads++;
  if (d->host)
    PP_DEBUG(d->host, "ReadyToRun table of %s loaded: %zu of %zu code blocks named, %zu KiB%s",
             dso->path, pp_r2r_count(t), pp_r2r_blocks(t), b / 1024,
             pp_r2r_skipped(t) ? " (some generic instantiations unread: names may be off)" : "");
  return 0;
}

void perf_dsos_trim(struct perf_dsos *d) {
  while (d->bytes > d->budget) {
    struct perf_dso *victim = NULL;
    for (size_t i = 0; i < d->map.cap; i++) {
      struct perf_dso *x = d->map.slots[i].val;
      if (x && x->bytes && (!victim || x->lru < victim->lru)) victim = x;
    }
    if (!victim) break;
    dso_drop_heavy(d, victim);
    d->evictions++;
  }
}
