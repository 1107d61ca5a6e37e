/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the kit's JSON string writer (sdk/json.c), which turns text a
 * target chose (thread names, paths, versions) into application metadata.
 * Whatever the bytes, the output must be a closed JSON string of valid
 * UTF-8 with no raw control character, within the buffer, for every buffer
 * size down to the smallest.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "polyprof/kit/json.h"

static bool valid_utf8(const unsigned char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    unsigned c = s[i];
    size_t k = c < 0x80             ? 1
               : (c & 0xe0) == 0xc0 ? 2
               : (c & 0xf0) == 0xe0 ? 3
               : (c & 0xf8) == 0xf0 ? 4
                                    : 0;
    if (!k || i + k > n) return false;
    for (size_t j = 1; j < k; j++)
      if ((s[i + j] & 0xc0) != 0x80) return false;
    i += k;
  }
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *in = malloc(size + 1);
  if (!in) abort();
  memcpy(in, data, size);
  in[size] = '\0';
  static const size_t caps[] = {0, 1, 2, 3, 4, 7, 16, 100, 4096};
  char out[4096 + 8];
  for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
    size_t cap = caps[i];
    memset(out, 'Z', sizeof(out));
    size_t n = pp_json_string(out, cap, in);
    if (cap == 0) {
      if (n != 0 || out[0] != 'Z') abort();
      continue;
    }
    if (n >= cap || out[n] != '\0' || strlen(out) != n || out[cap] != 'Z') abort();
    if (cap < 3) continue;
    if (n < 2 || out[0] != '"' || out[n - 1] != '"') abort();
    if (!valid_utf8((const unsigned char *)out, n)) abort();
    for (size_t k = 0; k < n; k++)
      if ((unsigned char)out[k] < 0x20) abort();
    /* every quote inside is escaped */
    for (size_t k = 1; k + 1 < n; k++)
      if (out[k] == '"') {
        size_t bs = 0;
        while (k - bs > 1 && out[k - 1 - bs] == '\\')
          bs++;
        if (bs % 2 == 0) abort();
      }
  }
  free(in);
  return 0;
}
