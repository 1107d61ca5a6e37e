/* SPDX-License-Identifier: Apache-2.0 */
/*
 * C++ frame names for the v8 mode (see v8_native.h).
 *
 * Per process: its executable mappings, sorted, read again (at most every
 * two seconds) when a pc falls in none of them (a library loaded later).
 * Shared: up to MAX_FILES symbol files, found by the device and inode the
 * maps name, loaded when a pc in them is first named, kept while a process
 * maps them and afterwards until their slot is needed. A file that cannot
 * be opened or read names nothing, and is not tried again while it stays.
 * Names: a direct-mapped cache keyed by file and symbol address, so a
 * sample costs a binary search per frame and no read of the file once its
 * hot functions were named.
 */
#include "v8_native.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "polyprof/kit/demangle.h"
#include "polyprof/kit/elf_symbols.h"
#include "polyprof/kit/hash.h"
#include "polyprof/kit/log.h"
#include "polyprof/kit/maps.h"
#include "polyprof/kit/remote.h"
#include "polyprof/kit/target_files.h"

#define MAX_FILES 32
#define MAX_MAPS 1024           /* executable mappings per process */
#define NAME_LEN 160            /* longer names are cut */
#define NAME_SLOTS 4096         /* cached names, all processes */
#define RING 512                /* names handed out before one is reused */
#define RELOAD_NS 2000000000ull /* maps read again at most this often */

struct symfile {
  struct pp_file_id id;
  uint32_t refs; /* processes that map it */
  uint32_t gen;  /* bumped when the slot holds another file */
  uint64_t used; /* load order, for eviction */
  int state;     /* 0: not loaded yet, 1: loaded, -1: failed */
  struct pp_elf_info info;
  struct pp_elf_symtab *tab;
  char path[256]; /* as the first process named it (for "(path)") */
};

struct nmap {
  uint64_t start, end, offset;
  int is_v8;      /* a mapping of the file holding V8 */
  int file;       /* index in files, -1: anonymous or no slot */
  int bias_state; /* 0: not computed, 1: bias valid, -1: none */
  uint64_t bias;
};

struct v8_native {
  uint32_t pid;
  struct pp_file_id v8_file;
  struct nmap *maps;
  size_t nmaps;
  uint64_t next_reload_ns;
};

struct name_slot {
  int16_t file;
  uint32_t gen;
  uint64_t start;
  char name[NAME_LEN];
};

static struct symfile files[MAX_FILES];
static uint64_t load_clock;
static struct name_slot *names; /* NAME_SLOTS, allocated on first use */
static char ring[RING][NAME_LEN];
static unsigned ring_next;

static int file_slot(const struct pp_map *m) {
  int free_slot = -1;
  for (int i = 0; i < MAX_FILES; i++) {
    struct symfile *f = &files[i];
    if (!f->path[0]) {
      if (free_slot < 0) free_slot = i;
    } else if (f->id.inode == m->inode && f->id.dev_major == m->dev_major &&
               f->id.dev_minor == m->dev_minor) {
      return i;
    }
  }
  if (free_slot < 0) {
    /* the least recently loaded file no process maps any more */
    for (int i = 0; i < MAX_FILES; i++)
      if (!files[i].refs && (free_slot < 0 || files[i].used < files[free_slot].used)) free_slot = i;
    if (free_slot < 0) return -1;
    struct symfile *f = &files[free_slot];
    pp_elf_symtab_free(f->tab);
    uint32_t gen = f->gen + 1;
    memset(f, 0, sizeof(*f));
    f->gen = gen;
  }
  struct symfile *f = &files[free_slot];
  f->id = (struct pp_file_id){m->dev_major, m->dev_minor, m->inode};
  snprintf(f->path, sizeof(f->path), "%s", m->path);
  return free_slot;
}

static void drop_maps(struct v8_native *nv) {
  for (size_t i = 0; i < nv->nmaps; i++)
    if (nv->maps[i].file >= 0 && files[nv->maps[i].file].refs) files[nv->maps[i].file].refs--;
  free(nv->maps);
  nv->maps = NULL;
  nv->nmaps = 0;
}

static int read_maps(struct v8_native *nv) {
  struct pp_map *m = NULL;
  size_t n = 0;
  int rc = pp_maps_read(nv->pid, 1, MAX_MAPS, &m, &n);
  if (rc < 0) return rc;
  struct nmap *out = calloc(n ? n : 1, sizeof(*out));
  if (!out) {
    pp_maps_free(m, n);
    return -ENOMEM;
  }
  drop_maps(nv);
  for (size_t i = 0; i < n; i++) {
    out[i] = (struct nmap){.start = m[i].start, .end = m[i].end, .offset = m[i].offset, .file = -1};
    out[i].is_v8 = m[i].path && m[i].inode == nv->v8_file.inode &&
                   m[i].dev_major == nv->v8_file.dev_major &&
                   m[i].dev_minor == nv->v8_file.dev_minor;
    /* a file (not [vdso], not anonymous JIT code) */
    if (m[i].path && m[i].path[0] == '/' && m[i].inode) {
      out[i].file = file_slot(&m[i]);
      if (out[i].file >= 0) files[out[i].file].refs++;
    }
  }
  pp_maps_free(m, n);
  nv->maps = out;
  nv->nmaps = n;
  return 0;
}

struct v8_native *v8_native_new(uint32_t pid, const struct pp_file_id *v8_file) {
  struct v8_native *nv = calloc(1, sizeof(*nv));
  if (!nv) return NULL;
  nv->pid = pid;
  nv->v8_file = *v8_file;
  read_maps(nv); /* a failure leaves no map: read again when first needed */
  nv->next_reload_ns = pp_clock_ns() + RELOAD_NS;
  return nv;
}

void v8_native_free(struct v8_native *nv) {
  if (!nv) return;
  drop_maps(nv);
  free(nv);
}

static struct nmap *find_map(struct v8_native *nv, uint64_t addr) {
  size_t lo = 0, hi = nv->nmaps;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (addr < nv->maps[mid].start)
      hi = mid;
    else if (addr >= nv->maps[mid].end)
      lo = mid + 1;
    else
      return &nv->maps[mid];
  }
  return NULL;
}

static void load(struct v8_native *nv, struct symfile *f, const struct nmap *m) {
  char why[200] = "";
  f->state = -1;
  f->used = ++load_clock;
  int fd = pp_target_open_mapped(nv->pid, f->path, &f->id, m->start, m->end, why, sizeof(why));
  if (fd < 0) return;
  int rc = pp_elf_load(fd, PP_ELF_WANT_SYMTAB | PP_ELF_WANT_DYNSYM | PP_ELF_NAMES_IN_FILE, &f->info,
                       &f->tab);
  close(fd);
  if (rc == 0 && f->tab) f->state = 1;
}

/* The runtime address of ELF vaddr 0 in this mapping. */
static int bias_of(struct nmap *m, const struct symfile *f) {
  if (m->bias_state == 0) {
    uint64_t vaddr;
    m->bias_state = -1;
    if (pp_elf_offset_to_vaddr(&f->info, m->offset, &vaddr) == 0) {
      m->bias = m->start - vaddr;
      m->bias_state = 1;
    }
  }
  return m->bias_state;
}

static const char *hand_out(const char *name) {
  char *slot = ring[ring_next++ % RING];
  snprintf(slot, NAME_LEN, "%s", name);
  return slot;
}

/* The mapping holding addr; the maps are read again (rate-limited) when
 * none does: a library loaded later, V8's copy of its builtins. */
static struct nmap *map_of(struct v8_native *nv, uint64_t addr) {
  struct nmap *m = find_map(nv, addr);
  if (m) return m;
  uint64_t now = pp_clock_ns();
  if (now < nv->next_reload_ns) return NULL;
  nv->next_reload_ns = now + RELOAD_NS;
  return read_maps(nv) < 0 ? NULL : find_map(nv, addr);
}

int v8_native_in_v8(void *ctx, uint64_t pc) {
  struct nmap *m = map_of(ctx, pc);
  return m && m->is_v8;
}

int v8_native_frame(void *ctx, uint64_t pc, int is_return, struct pp_frame *out) {
  struct v8_native *nv = ctx;
  uint64_t addr = is_return && pc ? pc - 1 : pc;
  struct nmap *m = map_of(nv, addr);
  if (!m || m->file < 0) return -1; /* JIT code or a file without a slot */
  struct symfile *f = &files[m->file];
  if (f->state == 0) load(nv, f, m);
  if (f->state < 0) return -1;
  *out = (struct pp_frame){.kind = PP_FRAME_NATIVE};
  uint64_t start;
  if (bias_of(m, f) < 0 || addr < m->bias || !pp_elf_symtab_find(f->tab, addr - m->bias, &start)) {
    char buf[NAME_LEN];
    snprintf(buf, sizeof(buf), "(%.*s)", (int)sizeof(buf) - 3, f->path); /* cut, not refused */
    out->name = hand_out(buf);
    return 0;
  }
  if (!names && !(names = calloc(NAME_SLOTS, sizeof(*names)))) return -1;
  uint64_t key = start ^ ((uint64_t)m->file << 56);
  struct name_slot *ns = &names[pp_hash_u64(key) & (NAME_SLOTS - 1)];
  if (ns->file != m->file + 1 || ns->gen != f->gen || ns->start != start || !ns->name[0]) {
    char raw[NAME_LEN], dem[NAME_LEN];
    const char *nm = pp_elf_symtab_lookup(f->tab, addr - m->bias, NULL, raw, sizeof(raw));
    if (!nm) return -1;
    const char *d = pp_demangle(nm, dem, sizeof(dem));
    ns->file = (int16_t)(m->file + 1);
    ns->gen = f->gen;
    ns->start = start;
    snprintf(ns->name, sizeof(ns->name), "%s", d ? d : nm);
  }
  out->name = hand_out(ns->name);
  return 0;
}

size_t v8_native_bytes(void) {
  size_t b = names ? NAME_SLOTS * sizeof(*names) : 0;
  for (int i = 0; i < MAX_FILES; i++)
    if (files[i].tab) b += pp_elf_symtab_bytes(files[i].tab);
  return b;
}
