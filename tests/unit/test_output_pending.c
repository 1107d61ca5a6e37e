/* SPDX-License-Identifier: Apache-2.0 */
/* The in-memory backlog of session files the output directory refused
 * (output/pending.h), on a real directory made unavailable by moving it
 * away (every create in it fails with ENOENT, as a removed or unmounted
 * directory does) and brought back: kept in order, bounded, oldest dropped
 * first, written back byte for byte with the link on the newest. The
 * read-only and disk-full cases run end to end in
 * tests/integration/test_fault_output_*.py. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "output/pending.h"
#include "testlib.h"

static char base[64], dir[96], away[96];

static int write_text(FILE *f, void *ctx) {
  return fputs(ctx, f) < 0 ? -EIO : 0;
}

static char *slurp(const char *name) {
  static char buf[4096];
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = 0;
  return buf;
}

static void go_away(void) {
  CHECK(rename(dir, away) == 0);
}

static void come_back(void) {
  CHECK(rename(away, dir) == 0);
}

static int put(struct pp_pending *p, const char *stem, const char *ext, const char *link,
               bool rotating, const char *text, size_t *dropped) {
  char err[512];
  return pp_pending_publish(p, dir, stem, ext, link, rotating, write_text, (void *)text, dropped,
                            err, sizeof(err));
}

static void test_kept_and_flushed_in_order(void) {
  struct pp_pending *p = pp_pending_new(1 << 20);
  size_t dropped = 9;
  CHECK_EQ_INT(put(p, "profile_A", ".col", "last_profile.col", false, "a-col\n", &dropped), 0);
  CHECK_EQ_INT(dropped, 0);
  go_away();
  char err[512] = "";
  CHECK_EQ_INT(pp_pending_publish(p, dir, "profile_B", ".col", "last_profile.col", false,
                                  write_text, "b-col\n", &dropped, err, sizeof(err)),
               1);
  CHECK_CONTAINS(err, strerror(ENOENT)); /* the real cause, naming the directory */
  CHECK_CONTAINS(err, dir);
  CHECK_EQ_INT(put(p, "profile_B", ".html", "last_flamegraph.html", false, "b-html\n", NULL), 1);
  CHECK_EQ_INT(put(p, "profile_C", ".col", "last_profile.col", false, "c-col\n", NULL), 1);
  CHECK_EQ_INT(pp_pending_count(p), 3);
  CHECK_EQ_INT(pp_pending_sessions(p), 2);
  CHECK_EQ_INT(pp_pending_bytes(p), 6 + 7 + 6);
  /* still away: nothing written, nothing lost, the cause reported */
  err[0] = 0;
  CHECK_EQ_INT(pp_pending_flush(p, dir, false, err, sizeof(err)), -ENOENT);
  CHECK_EQ_INT(pp_pending_count(p), 3);
  come_back();
  /* while older files wait, a new one is queued behind them, not written
   * ahead of them */
  CHECK_EQ_INT(put(p, "profile_D", ".col", "last_profile.col", false, "d-col\n", NULL), 1);
  CHECK_EQ_INT(pp_pending_flush(p, dir, false, err, sizeof(err)), 4);
  CHECK_EQ_INT(pp_pending_count(p), 0);
  CHECK_EQ_INT(pp_pending_bytes(p), 0);
  CHECK_EQ_STR(slurp("profile_B.col"), "b-col\n");
  CHECK_EQ_STR(slurp("profile_B.html"), "b-html\n");
  CHECK_EQ_STR(slurp("profile_C.col"), "c-col\n");
  CHECK_EQ_STR(slurp("profile_D.col"), "d-col\n");
  char link[PATH_MAX], target[64] = "";
  snprintf(link, sizeof(link), "%s/last_profile.col", dir);
  ssize_t n = readlink(link, target, sizeof(target) - 1);
  target[n > 0 ? n : 0] = 0;
  CHECK_EQ_STR(target, "profile_D.col");
  /* empty again: the next file is written at once */
  CHECK_EQ_INT(put(p, "profile_E", ".col", "last_profile.col", false, "e-col\n", NULL), 0);
  pp_pending_free(p);
}

static void test_cap_drops_oldest(void) {
  struct pp_pending *p = pp_pending_new(20);
  go_away();
  size_t dropped = 0;
  CHECK_EQ_INT(put(p, "profile_1", ".col", NULL, false, "123456789\n", &dropped), 1);
  CHECK_EQ_INT(put(p, "profile_2", ".col", NULL, false, "223456789\n", &dropped), 1);
  CHECK_EQ_INT(dropped, 0);
  CHECK_EQ_INT(put(p, "profile_3", ".col", NULL, false, "323456789\n", &dropped), 1);
  CHECK_EQ_INT(dropped, 1); /* profile_1 made room */
  CHECK_EQ_INT(pp_pending_count(p), 2);
  CHECK(pp_pending_bytes(p) <= 20);
  /* one file larger than the whole cap: refused, nothing else dropped */
  CHECK_EQ_INT(
      put(p, "profile_4", ".col", NULL, false, "this text is longer than twenty bytes\n", &dropped),
      -EFBIG);
  CHECK_EQ_INT(dropped, 0);
  CHECK_EQ_INT(pp_pending_count(p), 2);
  come_back();
  CHECK_EQ_INT(pp_pending_flush(p, dir, false, NULL, 0), 2);
  CHECK(slurp("profile_1.col") == NULL);
  CHECK_EQ_STR(slurp("profile_2.col"), "223456789\n");
  CHECK_EQ_STR(slurp("profile_3.col"), "323456789\n");
  pp_pending_free(p);
}

static void test_rotating_keeps_newest(void) {
  struct pp_pending *p = pp_pending_new(1 << 20);
  go_away();
  size_t dropped = 0;
  CHECK_EQ_INT(put(p, "profile_R1", ".col", "last_profile.col", true, "r1\n", &dropped), 1);
  CHECK_EQ_INT(put(p, "profile_R1", ".html", "last_flamegraph.html", true, "r1h\n", &dropped), 1);
  CHECK_EQ_INT(put(p, "profile_R2", ".col", "last_profile.col", true, "r2\n", &dropped), 1);
  CHECK_EQ_INT(dropped, 1); /* the older .col would only be written to be deleted */
  CHECK_EQ_INT(pp_pending_count(p), 2);
  come_back();
  CHECK_EQ_INT(pp_pending_flush(p, dir, true, NULL, 0), 2);
  CHECK_EQ_STR(slurp("profile_R2.col"), "r2\n");
  CHECK(slurp("profile_R1.col") == NULL);
  pp_pending_free(p);
}

static void test_cap_zero_keeps_nothing(void) {
  struct pp_pending *p = pp_pending_new(0);
  go_away();
  CHECK_EQ_INT(put(p, "profile_Z", ".col", NULL, false, "z\n", NULL), -ENOENT);
  CHECK_EQ_INT(pp_pending_count(p), 0);
  come_back();
  pp_pending_free(p);
}

int main(void) {
  snprintf(base, sizeof(base), "/tmp/pp-pending-XXXXXX");
  if (!mkdtemp(base)) return 1;
  snprintf(dir, sizeof(dir), "%s/out", base);
  snprintf(away, sizeof(away), "%s/away", base);
  if (mkdir(dir, 0755) < 0) return 1;
  test_kept_and_flushed_in_order();
  test_cap_drops_oldest();
  test_rotating_keeps_newest();
  test_cap_zero_keeps_nothing();
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", base);
  return pp_test_finish("test_output_pending");
}
