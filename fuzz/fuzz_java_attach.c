/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: a HotSpot attach reply (plugins/java/attach.c), which the
 * JVM, that is the profiled process, writes on its attach socket: the
 * status line and body, then the `load` result read from them (JDK 8's
 * bare return code, JDK 9-20's "return code: N", JDK 21's error text)
 * and the agent's error line looked up in the body.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "java.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* the plugin reads into a buffer with one byte spare for the NUL */
  char *buf = malloc(size + 1);
  if (!buf) abort();
  memcpy(buf, data, size);
  struct java_attach_reply r = {0};
  char err[256];
  if (java_attach_parse_reply(buf, size, &r, err, sizeof(err)) < 0) {
    if (!err[0]) abort(); /* a refusal names its reason */
    return 0;
  }
  if (!r.body || r.len > size || r.body[r.len] != '\0') abort();
  int rc;
  char why[256];
  if (java_load_result(&r, &rc, why, sizeof(why)) < 0 && !why[0]) abort();
  char small[8];
  (void)java_collect_error(r.body, small, sizeof(small));
  (void)java_collect_error(r.body, why, sizeof(why));
  java_attach_reply_free(&r);
  return 0;
}
