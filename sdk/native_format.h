/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NativeFormat encoding of ReadyToRun sections: variable-length
 * integers, the sparse NativeArray (METHODDEF_ENTRYPOINTS) and the
 * NativeHashtable (INSTANCE_METHOD_ENTRYPOINTS), and the method entry they
 * lead to. Offsets are RVAs, as the runtime reads them from the mapped
 * image; a reader holds one section's bytes and refuses any offset outside
 * them. Internal to the kit (pe_r2r.c).
 */
#ifndef POLYPROF_SDK_NATIVE_FORMAT_H
#define POLYPROF_SDK_NATIVE_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nf_reader {
  const uint8_t *data;
  uint32_t base, size; /* data holds the RVAs [base, base + size) */
};

/* Decodes the integer at *off and moves *off past it; false if it does
 * not fit in the reader or is not a valid encoding. */
bool nf_unsigned(const struct nf_reader *r, uint32_t *off, uint32_t *v);
bool nf_signed(const struct nf_reader *r, uint32_t *off, int32_t *v);

struct nf_array {
  const struct nf_reader *r;
  uint32_t base, count;
  uint8_t index_size; /* 0: 1 byte, 1: 2, 2: 4 */
};
bool nf_array_open(const struct nf_reader *r, uint32_t off, struct nf_array *a);
/* Offset of element index, false if the sparse array has none. */
bool nf_array_get(const struct nf_array *a, uint32_t index, uint32_t *off);

struct nf_hashtable {
  const struct nf_reader *r;
  uint32_t base, bucket_mask;
  uint8_t index_size;
};
bool nf_hashtable_open(const struct nf_reader *r, uint32_t off, struct nf_hashtable *h);
/* Calls fn with the offset of every entry, at most max_entries times.
 * Returns the number of entries visited, or -1 if the table is malformed
 * (fn may have been called for some entries). fn returns false to stop. */
long nf_hashtable_each(const struct nf_hashtable *h, size_t max_entries,
                       bool (*fn)(void *ctx, uint32_t entry_off), void *ctx);

/* The method entry at off: the index of the method's code in
 * RUNTIME_FUNCTIONS (its fixup list, which may follow, is skipped). */
bool nf_method_entry(const struct nf_reader *r, uint32_t off, uint32_t *runtime_function);

#endif
