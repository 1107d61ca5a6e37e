/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the .col parser as `polyprof upload-file` and `polyprof
 * convert` use it (a file from anywhere: ours, gProfiler's, hand-edited),
 * then the writers `convert` feeds the parsed profile to (.col, speedscope,
 * pprof), writing to /dev/null. A refused file must carry a message.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "output/col.h"
#include "output/pprof.h"
#include "output/speedscope.h"
#include "profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct pp_profile *p = pp_profile_new();
  if (!p) abort();
  char *header = NULL, err[512] = "";
  if (pp_col_parse((const char *)data, size, p, &header, err, sizeof(err)) == 0) {
    FILE *out = pp_fuzz_devnull();
    pp_col_write(out, p, header, NULL);
    pp_speedscope_write(out, p, "fuzz.col");
    struct pp_pprof_info pi = {.start = 0, .end = 1, .frequency = 11};
    pp_pprof_write(out, p, &pi);
    /* frame text of every frame, as the writers format it */
    char buf[256];
    for (size_t i = 0; i < pp_profile_frame_count(p); i++)
      pp_frame_format(p, (uint32_t)i, buf, sizeof(buf), true);
  } else if (!err[0]) {
    abort();
  }
  free(header);
  pp_profile_free(p);
  return 0;
}
