/* SPDX-License-Identifier: Apache-2.0 */
/* gzip in memory (see gzip.h). */
#include "support/gzip.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

/* windowBits 15 + 16: zlib writes a gzip wrapper instead of a zlib one */
#define GZIP_WINDOW (15 + 16)
/* windowBits 15 + 32: zlib detects gzip or zlib on input */
#define AUTO_WINDOW (15 + 32)

int pp_gzip(const void *in, size_t len, int level, unsigned char **out, size_t *out_len) {
  z_stream z;
  memset(&z, 0, sizeof(z));
  if (deflateInit2(&z, level, Z_DEFLATED, GZIP_WINDOW, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return -ENOMEM;
  size_t cap = deflateBound(&z, (uLong)len) + 32;
  unsigned char *b = malloc(cap);
  if (!b) {
    deflateEnd(&z);
    return -ENOMEM;
  }
  z.next_in = (Bytef *)in;
  z.avail_in = (uInt)len;
  z.next_out = b;
  z.avail_out = (uInt)cap;
  int rc = deflate(&z, Z_FINISH);
  size_t n = z.total_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) {
    free(b);
    return -EIO;
  }
  *out = b;
  *out_len = n;
  return 0;
}

int pp_gunzip(const void *in, size_t len, size_t max_out, char **out, size_t *out_len) {
  z_stream z;
  memset(&z, 0, sizeof(z));
  if (inflateInit2(&z, AUTO_WINDOW) != Z_OK) return -ENOMEM;
  size_t cap = len * 4 + 1024, n = 0;
  if (cap > max_out + 1) cap = max_out + 1;
  char *b = malloc(cap + 1);
  int rc = Z_OK;
  z.next_in = (Bytef *)in;
  z.avail_in = (uInt)len;
  while (b) {
    z.next_out = (Bytef *)b + n;
    z.avail_out = (uInt)(cap - n);
    rc = inflate(&z, Z_NO_FLUSH);
    n = z.total_out;
    if (rc == Z_STREAM_END || (rc != Z_OK && rc != Z_BUF_ERROR)) break;
    if (rc == Z_BUF_ERROR && z.avail_in == 0) break;
    if (n > max_out) break;
    if (n == cap) {
      cap *= 2;
      char *nb = realloc(b, cap + 1);
      if (!nb) {
        free(b);
        b = NULL;
        break;
      }
      b = nb;
    }
  }
  inflateEnd(&z);
  if (!b) return -ENOMEM;
  if (n > max_out) {
    free(b);
    return -EFBIG;
  }
  if (rc != Z_STREAM_END) {
    free(b);
    return -EINVAL;
  }
  b[n] = '\0';
  *out = b;
  *out_len = n;
  return 0;
}
