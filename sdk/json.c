/* SPDX-License-Identifier: Apache-2.0 */
/*
 * JSON string escaping with invalid UTF-8 replaced (see json.h).
 */
#include "polyprof/kit/json.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

size_t pp_utf8_decode(const char *str, size_t n, uint32_t *cp_out) {
  const unsigned char *s = (const unsigned char *)str;
  if (!n) return 0;
  unsigned c = s[0];
  size_t len;
  uint32_t cp, min;
  if (c < 0x80) {
    if (cp_out) *cp_out = c;
    return 1;
  }
  if (c >= 0xc2 && c <= 0xdf)
    len = 2, cp = c & 0x1f, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef)
    len = 3, cp = c & 0x0f, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4)
    len = 4, cp = c & 0x07, min = 0x10000;
  else
    return 0;
  if (len > n) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  if (cp_out) *cp_out = cp;
  return len;
}

size_t pp_json_string(char *out, size_t cap, const char *in) {
  if (cap < 3) {
    if (cap) out[0] = '\0';
    return 0;
  }
  size_t o = 0;
  out[o++] = '"';
  const unsigned char *s = (const unsigned char *)(in ? in : "");
  size_t left = strlen((const char *)s);
  while (*s) {
    char esc[8];
    const char *piece;
    size_t len, adv;
    size_t u = pp_utf8_decode((const char *)s, left, NULL);
    if (*s == '"' || *s == '\\') {
      esc[0] = '\\', esc[1] = (char)*s, esc[2] = '\0';
      piece = esc, len = 2, adv = 1;
    } else if (*s < 0x20) {
      static const char short_esc[] = {
          ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't'};
      if (*s < sizeof(short_esc) && short_esc[*s]) {
        esc[0] = '\\', esc[1] = short_esc[*s], esc[2] = '\0';
        len = 2;
      } else {
        len = (size_t)snprintf(esc, sizeof(esc), "\\u%04x", *s);
      }
      piece = esc, adv = 1;
    } else if (u == 0) {
      piece = "\xef\xbf\xbd", len = 3, adv = 1; /* U+FFFD */
    } else {
      piece = (const char *)s, len = u, adv = u;
    }
    if (o + len + 2 > cap) break; /* room for the closing quote and NUL */
    memcpy(out + o, piece, len);
    o += len;
    s += adv;
    left -= adv;
  }
  out[o++] = '"';
  out[o] = '\0';
  return o;
}
