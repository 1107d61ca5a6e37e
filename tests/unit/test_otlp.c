/* SPDX-License-Identifier: Apache-2.0 */
/* OTLP exporter: the protobuf writer against the bounded reader, the
 * encoder's resources per container (Kubernetes names split), the URL
 * rule and the reply parser on malformed bytes. (The whole request is
 * decoded with protoc by tests/integration/test_upload_otlp.py.) */
#include <stdlib.h>
#include <string.h>

#include "k8s_meta.h"
#include "profile.h"
#include "testlib.h"
#include "upload/otlp.h"
#include "upload/otlp_pb.h"

/* Field f of a message (first occurrence), or a zero field. */
static struct pp_pb_field field(const uint8_t *p, size_t n, uint32_t f, int nth) {
  struct pp_pb_reader r = {p, p + n};
  struct pp_pb_field x;
  while (pp_pb_read_field(&r, &x) > 0)
    if (x.number == f && nth-- == 0) return x;
  return (struct pp_pb_field){0};
}

/* The string value of resource attribute key, or NULL. */
static char *resource_attr(struct pp_pb_field rp, const char *key, char *buf, size_t len) {
  struct pp_pb_field res = field(rp.data, rp.len, 1, 0);
  for (int i = 0;; i++) {
    struct pp_pb_field kv = field(res.data, res.len, 1, i);
    if (!kv.data) return NULL;
    struct pp_pb_field k = field(kv.data, kv.len, 1, 0);
    if (k.len != strlen(key) || memcmp(k.data, key, k.len)) continue;
    struct pp_pb_field v = field(kv.data, kv.len, 2, 0);
    struct pp_pb_field s = field(v.data, v.len, 1, 0);
    snprintf(buf, len, "%.*s", (int)s.len, (const char *)s.data);
    return buf;
  }
}

static void writer(void) {
  struct pp_pb w = {0};
  pp_pb_begin(&w, 3);
  pp_pb_varint_field(&w, 1, 300);
  pp_pb_string_field(&w, 2, "x");
  uint8_t big[200];
  memset(big, 'a', sizeof(big));
  pp_pb_bytes_field(&w, 4, big, sizeof(big)); /* a two-byte inner length */
  pp_pb_end(&w);
  pp_pb_fixed64_field(&w, 5, 0x0102030405060708ULL);
  CHECK(!pp_pb_failed(&w));
  /* 3: tag, 2-byte length (3 + 3 + 3 + 200 = 209), then 5: tag + 8 bytes */
  CHECK_EQ_INT(w.n, 1 + 2 + 209 + 1 + 8);
  struct pp_pb_field m = field(w.b, w.n, 3, 0);
  CHECK_EQ_INT(m.len, 209);
  CHECK_EQ_INT(field(m.data, m.len, 1, 0).value, 300);
  CHECK_EQ_INT(field(m.data, m.len, 4, 0).len, 200);
  CHECK(field(w.b, w.n, 5, 0).value == 0x0102030405060708ULL);
  pp_pb_free(&w);
}

static void encoder(void) {
  struct pp_profile *p = pp_profile_new();
  uint32_t f1 = pp_profile_intern_frame(p, pp_profile_intern_cstr(p, "main (app.py:3)"), PP_NO_STR,
                                        0, PP_FRAME_PYTHON);
  uint32_t f2 =
      pp_profile_intern_frame(p, pp_profile_intern_cstr(p, "read"), PP_NO_STR, 0, PP_FRAME_KERNEL);
  uint32_t st[] = {f1, f2};
  CHECK_EQ_INT(pp_profile_add_stack(p, 10, PP_NO_STR, st, 2, 4), 0);
  CHECK_EQ_INT(pp_profile_add_stack(p, 20, PP_NO_STR, st, 2, 6), 0);
  CHECK_EQ_INT(pp_profile_add_stack(p, 30, PP_NO_STR, st, 1, 1), 0);
  pp_profile_pid_upsert(p, 10)->container =
      pp_profile_intern_cstr(p, "k8s_api_web-7d9f_prod_0c1f6c3e-1234_0");
  pp_profile_pid_upsert(p, 20)->container = pp_profile_intern_cstr(p, "redis");
  uint8_t seed[16] = {0};
  struct pp_otlp_info info = {.start = 100,
                              .end = 160,
                              .frequency = 100,
                              .hostname = "h1",
                              .service = "svc",
                              .version = "1",
                              .profile_id_seed = seed};
  uint8_t *buf = NULL;
  size_t len = 0;
  CHECK_EQ_INT(pp_otlp_encode(p, &info, &buf, &len), 0);
  char v[128];
  struct pp_pb_field rp0 = field(buf, len, 1, 0), rp1 = field(buf, len, 1, 1),
                     rp2 = field(buf, len, 1, 2);
  CHECK(rp0.data && rp1.data && rp2.data && !field(buf, len, 1, 3).data);
  CHECK_EQ_STR(resource_attr(rp0, "container.name", v, sizeof(v)), "api");
  CHECK_EQ_STR(resource_attr(rp0, "k8s.pod.name", v, sizeof(v)), "web-7d9f");
  CHECK_EQ_STR(resource_attr(rp0, "k8s.namespace.name", v, sizeof(v)), "prod");
  CHECK_EQ_STR(resource_attr(rp1, "container.name", v, sizeof(v)), "redis");
  CHECK(resource_attr(rp1, "k8s.pod.name", v, sizeof(v)) == NULL);
  CHECK(resource_attr(rp2, "container.name", v, sizeof(v)) == NULL);
  CHECK_EQ_STR(resource_attr(rp2, "host.name", v, sizeof(v)), "h1");
  CHECK_EQ_STR(resource_attr(rp2, "service.name", v, sizeof(v)), "svc");
  /* pids 10 and 20 share their stack: one stack entry besides the zero one
   * and the one-frame stack of pid 30 */
  struct pp_pb_field dict = field(buf, len, 2, 0);
  CHECK(field(dict.data, dict.len, 7, 2).data && !field(dict.data, dict.len, 7, 3).data);
  /* the Python frame's name was split: "main" and "app.py" are strings */
  bool main_s = false, file_s = false;
  for (int i = 0;; i++) {
    struct pp_pb_field s = field(dict.data, dict.len, 5, i);
    if (!s.data && !s.len && i > 0) break;
    main_s |= s.len == 4 && !memcmp(s.data, "main", 4);
    file_s |= s.len == 6 && !memcmp(s.data, "app.py", 6);
  }
  CHECK(main_s && file_s);
  /* cpu: a period; another type: its own sample type and no period */
  struct pp_pb_field prof =
      field(field(rp2.data, rp2.len, 2, 0).data, field(rp2.data, rp2.len, 2, 0).len, 2, 0);
  CHECK_EQ_INT(field(prof.data, prof.len, 6, 0).value, 10000000);
  free(buf);
  info.sample_type = "off_cpu", info.sample_unit = "microseconds";
  CHECK_EQ_INT(pp_otlp_encode(p, &info, &buf, &len), 0);
  rp2 = field(buf, len, 1, 2);
  prof = field(field(rp2.data, rp2.len, 2, 0).data, field(rp2.data, rp2.len, 2, 0).len, 2, 0);
  CHECK(prof.data && !field(prof.data, prof.len, 5, 0).data &&
        !field(prof.data, prof.len, 6, 0).value);
  dict = field(buf, len, 2, 0);
  bool off_cpu = false;
  for (int i = 0;; i++) {
    struct pp_pb_field s = field(dict.data, dict.len, 5, i);
    if (!s.data && !s.len && i > 0) break;
    off_cpu |= s.len == 7 && !memcmp(s.data, "off_cpu", 7);
  }
  CHECK(off_cpu);
  free(buf);
  pp_profile_free(p);
}

static void names_and_urls(void) {
  const char *c, *pod, *ns;
  size_t cl, pl, nl;
  CHECK_EQ_INT(pp_k8s_name_split("k8s_POD_web_default_uid_0", &c, &cl, &pod, &pl, &ns, &nl), 0);
  CHECK(cl == 3 && !memcmp(c, "POD", 3) && pl == 3 && nl == 7);
  CHECK_EQ_INT(pp_k8s_name_split("k8s_a_b", &c, &cl, &pod, &pl, &ns, &nl), -1);
  CHECK_EQ_INT(pp_k8s_name_split("k8s__p_n_u_0", &c, &cl, &pod, &pl, &ns, &nl), -1);
  CHECK_EQ_INT(pp_k8s_name_split("web", &c, &cl, &pod, &pl, &ns, &nl), -1);
  char *u = pp_otlp_url("http://c:4318");
  CHECK_EQ_STR(u, "http://c:4318/v1development/profiles");
  free(u);
  u = pp_otlp_url("https://c:4318/");
  CHECK_EQ_STR(u, "https://c:4318/v1development/profiles");
  free(u);
  u = pp_otlp_url("http://c/custom/profiles");
  CHECK_EQ_STR(u, "http://c/custom/profiles");
  free(u);
}

static void replies(void) {
  int64_t rej;
  char msg[8];
  const uint8_t ok[] = {0x0a, 0x07, 0x08, 0x02, 0x12, 0x03, 'a', '\n', 'c'};
  CHECK_EQ_INT(pp_otlp_parse_response(ok, sizeof(ok), &rej, msg, sizeof(msg)), 0);
  CHECK_EQ_INT(rej, 2);
  CHECK_EQ_STR(msg, "a?c");
  CHECK_EQ_INT(pp_otlp_parse_response(ok, 0, &rej, msg, sizeof(msg)), 0);
  CHECK_EQ_INT(rej, 0);
  const uint8_t long_msg[] = {0x0a, 0x0c, 0x12, 0x0a, '0', '1', '2',
                              '3',  '4',  '5',  '6',  '7', '8', '9'};
  CHECK_EQ_INT(pp_otlp_parse_response(long_msg, sizeof(long_msg), &rej, msg, sizeof(msg)), 0);
  CHECK_EQ_STR(msg, "0123456"); /* cut to the buffer */
  /* lengths past the end, inner and outer; a varint that never ends; a bad wire type */
  const uint8_t past[] = {0x0a, 0x05, 0x08};
  const uint8_t inner_past[] = {0x0a, 0x02, 0x12, 0x7f};
  const uint8_t endless[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
                             0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  const uint8_t wire7[] = {0x0f, 0x00};
  const uint8_t fixed_short[] = {0x09, 0x01, 0x02};
  CHECK_EQ_INT(pp_otlp_parse_response(past, sizeof(past), &rej, msg, sizeof(msg)), -1);
  CHECK_EQ_INT(pp_otlp_parse_response(inner_past, sizeof(inner_past), &rej, msg, sizeof(msg)), -1);
  CHECK_EQ_INT(pp_otlp_parse_response(endless, sizeof(endless), &rej, msg, sizeof(msg)), -1);
  CHECK_EQ_INT(pp_otlp_parse_response(wire7, sizeof(wire7), &rej, msg, sizeof(msg)), -1);
  CHECK_EQ_INT(pp_otlp_parse_response(fixed_short, sizeof(fixed_short), &rej, msg, sizeof(msg)),
               -1);
}

int main(void) {
  writer();
  encoder();
  names_and_urls();
  replies();
  return pp_test_finish("test_otlp");
}
