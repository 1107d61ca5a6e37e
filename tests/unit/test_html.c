/* SPDX-License-Identifier: Apache-2.0 */
/* HTML flame graph writer: self-containment, escaping of hostile names, the
 * data encoding (decoded back with jansson and compared with the input), and
 * write speed on a large profile. The page's behaviour in a real browser is
 * tests/integration/test_html_browser.py. */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "output/html.h"
#include "profile.h"
#include "testlib.h"

#define XSS_NAME "</script><script>alert(1)</script>"
#define XSS_NAME2 "<!--<img src=x onerror=alert(2)>"
#define URL_NAME "https://evil.example/x.js"

static char *render(const struct pp_profile *p, const struct pp_html_info *info, size_t *len,
                    int *rc) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  *rc = pp_html_write(f, p, info);
  fclose(f);
  *len = n;
  return buf;
}

static size_t count_ci(const char *hay, const char *needle) {
  size_t c = 0;
  for (const char *s = hay; (s = strcasestr(s, needle)); s++)
    c++;
  return c;
}

static int valid_utf8(const unsigned char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    unsigned char c = s[i];
    size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!k || i + k > n) return 0;
    for (size_t j = 1; j < k; j++)
      if ((s[i + j] & 0xc0) != 0x80) return 0;
    i += k;
  }
  return 1;
}

/* The JSON inside <script id="pp-data" ...>...</script>, parsed. */
static json_t *page_data(const char *page) {
  const char *open = "<script id=\"pp-data\" type=\"application/json\">";
  const char *s = strstr(page, open);
  if (!s) return NULL;
  s += strlen(open);
  const char *e = strstr(s, "</script>");
  if (!e) return NULL;
  json_error_t err;
  json_t *j = json_loadb(s, (size_t)(e - s), 0, &err);
  if (!j) fprintf(stderr, "data JSON: %s at line %d col %d\n", err.text, err.line, err.column);
  return j;
}

static void add(struct pp_profile *p, uint32_t pid, const char *comm,
                const struct pp_frame *leaf_first, uint32_t n, uint64_t count) {
  struct pp_sample s = {
      .pid = pid, .comm = comm, .frames = leaf_first, .nframes = n, .count = count};
  CHECK_EQ_INT(pp_profile_add_sample(p, &s), 0);
}

static void set_pid(struct pp_profile *p, uint32_t pid, const char *comm, const char *container,
                    const char *appid) {
  uint32_t c = pp_profile_intern_cstr(p, comm);
  uint32_t ct = pp_profile_intern_cstr(p, container);
  uint32_t a = pp_profile_intern_cstr(p, appid);
  struct pp_pid_rec *r = pp_profile_pid_upsert(p, pid);
  r->comm = c;
  r->container = ct;
  r->appid = a;
}

static struct pp_profile *sample_profile(void) {
  struct pp_profile *p = pp_profile_new();
  set_pid(p, 100, "python3", "web-1", NULL);
  set_pid(p, 200, "java", NULL, "svc");
  set_pid(p, 300, "evil", NULL, NULL);
  struct pp_frame py1[] = {
      {"compute", "calc.py", 5, PP_FRAME_PYTHON},
      {"main", "app.py", 10, PP_FRAME_PYTHON},
      {"Py_RunMain", NULL, 0, PP_FRAME_NATIVE},
  };
  add(p, 100, NULL, py1, 3, 300);
  struct pp_frame py2[] = {
      {"render", "tpl.py", 8, PP_FRAME_PYTHON},
      {"main", "app.py", 10, PP_FRAME_PYTHON},
      {"Py_RunMain", NULL, 0, PP_FRAME_NATIVE},
  };
  add(p, 100, NULL, py2, 3, 100);
  struct pp_frame k[] = {
      {"ksys_read", NULL, 0, PP_FRAME_KERNEL},
      {"entry_SYSCALL_64", NULL, 0, PP_FRAME_KERNEL},
  };
  add(p, 100, NULL, k, 2, 40);
  struct pp_frame j[] = {
      {"Foo.bar(Ljava/lang/String;)V", NULL, 0, PP_FRAME_JAVA_JIT},
      {"Thread.run", NULL, 0, PP_FRAME_JAVA_INTERPRETED},
  };
  add(p, 200, NULL, j, 2, 200);
  /* the same symbol in two objects prints the same: one frame in the page */
  struct pp_frame n1[] = {{"memcpy", "/lib/a.so", 0, PP_FRAME_NATIVE}};
  struct pp_frame n2[] = {{"memcpy", "/lib/b.so", 0, PP_FRAME_NATIVE}};
  add(p, 200, NULL, n1, 1, 7);
  add(p, 200, NULL, n2, 1, 3);
  struct pp_frame evil[] = {
      {"bad\xff\xfe utf8 \xe2\x80\xa8 sep \x01\"\\", NULL, 0, PP_FRAME_NATIVE},
      {URL_NAME, NULL, 0, PP_FRAME_JS},
      {XSS_NAME2, NULL, 0, PP_FRAME_NATIVE},
      {XSS_NAME, NULL, 0, PP_FRAME_NATIVE},
  };
  add(p, 300, "</title><script>x()</script>", evil, 4, 25);
  return p;
}

static const struct pp_html_plugin_stat plugins[] = {
    {"perf", 1000, 99.5, "ok"},
    {"java", 0, 0, "attach failed: </script>"},
};
static const struct pp_html_info info = {
    .title = "polyprof \xe2\x80\x94 host<1>&\"",
    .start_time = "2026-11-22T03:00:00Z",
    .end_time = "2026-11-22T03:01:00Z",
    .duration_s = 60,
    .hostname = "host1",
    .plugins = plugins,
    .plugin_count = 2,
};

static void test_self_contained_and_escaped(void) {
  struct pp_profile *p = sample_profile();
  size_t len;
  int rc;
  char *page = render(p, &info, &len, &rc);
  CHECK_EQ_INT(rc, 0);
  CHECK(len > 10000);
  CHECK_EQ_INT(strlen(page), len); /* no NUL bytes */

  /* nothing that could load anything */
  CHECK(!strcasestr(page, "http://"));
  CHECK(!strcasestr(page, "https://"));
  CHECK(!strcasestr(page, "//cdn"));
  CHECK(!strcasestr(page, "src=\"http"));
  CHECK(!strcasestr(page, "src=\""));
  CHECK(!strcasestr(page, "<link"));
  CHECK(!strcasestr(page, "@import"));
  CHECK(!strcasestr(page, "url("));
  CHECK(!strcasestr(page, "fetch("));
  CHECK(!strcasestr(page, "XMLHttpRequest"));
  CHECK_CONTAINS(page, "content=\"default-src 'none';");

  /* exactly our two scripts; no name opened or closed one, or a comment */
  CHECK_EQ_INT(count_ci(page, "<script"), 2);
  CHECK_EQ_INT(count_ci(page, "</script"), 2);
  CHECK_EQ_INT(count_ci(page, "<!--"), 0);
  CHECK_EQ_INT(count_ci(page, "</title"), 1);
  CHECK_CONTAINS(page,
                 "\\u003c\\/script\\u003e\\u003cscript\\u003ealert(1)\\u003c\\/script\\u003e");
  CHECK_CONTAINS(page, "\\u003c!--\\u003cimg src=x onerror=alert(2)\\u003e");
  CHECK_CONTAINS(page, "https:\\/\\/evil.example\\/x.js");
  CHECK_CONTAINS(page, "bad\\ufffd\\ufffd utf8 \\u2028 sep \\u0001\\\"\\\\");
  CHECK(!strstr(page, "\xe2\x80\xa8"));
  CHECK(valid_utf8((const unsigned char *)page, len));
  CHECK_CONTAINS(page, "<title>polyprof \xe2\x80\x94 host&lt;1&gt;&amp;&quot;</title>");
  CHECK_CONTAINS(page, "\"attach failed: \\u003c\\/script\\u003e\"");

  /* the data decodes back to the input */
  json_t *d = page_data(page);
  CHECK(d != NULL);
  if (d) {
    CHECK_EQ_INT(json_integer_value(json_object_get(d, "v")), 1);
    CHECK_EQ_STR(json_string_value(json_object_get(d, "title")), info.title);
    CHECK_EQ_STR(json_string_value(json_object_get(d, "host")), "host1");
    CHECK_EQ_STR(json_string_value(json_object_get(d, "start")), info.start_time);
    json_t *kinds = json_object_get(d, "kinds");
    CHECK_EQ_INT(json_array_size(kinds), PP_FRAME_KIND_COUNT);
    CHECK_EQ_STR(json_string_value(json_array_get(json_array_get(kinds, PP_FRAME_KERNEL), 0)),
                 "kernel");
    CHECK_EQ_STR(json_string_value(json_array_get(json_array_get(kinds, PP_FRAME_KERNEL), 1)),
                 "_[k]");
    json_t *pl = json_object_get(d, "plugins");
    CHECK_EQ_INT(json_array_size(pl), 2);
    CHECK_EQ_STR(json_string_value(json_array_get(json_array_get(pl, 1), 3)),
                 "attach failed: </script>");
    CHECK(json_real_value(json_array_get(json_array_get(pl, 0), 2)) == 99.5);

    json_t *strs = json_object_get(d, "strings"), *frames = json_object_get(d, "frames");
    json_t *procs = json_object_get(d, "procs"), *stacks = json_object_get(d, "stacks");
#define STR(i) json_string_value(json_array_get(strs, (size_t)(i)))
#define INT(a, i) ((long long)json_integer_value(json_array_get(a, (size_t)(i))))
    /* frames deduplicated by display text + kind: 14 in the input, memcpy twice */
    CHECK_EQ_INT(json_array_size(frames), 2 * 13);
    CHECK_EQ_INT(json_array_size(procs), 5 * 3); /* pid, comm, container, appid, thread */
    /* rebuild every stack as "comm|container|appid|f;f;f" and its count */
    char seen[8][512];
    long long counts[8];
    int ns = 0;
    long long total = 0;
    long long prev[64];
    long long plen = 0;
    for (size_t i = 0; i < json_array_size(stacks) && ns < 8;) {
      long long proc = INT(stacks, i), count = INT(stacks, i + 1);
      long long shared = INT(stacks, i + 2), n = INT(stacks, i + 3);
      CHECK(shared <= plen);
      for (long long k = 0; k < n; k++)
        prev[shared + k] = INT(stacks, i + 4 + (size_t)k);
      plen = shared + n;
      char *o = seen[ns];
      long long comm = INT(procs, proc * 5 + 1), ct = INT(procs, proc * 5 + 2);
      long long app = INT(procs, proc * 5 + 3);
      int w = snprintf(o, 512, "%lld|%s|%s|%s|", INT(procs, proc * 5), comm >= 0 ? STR(comm) : "-",
                       ct >= 0 ? STR(ct) : "-", app >= 0 ? STR(app) : "-");
      for (long long k = 0; k < plen; k++) {
        long long fr = prev[k];
        w += snprintf(o + w, 512 - (size_t)w, "%s%s/%lld", k ? ";" : "", STR(INT(frames, fr * 2)),
                      INT(frames, fr * 2 + 1));
      }
      counts[ns++] = count;
      total += count;
      i += 4 + (size_t)n;
    }
    CHECK_EQ_INT(ns, 6);
    CHECK_EQ_INT(total, 675);
    const struct {
      const char *text;
      long long count;
    } want[] = {
        {"100|python3|web-1|-|Py_RunMain/0;main (app.py:10)/2;compute (calc.py:5)/2", 300},
        {"100|python3|web-1|-|Py_RunMain/0;main (app.py:10)/2;render (tpl.py:8)/2", 100},
        {"100|python3|web-1|-|entry_SYSCALL_64/1;ksys_read/1", 40},
        {"200|java|-|svc|Thread.run/7;Foo.bar(Ljava/lang/String|)V/5", 200},
        {"200|java|-|svc|memcpy/0", 10},
        /* the stack's own comm is a thread name: the process keeps "evil" */
        {"300|evil|-|-|" XSS_NAME "/0;" XSS_NAME2 "/0;" URL_NAME
         "/12;bad\xef\xbf\xbd\xef\xbf\xbd utf8 \xe2\x80\xa8 sep \x01\"\\/0",
         25},
    };
    for (size_t w = 0; w < sizeof(want) / sizeof(want[0]); w++) {
      int found = 0;
      for (int s = 0; s < ns; s++) {
        if (!strcmp(seen[s], want[w].text)) {
          found = 1;
          CHECK_EQ_INT(counts[s], want[w].count);
        }
      }
      if (!found) {
        fprintf(stderr, "missing stack %s; have:\n", want[w].text);
        for (int s = 0; s < ns; s++)
          fprintf(stderr, "  %s %lld\n", seen[s], counts[s]);
      }
      CHECK(found);
    }
    /* the two python stacks share their first two frames */
    size_t at = 0;
    int shared_seen = 0;
    while (at < json_array_size(stacks)) {
      if (INT(stacks, at + 2) == 2) shared_seen = 1;
      at += 4 + (size_t)INT(stacks, at + 3);
    }
    CHECK(shared_seen);
#undef STR
#undef INT
    json_decref(d);
  }
  free(page);
  pp_profile_free(p);
}

static void test_empty_and_errors(void) {
  struct pp_profile *p = pp_profile_new();
  size_t len;
  int rc;
  char *page = render(p, NULL, &len, &rc);
  CHECK_EQ_INT(rc, 0);
  CHECK_CONTAINS(page, "\"stacks\":[]");
  CHECK_CONTAINS(page, "<title>polyprof flame graph</title>");
  json_t *d = page_data(page);
  CHECK(d != NULL);
  json_decref(d);
  free(page);

  CHECK_EQ_INT(pp_html_write(NULL, p, NULL), -EINVAL);
  /* a write failure is reported, not swallowed */
  FILE *ro = fopen("/dev/null", "r");
  if (ro) {
    CHECK(pp_html_write(ro, p, NULL) < 0);
    fclose(ro);
  }
  pp_profile_free(p);
}

/* Random bytes as frame names: the page stays valid UTF-8 with exactly our
 * two scripts, and each name decodes back to itself if it was valid UTF-8
 * (jansson is the independent judge of that) or to a U+FFFD-patched
 * string if it was not. */
static void test_random_names(void) {
  struct pp_profile *p = pp_profile_new();
  enum { NAMES = 2000 };
  static char names[NAMES][96];
  static size_t lens[NAMES];
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < NAMES; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    size_t n = 0;
    if (i % 2) {
      /* raw bytes, biased towards '<', '/', quotes, UTF-8 lead/continuation */
      static const char pick[] = "<>/!-&\"\\\x00\x01\x1f\x7f\xe2\x80\xa8\xa9\xc0\xed\xf4\xff";
      for (size_t want = 4 + x % 36; n < want; n++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        char c = (x >> 8) % 3 ? pick[(x >> 16) % (sizeof(pick) - 1)] : (char)(x >> 24);
        if (c == ';' || c == '\n' || c == '\r') c = 'x'; /* the .col separators are replaced */
        names[i][n] = c;
      }
    } else {
      /* valid UTF-8 made of hostile pieces: must come back byte for byte */
      static const char *const tok[] = {"<",
                                        "/",
                                        "\"",
                                        "\\",
                                        "\x01",
                                        "\x7f",
                                        "</script>",
                                        "<!--",
                                        "\xe2\x80\xa8",
                                        "\xe2\x80\xa9",
                                        "\xc3\xa9",
                                        "&amp",
                                        "\xf0\x9f\x94\xa5",
                                        "a",
                                        "\u2028"};
      for (int t = 0, nt = 2 + (int)(x % 8); t < nt; t++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const char *k = tok[(x >> 12) % (sizeof(tok) / sizeof(tok[0]))];
        memcpy(names[i] + n, k, strlen(k));
        n += strlen(k);
      }
    }
    /* a unique ASCII tail keeps every name distinct */
    lens[i] = n + (size_t)snprintf(names[i] + n, sizeof(names[i]) - n, "#%d", i);
    uint32_t s = pp_profile_intern(p, names[i], lens[i]);
    uint32_t f = pp_profile_intern_frame(p, s, PP_NO_STR, 0, PP_FRAME_NATIVE);
    CHECK_EQ_INT(pp_profile_add_stack(p, 1, PP_NO_STR, &f, 1, 1), 0);
  }
  size_t len;
  int rc;
  char *page = render(p, NULL, &len, &rc);
  CHECK_EQ_INT(rc, 0);
  CHECK(valid_utf8((const unsigned char *)page, len));
  CHECK_EQ_INT(count_ci(page, "<script"), 2);
  CHECK_EQ_INT(count_ci(page, "</script"), 2);
  CHECK_EQ_INT(count_ci(page, "<!--"), 0);
  CHECK(!memchr(page, '\0', len));
  const char *marker = "type=\"application/json\">";
  const char *open = strstr(page, marker);
  const char *close = open ? strstr(open, "</script>") : NULL;
  CHECK(open && close);
  json_error_t err;
  json_t *d = NULL;
  if (open && close) {
    open += strlen(marker);
    d = json_loadb(open, (size_t)(close - open), JSON_ALLOW_NUL, &err);
    if (!d) fprintf(stderr, "data JSON: %s at column %d\n", err.text, err.column);
  }
  CHECK(d != NULL);
  json_t *strs = json_object_get(d, "strings");
  int valid = 0, invalid = 0;
  for (int i = 0; i < NAMES && d; i++) {
    const char *tail = memrchr(names[i], '#', lens[i]); /* names may hold NULs */
    json_t *j = json_stringn(names[i], lens[i]);
    const char *got = NULL;
    size_t glen = 0;
    for (size_t k = 0; k < json_array_size(strs); k++) {
      json_t *e = json_array_get(strs, k);
      size_t el = json_string_length(e);
      if (el >= strlen(tail) && !strcmp(json_string_value(e) + el - strlen(tail), tail)) {
        got = json_string_value(e);
        glen = el;
        break;
      }
    }
    CHECK(got != NULL);
    if (!got) break;
    if (j) {
      valid++;
      CHECK(glen == lens[i] && !memcmp(got, names[i], glen));
    } else {
      invalid++;
      CHECK(memmem(got, glen, "\xef\xbf\xbd", 3) != NULL);
    }
    json_decref(j);
  }
  printf("test_html: random names: %d valid UTF-8, %d invalid\n", valid, invalid);
  CHECK(valid > 50 && invalid > 50);
  json_decref(d);
  free(page);
  pp_profile_free(p);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* 50,000 distinct stacks, 1,000,000 samples, deep Java-like call chains. */
static void test_speed(void) {
  struct pp_profile *p = pp_profile_new();
  enum { NAMES = 8000, STACKS = 50000, DEPTH_MAX = 48 };
  uint32_t *names = malloc(NAMES * sizeof(uint32_t));
  char buf[128];
  for (int i = 0; i < NAMES; i++) {
    int n = snprintf(buf, sizeof(buf), "com.example.pkg%d.Class%d.method%d(Ljava/lang/String;I)V",
                     i % 37, i % 211, i);
    uint32_t s = pp_profile_intern(p, buf, (size_t)n);
    names[i] = pp_profile_intern_frame(p, s, PP_NO_STR, 0, (uint32_t)(i % PP_FRAME_KIND_COUNT));
  }
  for (uint32_t pid = 1; pid <= 40; pid++) {
    snprintf(buf, sizeof(buf), "worker-%u", pid % 7);
    set_pid(p, pid, buf, pid % 3 ? "pod-a" : NULL, NULL);
  }
  uint64_t x = 88172645463325252ull;
  uint32_t frames[DEPTH_MAX];
  uint64_t samples = 0;
  for (int s = 0; s < STACKS; s++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    uint32_t depth = 8 + (uint32_t)(x % (DEPTH_MAX - 8));
    /* a shared trunk, then branches that make the stack unique */
    for (uint32_t d = 0; d < depth; d++)
      frames[d] = names[(d < 6 ? d * 13 : (s * 7 + d * 131 + (s >> d % 5)) % NAMES)];
    frames[depth - 2] = names[100 + s / NAMES]; /* (s / NAMES, s % NAMES): unique */
    frames[depth - 1] = names[s % NAMES];
    uint64_t count = s < STACKS - 1 ? 1 + (x >> 20) % 39 : 1000000 - samples;
    samples += count;
    CHECK_EQ_INT(pp_profile_add_stack(p, 1 + (uint32_t)s % 40, PP_NO_STR, frames, depth, count), 0);
  }
  CHECK_EQ_INT(pp_profile_stack_count(p), STACKS);
  CHECK_EQ_INT(pp_profile_total(p), 1000000);

  char *buf_out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf_out, &len);
  double t0 = now_ms();
  int rc = pp_html_write(f, p, &info);
  double t1 = now_ms();
  fclose(f);
  CHECK_EQ_INT(rc, 0);
  /* memstream reallocations dominate here and a loaded machine stretches
   * it; the speed bound that matters is the file one below */
  CHECK(t1 - t0 < 5000);
  /* the same into a plain file: what the agent does, without memstream's
   * reallocations; best of three, the machine may be busy */
  double best = 1e9;
  for (int i = 0; i < 3; i++) {
    FILE *null = fopen("/dev/null", "w");
    double a = now_ms();
    CHECK_EQ_INT(pp_html_write(null, p, &info), 0);
    double b = now_ms();
    fclose(null);
    if (b - a < best) best = b - a;
  }
  printf(
      "test_html: 50k stacks / 1M samples -> %.1f MB page in %.1f ms (memstream), %.1f ms (file)\n",
      len / 1e6, t1 - t0, best);
  CHECK(best < 1000);
  json_t *d = page_data(buf_out);
  CHECK(d != NULL);
  if (d) {
    long long total = 0;
    json_t *st = json_object_get(d, "stacks");
    for (size_t i = 0; i < json_array_size(st);) {
      total += json_integer_value(json_array_get(st, i + 1));
      i += 4 + (size_t)json_integer_value(json_array_get(st, i + 3));
    }
    CHECK_EQ_INT(total, 1000000);
    json_decref(d);
  }
  free(buf_out);
  free(names);
  pp_profile_free(p);
}

int main(void) {
  test_self_contained_and_escaped();
  test_empty_and_errors();
  test_random_names();
  test_speed();
  return pp_test_finish("test_html");
}
