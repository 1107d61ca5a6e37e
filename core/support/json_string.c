/* JSON string literal writer (see json_string.h). */
#include "support/json_string.h"

/* Length of the valid UTF-8 sequence at s (1-4), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t need;
  unsigned min;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf)
    need = 2, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef)
    need = 3, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4)
    need = 4, min = 0x10000;
  else
    return 0;
  if (n < need) return 0;
  unsigned cp = c & (0xff >> (need + 1));
  for (size_t i = 1; i < need; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return need;
}

void pp_json_put_string(FILE *f, const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  putc('"', f);
  size_t i = 0, run = 0; /* u[run..i) is plain text not yet written */
  while (i < n) {
    unsigned c = u[i];
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      i++;
      continue;
    }
    if (i > run) fwrite(u + run, 1, i - run, f);
    if (c == '"' || c == '\\') {
      putc('\\', f);
      putc((int)c, f);
      i++;
    } else if (c < 0x20) {
      fprintf(f, "\\u%04x", c);
      i++;
    } else {
      size_t l = utf8_len(u + i, n - i);
      if (l) {
        fwrite(u + i, 1, l, f);
        i += l;
      } else {
        fputs("\\ufffd", f);
        i++;
      }
    }
    run = i;
  }
  if (i > run) fwrite(u + run, 1, i - run, f);
  putc('"', f);
}
