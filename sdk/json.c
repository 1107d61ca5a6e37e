/*
 * JSON string escaping with invalid UTF-8 replaced (see json.h).
 */
#include "polyprof/kit/json.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if it is not one. */
static size_t utf8_len(const unsigned char *s) {
  unsigned c = s[0];
  size_t n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf)
    n = 2, cp = c & 0x1f;
  else if (c >= 0xe0 && c <= 0xef)
    n = 3, cp = c & 0x0f;
  else if (c >= 0xf0 && c <= 0xf4)
    n = 4, cp = c & 0x07;
  else
    return 0;
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  /* overlong forms, surrogates, beyond U+10FFFF */
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || (cp >= 0xd800 && cp <= 0xdfff) ||
      cp > 0x10ffff)
    return 0;
  return n;
}

size_t pp_json_string(char *out, size_t cap, const char *in) {
  if (cap < 3) {
    if (cap) out[0] = '\0';
    return 0;
  }
  size_t o = 0;
  out[o++] = '"';
  const unsigned char *s = (const unsigned char *)(in ? in : "");
  while (*s) {
    char esc[8];
    const char *piece;
    size_t len, adv;
    size_t u = utf8_len(s);
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
  }
  out[o++] = '"';
  out[o] = '\0';
  return o;
}
