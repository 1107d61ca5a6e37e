/* SPDX-License-Identifier: Apache-2.0 */
/* The ruby plugin's version table and server appids: every supported series
 * resolves, patch-split rows (4.0.0-5 vs 4.0.6) pick the right offsets,
 * unknown or malformed versions are refused, rows are self-consistent; and
 * puma / unicorn / sidekiq / rails processes get their appids. The plugin's
 * sources are compiled into this test (they are not part of the core). */
#include <stdint.h>
#include <string.h>

#include "../../plugins/ruby/ruby_appid.c"
#include "../../plugins/ruby/ruby_layout.c"
#include "testlib.h"

static void test_versions(void) {
  int ma, mi, pa;
  CHECK_EQ_INT(ruby_parse_version("3.1.2", &ma, &mi, &pa), 0);
  CHECK_EQ_INT(ma * 10000 + mi * 100 + pa, 30102);
  CHECK_EQ_INT(ruby_parse_version("3.4", &ma, &mi, &pa), 0);
  CHECK_EQ_INT(pa, 0);
  CHECK_EQ_INT(ruby_parse_version("", &ma, &mi, &pa), -1);
  CHECK_EQ_INT(ruby_parse_version("x.y", &ma, &mi, &pa), -1);
  CHECK_EQ_INT(ruby_parse_version("3", &ma, &mi, &pa), -1);
  CHECK_EQ_INT(ruby_parse_version("-3.1.0", &ma, &mi, &pa), -1);

  const char *series[] = {"2.5.9", "2.6.10", "2.7.8", "3.0.7", "3.1.2",
                          "3.2.4", "3.3.6",  "3.4.1", "4.0.0", "4.0.6"};
  for (size_t i = 0; i < sizeof(series) / sizeof(series[0]); i++) {
    int ok = 0;
    const struct ruby_layout *L = ruby_layout_for(series[i], &ok);
    CHECK(L != NULL);
    if (!L) continue;
    CHECK(ok);
    CHECK(strncmp(series[i], L->series, 3) == 0);
    CHECK(L->cfp_size == 48 || L->cfp_size == 56 || L->cfp_size == 64);
    CHECK(L->ii_entry_line + 4 <= L->ii_entry_size);
    CHECK(L->line_kind == RUBY_LINES_POSITIONS || L->ii_succ > 0);
    /* 3.x finds the running EC through the main ractor, 2.x through globals */
    CHECK((L->major >= 3) == (L->vm_main_ractor >= 0));
    CHECK(L->major < 3 || L->ractor_main == L->ractor_running_ec + 8);
    CHECK(L->thread_nt < 0 || L->thread_tid >= 0);
    CHECK(L->last_op_id >= 160 && L->last_op_id <= 180);
  }
  /* values checked live on Debian 3.1.2 */
  const struct ruby_layout *L31 = ruby_layout_for("3.1.2", NULL);
  CHECK_EQ_INT(L31->cfp_size, 64);
  CHECK_EQ_INT(L31->ractor_running_ec, 520);
  CHECK_EQ_INT(L31->thread_ec, 40);
  CHECK_EQ_INT(L31->thread_tid, 88);
  CHECK_EQ_INT(L31->ii_entry_size, 12);
  CHECK_EQ_INT(L31->string_kind, RUBY_STR_FLAGS_LEN);
  CHECK_EQ_INT(ruby_layout_for("3.2.0", NULL)->string_kind, RUBY_STR_LEN_FIELD);
  /* 4.0.6 moved threads.running_ec by 8 */
  CHECK_EQ_INT(ruby_layout_for("4.0.5", NULL)->ractor_running_ec, 312);
  CHECK_EQ_INT(ruby_layout_for("4.0.6", NULL)->ractor_running_ec, 320);
  CHECK(ruby_layout_for("1.9.3", NULL) == NULL);
  CHECK(ruby_layout_for("2.4.10", NULL) == NULL);
  CHECK(ruby_layout_for("3.5.0", NULL) == NULL);
  CHECK(ruby_layout_for("5.0.0", NULL) == NULL);
  CHECK(ruby_layout_for("garbage", NULL) == NULL);
  CHECK_CONTAINS(ruby_layout_supported(), "3.1");
}

static int appid(const char *const *argv, const char *cwd, char *out, size_t cap) {
  char buf[512];
  size_t n = 0;
  for (size_t i = 0; argv[i]; i++) {
    size_t l = strlen(argv[i]) + 1;
    memcpy(buf + n, argv[i], l);
    n += l;
  }
  out[0] = '\0';
  return ruby_server_appid(buf, n, cwd, out, cap);
}

static void test_appids(void) {
  char out[256];
  const char *puma[] = {"puma 6.4.0 (tcp://0.0.0.0:3000) [shop]", NULL};
  CHECK_EQ_INT(appid(puma, "/srv/shop", out, sizeof(out)), 1);
  CHECK_EQ_STR(out, "puma: shop (/srv/shop)");
  const char *worker[] = {"puma: cluster worker 1: 4242 [shop]", NULL};
  CHECK_EQ_INT(appid(worker, "/srv/shop", out, sizeof(out)), 1);
  CHECK_EQ_STR(out, "puma: shop (/srv/shop)");
  const char *puma_cmd[] = {"/usr/bin/ruby", "/usr/local/bin/puma", "-C", "config/puma.rb", NULL};
  CHECK_EQ_INT(appid(puma_cmd, "/app", out, sizeof(out)), 1);
  CHECK_EQ_STR(out, "puma: /app");
  const char *unicorn[] = {"unicorn worker[2] -c config/unicorn.rb -E production", NULL};
  CHECK_EQ_INT(appid(unicorn, "/app", out, sizeof(out)), 1);
  CHECK_EQ_STR(out, "unicorn: /app");
  const char *sidekiq[] = {"sidekiq 7.2.0 billing [0 of 5 busy]", NULL};
  CHECK_EQ_INT(appid(sidekiq, "/app", out, sizeof(out)), 1);
  CHECK_EQ_STR(out, "sidekiq: billing (/app)");
  const char *sidekiq_notag[] = {"sidekiq 7.2.0  [0 of 5 busy]", NULL};
  CHECK_EQ_INT(appid(sidekiq_notag, "/app", out, sizeof(out)), 1);
  CHECK_EQ_STR(out, "sidekiq: /app");
  const char *rails[] = {"ruby", "bin/rails", "server", "-p", "3000", NULL};
  CHECK_EQ_INT(appid(rails, "/app", out, sizeof(out)), 1);
  CHECK_EQ_STR(out, "rails: /app");
  /* plain scripts are the core's rule (ruby: app.rb (...)): no override */
  const char *script[] = {"ruby", "app.rb", NULL};
  CHECK_EQ_INT(appid(script, "/app", out, sizeof(out)), 0);
  const char *console[] = {"ruby", "bin/rails", "console", NULL};
  CHECK_EQ_INT(appid(console, "/app", out, sizeof(out)), 0);
  /* hostile input: no terminating NUL, empty */
  CHECK_EQ_INT(ruby_server_appid("puma 1 [x]", 10, "/", out, sizeof(out)), 0);
  CHECK_EQ_INT(ruby_server_appid("", 0, "/", out, sizeof(out)), 0);
  /* a bracket with nothing inside is no tag; output is bounded */
  const char *empty_tag[] = {"puma 6 (tcp://x) []", NULL};
  CHECK_EQ_INT(appid(empty_tag, "/a", out, sizeof(out)), 1);
  CHECK_EQ_STR(out, "puma: /a");
  char small[12];
  CHECK_EQ_INT(appid(puma, "/srv/shop", small, sizeof(small)), 1);
  CHECK_EQ_INT(strlen(small), sizeof(small) - 1);
}

int main(void) {
  test_versions();
  test_appids();
  return pp_test_finish("test_ruby_layout");
}
