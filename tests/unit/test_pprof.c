/* SPDX-License-Identifier: Apache-2.0 */
/* pprof encoder: decode what pp_pprof_encode wrote with protobuf-c and check
 * the invariants pprof readers rely on. */
#include <stdlib.h>
#include <string.h>

#include "output/pprof.h"
#include "output/profile.pb-c.h"
#include "profile.h"
#include "support/gzip.h"
#include "testlib.h"

static const char *S(const Perftools__Profiles__Profile *p, int64_t i) {
  return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : "<bad index>";
}

static const Perftools__Profiles__Function *fn_of(const Perftools__Profiles__Profile *pr,
                                                  uint64_t loc_id, int64_t *line) {
  for (size_t i = 0; i < pr->n_location; i++) {
    if (pr->location[i]->id != loc_id) continue;
    const Perftools__Profiles__Line *l = pr->location[i]->line[0];
    *line = l->line;
    for (size_t j = 0; j < pr->n_function; j++)
      if (pr->function[j]->id == l->function_id) return pr->function[j];
  }
  return NULL;
}

int main(void) {
  struct pp_profile *p = pp_profile_new();
  uint32_t py = pp_profile_intern_cstr(p, "app.py");
  uint32_t f_main =
      pp_profile_intern_frame(p, pp_profile_intern_cstr(p, "main"), py, 10, PP_FRAME_PYTHON);
  uint32_t f_work =
      pp_profile_intern_frame(p, pp_profile_intern_cstr(p, "work"), py, 20, PP_FRAME_PYTHON);
  uint32_t f_k = pp_profile_intern_frame(p, pp_profile_intern_cstr(p, "do_sys_open"), PP_NO_STR, 0,
                                         PP_FRAME_KERNEL);
  uint32_t s1[] = {f_main, f_work}, s2[] = {f_main, f_work, f_k}, s3[] = {f_k};
  CHECK_EQ_INT(pp_profile_add_stack(p, 100, PP_NO_STR, s1, 2, 7), 0);
  CHECK_EQ_INT(pp_profile_add_stack(p, 100, PP_NO_STR, s2, 3, 3), 0);
  CHECK_EQ_INT(pp_profile_add_stack(p, 200, PP_NO_STR, s3, 1, 5), 0);
  pp_profile_pid_upsert(p, 100)->comm = pp_profile_intern_cstr(p, "python3");
  pp_profile_pid_upsert(p, 100)->container = pp_profile_intern_cstr(p, "web");
  pp_profile_pid_upsert(p, 200)->comm = pp_profile_intern_cstr(p, "cat");

  struct pp_pprof_info info = {.start = 1000, .end = 1060, .frequency = 100};
  uint8_t *buf = NULL;
  size_t len = 0;
  CHECK_EQ_INT(pp_pprof_encode(p, &info, &buf, &len), 0);
  Perftools__Profiles__Profile *pr = perftools__profiles__profile__unpack(NULL, len, buf);
  CHECK(pr != NULL);
  if (!pr) return pp_test_finish("test_pprof");
  CHECK(pr->n_string_table > 0 && pr->string_table[0][0] == '\0');
  CHECK_EQ_INT(pr->n_sample_type, 2);
  CHECK_EQ_STR(S(pr, pr->sample_type[0]->type), "samples");
  CHECK_EQ_STR(S(pr, pr->sample_type[1]->unit), "nanoseconds");
  CHECK_EQ_INT(pr->period, 10000000);
  CHECK_EQ_INT(pr->time_nanos, 1000LL * 1000000000LL);
  CHECK_EQ_INT(pr->duration_nanos, 60LL * 1000000000LL);
  CHECK_EQ_INT(pr->n_sample, 3);
  CHECK_EQ_INT(pr->n_location, 3); /* one per distinct frame */
  CHECK_EQ_INT(pr->n_function, 3);
  CHECK_EQ_INT(pr->n_mapping, 2); /* python, kernel */
  int64_t total = 0;
  for (size_t i = 0; i < pr->n_sample; i++) {
    const Perftools__Profiles__Sample *s = pr->sample[i];
    CHECK_EQ_INT(s->n_value, 2);
    CHECK_EQ_INT(s->value[1], s->value[0] * 10000000);
    total += s->value[0];
    int64_t line = -1;
    const Perftools__Profiles__Function *leaf = fn_of(pr, s->location_id[0], &line);
    CHECK(leaf != NULL);
    if (s->value[0] == 7) { /* main -> work: leaf first */
      CHECK_EQ_INT(s->n_location_id, 2);
      CHECK_EQ_STR(S(pr, leaf->name), "work");
      CHECK_EQ_STR(S(pr, leaf->filename), "app.py");
      CHECK_EQ_INT(line, 20);
      const char *comm = NULL, *cont = NULL;
      int64_t pid = 0;
      for (size_t k = 0; k < s->n_label; k++) {
        const char *key = S(pr, s->label[k]->key);
        if (!strcmp(key, "comm")) comm = S(pr, s->label[k]->str);
        if (!strcmp(key, "container")) cont = S(pr, s->label[k]->str);
        if (!strcmp(key, "pid")) pid = s->label[k]->num;
      }
      CHECK_EQ_STR(comm, "python3");
      CHECK_EQ_STR(cont, "web");
      CHECK_EQ_INT(pid, 100);
    }
    if (s->value[0] == 3) {
      CHECK_EQ_INT(s->n_location_id, 3);
      CHECK_EQ_STR(S(pr, leaf->name), "do_sys_open");
    }
  }
  CHECK_EQ_INT(total, 15);
  perftools__profiles__profile__free_unpacked(pr, NULL);
  free(buf);

  /* the file form is gzip of the same bytes */
  char *mem = NULL;
  size_t mlen = 0;
  FILE *f = open_memstream(&mem, &mlen);
  CHECK_EQ_INT(pp_pprof_write(f, p, &info), 0);
  fclose(f);
  char *plain = NULL;
  size_t plen = 0;
  CHECK_EQ_INT(pp_gunzip(mem, mlen, 1 << 20, &plain, &plen), 0);
  pr = perftools__profiles__profile__unpack(NULL, plen, (uint8_t *)plain);
  CHECK(pr && pr->n_sample == 3);
  if (pr) perftools__profiles__profile__free_unpacked(pr, NULL);
  free(plain);
  free(mem);

  /* an empty profile is still a valid pprof */
  struct pp_profile *e = pp_profile_new();
  CHECK_EQ_INT(pp_pprof_encode(e, NULL, &buf, &len), 0);
  pr = perftools__profiles__profile__unpack(NULL, len, buf);
  CHECK(pr && pr->n_sample == 0 && pr->n_string_table >= 1);
  if (pr) perftools__profiles__profile__free_unpacked(pr, NULL);
  free(buf);
  pp_profile_free(e);
  pp_profile_free(p);
  return pp_test_finish("test_pprof");
}
