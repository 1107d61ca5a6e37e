/* SPDX-License-Identifier: Apache-2.0 */
/* speedscope writer: structure, one profile per process, shared frames,
 * weights, hostile and invalid UTF-8 names kept valid JSON. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "output/speedscope.h"
#include "profile.h"
#include "testlib.h"

int main(void) {
  struct pp_profile *p = pp_profile_new();
  uint32_t fa = pp_profile_intern_frame(p, pp_profile_intern_cstr(p, "a"),
                                        pp_profile_intern_cstr(p, "a.py"), 3, PP_FRAME_PYTHON);
  uint32_t fb = pp_profile_intern_frame(p, pp_profile_intern_cstr(p, "b\"</script>\n"), PP_NO_STR,
                                        0, PP_FRAME_NATIVE);
  uint32_t fc = pp_profile_intern_frame(p, pp_profile_intern(p, "bad\xff\xfe", 5), PP_NO_STR, 0,
                                        PP_FRAME_NATIVE);
  uint32_t s1[] = {fa, fb}, s2[] = {fa}, s3[] = {fc};
  pp_profile_add_stack(p, 1, PP_NO_STR, s1, 2, 4);
  pp_profile_add_stack(p, 2, PP_NO_STR, s3, 1, 9);
  pp_profile_add_stack(p, 1, PP_NO_STR, s2, 1, 6);
  pp_profile_pid_upsert(p, 1)->comm = pp_profile_intern_cstr(p, "python3");
  pp_profile_pid_upsert(p, 2)->comm = pp_profile_intern_cstr(p, "x");

  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  CHECK_EQ_INT(pp_speedscope_write(f, p, "test"), 0);
  fclose(f);
  json_error_t je;
  json_t *doc = json_loadb(buf, len, 0, &je);
  CHECK(doc != NULL);
  if (!doc) {
    fprintf(stderr, "%s\n%s\n", je.text, buf);
    return pp_test_finish("test_speedscope");
  }
  CHECK_EQ_STR(json_string_value(json_object_get(doc, "$schema")),
               "https://www.speedscope.app/file-format-schema.json");
  json_t *frames = json_object_get(json_object_get(doc, "shared"), "frames");
  CHECK_EQ_INT(json_array_size(frames), 3);
  CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(frames, 0), "name")), "a");
  CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(frames, 0), "file")), "a.py");
  CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(frames, 0), "line")), 3);
  CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(frames, 1), "name")),
               "b\"</script>\n");
  CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(frames, 2), "name")),
               "bad\xef\xbf\xbd\xef\xbf\xbd");
  json_t *profs = json_object_get(doc, "profiles");
  CHECK_EQ_INT(json_array_size(profs), 2);
  json_t *p0 = json_array_get(profs, 0);
  CHECK_EQ_STR(json_string_value(json_object_get(p0, "name")), "python3 (pid 1)");
  CHECK_EQ_STR(json_string_value(json_object_get(p0, "type")), "sampled");
  CHECK_EQ_INT(json_integer_value(json_object_get(p0, "endValue")), 10);
  json_t *samples = json_object_get(p0, "samples"), *weights = json_object_get(p0, "weights");
  CHECK_EQ_INT(json_array_size(samples), 2);
  CHECK_EQ_INT(json_array_size(weights), 2);
  /* root first: [a, b] */
  json_t *first = json_array_get(samples, 0);
  CHECK_EQ_INT(json_integer_value(json_array_get(first, 0)), 0);
  CHECK_EQ_INT(json_integer_value(json_array_get(first, 1)), 1);
  CHECK_EQ_INT(json_integer_value(json_array_get(weights, 0)), 4);
  json_decref(doc);
  free(buf);
  pp_profile_free(p);
  return pp_test_finish("test_speedscope");
}
