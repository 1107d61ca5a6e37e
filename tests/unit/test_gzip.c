/* SPDX-License-Identifier: Apache-2.0 */
/* gzip helpers: round trip, a real gzip wrapper, bounded and strict gunzip. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "support/gzip.h"
#include "testlib.h"

int main(void) {
  const char *text = "hello hello hello hello hello";
  unsigned char *gz;
  size_t gzlen;
  CHECK_EQ_INT(pp_gzip(text, strlen(text), 6, &gz, &gzlen), 0);
  CHECK(gz[0] == 0x1f && gz[1] == 0x8b); /* gzip magic, not a zlib stream */
  char *plain;
  size_t plen;
  CHECK_EQ_INT(pp_gunzip(gz, gzlen, 1000, &plain, &plen), 0);
  CHECK_EQ_STR(plain, text);
  CHECK_EQ_INT(plen, strlen(text));
  free(plain);
  /* a server's reply larger than the caller's bound is refused */
  CHECK_EQ_INT(pp_gunzip(gz, gzlen, 5, &plain, &plen), -EFBIG);
  /* a cut-off stream is an error, not a short result */
  CHECK_EQ_INT(pp_gunzip(gz, gzlen / 2, 1000, &plain, &plen), -EINVAL);
  free(gz);

  /* empty input still makes a valid gzip member */
  CHECK_EQ_INT(pp_gzip("", 0, 6, &gz, &gzlen), 0);
  CHECK_EQ_INT(pp_gunzip(gz, gzlen, 10, &plain, &plen), 0);
  CHECK_EQ_INT(plen, 0);
  CHECK_EQ_STR(plain, "");
  free(plain);
  free(gz);
  return pp_test_finish("test_gzip");
}
