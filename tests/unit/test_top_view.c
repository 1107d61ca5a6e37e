/* SPDX-License-Identifier: Apache-2.0 */
/* `polyprof top`'s model and screen: self and total shares of the last
 * tick (a recursive function counted once per stack), cumulative times,
 * the process and runtime filters, pause, sort, and a terminal too small
 * for the view. */
#include <stdlib.h>
#include <string.h>

#include "profile.h"
#include "testlib.h"
#include "top_view.h"

static uint32_t frame(struct pp_profile *p, const char *name, const char *file, unsigned kind) {
  return pp_profile_intern_frame(p, pp_profile_intern_cstr(p, name),
                                 pp_profile_intern_cstr(p, file), file ? 1 : 0, kind);
}

/* The screen line that holds `what`, or "". */
static const char *line_of(const char *screen, const char *what, char *out, size_t cap) {
  const char *at = strstr(screen, what);
  out[0] = '\0';
  if (!at) return out;
  const char *b = at;
  while (b > screen && b[-1] != '\n')
    b--;
  const char *e = strstr(at, "\x1b[K");
  size_t n = e ? (size_t)(e - b) : strlen(b);
  if (n >= cap) n = cap - 1;
  memcpy(out, b, n);
  out[n] = '\0';
  return out;
}

int main(void) {
  struct pp_profile *p = pp_profile_new();
  uint32_t main_f = frame(p, "main", "app.py", PP_FRAME_PYTHON);
  uint32_t f = frame(p, "f", "app.py", PP_FRAME_PYTHON);
  uint32_t g = frame(p, "g_native", NULL, PP_FRAME_NATIVE);
  uint32_t k = frame(p, "do_idle", NULL, PP_FRAME_KERNEL);
  pp_profile_pid_upsert(p, 1)->comm = pp_profile_intern_cstr(p, "app");
  pp_profile_pid_upsert(p, 2)->comm = pp_profile_intern_cstr(p, "idle");
  uint32_t s1[] = {main_f, f, g}, s2[] = {main_f, f, f}, s3[] = {k};
  CHECK_EQ_INT(pp_profile_add_stack(p, 1, PP_NO_STR, s1, 3, 30), 0);
  CHECK_EQ_INT(pp_profile_add_stack(p, 1, PP_NO_STR, s2, 3, 10), 0);
  CHECK_EQ_INT(pp_profile_add_stack(p, 2, PP_NO_STR, s3, 1, 60), 0);

  struct pp_top *t = pp_top_new(100);
  CHECK(t != NULL);
  pp_top_add_tick(t, p, 1.0, 3);
  size_t cap = 1 << 16;
  char *scr = malloc(cap), ln[512];
  pp_top_render(t, scr, cap, 30, 120);
  CHECK_CONTAINS(scr, "1 app, 2 idle");
  CHECK_CONTAINS(scr, "rate: 100 samples/s achieved (requested 100 Hz per thread), missed 3");
  CHECK_CONTAINS(line_of(scr, "do_idle", ln, sizeof(ln)),
                 "60.0%   60.0%     0.60s     0.60s  kernel");
  CHECK_CONTAINS(line_of(scr, "g_native", ln, sizeof(ln)), "30.0%   30.0%");
  /* f recurses in one stack: its total is 40 samples, not 50 */
  CHECK_CONTAINS(line_of(scr, "f (app.py)", ln, sizeof(ln)), "10.0%   40.0%");
  CHECK_CONTAINS(line_of(scr, "main (app.py)", ln, sizeof(ln)), " 0.0%   40.0%");
  CHECK_CONTAINS(scr, "keys: q quit");

  bool quit = false;
  CHECK(pp_top_key(t, 'p', &quit)); /* the first process */
  pp_top_render(t, scr, cap, 30, 120);
  CHECK_CONTAINS(scr, "process: 1 app");
  CHECK_CONTAINS(line_of(scr, "g_native", ln, sizeof(ln)), "75.0%   75.0%");
  CHECK(strstr(scr, "do_idle") == NULL);
  pp_top_key(t, 'p', &quit);
  pp_top_key(t, 'p', &quit);                                     /* back to all */
  CHECK(pp_top_key(t, 'r', &quit) && pp_top_key(t, 'r', &quit)); /* native, then kernel */
  pp_top_render(t, scr, cap, 30, 120);
  CHECK_CONTAINS(scr, "runtime: kernel");
  CHECK(strstr(scr, "g_native") == NULL && strstr(scr, "do_idle") != NULL);
  for (int i = 0; i < 8; i++)
    pp_top_key(t, 'r', &quit); /* ... back to all */
  pp_top_key(t, 's', &quit);
  pp_top_render(t, scr, cap, 30, 120);
  CHECK_CONTAINS(scr, "runtime: all   sort: %total");

  CHECK(pp_top_key(t, ' ', &quit));
  pp_top_add_tick(t, p, 1.0, 0); /* paused: not counted */
  pp_top_render(t, scr, cap, 30, 120);
  CHECK_CONTAINS(scr, "[PAUSED]");
  CHECK_CONTAINS(scr, "100 in all");
  pp_top_key(t, ' ', &quit);
  pp_top_add_tick(t, p, 1.0, 0);
  pp_top_render(t, scr, cap, 30, 120);
  CHECK_CONTAINS(scr, "100 last tick, 200 in all");
  CHECK_CONTAINS(line_of(scr, "do_idle", ln, sizeof(ln)), "1.20s");

  /* v: source lines (frames of one line: "f (app.py:1)"), then threads */
  CHECK(pp_top_key(t, 'v', &quit));
  pp_top_render(t, scr, cap, 30, 120);
  CHECK_CONTAINS(scr, "view: lines");
  CHECK_CONTAINS(line_of(scr, "f (app.py:1)", ln, sizeof(ln)), "10.0%   40.0%");
  CHECK_CONTAINS(line_of(scr, "g_native", ln, sizeof(ln)), "30.0%   30.0%");
  CHECK(pp_top_key(t, 'v', &quit));
  pp_top_render(t, scr, cap, 30, 120);
  CHECK_CONTAINS(scr, "view: threads");
  CHECK_CONTAINS(line_of(scr, "app (pid 1)", ln, sizeof(ln)), "40.0%   40.0%");
  CHECK_CONTAINS(line_of(scr, "app (pid 1)", ln, sizeof(ln)), "python");
  CHECK_CONTAINS(line_of(scr, "idle (pid 2)", ln, sizeof(ln)), "60.0%   60.0%");
  pp_top_key(t, 'v', &quit); /* back to functions */

  pp_top_render(t, scr, cap, 8, 40);
  CHECK_CONTAINS(scr, "terminal too small (40x8)");
  CHECK(!quit);
  pp_top_key(t, 'q', &quit);
  CHECK(quit);
  free(scr);
  pp_top_free(t);
  pp_profile_free(p);
  return pp_test_finish("test_top_view");
}
