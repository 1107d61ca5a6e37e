/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ReadyToRun method signatures (the keys of INSTANCE_METHOD_ENTRYPOINTS):
 * flags, an optional module override and owner type, the method token and
 * the method's instantiation, in the compressed encoding of ECMA-335
 * signatures plus the runtime's own element types. Decoded only as far as
 * the method token and the signature's length (its entry follows it).
 * Internal to the kit (pe_r2r.c).
 */
#ifndef POLYPROF_SDK_R2R_SIGNATURE_H
#define POLYPROF_SDK_R2R_SIGNATURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct r2r_method_sig {
  uint32_t flags;
  uint32_t rid;  /* row of the method token */
  bool foreign;  /* the token is a MemberRef of another module's metadata */
  size_t length; /* bytes of the signature */
};

/* false if the len bytes at p do not start with a whole method signature
 * this decoder understands. */
bool r2r_method_sig_decode(const uint8_t *p, size_t len, struct r2r_method_sig *out);

#endif
