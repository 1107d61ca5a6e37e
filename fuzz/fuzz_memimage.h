/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A process's memory as a fuzz input, for the runtime walkers (python,
 * ruby, php), which follow pointers through a target's memory with the
 * kit's remote reads. The input is a header the target interprets (where
 * the walk starts, which runtime version) and then segments, each
 * u64 address, u32 length, the bytes; a read inside one segment gets its
 * bytes, any other read fails as unmapped memory does (-EFAULT). The
 * kit's reader seam (pp_remote_set_reader) makes the walker read it.
 *
 * The same format is recorded from real processes: the recorder reads the
 * real target and keeps every segment the walker read, so a seed is the
 * part of a real address space that one real sample walked.
 */
#ifndef PP_FUZZ_MEMIMAGE_H
#define PP_FUZZ_MEMIMAGE_H

#include <stddef.h>
#include <stdint.h>

/* Serves data[hdr_len..] as memory from now on. Returns the header, or
 * NULL if the input is shorter than it. Segments past the last whole one
 * are ignored. */
const uint8_t *pp_fuzz_image_load(const uint8_t *data, size_t size, size_t hdr_len);
/* Back to real reads. */
void pp_fuzz_image_unload(void);

/* Recording: real reads from now on, every successful one kept. */
void pp_fuzz_image_record_start(void);
/* Writes the header and the kept segments to path, stops recording.
 * 0 or -1. */
int pp_fuzz_image_record_write(const char *path, const void *hdr, size_t hdr_len);

#endif
