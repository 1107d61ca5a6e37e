/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ReadyToRun method signatures. See r2r_signature.h. Compressed integers
 * (ECMA-335 II.23.2): 0xxxxxxx one byte, 10xxxxxx two, 110xxxxx four, big
 * endian. Type signatures are skipped element by element; the runtime's
 * additions are a module override (0x3f, an index then a type), the
 * canonical type (0x3e), a native value type (0x3d, then a type) and a
 * type variable of the method's owner (0x3b, a number).
 */
#include "r2r_signature.h"

#define SIG_DEPTH 32  /* nesting of type signatures */
#define SIG_ARGS 1024 /* generic arguments, array dimensions, parameters */

enum {
  SIG_UnboxingStub = 0x01,
  SIG_InstantiatingStub = 0x02,
  SIG_MethodInstantiation = 0x04,
  SIG_SlotInsteadOfToken = 0x08,
  SIG_MemberRefToken = 0x10,
  SIG_Constrained = 0x20,
  SIG_OwnerType = 0x40,
  SIG_UpdateContext = 0x80,
};

struct cur {
  const uint8_t *p, *end;
};

static bool data(struct cur *c, uint32_t *v) {
  if (c->p >= c->end) return false;
  uint8_t b = c->p[0];
  if ((b & 0x80) == 0) {
    *v = b;
    c->p += 1;
  } else if ((b & 0xc0) == 0x80) {
    if (c->end - c->p < 2) return false;
    *v = ((uint32_t)(b & 0x3f) << 8) | c->p[1];
    c->p += 2;
  } else if ((b & 0xe0) == 0xc0) {
    if (c->end - c->p < 4) return false;
    *v = ((uint32_t)(b & 0x1f) << 24) | ((uint32_t)c->p[1] << 16) | ((uint32_t)c->p[2] << 8) |
         c->p[3];
    c->p += 4;
  } else {
    return false;
  }
  return true;
}

static bool skip_type(struct cur *c, unsigned depth);

static bool skip_n_types(struct cur *c, uint32_t n, unsigned depth) {
  if (n > SIG_ARGS) return false;
  for (uint32_t i = 0; i < n; i++)
    if (!skip_type(c, depth)) return false;
  return true;
}

/* a method signature inside a function pointer type */
static bool skip_method_sig(struct cur *c, unsigned depth) {
  if (c->p >= c->end) return false;
  uint8_t conv = *c->p++;
  uint32_t n, x;
  if ((conv & 0x10) && !data(c, &x)) return false; /* generic: type parameter count */
  if (!data(c, &n) || n > SIG_ARGS) return false;
  if (!skip_type(c, depth)) return false; /* return type */
  for (uint32_t i = 0; i < n; i++) {
    if (c->p < c->end && *c->p == 0x41) c->p++; /* sentinel before varargs */
    if (!skip_type(c, depth)) return false;
  }
  return true;
}

static bool skip_type(struct cur *c, unsigned depth) {
  if (depth >= SIG_DEPTH || c->p >= c->end) return false;
  uint8_t t = *c->p++;
  uint32_t x, n;
  if ((t >= 0x01 && t <= 0x0e) || t == 0x16 || t == 0x18 || t == 0x19 || t == 0x1c || t == 0x3e)
    return true; /* primitives, string, typedref, object, canonical */
  switch (t) {
    case 0x0f: /* PTR */
    case 0x10: /* BYREF */
    case 0x1d: /* SZARRAY */
    case 0x45: /* PINNED */
    case 0x41: /* SENTINEL */
    case 0x3d: /* native value type */
      return skip_type(c, depth + 1);
    case 0x11: /* VALUETYPE */
    case 0x12: /* CLASS */
    case 0x13: /* VAR */
    case 0x1e: /* MVAR */
    case 0x3b: /* VAR of the owner */
      return data(c, &x);
    case 0x1f: /* CMOD_REQD */
    case 0x20: /* CMOD_OPT */
      return data(c, &x) && skip_type(c, depth + 1);
    case 0x3f: /* module override */
      return data(c, &x) && skip_type(c, depth + 1);
    case 0x15: /* GENERICINST */
      return skip_type(c, depth + 1) && data(c, &n) && skip_n_types(c, n, depth + 1);
    case 0x14: /* ARRAY: type, rank, sizes, lower bounds */
      if (!skip_type(c, depth + 1) || !data(c, &x) || !data(c, &n) || n > SIG_ARGS) return false;
      for (uint32_t i = 0; i < n; i++)
        if (!data(c, &x)) return false;
      if (!data(c, &n) || n > SIG_ARGS) return false;
      for (uint32_t i = 0; i < n; i++)
        if (!data(c, &x)) return false; /* signed, same length rule */
      return true;
    case 0x1b: /* FNPTR */
      return skip_method_sig(c, depth + 1);
    default:
      return false;
  }
}

bool r2r_method_sig_decode(const uint8_t *p, size_t len, struct r2r_method_sig *out) {
  struct cur c = {p, p + len};
  uint32_t flags, x;
  if (!data(&c, &flags)) return false;
  out->flags = flags;
  out->foreign = (flags & (SIG_UpdateContext | SIG_MemberRefToken)) != 0;
  if ((flags & SIG_UpdateContext) && !data(&c, &x)) return false;
  if ((flags & SIG_OwnerType) && !skip_type(&c, 0)) return false;
  if (flags & SIG_SlotInsteadOfToken) return false; /* no token: nothing to name */
  if (!data(&c, &out->rid)) return false;
  if (flags & SIG_MethodInstantiation) {
    uint32_t n;
    if (!data(&c, &n) || !skip_n_types(&c, n, 0)) return false;
  }
  out->length = (size_t)(c.p - p);
  return true;
}
