/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unwind tables of an object file for the remote DWARF unwinder
 * (polyprof/kit/unwind.h): .debug_frame rewritten as the binary-search
 * table + .eh_frame records libunwind's remote lookup takes, and the check
 * an object's own .eh_frame must pass before libunwind reads it. Input
 * sections are hostile: every length and offset is checked.
 */
#ifndef POLYPROF_KIT_DEBUG_FRAME_H
#define POLYPROF_KIT_DEBUG_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* .debug_frame as an .eh_frame_hdr-style table followed by .eh_frame
 * records, to be served at ELF virtual address `vaddr` (plus the mapping's
 * bias): `nentries` (int32 start_ip - vaddr, int32 fde - vaddr) pairs at
 * vaddr, sorted. */
struct pp_debug_frame {
  uint8_t *data; /* NULL: none; free() it */
  size_t size;
  uint64_t vaddr;
  size_t nentries;
};

/* Converts a .debug_frame section (len bytes, untrusted) into `out` laid
 * out at ELF address base. 0, -ENOENT (nothing usable) or -ENOMEM. */
int pp_debug_frame_convert(const uint8_t *df, size_t len, uint64_t base,
                           struct pp_debug_frame *out);

/* True if every record of an .eh_frame section (len bytes at ELF address
 * f_vaddr, untrusted) can be read with CFA programs naming registers
 * libunwind can index, and every FDE pointer of its .eh_frame_hdr table
 * (hdr_len bytes at hdr_vaddr) is the start of such an FDE. */
bool pp_eh_frame_ok(const uint8_t *hdr, size_t hdr_len, uint64_t hdr_vaddr, const uint8_t *f,
                    size_t len, uint64_t f_vaddr);

#ifdef __cplusplus
}
#endif

#endif
