/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: python.native's reader of a thread's perf ring
 * (plugins/python/native_events.c): the ring's head and tail, records
 * that wrap around its end, and each PERF_RECORD_SAMPLE's callchain,
 * user registers and user stack copy, whose counts and sizes are the
 * records' own. The kernel writes the ring, but the ring is shared
 * memory that a bug (ours or the kernel's) can leave in any state, so
 * it is read as hostile. The input is the ring's tail position, how far
 * the head claims to be past it, then the bytes the kernel would have
 * written from the tail on (laid into the ring from that position,
 * wrapping at its end). A sample handed on must lie inside the scratch
 * buffer the records are copied to. Seeds are rings of well-formed
 * records (samples with and without registers and stack, a lost count),
 * some wrapping around the end.
 */
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "native.h"

#define PAGE 4096u
#define RING_DATA ((size_t)PYN_RING_PAGES * PAGE)
#define SCRATCH (PYN_STACK_COPY + 4096u) /* what native.c gives the reader */

static uint8_t ring[PAGE + RING_DATA];
static uint8_t scratch[SCRATCH];
static uint64_t sink;

static void on_sample(void *ctx, const struct pyn_sample *s) {
  (void)ctx;
  if (s->nkips > PYN_MAX_KERNEL) abort();
  if (s->stack_len && (s->stack < scratch || s->stack_len > SCRATCH ||
                       (size_t)(s->stack - scratch) > SCRATCH - s->stack_len))
    abort();
  /* every byte handed on is read, as the unwinder may */
  for (uint64_t i = 0; i < s->stack_len; i++)
    sink += s->stack[i];
  for (uint32_t i = 0; i < s->nkips; i++)
    sink += s->kips[i];
  if (s->have_regs)
    for (int i = 0; i < PP_UNWIND_NREGS; i++)
      sink += s->regs[i];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 12) return 0;
  uint64_t tail;
  uint32_t ahead;
  memcpy(&tail, data, 8);
  memcpy(&ahead, data + 8, 4);
  data += 12, size -= 12;
  memset(ring, 0, sizeof(ring));
  for (size_t i = 0; i < size && i < RING_DATA; i++)
    ring[PAGE + (tail + i) % RING_DATA] = data[i];
  struct perf_event_mmap_page *pg = (struct perf_event_mmap_page *)ring;
  pg->data_tail = tail;
  pg->data_head = tail + ahead;
  struct pyn_thread t;
  memset(&t, 0, sizeof(t));
  t.fd = -1;
  t.ring = ring;
  uint64_t bad = 0;
  (void)pyn_thread_drain(&t, scratch, sizeof(scratch), on_sample, NULL, &bad);
  /* the reader consumed at most what the head promised */
  if (pg->data_tail - tail > ahead) abort();
  return 0;
}
