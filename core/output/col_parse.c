/* SPDX-License-Identifier: Apache-2.0 */
/*
 * .col parser: the inverse of pp_col_write, for `upload-file` and `convert`.
 * The input is untrusted (any file a user points us at, and fuzzed), so
 * every field is length-checked, nothing is NUL-terminated in place and the
 * first malformed line ends the parse with its number and the reason.
 *
 * Line layouts (docs/gprofiler-compat.md):
 *   IDX   <idx>;<container>;<comm>;...   app metadata on (default)
 *   CONT  <container>;<comm>;...         app metadata off
 *   V1    <comm>;...                     --profile-api-version v1, or any
 *                                        plain folded-stacks file
 * Lines carry no marker of their layout, so it is decided once per file:
 * IDX when every stack line has >= 3 fields, a decimal first field and (if
 * the header lists "containers") a second field that is "" or one of them;
 * CONT when the header lists containers and every line's first field is ""
 * or one of them; V1 otherwise. A V1 file whose every comm is a number and
 * every stack has two frames would be misread as IDX; gProfiler's own files
 * cannot be, since they are never V1 with a header that says otherwise.
 *
 * Accepted leniencies: CRLF line ends, one trailing newline, blank lines,
 * zero counts (skipped), a header that is not JSON (returned as text; only
 * the layout detection then lacks its container list).
 */
#include "output/col.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum layout { LAYOUT_V1, LAYOUT_CONT, LAYOUT_IDX };

struct span {
  const char *s;
  size_t n;
};

struct line_iter {
  const char *text;
  size_t len, pos, no;
};

/* Next line without its "\n" / "\r\n"; false at the end. A final newline
 * does not make an extra empty line. */
static bool next_line(struct line_iter *it, struct span *l) {
  if (it->pos >= it->len) return false;
  const char *s = it->text + it->pos;
  const char *nl = memchr(s, '\n', it->len - it->pos);
  size_t n = nl ? (size_t)(nl - s) : it->len - it->pos;
  it->pos += n + (nl ? 1 : 0);
  it->no++;
  if (n && s[n - 1] == '\r') n--;
  *l = (struct span){s, n};
  return true;
}

static bool starts_with(struct span a, const char *p) {
  size_t n = strlen(p);
  return a.n >= n && memcmp(a.s, p, n) == 0;
}

static bool ends_with(struct span a, const char *p, size_t n) {
  return a.n >= n && memcmp(a.s + a.n - n, p, n) == 0;
}

static bool contains(struct span a, const char *p) {
  size_t n = strlen(p);
  for (size_t i = 0; i + n <= a.n; i++)
    if (memcmp(a.s + i, p, n) == 0) return true;
  return false;
}

/* Split off the field up to the next ';'. Returns false if there was no
 * ';' (then *field is the whole rest). */
static bool take_field(struct span *rest, struct span *field) {
  const char *sc = memchr(rest->s, ';', rest->n);
  if (!sc) {
    *field = *rest;
    *rest = (struct span){rest->s + rest->n, 0};
    return false;
  }
  *field = (struct span){rest->s, (size_t)(sc - rest->s)};
  rest->n -= field->n + 1;
  rest->s = sc + 1;
  return true;
}

/* Decimal without sign or spaces; false if empty, not digits or > max. */
static bool parse_uint(struct span d, uint64_t max, uint64_t *out) {
  if (!d.n || d.n > 20) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < d.n; i++) {
    unsigned c = (unsigned char)d.s[i] - '0';
    if (c > 9) return false;
    if (v > (max - c) / 10) return false;
    v = v * 10 + c;
  }
  *out = v;
  return true;
}

/* ---- the header's container list: sorted spans, binary search -------- */

struct names {
  struct span *v;
  size_t n;
  bool known; /* the header had a "containers" array */
};

static int span_cmp(const void *a, const void *b) {
  const struct span *x = a, *y = b;
  size_t n = x->n < y->n ? x->n : y->n;
  int c = memcmp(x->s, y->s, n);
  return c ? c : (x->n > y->n) - (x->n < y->n);
}

static bool is_container(const struct names *c, struct span f) {
  if (!c->known || f.n == 0) return true;
  return bsearch(&f, c->v, c->n, sizeof(*c->v), span_cmp) != NULL;
}

/* ---- synthetic pids: (idx, container, comm, appid) -> pid ------------- */

struct key {
  uint32_t idx, container, comm, appid;
};

struct pid_table {
  struct key *keys;
  uint32_t *pids; /* 0 = empty slot */
  size_t cap, count;
};

static size_t key_hash(const struct key *k) {
  uint64_t h = 1469598103934665603ull;
  const uint32_t w[4] = {k->idx, k->container, k->comm, k->appid};
  for (int i = 0; i < 4; i++)
    h = (h ^ w[i]) * 1099511628211ull;
  return (size_t)(h ^ (h >> 29));
}

static size_t table_slot(const struct pid_table *t, const struct key *k) {
  size_t i = key_hash(k) & (t->cap - 1);
  while (t->pids[i] && memcmp(&t->keys[i], k, sizeof(*k)) != 0)
    i = (i + 1) & (t->cap - 1);
  return i;
}

static int table_grow(struct pid_table *t) {
  size_t cap = t->cap ? t->cap * 2 : 64;
  struct pid_table n = {.keys = malloc(cap * sizeof(struct key)),
                        .pids = calloc(cap, sizeof(uint32_t)),
                        .cap = cap,
                        .count = t->count};
  if (!n.keys || !n.pids) {
    free(n.keys);
    free(n.pids);
    return -ENOMEM;
  }
  for (size_t i = 0; i < t->cap; i++) {
    if (!t->pids[i]) continue;
    size_t j = table_slot(&n, &t->keys[i]);
    n.keys[j] = t->keys[i];
    n.pids[j] = t->pids[i];
  }
  free(t->keys);
  free(t->pids);
  *t = n;
  return 0;
}

/* ---- the parse ---------------------------------------------------------- */

struct parser {
  struct pp_profile *out;
  enum layout layout;
  struct names containers;
  json_t *doc;      /* the header, if it is a JSON object */
  json_t *app_meta; /* its application_metadata array (borrowed), or NULL */
  struct pid_table pids;
  uint32_t frames[PP_MAX_FRAMES];
  struct {
    const char *text;
    size_t len;
  } suffix[PP_FRAME_KIND_COUNT];
  char *err;
  size_t errlen;
  size_t line_no;
};

static int fail(struct parser *ps, int rc, const char *fmt, ...) PP_PRINTF(3, 4);
static int fail(struct parser *ps, int rc, const char *fmt, ...) {
  if (ps->err && ps->errlen) {
    int n = snprintf(ps->err, ps->errlen, "line %zu: ", ps->line_no);
    if (n >= 0 && (size_t)n < ps->errlen) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return rc;
}

/* Header facts the layout detection and the pid records use. The spans of
 * the container list point into `doc`, kept until the parse ends. */
static int read_header(struct parser *ps, struct span h) {
  json_t *j = json_loadb(h.s, h.n, 0, NULL);
  if (!json_is_object(j)) {
    json_decref(j);
    return 0;
  }
  ps->doc = j;
  json_t *c = json_object_get(j, "containers");
  if (json_is_array(c)) {
    size_t n = json_array_size(c);
    ps->containers.v = malloc((n ? n : 1) * sizeof(struct span));
    if (!ps->containers.v) return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
      json_t *s = json_array_get(c, i);
      if (json_is_string(s))
        ps->containers.v[ps->containers.n++] =
            (struct span){json_string_value(s), json_string_length(s)};
    }
    qsort(ps->containers.v, ps->containers.n, sizeof(struct span), span_cmp);
    ps->containers.known = true;
  }
  json_t *am = json_object_get(j, "application_metadata");
  if (json_is_array(am)) ps->app_meta = am;
  return 0;
}

static void classify(struct parser *ps, struct span stack, bool *idx_ok, bool *cont_ok) {
  struct span rest = stack, f0, f1;
  bool two = take_field(&rest, &f0);
  bool three = two && take_field(&rest, &f1);
  uint64_t v;
  *idx_ok = *idx_ok && three && parse_uint(f0, UINT32_MAX, &v) && is_container(&ps->containers, f1);
  *cont_ok = *cont_ok && ps->containers.known && two && is_container(&ps->containers, f0);
}

/* The stack part and the count of a line ("<stack> <count>"). */
static int split_count(struct parser *ps, struct span l, struct span *stack, uint64_t *count) {
  const char *sp = NULL;
  for (size_t i = l.n; i > 0; i--) {
    if (l.s[i - 1] == ' ') {
      sp = l.s + i - 1;
      break;
    }
  }
  if (!sp) return fail(ps, -EINVAL, "no count (expected \"<frames> <count>\")");
  struct span d = {sp + 1, l.n - (size_t)(sp + 1 - l.s)};
  if (!d.n) return fail(ps, -EINVAL, "no count after the last space");
  for (size_t i = 0; i < d.n; i++)
    if (d.s[i] < '0' || d.s[i] > '9') return fail(ps, -EINVAL, "count is not a decimal number");
  if (!parse_uint(d, UINT64_MAX, count)) return fail(ps, -EINVAL, "count out of range");
  *stack = (struct span){l.s, (size_t)(sp - l.s)};
  if (!stack->n) return fail(ps, -EINVAL, "empty stack");
  return 0;
}

static uint32_t intern_span(struct parser *ps, struct span s) {
  return pp_profile_intern(ps->out, s.s, s.n);
}

/* "FILE:LINE" at the end of s (LINE as pp_frame_format writes it: digits,
 * no leading zero, not 0) -> file and line; false if it does not end so. */
static bool split_line(struct span s, struct span *file, uint32_t *line) {
  size_t i = s.n;
  while (i > 0 && s.s[i - 1] >= '0' && s.s[i - 1] <= '9')
    i--;
  struct span digits = {s.s + i, s.n - i};
  uint64_t v;
  if (i < 2 || s.s[i - 1] != ':' || !digits.n || digits.s[0] == '0' ||
      !parse_uint(digits, UINT32_MAX, &v))
    return false;
  *file = (struct span){s.s, i - 1};
  *line = (uint32_t)v;
  return true;
}

/* The last occurrence of sep in s, or SIZE_MAX. */
static size_t last_of(struct span s, const char *sep) {
  size_t n = strlen(sep);
  for (size_t i = s.n >= n ? s.n - n + 1 : 0; i-- > 0;)
    if (memcmp(s.s + i, sep, n) == 0) return i;
  return SIZE_MAX;
}

/* The inverse of pp_frame_format's layouts, so that a converted profile has
 * the name, file and line a live one has: "name (file:line)" or "name
 * (file)" (Python, JavaScript), "name - file:line" (Ruby), "name file:line"
 * (PHP). The text is cut at the separator the writer puts back, so a .col
 * written again is the same text. False when f has no such location. */
static bool split_location(struct span f, uint32_t kind, struct span *name, struct span *file,
                           uint32_t *line) {
  *line = 0;
  size_t at;
  if (kind == PP_FRAME_PYTHON || pp_frame_kind_is_js(kind)) {
    if (!ends_with(f, ")", 1) || (at = last_of(f, " (")) == SIZE_MAX) return false;
    struct span loc = {f.s + at + 2, f.n - at - 3};
    if (!loc.n) return false;
    if (!split_line(loc, file, line)) *file = loc;
  } else if (kind == PP_FRAME_RUBY || kind == PP_FRAME_PHP) {
    const char *sep = kind == PP_FRAME_RUBY ? " - " : " ";
    if ((at = last_of(f, sep)) == SIZE_MAX) return false;
    struct span loc = {f.s + at + strlen(sep), f.n - at - strlen(sep)};
    /* Ruby's writer puts ":0" for an unknown line */
    if (kind == PP_FRAME_RUBY && ends_with(loc, ":0", 2) && loc.n > 2) {
      *file = (struct span){loc.s, loc.n - 2};
    } else if (!split_line(loc, file, line)) {
      return false;
    }
  } else {
    return false;
  }
  if (!file->n || !at) return false;
  *name = (struct span){f.s, at};
  return true;
}

/* A frame without a suffix that ends in " (file:line)" is JavaScript: the
 * writer gives V8's plain frames no suffix and that location, which no
 * native symbol ends with. */
static bool looks_js(struct span f) {
  size_t at;
  struct span file;
  uint32_t line;
  if (!ends_with(f, ")", 1) || (at = last_of(f, " (")) == SIZE_MAX || !at) return false;
  struct span loc = {f.s + at + 2, f.n - at - 3};
  return split_line(loc, &file, &line) && file.n && !memchr(file.s, ')', file.n);
}

static uint32_t frame_of(struct parser *ps, struct span f) {
  uint32_t kind = PP_FRAME_NATIVE;
  if ((starts_with(f, "[Profiling error: ") || starts_with(f, "[Profiling skipped: ")) &&
      ends_with(f, "]", 1)) {
    kind = PP_FRAME_ERROR;
  } else if (ends_with(f, "]", 1)) {
    for (uint32_t k = 0; k < PP_FRAME_KIND_COUNT; k++) {
      if (ps->suffix[k].len && ends_with(f, ps->suffix[k].text, ps->suffix[k].len)) {
        kind = k;
        f.n -= ps->suffix[k].len;
        break;
      }
    }
    if (kind >= PP_FRAME_JAVA_JIT && kind <= PP_FRAME_JAVA_C1 && ends_with(f, ")", 1) &&
        contains(f, " (")) {
      /* JavaScript tiers share Java's letters; a JS frame reads "name (script:line)" */
      static const uint32_t js_tier[] = {PP_FRAME_JS_OPTIMIZED, PP_FRAME_JS_INLINED,
                                         PP_FRAME_JS_INTERPRETED, PP_FRAME_JS_BASELINE};
      kind = js_tier[kind - PP_FRAME_JAVA_JIT];
    }
  }
  if (kind == PP_FRAME_NATIVE && looks_js(f)) kind = PP_FRAME_JS;
  struct span fn = f, file = {NULL, 0};
  uint32_t line = 0, file_id = PP_NO_STR;
  if (split_location(f, kind, &fn, &file, &line)) {
    file_id = intern_span(ps, file);
    if (file_id == PP_NO_STR) return UINT32_MAX;
  }
  uint32_t name = intern_span(ps, fn);
  if (name == PP_NO_STR) return UINT32_MAX;
  return pp_profile_intern_frame(ps->out, name, file_id, line, kind);
}

static uint32_t pid_for(struct parser *ps, const struct key *k) {
  if ((ps->pids.count + 1) * 2 > ps->pids.cap && table_grow(&ps->pids) < 0) return 0;
  size_t slot = table_slot(&ps->pids, k);
  if (ps->pids.pids[slot]) return ps->pids.pids[slot];
  uint32_t pid = (uint32_t)++ps->pids.count;
  uint32_t app_meta = PP_NO_STR;
  json_t *m = ps->app_meta ? json_array_get(ps->app_meta, k->idx) : NULL;
  if (json_is_object(m)) {
    char *txt = json_dumps(m, JSON_COMPACT);
    if (!txt) return 0;
    app_meta = pp_profile_intern_cstr(ps->out, txt);
    free(txt);
    if (app_meta == PP_NO_STR) return 0;
  }
  struct pp_pid_rec *r = pp_profile_pid_upsert(ps->out, pid);
  if (!r) return 0;
  r->comm = k->comm;
  r->container = k->container;
  r->appid = k->appid;
  r->app_meta_index = k->idx;
  r->app_meta = app_meta;
  ps->pids.keys[slot] = *k;
  ps->pids.pids[slot] = pid;
  return pid;
}

static int parse_stack_line(struct parser *ps, struct span l) {
  struct span stack, f;
  uint64_t count, idx = 0;
  int rc = split_count(ps, l, &stack, &count);
  if (rc < 0) return rc;
  if (!count) return 0;
  struct key k = {.container = PP_NO_STR, .appid = PP_NO_STR};
  struct span rest = stack;
  if (ps->layout == LAYOUT_IDX) {
    take_field(&rest, &f);
    if (!parse_uint(f, UINT32_MAX, &idx)) return fail(ps, -EINVAL, "bad app metadata index");
    k.idx = (uint32_t)idx;
  }
  if (ps->layout != LAYOUT_V1) {
    if (!take_field(&rest, &f)) return fail(ps, -EINVAL, "missing comm field");
    if (f.n && (k.container = intern_span(ps, f)) == PP_NO_STR) return -ENOMEM;
  }
  bool more = take_field(&rest, &f);
  if ((k.comm = intern_span(ps, f)) == PP_NO_STR) return -ENOMEM;
  /* Frames start after the comm; "appid: X" may come first. */
  if (more && starts_with(rest, "appid: ")) {
    more = take_field(&rest, &f);
    f.s += 7;
    f.n -= 7;
    if ((k.appid = intern_span(ps, f)) == PP_NO_STR) return -ENOMEM;
  }
  uint32_t n = 0;
  if (more) {
    /* Deeper than PP_MAX_FRAMES: keep the leaf side, as the profile does. */
    size_t total = 1;
    for (const char *p = rest.s; (p = memchr(p, ';', rest.n - (size_t)(p - rest.s))); p++)
      total++;
    size_t skip = total > PP_MAX_FRAMES ? total - PP_MAX_FRAMES : 0;
    for (size_t i = 0; i < total; i++) {
      take_field(&rest, &f);
      if (i < skip) continue;
      if ((ps->frames[n++] = frame_of(ps, f)) == UINT32_MAX) return -ENOMEM;
    }
  }
  uint32_t pid = pid_for(ps, &k);
  if (!pid) return -ENOMEM;
  return pp_profile_add_stack(ps->out, pid, PP_NO_STR, ps->frames, n, count);
}

static int parse(struct parser *ps, const char *text, size_t len, char **header_json) {
  struct line_iter it = {.text = text, .len = len};
  struct span l;
  size_t body = 0; /* where stack lines start */
  if (next_line(&it, &l) && l.n && l.s[0] == '#') {
    ps->line_no = 1;
    struct span h = {l.s + 1, l.n - 1};
    if (h.n && h.s[0] == ' ') h.s++, h.n--;
    if (memchr(h.s, '\0', h.n)) return fail(ps, -EINVAL, "NUL byte in the header");
    if (header_json) {
      if (!(*header_json = strndup(h.s, h.n))) return -ENOMEM;
    }
    int rc = read_header(ps, h);
    if (rc < 0) return rc;
    body = it.pos;
  }

  /* Pass 1: layout. */
  bool idx_ok = true, cont_ok = true, any = false;
  it = (struct line_iter){.text = text, .len = len, .pos = body};
  while (next_line(&it, &l)) {
    struct span stack;
    uint64_t count;
    ps->line_no = it.no + (body ? 1 : 0);
    if (!l.n) continue;
    if (memchr(l.s, '\0', l.n)) return fail(ps, -EINVAL, "NUL byte");
    int rc = split_count(ps, l, &stack, &count);
    if (rc < 0) return rc;
    classify(ps, stack, &idx_ok, &cont_ok);
    any = true;
  }
  ps->layout = !any ? LAYOUT_V1 : idx_ok ? LAYOUT_IDX : cont_ok ? LAYOUT_CONT : LAYOUT_V1;

  /* Pass 2: stacks. */
  it = (struct line_iter){.text = text, .len = len, .pos = body};
  while (next_line(&it, &l)) {
    ps->line_no = it.no + (body ? 1 : 0);
    if (!l.n) continue;
    int rc = parse_stack_line(ps, l);
    if (rc == -ENOMEM) return fail(ps, rc, "out of memory");
    if (rc < 0) return rc;
  }
  return 0;
}

int pp_col_parse(const char *text, size_t len, struct pp_profile *out, char **header_json,
                 char *err, size_t errlen) {
  struct parser *ps = calloc(1, sizeof(*ps));
  if (header_json) *header_json = NULL;
  if (err && errlen) err[0] = '\0';
  if (!ps) return -ENOMEM;
  pp_profile_clear(out);
  ps->out = out;
  ps->err = err;
  ps->errlen = errlen;
  for (uint32_t k = 0; k < PP_FRAME_KIND_COUNT; k++) {
    const char *s = pp_frame_kind_suffix(k);
    ps->suffix[k].text = s ? s : "";
    ps->suffix[k].len = s ? strlen(s) : 0;
  }
  int rc = text ? parse(ps, text, len, header_json) : 0;
  if (rc < 0) {
    pp_profile_clear(out);
    if (header_json) {
      free(*header_json);
      *header_json = NULL;
    }
  }
  free(ps->containers.v);
  free(ps->pids.keys);
  free(ps->pids.pids);
  json_decref(ps->doc);
  free(ps);
  return rc;
}
