/* SPDX-License-Identifier: Apache-2.0 */
/*
 * JSON text exactly as Python's json.dumps(obj) writes it with default
 * arguments, because gProfiler's .col header is produced that way and
 * consumers may compare bytes: ", " and ": " separators, ensure_ascii
 * (everything outside printable ASCII as \uXXXX, lowercase hex, surrogate
 * pairs above U+FFFF), short escapes for \" \\ \n \r \t \b \f, floats as
 * repr() (shortest round-trip digits, "1e-05", "3.0", "1e+16"), NaN and
 * infinities as NaN / Infinity / -Infinity.
 *
 * Invalid UTF-8 inside a string is written the way Python sees bytes
 * decoded with "surrogateescape" (what psutil does with /proc data): each
 * bad byte 0xXY as \udcxy.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metadata.h"
#include "polyprof/kit/json.h"

struct sbuf {
  char *p;
  size_t len, cap;
  bool oom;
};

static void sb_reserve(struct sbuf *b, size_t more) {
  if (b->oom || b->len + more + 1 <= b->cap) return;
  size_t nc = b->cap ? b->cap : 256;
  while (nc < b->len + more + 1)
    nc *= 2;
  char *np = realloc(b->p, nc);
  if (!np) {
    b->oom = true;
    return;
  }
  b->p = np;
  b->cap = nc;
}

static void sb_addn(struct sbuf *b, const char *s, size_t n) {
  sb_reserve(b, n);
  if (b->oom) return;
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

static void sb_add(struct sbuf *b, const char *s) {
  sb_addn(b, s, strlen(s));
}

static void sb_u16(struct sbuf *b, unsigned v) {
  char t[8];
  snprintf(t, sizeof(t), "\\u%04x", v & 0xffffu);
  sb_addn(b, t, 6);
}

/* Decode one UTF-8 sequence at s[0..n). Returns its length and the code
 * point, or 0 if the bytes there are not a valid (shortest-form,
 * non-surrogate, <= U+10FFFF) sequence. */

static void put_string(struct sbuf *b, const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str;
  sb_reserve(b, n + 2);
  sb_addn(b, "\"", 1);
  size_t i = 0;
  while (i < n && !b->oom) {
    /* runs of plain printable ASCII are copied at once */
    size_t run = i;
    while (run < n && s[run] >= 0x20 && s[run] <= 0x7e && s[run] != '"' && s[run] != '\\')
      run++;
    if (run > i) {
      sb_addn(b, str + i, run - i);
      i = run;
      continue;
    }
    uint32_t cp;
    size_t l = pp_utf8_decode((const char *)s + i, n - i, &cp);
    if (!l) {
      sb_u16(b, 0xdc00u | s[i]); /* surrogateescape */
      i++;
      continue;
    }
    i += l;
    switch (cp) {
      case '"':
        sb_addn(b, "\\\"", 2);
        break;
      case '\\':
        sb_addn(b, "\\\\", 2);
        break;
      case '\n':
        sb_addn(b, "\\n", 2);
        break;
      case '\r':
        sb_addn(b, "\\r", 2);
        break;
      case '\t':
        sb_addn(b, "\\t", 2);
        break;
      case '\b':
        sb_addn(b, "\\b", 2);
        break;
      case '\f':
        sb_addn(b, "\\f", 2);
        break;
      default:
        if (cp >= 0x10000) {
          uint32_t v = cp - 0x10000;
          sb_u16(b, 0xd800u | (v >> 10));
          sb_u16(b, 0xdc00u | (v & 0x3ff));
        } else {
          sb_u16(b, cp);
        }
    }
  }
  sb_addn(b, "\"", 1);
}

/* Python's float.__repr__ (the 'r' format of PyOS_double_to_string). */
static void put_real(struct sbuf *b, double d) {
  if (isnan(d)) {
    sb_add(b, "NaN");
    return;
  }
  if (isinf(d)) {
    sb_add(b, d < 0 ? "-Infinity" : "Infinity");
    return;
  }
  if (d == 0) {
    sb_add(b, signbit(d) ? "-0.0" : "0.0");
    return;
  }
  /* Shortest digit string that reads back as the same double. printf's
   * %e is correctly rounded, so the first precision whose nearest string
   * round-trips gives what repr() prints; at a power of two the gap below
   * is half the gap above, and the next string up may round-trip where the
   * nearest one (below) does not. */
  char digits[24];
  size_t nd = 0;
  int exp10 = 0;
  bool neg = signbit(d);
  for (int prec = 0; prec < 17; prec++) {
    char e[40];
    snprintf(e, sizeof(e), "%.*e", prec, fabs(d));
    nd = 0;
    const char *p = e;
    for (; *p && *p != 'e'; p++)
      if (*p >= '0' && *p <= '9' && nd < sizeof(digits) - 1) digits[nd++] = *p;
    exp10 = *p == 'e' ? atoi(p + 1) : 0;
    if (strtod(e, NULL) == fabs(d)) break;
    int bexp;
    if (frexp(fabs(d), &bexp) != 0.5) continue;
    /* one unit up in the last digit, carrying */
    char up[24];
    memcpy(up, digits, nd);
    int upexp = exp10;
    size_t k = nd;
    while (k > 0 && up[k - 1] == '9')
      up[--k] = '0';
    if (k == 0) {
      up[0] = '1';
      upexp++;
    } else {
      up[k - 1]++;
    }
    char t[48];
    snprintf(t, sizeof(t), "%c.%.*se%d", up[0], (int)nd - 1, up + 1, upexp);
    if (strtod(t, NULL) == fabs(d)) {
      memcpy(digits, up, nd);
      exp10 = upexp;
      break;
    }
  }
  while (nd > 1 && digits[nd - 1] == '0')
    nd--;
  digits[nd] = '\0';
  int decpt = exp10 + 1; /* digits D.DDD * 10^exp10 = 0.DDDD * 10^decpt */
  char out[64];
  size_t o = 0;
  if (neg) out[o++] = '-';
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out[o++] = '0';
      out[o++] = '.';
      for (int i = 0; i < -decpt; i++)
        out[o++] = '0';
      memcpy(out + o, digits, nd);
      o += nd;
    } else if ((size_t)decpt >= nd) {
      memcpy(out + o, digits, nd);
      o += nd;
      for (size_t i = nd; i < (size_t)decpt; i++)
        out[o++] = '0';
      out[o++] = '.';
      out[o++] = '0';
    } else {
      memcpy(out + o, digits, (size_t)decpt);
      o += (size_t)decpt;
      out[o++] = '.';
      memcpy(out + o, digits + decpt, nd - (size_t)decpt);
      o += nd - (size_t)decpt;
    }
    out[o] = '\0';
  } else {
    out[o++] = digits[0];
    if (nd > 1) {
      out[o++] = '.';
      memcpy(out + o, digits + 1, nd - 1);
      o += nd - 1;
    }
    int x = decpt - 1;
    snprintf(out + o, sizeof(out) - o, "e%c%02d", x < 0 ? '-' : '+', x < 0 ? -x : x);
  }
  sb_add(b, out);
}

static void put_value(struct sbuf *b, const json_t *j, int depth) {
  if (b->oom) return;
  if (!j || depth > 256) {
    sb_add(b, "null");
    return;
  }
  switch (json_typeof(j)) {
    case JSON_OBJECT: {
      sb_add(b, "{");
      const char *k;
      json_t *v;
      bool first = true;
      json_object_foreach((json_t *)j, k, v) {
        if (!first) sb_add(b, ", ");
        first = false;
        put_string(b, k, strlen(k));
        sb_add(b, ": ");
        put_value(b, v, depth + 1);
      }
      sb_add(b, "}");
      break;
    }
    case JSON_ARRAY: {
      sb_add(b, "[");
      for (size_t i = 0; i < json_array_size(j); i++) {
        if (i) sb_add(b, ", ");
        put_value(b, json_array_get(j, i), depth + 1);
      }
      sb_add(b, "]");
      break;
    }
    case JSON_STRING:
      put_string(b, json_string_value(j), json_string_length(j));
      break;
    case JSON_INTEGER: {
      char t[32];
      snprintf(t, sizeof(t), "%lld", (long long)json_integer_value(j));
      sb_add(b, t);
      break;
    }
    case JSON_REAL:
      put_real(b, json_real_value(j));
      break;
    case JSON_TRUE:
      sb_add(b, "true");
      break;
    case JSON_FALSE:
      sb_add(b, "false");
      break;
    case JSON_NULL:
      sb_add(b, "null");
      break;
  }
}

char *pp_json_dumps_python(const json_t *j) {
  struct sbuf b = {0};
  put_value(&b, j, 0);
  if (b.oom) {
    free(b.p);
    return NULL;
  }
  return b.p ? b.p : strdup("null");
}

char *pp_json_real_repr(double d, char *buf, size_t len) {
  struct sbuf b = {0};
  put_real(&b, d);
  if (b.oom || !b.p) {
    free(b.p);
    return NULL;
  }
  snprintf(buf, len, "%s", b.p);
  free(b.p);
  return buf;
}

json_t *pp_json_string_lossy(const char *s, size_t n) {
  if (!s) return json_null();
  size_t i = 0;
  uint32_t cp;
  while (i < n) {
    size_t l = pp_utf8_decode(s + i, n - i, &cp);
    if (!l) break;
    i += l;
  }
  if (i == n) return json_stringn(s, n);
  /* at most 3 bytes (U+FFFD) per input byte */
  char *out = malloc(n * 3 + 1);
  if (!out) return NULL;
  size_t o = 0;
  for (i = 0; i < n;) {
    size_t l = pp_utf8_decode(s + i, n - i, &cp);
    if (l) {
      memcpy(out + o, s + i, l);
      o += l;
      i += l;
    } else {
      memcpy(out + o, "\xef\xbf\xbd", 3);
      o += 3;
      i++;
    }
  }
  json_t *j = json_stringn(out, o);
  free(out);
  return j;
}
