/* SPDX-License-Identifier: Apache-2.0 */
/* --containers selectors, and the profile cut down to the selected ones. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "k8s_select.h"
#include "output/pprof.h"
#include "output/profile.pb-c.h"
#include "profile.h"
#include "testlib.h"

#define CRI "k8s_api_web-7d9f_prod_u-1_0"

int main(void) {
  CHECK(pp_container_selected("api", CRI));
  CHECK(pp_container_selected("redis,ap*", CRI));
  CHECK(pp_container_selected("pod=web-*", CRI));
  CHECK(pp_container_selected("namespace=prod", CRI));
  CHECK(pp_container_selected("container=api", CRI));
  CHECK(pp_container_selected("k8s_*_prod_*", CRI));
  CHECK(!pp_container_selected("pod=api", CRI));
  CHECK(!pp_container_selected("namespace=prod", "redis")); /* not a Kubernetes name */
  CHECK(pp_container_selected("red*", "redis"));
  CHECK(!pp_container_selected("api", ""));
  CHECK(!pp_container_selected("", CRI));
  CHECK(!pp_container_selected(",", CRI));
  CHECK(!pp_container_selected("api", "k8s_api")); /* cut short: only the whole name */

  struct pp_profile *p = pp_profile_new();
  uint32_t f =
      pp_profile_intern_frame(p, pp_profile_intern_cstr(p, "main"), PP_NO_STR, 0, PP_FRAME_NATIVE);
  CHECK_EQ_INT(pp_profile_add_stack(p, 10, PP_NO_STR, &f, 1, 4), 0);
  CHECK_EQ_INT(pp_profile_add_stack(p, 20, PP_NO_STR, &f, 1, 6), 0);
  CHECK_EQ_INT(pp_profile_add_stack(p, 30, PP_NO_STR, &f, 1, 1), 0);
  pp_profile_pid_upsert(p, 10)->container = pp_profile_intern_cstr(p, CRI);
  pp_profile_pid_upsert(p, 10)->appid = pp_profile_intern_cstr(p, "gunicorn: app");
  pp_profile_pid_upsert(p, 20)->container = pp_profile_intern_cstr(p, "redis");
  json_t *list = json_pack("[ss]", CRI, "redis");
  CHECK_EQ_INT(pp_containers_select(&p, "namespace=prod", list), 0);
  CHECK_EQ_INT(pp_profile_total(p), 4);
  CHECK_EQ_INT(pp_profile_pid_count(p), 1);
  const struct pp_pid_rec *r = pp_profile_pid(p, 10);
  CHECK(r && r->total == 4);
  CHECK_EQ_STR(r ? pp_profile_str(p, r->appid) : NULL, "gunicorn: app");
  CHECK_EQ_STR(r ? pp_profile_str(p, r->container) : NULL, CRI);
  CHECK_EQ_INT(json_array_size(list), 1);
  CHECK_EQ_STR(json_string_value(json_array_get(list, 0)), CRI);
  json_decref(list);

  /* pprof carries the Kubernetes parts as labels too */
  uint8_t *buf = NULL;
  size_t len = 0;
  struct pp_pprof_info info = {.start = 1, .end = 2, .frequency = 100};
  CHECK_EQ_INT(pp_pprof_encode(p, &info, &buf, &len), 0);
  Perftools__Profiles__Profile *pr = perftools__profiles__profile__unpack(NULL, len, buf);
  CHECK(pr && pr->n_sample == 1);
  char labels[256] = "";
  for (size_t i = 0; pr && pr->n_sample && i < pr->sample[0]->n_label; i++) {
    const Perftools__Profiles__Label *l = pr->sample[0]->label[i];
    if (l->str > 0 && (size_t)l->str < pr->n_string_table)
      snprintf(labels + strlen(labels), sizeof(labels) - strlen(labels), "%s=%s;",
               pr->string_table[l->key], pr->string_table[l->str]);
  }
  CHECK(strstr(labels, "pod=web-7d9f;") && strstr(labels, "namespace=prod;"));
  if (pr) perftools__profiles__profile__free_unpacked(pr, NULL);
  free(buf);
  pp_profile_free(p);
  return pp_test_finish("test_k8s_select");
}
