/* SPDX-License-Identifier: Apache-2.0 */
/*
 * python.native: what an address of a target is. A target's executable
 * mappings come from /proc/PID/maps (read again when an address falls in
 * none, at most every 100 ms); the object behind a mapping is known by its
 * device and inode, so the libc of fifty interpreters is loaded once: its
 * ELF facts, unwind tables (polyprof/kit/unwind.h) and function symbols,
 * read once through the kit's safe access to the target's files
 * (pp_target_open_mapped: the mapped inode, in the target's root or through
 * map_files). At most PYN_OBJECTS objects are held, the least recently
 * used dropped first; nothing is allocated per sample.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "native.h"
#include "polyprof/kit/elf_lookup.h"
#include "polyprof/kit/target_files.h"

#define MAPS_MAX 4096               /* executable mappings read per target */
#define MAPS_REREAD_NS 100000000ull /* a miss re-reads the maps at most this often */

struct pyn_object {
  uint32_t dev_major, dev_minor;
  uint64_t inode; /* 0: free slot */
  int state;      /* 1 loaded, < 0 -errno (not retried while held) */
  uint64_t lru;
  struct pp_elf_info info;
  struct pp_elf_symtab *sym;
  struct pp_unwind_tables tabs;
  bool have_tabs;
  /* the eval loop: _PyEval_EvalFrameDefault / PyEval_EvalFrameEx and
   * their .cold parts, as ELF [vaddr, vaddr + size) (size 0: by symbol) */
  uint64_t eval_at[3], eval_size[3];
};

struct pyn_objects {
  struct pyn_object obj[PYN_OBJECTS];
  uint64_t clock;
};

struct pyn_objects *pyn_objects_new(void) {
  return calloc(1, sizeof(struct pyn_objects));
}

static void drop(struct pyn_object *o) {
  if (o->sym) pp_elf_symtab_free(o->sym);
  pp_unwind_tables_free(&o->tabs);
  memset(o, 0, sizeof(*o));
}

void pyn_objects_free(struct pyn_objects *c) {
  if (!c) return;
  for (size_t i = 0; i < PYN_OBJECTS; i++)
    if (c->obj[i].inode) drop(&c->obj[i]);
  free(c);
}

size_t pyn_objects_bytes(const struct pyn_objects *c) {
  size_t b = 0;
  for (size_t i = 0; i < PYN_OBJECTS; i++)
    if (c->obj[i].state == 1)
      b += pp_unwind_tables_bytes(&c->obj[i].tabs) +
           (c->obj[i].sym ? pp_elf_symtab_bytes(c->obj[i].sym) : 0);
  return b;
}

void pyn_maps_clear(struct pyn_maps *m) {
  if (m->maps) pp_maps_free(m->maps, m->n);
  m->maps = NULL;
  m->n = 0;
  m->read_ns = 0;
}

static void load(struct pyn_object *o, uint32_t pid, const struct pp_map *m) {
  struct pp_file_id id = {m->dev_major, m->dev_minor, m->inode};
  int fd = pp_target_open_mapped(pid, m->path, &id, m->start, m->end, NULL, 0);
  if (fd < 0) {
    o->state = fd;
    return;
  }
  int rc = pp_elf_load(fd, PP_ELF_WANT_SYMTAB | PP_ELF_WANT_DYNSYM, &o->info, &o->sym);
  if (rc == 0 && !o->info.has_symtab) {
    /* a stripped object (Debian's libc, python3.11): its debug file's
     * .symtab names its internal functions, when one is installed */
    int dfd = pp_elf_open_debug_file(pid, m->path, &o->info);
    struct pp_elf_info dinfo;
    struct pp_elf_symtab *dt = NULL;
    if (dfd >= 0 && pp_elf_load(dfd, PP_ELF_WANT_SYMTAB, &dinfo, &dt) == 0 && dt) {
      if (o->sym) pp_elf_symtab_free(o->sym);
      o->sym = dt;
    }
    if (dfd >= 0) close(dfd);
  }
  if (rc == 0) {
    o->have_tabs = pp_unwind_tables_load(fd, &o->info, &o->tabs) == 0;
    static const char *const names[] = {"_PyEval_EvalFrameDefault", "PyEval_EvalFrameEx",
                                        "_PyEval_EvalFrameDefault.cold"};
    uint64_t v[3] = {0}, sz[3] = {0};
    if (pp_elf_lookup_symbols(fd, names, 3, 0, v, sz) > 0) {
      /* 3.x: PyEval_EvalFrameEx is a wrapper that calls the loop, only
       * 2.7's is the loop itself */
      if (v[0]) v[1] = sz[1] = 0;
      memcpy(o->eval_at, v, sizeof(v));
      memcpy(o->eval_size, sz, sizeof(sz));
    }
  }
  close(fd);
  o->state = rc == 0 ? 1 : rc;
}

static struct pyn_object *object_for(struct pyn_objects *c, uint32_t pid, const struct pp_map *m) {
  if (!m->inode || !m->path || m->path[0] != '/') return NULL;
  struct pyn_object *victim = NULL;
  c->clock++;
  for (size_t i = 0; i < PYN_OBJECTS; i++) {
    struct pyn_object *o = &c->obj[i];
    if (o->inode == m->inode && o->dev_major == m->dev_major && o->dev_minor == m->dev_minor) {
      o->lru = c->clock;
      return o->state == 1 ? o : NULL;
    }
    if (!victim || !o->inode || (victim->inode && o->lru < victim->lru)) victim = o;
  }
  if (victim->inode) drop(victim);
  victim->inode = m->inode;
  victim->dev_major = m->dev_major;
  victim->dev_minor = m->dev_minor;
  victim->lru = c->clock;
  load(victim, pid, m);
  return victim->state == 1 ? victim : NULL;
}

int pyn_locate(struct pyn_objects *c, struct pyn_maps *mp, uint64_t ip, uint64_t now_ns,
               struct pyn_where *w) {
  memset(w, 0, sizeof(*w));
  long i = mp->maps ? pp_maps_find(mp->maps, mp->n, ip) : -1;
  if (i < 0 && (!mp->read_ns || now_ns - mp->read_ns >= MAPS_REREAD_NS)) {
    pyn_maps_clear(mp);
    if (mp->unw) pp_unwinder_flush(mp->unw); /* an address may hold other code now */
    mp->read_ns = now_ns ? now_ns : 1;
    if (pp_maps_read(mp->pid, 1, MAPS_MAX, &mp->maps, &mp->n) < 0) {
      mp->maps = NULL;
      mp->n = 0;
    }
    i = mp->maps ? pp_maps_find(mp->maps, mp->n, ip) : -1;
  }
  if (i < 0) return -ENOENT;
  w->map = &mp->maps[i];
  w->obj = object_for(c, mp->pid, w->map);
  if (!w->obj) return 0;
  uint64_t at;
  if (pp_elf_offset_to_vaddr(&w->obj->info, w->map->offset, &at) < 0) {
    w->obj = NULL;
    return 0;
  }
  w->vaddr = ip - w->map->start + at;
  return 0;
}

int pyn_find_object(void *arg, uint64_t ip, struct pp_unwind_object *out) {
  struct pyn_unwind_arg *a = arg;
  struct pyn_where w;
  if (pyn_locate(a->c, a->m, ip, a->now_ns, &w) < 0 || !w.obj || !w.obj->have_tabs) return -ENOENT;
  const struct pyn_object *o = w.obj;
  out->start = w.map->start;
  out->end = w.map->end;
  out->bias = ip - w.vaddr;
  out->eh_hdr = o->tabs.eh_hdr;
  out->eh_hdr_vaddr = o->info.eh_frame_hdr_vaddr;
  out->eh_hdr_size = o->tabs.eh_hdr_size;
  out->eh_frame = o->tabs.eh_frame;
  out->eh_frame_vaddr = o->info.eh_frame_vaddr;
  out->eh_frame_size = o->tabs.eh_frame_size;
  out->dbg = &o->tabs.dbg;
  return 0;
}

const char *pyn_name(const struct pyn_where *w, char *buf, size_t cap) {
  if (w->obj && w->obj->sym) {
    const char *n = pp_elf_symtab_lookup(w->obj->sym, w->vaddr, NULL, buf, cap);
    if (n) return n;
  }
  if (w->map && w->map->path) {
    snprintf(buf, cap, "(%s)", w->map->path);
    return buf;
  }
  return "[unknown]";
}

bool pyn_is_eval(const struct pyn_where *w) {
  const struct pyn_object *o = w->obj;
  if (!o) return false;
  for (int k = 0; k < 3; k++) {
    if (!o->eval_at[k]) continue;
    if (o->eval_size[k]) {
      if (w->vaddr >= o->eval_at[k] && w->vaddr - o->eval_at[k] < o->eval_size[k]) return true;
    } else if (o->sym) {
      uint64_t start = 0;
      if (pp_elf_symtab_find(o->sym, w->vaddr, &start) && start == o->eval_at[k]) return true;
    }
  }
  return false;
}
