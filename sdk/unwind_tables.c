/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loading one object's unwind tables from its file for the remote
 * unwinder (polyprof/kit/unwind.h): .eh_frame_hdr and .eh_frame copied
 * and checked, .debug_frame converted. Kept apart from unwind.c so that a
 * plugin can load tables without linking libunwind twice.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "polyprof/kit/unwind.h"

#define SECTION_MAX (64u << 20) /* refuse absurd unwind section sizes */

/* Reads [off, off+len) of fd into a new buffer. */
static int read_range(int fd, uint64_t off, uint64_t len, uint8_t **out) {
  *out = NULL;
  if (len == 0 || len > SECTION_MAX) return -EINVAL;
  uint8_t *b = malloc((size_t)len);
  if (!b) return -ENOMEM;
  uint64_t got = 0;
  while (got < len) {
    ssize_t r = pread(fd, b + got, (size_t)(len - got), (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      free(b);
      return -EIO;
    }
    got += (uint64_t)r;
  }
  *out = b;
  return 0;
}

/* The converted .debug_frame goes just past the object's last segment,
 * where nothing of the object lives, within int32 reach of its code. */
static void load_debug_frame(int fd, const struct pp_elf_info *in, struct pp_debug_frame *dbg) {
  uint64_t top = 0;
  for (unsigned i = 0; i < in->nloads && i < PP_ELF_MAX_LOADS; i++)
    if (in->loads[i].vaddr + in->loads[i].memsz > top)
      top = in->loads[i].vaddr + in->loads[i].memsz;
  if (top == 0) return;
  uint64_t base = ((top + 0xfff) & ~0xfffull) + 0x1000;
  uint8_t *df = NULL;
  if (read_range(fd, in->debug_frame_offset, in->debug_frame_size, &df) < 0) return;
  pp_debug_frame_convert(df, (size_t)in->debug_frame_size, base, dbg);
  free(df);
}

int pp_unwind_tables_load(int fd, const struct pp_elf_info *in, struct pp_unwind_tables *t) {
  memset(t, 0, sizeof(*t));
  int have_eh = in->eh_frame_hdr_size && in->eh_frame_size;
  if (!have_eh && !in->debug_frame_size) return -ENOENT;
  int rc = 0;
  if (have_eh) {
    rc = read_range(fd, in->eh_frame_hdr_offset, in->eh_frame_hdr_size, &t->eh_hdr);
    if (rc == 0) rc = read_range(fd, in->eh_frame_offset, in->eh_frame_size, &t->eh_frame);
    /* CFI that would make libunwind index its register table out of
     * bounds, or a table pointing it at bytes that are no FDE */
    if (rc == 0 && !pp_eh_frame_ok(t->eh_hdr, (size_t)in->eh_frame_hdr_size, in->eh_frame_hdr_vaddr,
                                   t->eh_frame, (size_t)in->eh_frame_size, in->eh_frame_vaddr))
      have_eh = 0;
    if (rc < 0 || !have_eh) {
      free(t->eh_hdr);
      free(t->eh_frame);
      t->eh_hdr = t->eh_frame = NULL;
    }
  }
  /* code built without unwind tables is described only in .debug_frame */
  if (rc == 0 && in->debug_frame_size) load_debug_frame(fd, in, &t->dbg);
  if (rc == 0 && !have_eh && !t->dbg.data) rc = -ENOENT;
  if (rc < 0) {
    pp_unwind_tables_free(t);
    return rc;
  }
  t->eh_hdr_size = have_eh ? in->eh_frame_hdr_size : 0;
  t->eh_frame_size = have_eh ? in->eh_frame_size : 0;
  return 0;
}

void pp_unwind_tables_free(struct pp_unwind_tables *t) {
  free(t->eh_hdr);
  free(t->eh_frame);
  free(t->dbg.data);
  memset(t, 0, sizeof(*t));
}

size_t pp_unwind_tables_bytes(const struct pp_unwind_tables *t) {
  return (size_t)(t->eh_hdr_size + t->eh_frame_size) + t->dbg.size;
}
