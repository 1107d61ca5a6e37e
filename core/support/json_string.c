/* SPDX-License-Identifier: Apache-2.0 */
/* JSON string literal writer (see json_string.h). */
#include "support/json_string.h"

#include "polyprof/kit/json.h"

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
      size_t l = pp_utf8_decode(s + i, n - i, NULL);
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
