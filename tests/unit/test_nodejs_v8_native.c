/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the v8 mode's C++ frame names (plugins/nodejs/v8_native.c)
 * on this very process: a function of the test binary and one of libc
 * named from their files' symbols (a return address names its call),
 * "the file holding V8" told by the file's identity, anonymous memory
 * and the stack named nothing, the shared tables counted. The plugin
 * source is compiled in. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../../plugins/nodejs/v8_native.c"
#include "testlib.h"

__attribute__((noinline)) int pp_test_native_marker(int x) {
  return x * 3 + 1;
}

static void test_self(void) {
  struct stat st;
  CHECK_EQ_INT(stat("/proc/self/exe", &st), 0);
  struct pp_file_id self = {major(st.st_dev), minor(st.st_dev), st.st_ino};
  struct v8_native *nv = v8_native_new((uint32_t)getpid(), &self);
  CHECK(nv != NULL);
  if (!nv) return;
  struct pp_frame f;
  uint64_t fn = (uint64_t)(uintptr_t)&pp_test_native_marker;
  CHECK_EQ_INT(pp_test_native_marker(1), 4);
  CHECK_EQ_INT(v8_native_frame(nv, fn + 2, 0, &f), 0);
  CHECK_EQ_STR(f.name, "pp_test_native_marker");
  CHECK_EQ_INT((int)f.kind, PP_FRAME_NATIVE);
  /* a return address right after a call at the function's end names it */
  CHECK_EQ_INT(v8_native_frame(nv, fn + 1, 1, &f), 0);
  CHECK_EQ_STR(f.name, "pp_test_native_marker");
  /* the cached name again */
  CHECK_EQ_INT(v8_native_frame(nv, fn + 3, 0, &f), 0);
  CHECK_EQ_STR(f.name, "pp_test_native_marker");
  CHECK_EQ_INT(v8_native_in_v8(nv, fn), 1);

  /* libc: another file, not "V8's" */
  uint64_t lc = (uint64_t)(uintptr_t)&getppid;
  CHECK_EQ_INT(v8_native_in_v8(nv, lc), 0);
  if (v8_native_frame(nv, lc, 0, &f) == 0) CHECK_CONTAINS(f.name, "getppid");

  /* the heap and the stack hold no code */
  char *heap = malloc(64);
  CHECK(v8_native_frame(nv, (uint64_t)(uintptr_t)heap, 0, &f) < 0);
  free(heap);
  CHECK(v8_native_frame(nv, (uint64_t)(uintptr_t)&st, 0, &f) < 0);
  CHECK_EQ_INT(v8_native_in_v8(nv, (uint64_t)(uintptr_t)&st), 0);
  CHECK(v8_native_bytes() > 0);

  /* a second reader of the same files shares their tables */
  size_t bytes = v8_native_bytes();
  struct v8_native *nv2 = v8_native_new((uint32_t)getpid(), &self);
  CHECK(nv2 != NULL);
  if (nv2) {
    CHECK_EQ_INT(v8_native_frame(nv2, fn, 0, &f), 0);
    CHECK_EQ_STR(f.name, "pp_test_native_marker");
    CHECK_EQ_INT((int)v8_native_bytes(), (int)bytes);
    v8_native_free(nv2);
  }
  v8_native_free(nv);
}

int main(void) {
  test_self();
  return pp_test_finish("test_nodejs_v8_native");
}
