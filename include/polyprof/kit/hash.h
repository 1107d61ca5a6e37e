/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A 64-bit integer hash for open-addressing tables keyed by addresses or
 * ids (murmur3's finalizer: every input bit moves every output bit, so
 * aligned pointers spread over the low bits a power-of-two mask keeps).
 */
#ifndef POLYPROF_KIT_HASH_H
#define POLYPROF_KIT_HASH_H

#include <stdint.h>

static inline uint64_t pp_hash_u64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}

#endif
