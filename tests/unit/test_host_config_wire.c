/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plugin configuration INIT carries to a worker (host_config_wire.c):
 * a real configuration survives the trip, and every truncation or lying
 * count of it is refused without reading past the message.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "host.h"
#include "testlib.h"

static const struct pp_option options[] = {
    {.key = "greeting", .type = PP_OPT_STRING, .default_value = "hello"},
    {.key = "depth", .type = PP_OPT_INT, .default_value = "3"},
    {.key = "tags", .type = PP_OPT_LIST, .default_value = "a, b"},
    {.key = "unset", .type = PP_OPT_STRING},
    {.key = "mode", .type = PP_OPT_ENUM, .default_value = "fast"},
};

static void build(struct pp_host_config *c) {
  struct pp_plugin desc = {.name = "demo", .options = options, .option_count = 5};
  struct pp_bound_option bound[] = {{.opt = &options[1], .scalar = "9"}};
  struct pp_plugin_config pc = {
      .name = "demo", .enabled = true, .mode = "slow", .options = bound, .option_count = 1};
  CHECK_EQ_INT(pp_host_config_build(c, &desc, &pc), 0);
}

static const struct pp_host_option *opt(const struct pp_host_config *c, const char *key) {
  for (size_t i = 0; i < c->count; i++)
    if (strcmp(c->options[i].key, key) == 0) return &c->options[i];
  return NULL;
}

static void test_round_trip(void) {
  struct pp_host_config in, out;
  build(&in);
  struct pp_wbuf b;
  pp_wbuf_init(&b);
  pp_host_config_encode(&b, &in);
  CHECK_EQ_INT(b.err, 0);
  struct pp_rbuf r;
  pp_rbuf_init(&r, b.data, b.len);
  CHECK_EQ_INT(pp_host_config_decode(&r, &out), 0);
  CHECK_EQ_INT(pp_rbuf_left(&r), 0);
  CHECK_EQ_STR(out.plugin, "demo");
  CHECK_EQ_STR(out.mode, "slow");
  CHECK(out.enabled);
  CHECK_EQ_INT(out.count, in.count);
  const struct pp_host_option *o = opt(&out, "depth");
  CHECK(o && o->type == PP_OPT_INT);
  if (o) CHECK_EQ_STR(o->scalar, "9");
  o = opt(&out, "greeting");
  if (o) CHECK_EQ_STR(o->scalar, "hello");
  o = opt(&out, "tags");
  CHECK(o && o->item_count == 2 && o->items && !o->items[2]);
  if (o && o->item_count == 2) {
    CHECK_EQ_STR(o->items[0], "a");
    CHECK_EQ_STR(o->items[1], "b");
  }
  o = opt(&out, "unset");
  CHECK(o && !o->scalar && !o->items);
  o = opt(&out, "mode");
  if (o) CHECK_EQ_STR(o->scalar, "slow");

  /* Every cut of the message is refused, and leaves nothing allocated
   * (ASan's leak check sees to the latter). */
  for (size_t cut = 0; cut < b.len; cut++) {
    struct pp_host_config part;
    pp_rbuf_init(&r, b.data, cut);
    CHECK_EQ_INT(pp_host_config_decode(&r, &part), -EINVAL);
    CHECK(part.count == 0 && !part.plugin && !part.options);
  }
  pp_host_config_free(&out);
  pp_host_config_free(&in);
  pp_wbuf_free(&b);
}

static void test_lies(void) {
  /* An option count far beyond what the message holds. */
  struct pp_wbuf b;
  pp_wbuf_init(&b);
  pp_wbuf_str(&b, "x");
  pp_wbuf_str(&b, NULL);
  pp_wbuf_u32(&b, 1);
  pp_wbuf_u32(&b, 1000);
  struct pp_rbuf r;
  struct pp_host_config c;
  pp_rbuf_init(&r, b.data, b.len);
  CHECK_EQ_INT(pp_host_config_decode(&r, &c), -EINVAL);

  /* An item count far beyond what the message holds. */
  pp_wbuf_reset(&b);
  pp_wbuf_str(&b, "x");
  pp_wbuf_str(&b, NULL);
  pp_wbuf_u32(&b, 1);
  pp_wbuf_u32(&b, 1);
  pp_wbuf_str(&b, "k");
  pp_wbuf_u32(&b, PP_OPT_LIST);
  pp_wbuf_str(&b, NULL);
  pp_wbuf_u32(&b, 0x7fffffff);
  for (int i = 0; i < 4; i++)
    pp_wbuf_u32(&b, 0);
  pp_rbuf_init(&r, b.data, b.len);
  CHECK_EQ_INT(pp_host_config_decode(&r, &c), -EINVAL);

  /* A NULL plugin name, an "enabled" that is not a boolean. */
  pp_wbuf_reset(&b);
  pp_wbuf_str(&b, NULL);
  pp_wbuf_str(&b, NULL);
  pp_wbuf_u32(&b, 1);
  pp_wbuf_u32(&b, 0);
  pp_rbuf_init(&r, b.data, b.len);
  CHECK_EQ_INT(pp_host_config_decode(&r, &c), -EINVAL);
  pp_wbuf_reset(&b);
  pp_wbuf_str(&b, "x");
  pp_wbuf_str(&b, NULL);
  pp_wbuf_u32(&b, 7);
  pp_wbuf_u32(&b, 0);
  pp_rbuf_init(&r, b.data, b.len);
  CHECK_EQ_INT(pp_host_config_decode(&r, &c), -EINVAL);
  pp_wbuf_free(&b);
}

int main(void) {
  test_round_trip();
  test_lies();
  return pp_test_finish("test_host_config_wire");
}
