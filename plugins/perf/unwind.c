/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The perf plugin's side of DWARF unwinding: the kit's unwinder
 * (polyprof/kit/unwind.h) walks the stack copy; this file tells it which
 * object holds an address (the process's mapping, its load bias and the
 * tables dso.c loaded for it).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"
#include "polyprof/kit/unwind.h"

struct perf_unwind {
  struct pp_unwinder *u;
};

struct find_ctx {
  struct perf_state *st;
  struct perf_proc *p;
};

static int find_object(void *arg, uint64_t ip, struct pp_unwind_object *o) {
  struct find_ctx *c = arg;
  struct perf_map *m = perf_proc_find_map(c->p, ip);
  if (!m || !m->dso) return -ENOENT;
  struct perf_dso *dso = m->dso;
  if (perf_dso_need_unwind(&c->st->dsos, dso, c->p, m) < 0) return -ENOENT;
  if (!m->bias_ok) {
    uint64_t vaddr;
    if (pp_elf_offset_to_vaddr(&dso->info, m->pgoff, &vaddr) == 0) {
      m->bias = m->start - vaddr;
      m->bias_ok = 1;
    } else {
      m->bias_ok = -1;
    }
  }
  if (m->bias_ok < 0) return -ENOENT;
  o->start = m->start;
  o->end = m->end;
  o->bias = m->bias;
  o->eh_hdr = dso->eh_hdr;
  o->eh_hdr_vaddr = dso->info.eh_frame_hdr_vaddr;
  o->eh_hdr_size = dso->eh_frame_hdr_size;
  o->eh_frame = dso->eh_frame;
  o->eh_frame_vaddr = dso->info.eh_frame_vaddr;
  o->eh_frame_size = dso->eh_frame_size;
  o->dbg = &dso->dbg;
  return 0;
}

int perf_unwind_init(struct perf_unwind **out) {
  struct perf_unwind *u = calloc(1, sizeof(*u));
  if (!u) return -ENOMEM;
  int rc = pp_unwinder_new(&u->u);
  if (rc < 0) {
    free(u);
    return rc;
  }
  *out = u;
  return 0;
}

void perf_unwind_fini(struct perf_unwind *u) {
  if (!u) return;
  pp_unwinder_free(u->u);
  free(u);
}

int perf_unwind_user(struct perf_state *st, struct perf_proc *p, const uint64_t *regs,
                     unsigned nregs, const uint8_t *stack, uint64_t stack_len, uint64_t *ips,
                     int max) {
  uint64_t r[PP_UNWIND_NREGS];
  pp_unwind_regs_unpack(st->ev.regs_mask, regs, nregs, r);
  return perf_unwind_user_regs(st, p, r, stack, stack_len, ips, max);
}

int perf_unwind_user_regs(struct perf_state *st, struct perf_proc *p, const uint64_t *r,
                          const uint8_t *stack, uint64_t stack_len, uint64_t *ips, int max) {
  struct find_ctx c = {.st = st, .p = p};
  int failed = 0;
  int n = pp_unwind_stack(st->unwind->u, r, stack, stack_len, find_object, &c, ips, max, &failed);
  if (failed) st->unwind_errors++;
  return n;
}
