/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Self-contained HTML flame graph writer.
 *
 * The page is assets/flamegraph.html (markup, CSS and viewer JavaScript in
 * one file) with {{TITLE}} and {{DATA}} filled in. DATA is one JSON object
 * inside an inert <script type="application/json"> element:
 *
 *   v         1 (format version, checked by the page)
 *   title, host, start, end   strings;  duration  seconds
 *   kinds     [[name, suffix], ...] indexed by enum pp_frame_kind
 *   plugins   [[name, samples, rate_hz, status], ...]
 *   strings   every distinct text (frame names, comms, containers, appids)
 *   frames    flat [name string index, kind, ...]; one entry per distinct
 *             (display text, kind), so frames that print the same merge in
 *             the graph exactly as they do in the .col file
 *   procs     flat [pid, comm, container, appid, thread, ...] string indexes,
 *             -1 = none; one entry per (pid, comm of the stack): comm is the
 *             process's, thread the stack's own name when it differs (a
 *             runtime's thread name)
 *   stacks    flat [proc, count, shared, n, frame * n, ...], root first,
 *             sorted by (proc, frames); `shared` leading frames are the same
 *             as the previous record's and are not repeated, which makes
 *             deep, similar stacks (Java, Python) a fraction of their size
 *
 * Every string from a profiled process is hostile. The JSON escaping never
 * emits '<', '>', '&', '/' or U+2028/2029 raw, so nothing can close the
 * script element or open a comment, and invalid UTF-8 becomes U+FFFD. The
 * page's Content-Security-Policy (default-src 'none') forbids any network
 * access even if something slipped through.
 *
 * Speed: strings and frames are deduplicated through small open-addressing
 * tables; the only per-profile allocations are a handful of flat arrays,
 * nothing per stack. Output goes through a 64 KiB buffer.
 */
#include "output/html.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "output/col.h"
#include "output/heatmap.h"

extern const unsigned char pp_asset_flamegraph_html[];
extern const size_t pp_asset_flamegraph_html_len;

#define NONE UINT32_MAX
#define FMT_CAP 16384 /* longest frame text kept (C++ templates, Java signatures) */

/* --- buffered output ----------------------------------------------------- */

struct out {
  FILE *f;
  size_t len;
  int err;
  char buf[1 << 16];
};

static void out_flush(struct out *o) {
  if (o->len && !o->err && fwrite(o->buf, 1, o->len, o->f) != o->len) o->err = errno ? errno : EIO;
  o->len = 0;
}

static void out_put(struct out *o, const void *s, size_t n) {
  if (o->len + n > sizeof(o->buf)) {
    out_flush(o);
    if (n > sizeof(o->buf)) {
      if (!o->err && fwrite(s, 1, n, o->f) != n) o->err = errno ? errno : EIO;
      return;
    }
  }
  memcpy(o->buf + o->len, s, n);
  o->len += n;
}

static void out_str(struct out *o, const char *s) {
  out_put(o, s, strlen(s));
}

static inline void out_ch(struct out *o, char c) {
  if (o->len == sizeof(o->buf)) out_flush(o);
  o->buf[o->len++] = c;
}

/* Decimal digits of v, written straight into the buffer: the stack table is
 * millions of small integers, so this is the writer's hottest loop. `sep`
 * (if not 0) goes first. */
static inline void out_num(struct out *o, char sep, uint64_t v) {
  if (o->len + 22 > sizeof(o->buf)) out_flush(o);
  char *d = o->buf + o->len;
  if (sep) *d++ = sep;
  if (v < 10) {
    *d++ = (char)('0' + v);
  } else {
    char tmp[20];
    int i = 0;
    while (v) {
      tmp[i++] = (char)('0' + v % 10);
      v /= 10;
    }
    while (i)
      *d++ = tmp[--i];
  }
  o->len = (size_t)(d - o->buf);
}

static void out_u64(struct out *o, uint64_t v) {
  out_num(o, 0, v);
}

/* A string index, or -1 for "none". */
static void out_idx(struct out *o, uint32_t v) {
  if (v == NONE)
    out_put(o, "-1", 2);
  else
    out_u64(o, v);
}

static void out_double(struct out *o, double v) {
  char tmp[32];
  /* JSON has no NaN or infinity */
  int n = snprintf(tmp, sizeof(tmp), "%.6g", isfinite(v) ? v : 0.0);
  out_put(o, tmp, (size_t)n);
}

/* --- escaping ------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if it is not one.
 * Rejects overlong forms, surrogates and code points above U+10FFFF. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) return n >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    if (n < 3 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80) return 0;
    if (c == 0xe0 && s[1] < 0xa0) return 0;
    if (c == 0xed && s[1] > 0x9f) return 0;
    return 3;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    if (n < 4 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80) return 0;
    if (c == 0xf0 && s[1] < 0x90) return 0;
    if (c == 0xf4 && s[1] > 0x8f) return 0;
    return 4;
  }
  return 0;
}

/* 1 for ASCII bytes that must be escaped in a JSON string inside a script
 * element: controls, quote, backslash, and the HTML-significant characters. */
static const unsigned char json_special[128] = {
    1, 1, 1,         1,         1,          1,         1,         1,         1,          1,
    1, 1, 1,         1,         1,          1,         1,         1,         1,          1,
    1, 1, 1,         1,         1,          1,         1,         1,         1,          1,
    1, 1, ['"'] = 1, ['&'] = 1, ['\''] = 1, ['/'] = 1, ['<'] = 1, ['>'] = 1, ['\\'] = 1, [127] = 1,
};

static void out_json_string(struct out *o, const char *str, size_t n) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *s = (const unsigned char *)str;
  out_ch(o, '"');
  size_t run = 0; /* start of the pending run of bytes that need no escape */
  size_t i = 0;
  while (i < n) {
    unsigned char c = s[i];
    if (c < 0x80 && !json_special[c]) {
      i++;
      continue;
    }
    size_t seq = c < 0x80 ? 1 : utf8_seq(s + i, n - i);
    /* U+2028/U+2029 end lines in older JavaScript parsers */
    bool sep = seq == 3 && c == 0xe2 && s[i + 1] == 0x80 && (s[i + 2] == 0xa8 || s[i + 2] == 0xa9);
    if (c >= 0x80 && seq && !sep) {
      i += seq;
      continue;
    }
    out_put(o, s + run, i - run);
    if (sep) {
      out_put(o, s[i + 2] == 0xa8 ? "\\u2028" : "\\u2029", 6);
      i += 3;
    } else if (c >= 0x80) {
      out_put(o, "\\ufffd", 6);
      i++;
    } else {
      char e[6];
      switch (c) {
        case '"':
          out_put(o, "\\\"", 2);
          break;
        case '\\':
          out_put(o, "\\\\", 2);
          break;
        case '/':
          out_put(o, "\\/", 2);
          break;
        case '\n':
          out_put(o, "\\n", 2);
          break;
        case '\t':
          out_put(o, "\\t", 2);
          break;
        default:
          memcpy(e, "\\u00", 4);
          e[4] = hex[c >> 4];
          e[5] = hex[c & 15];
          out_put(o, e, 6);
      }
      i++;
    }
    run = i;
  }
  out_put(o, s + run, n - run);
  out_ch(o, '"');
}

static void out_json_cstr(struct out *o, const char *s) {
  out_json_string(o, s ? s : "", s ? strlen(s) : 0);
}

/* Text content of an HTML element (the <title>). */
static void out_html_text(struct out *o, const char *str) {
  const unsigned char *s = (const unsigned char *)(str ? str : "");
  size_t n = strlen((const char *)s);
  for (size_t i = 0; i < n;) {
    unsigned char c = s[i];
    size_t seq = utf8_seq(s + i, n - i);
    if (!seq) {
      out_put(o, "\xef\xbf\xbd", 3);
      i++;
    } else if (c == '<') {
      out_put(o, "&lt;", 4), i++;
    } else if (c == '>') {
      out_put(o, "&gt;", 4), i++;
    } else if (c == '&') {
      out_put(o, "&amp;", 5), i++;
    } else if (c == '"') {
      out_put(o, "&quot;", 6), i++;
    } else if (c < 0x20 || c == 0x7f) {
      out_ch(o, ' '), i++;
    } else {
      out_put(o, s + i, seq);
      i += seq;
    }
  }
}

/* --- tables -------------------------------------------------------------- */

/* All tables are sized up front from the profile's own counts (distinct
 * frames, stacks), so they never rehash: an open-addressing index at most
 * half full, plus flat arrays. */
struct slots {
  uint32_t *v; /* id or NONE */
  uint32_t mask;
};

static int slots_init(struct slots *s, size_t max_entries) {
  size_t cap = 64;
  while (cap < max_entries * 2)
    cap *= 2;
  s->v = malloc(cap * sizeof(uint32_t));
  if (!s->v) return -ENOMEM;
  memset(s->v, 0xff, cap * sizeof(uint32_t));
  s->mask = (uint32_t)(cap - 1);
  return 0;
}

static uint64_t hash_bytes(const char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    memcpy(&v, p + i, 8);
    h = (h ^ v) * 0x100000001b3ull;
    h ^= h >> 32;
  }
  for (; i < n; i++)
    h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
  return h ^ (h >> 31);
}

static uint64_t hash_u64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

struct strtab {
  char *arena;
  size_t alen, acap;
  size_t *off;
  uint32_t *len;
  uint64_t *hash;
  uint32_t n;
  struct slots ix;
};

static uint32_t strtab_add(struct strtab *t, const char *s, size_t n) {
  uint64_t h = hash_bytes(s, n);
  uint32_t pos = (uint32_t)h & t->ix.mask;
  for (uint32_t id; (id = t->ix.v[pos]) != NONE; pos = (pos + 1) & t->ix.mask) {
    if (t->hash[id] == h && t->len[id] == n && memcmp(t->arena + t->off[id], s, n) == 0) return id;
  }
  if (t->alen + n > t->acap) {
    size_t cap = t->acap ? t->acap : 65536;
    while (cap < t->alen + n)
      cap *= 2;
    char *a = realloc(t->arena, cap);
    if (!a) return NONE;
    t->arena = a;
    t->acap = cap;
  }
  uint32_t id = t->n++;
  memcpy(t->arena + t->alen, s, n);
  t->off[id] = t->alen;
  t->len[id] = (uint32_t)n;
  t->hash[id] = h;
  t->alen += n;
  t->ix.v[pos] = id;
  return id;
}

/* A profile string (comm, container, appid) into the table; NONE stays. */
static uint32_t strtab_add_pstr(struct strtab *t, const struct pp_profile *p, uint32_t id,
                                bool *oom) {
  if (id == PP_NO_STR) return NONE;
  uint32_t r = strtab_add(t, pp_profile_str(p, id), pp_profile_str_len(p, id));
  if (r == NONE) *oom = true;
  return r;
}

struct proc {
  uint32_t pid;
  uint32_t key;                            /* strtab id of the stack's comm: with pid, the key */
  uint32_t comm, container, appid, thread; /* strtab ids or NONE */
};

struct ent {
  uint32_t proc;
  uint32_t n;
  uint32_t shared;     /* leading frames equal to the previous record's */
  const uint32_t *fr;  /* its profile's frame ids, root first */
  const uint32_t *map; /* its profile's frame id -> model frame */
  uint64_t count;
  uint64_t base; /* a differential page's base samples */
};

struct model {
  struct strtab st;
  /* frames: (strtab id, kind), deduplicated */
  uint32_t *fr_str, *fr_kind, nfr;
  uint32_t *fr_file, *fr_line; /* with a heatmap: a frame's source line (strtab id, line) */
  struct slots fr_ix;
  uint32_t *fmap; /* profile frame id -> model frame, NONE until seen */
  struct proc *procs;
  uint32_t nprocs;
  struct slots pr_ix;
  struct ent *ents;
  size_t nents;
  char *fmt; /* FMT_CAP scratch for pp_frame_format */
};

static void model_free(struct model *m) {
  free(m->st.arena);
  free(m->st.off);
  free(m->st.len);
  free(m->st.hash);
  free(m->st.ix.v);
  free(m->fr_str);
  free(m->fr_kind);
  free(m->fr_file);
  free(m->fr_line);
  free(m->fr_ix.v);
  free(m->fmap);
  free(m->procs);
  free(m->pr_ix.v);
  free(m->ents);
  free(m->fmt);
}

static uint32_t model_frame(struct model *m, uint32_t *fmap, const struct pp_profile *p,
                            uint32_t fid) {
  if (fmap[fid] != NONE) return fmap[fid];
  size_t n = pp_frame_format(p, fid, m->fmt, FMT_CAP, false);
  uint32_t s = strtab_add(&m->st, m->fmt, n);
  if (s == NONE) return NONE;
  const struct pp_frame_rec *fr = pp_profile_frame(p, fid);
  uint32_t kind = fr && fr->kind < PP_FRAME_KIND_COUNT ? fr->kind : PP_FRAME_NATIVE;
  uint32_t pos = (uint32_t)hash_u64(((uint64_t)s << 8) | kind) & m->fr_ix.mask;
  for (uint32_t id; (id = m->fr_ix.v[pos]) != NONE; pos = (pos + 1) & m->fr_ix.mask) {
    if (m->fr_str[id] == s && m->fr_kind[id] == kind) return fmap[fid] = id;
  }
  uint32_t id = m->nfr++;
  m->fr_str[id] = s;
  m->fr_kind[id] = kind;
  if (m->fr_file) {
    const char *file;
    size_t flen;
    uint32_t line;
    m->fr_file[id] = NONE;
    if (pp_frame_source_line(p, fid, &file, &flen, &line)) {
      m->fr_file[id] = strtab_add(&m->st, file, flen);
      m->fr_line[id] = line;
    }
  }
  m->fr_ix.v[pos] = id;
  return fmap[fid] = id;
}

/* A thread named by a root pseudo-frame "<thread: NAME>" (the Python
 * plugin's thread names): the graph shows it as the thread level. */
static bool thread_root(const struct pp_profile *p, const struct pp_stack_rec *s, const char **name,
                        size_t *len) {
  if (!s->nframes) return false;
  const struct pp_frame_rec *f = pp_profile_frame(p, pp_profile_stack_frames(p, s)[0]);
  if (!f || f->kind != PP_FRAME_PSEUDO) return false;
  const char *t = pp_profile_str(p, f->name);
  size_t n = pp_profile_str_len(p, f->name);
  if (n < 11 || memcmp(t, "<thread: ", 9) != 0 || t[n - 1] != '>') return false;
  *name = t + 9;
  *len = n - 10;
  return true;
}

static uint32_t model_proc(struct model *m, const struct pp_profile *p, uint32_t pid,
                           uint32_t scomm, const char *tname, size_t tlen) {
  const struct pp_pid_rec *r = pp_profile_pid(p, pid);
  uint32_t pcomm = scomm != PP_NO_STR ? scomm : r ? r->comm : PP_NO_STR;
  bool oom = false;
  /* keyed by the comm's text: a differential page's two profiles agree */
  uint32_t comm = tname ? strtab_add(&m->st, tname, tlen) : strtab_add_pstr(&m->st, p, pcomm, &oom);
  if (oom || (tname && comm == NONE)) return NONE; /* NONE without tname: no comm known */
  uint32_t pos = (uint32_t)hash_u64(((uint64_t)pid << 32) | comm) & m->pr_ix.mask;
  for (uint32_t id; (id = m->pr_ix.v[pos]) != NONE; pos = (pos + 1) & m->pr_ix.mask) {
    if (m->procs[id].pid == pid && m->procs[id].key == comm) return id;
  }
  struct proc pr = {.pid = pid, .key = comm, .comm = comm, .thread = NONE};
  /* a stack named after its thread: the process keeps its own name */
  uint32_t own = r ? strtab_add_pstr(&m->st, p, r->comm, &oom) : NONE;
  if (own != NONE && own != comm) {
    pr.comm = own;
    pr.thread = comm;
  }
  pr.container = strtab_add_pstr(&m->st, p, r ? r->container : PP_NO_STR, &oom);
  pr.appid = strtab_add_pstr(&m->st, p, r ? r->appid : PP_NO_STR, &oom);
  if (oom) return NONE;
  uint32_t id = m->nprocs++;
  m->procs[id] = pr;
  m->pr_ix.v[pos] = id;
  return id;
}

/* Order by process, then by the profile's frame ids: any order that puts
 * stacks with common prefixes next to each other does, and comparing the
 * ids in place avoids copying every stack. */
static int ent_cmp(const void *a, const void *b) {
  const struct ent *x = a, *y = b;
  if (x->proc != y->proc) return x->proc < y->proc ? -1 : 1;
  uint32_t n = x->n < y->n ? x->n : y->n;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t fx = x->map[x->fr[i]], fy = y->map[y->fr[i]];
    if (fx != fy) return fx < fy ? -1 : 1;
  }
  return x->n < y->n ? -1 : x->n > y->n;
}

/* The stacks of p into the model, their counts as `count` or, for a
 * differential page's base, as `base`. */
static int model_add(struct model *m, const struct pp_profile *p, uint32_t *fmap, bool is_base) {
  size_t nframes = pp_profile_frame_count(p), nstacks = pp_profile_stack_count(p);
  for (size_t i = 0; i < nstacks; i++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, i);
    if (!s->count) continue;
    struct ent *e = &m->ents[m->nents++];
    const char *tname = NULL;
    size_t tlen = 0;
    bool named = thread_root(p, s, &tname, &tlen);
    e->proc = model_proc(m, p, s->pid, s->comm, named ? tname : NULL, tlen);
    if (e->proc == NONE) return -ENOMEM;
    e->fr = pp_profile_stack_frames(p, s) + named;
    e->map = fmap;
    e->n = s->nframes - named;
    e->count = is_base ? 0 : s->count;
    e->base = is_base ? s->count : 0;
    for (uint32_t j = 0; j < e->n; j++) {
      if (e->fr[j] >= nframes) return -EINVAL;
      if (model_frame(m, fmap, p, e->fr[j]) == NONE) return -ENOMEM;
    }
  }
  return 0;
}

static int model_build(struct model *m, const struct pp_profile *p, const struct pp_profile *base,
                       bool sources) {
  size_t nf_p = pp_profile_frame_count(p), nf_b = base ? pp_profile_frame_count(base) : 0;
  size_t nframes = nf_p + nf_b, nstacks = pp_profile_stack_count(p);
  if (base) nstacks += pp_profile_stack_count(base);
  /* processes are (pid, comm): at most one per pid plus one per stack that
   * names its own comm */
  size_t maxproc = pp_profile_pid_count(p) + 1 + (base ? pp_profile_pid_count(base) : 0);
  const char *tn;
  size_t tl;
  for (size_t i = 0; i < pp_profile_stack_count(p); i++)
    maxproc += pp_profile_stack(p, i)->comm != PP_NO_STR ||
               thread_root(p, pp_profile_stack(p, i), &tn, &tl);
  for (size_t i = 0; base && i < pp_profile_stack_count(base); i++)
    maxproc += pp_profile_stack(base, i)->comm != PP_NO_STR ||
               thread_root(base, pp_profile_stack(base, i), &tn, &tl);
  size_t maxstr = (sources ? 2 : 1) * nframes + 4 * maxproc + 16;
  if (maxstr > UINT32_MAX / 4 || nstacks > UINT32_MAX / 4) return -E2BIG;

  m->st.off = malloc(maxstr * sizeof(size_t));
  m->st.len = malloc(maxstr * sizeof(uint32_t));
  m->st.hash = malloc(maxstr * sizeof(uint64_t));
  m->fr_str = malloc((nframes + 1) * sizeof(uint32_t));
  m->fr_kind = malloc((nframes + 1) * sizeof(uint32_t));
  /* one map per profile, side by side: the base's starts at nf_p + 1 */
  m->fmap = malloc((nframes + 2) * sizeof(uint32_t));
  m->procs = malloc(maxproc * sizeof(struct proc));
  m->ents = malloc((nstacks + 1) * sizeof(struct ent));
  m->fmt = malloc(FMT_CAP);
  if (sources) {
    m->fr_file = malloc((nframes + 1) * sizeof(uint32_t));
    m->fr_line = malloc((nframes + 1) * sizeof(uint32_t));
    if (!m->fr_file || !m->fr_line) return -ENOMEM;
  }
  if (!m->st.off || !m->st.len || !m->st.hash || !m->fr_str || !m->fr_kind || !m->fmap ||
      !m->procs || !m->ents || !m->fmt)
    return -ENOMEM;
  if (slots_init(&m->st.ix, maxstr) < 0 || slots_init(&m->fr_ix, nframes + 1) < 0 ||
      slots_init(&m->pr_ix, maxproc) < 0)
    return -ENOMEM;
  memset(m->fmap, 0xff, (nframes + 2) * sizeof(uint32_t));
  int rc = model_add(m, p, m->fmap, false);
  if (rc == 0 && base) rc = model_add(m, base, m->fmap + nf_p + 1, true);
  if (rc < 0) return rc;

  /* Sorted, similar stacks sit next to each other: the page then rebuilds
   * the tree walking mostly shared prefixes, and the prefixes are not
   * repeated in the file. */
  qsort(m->ents, m->nents, sizeof(struct ent), ent_cmp);

  size_t w = 0;
  for (size_t i = 0; i < m->nents; i++) {
    struct ent *e = &m->ents[i];
    uint32_t s = 0;
    if (w) {
      const struct ent *prev = &m->ents[w - 1];
      uint32_t n = prev->n < e->n ? prev->n : e->n;
      while (s < n && prev->map[prev->fr[s]] == e->map[e->fr[s]])
        s++;
      /* frames that print the same made two stacks identical: merge */
      if (prev->proc == e->proc && s == e->n && s == prev->n) {
        m->ents[w - 1].count += e->count;
        m->ents[w - 1].base += e->base;
        continue;
      }
    }
    e->shared = s;
    m->ents[w++] = *e;
  }
  m->nents = w;
  return 0;
}

/* --- page ---------------------------------------------------------------- */

static void write_data(struct out *o, const struct model *m, const struct pp_html_info *info) {
  out_str(o, "{\"v\":1,\"title\":");
  out_json_cstr(o, info && info->title ? info->title : "polyprof flame graph");
  out_str(o, ",\"host\":");
  out_json_cstr(o, info ? info->hostname : NULL);
  out_str(o, ",\"start\":");
  out_json_cstr(o, info ? info->start_time : NULL);
  out_str(o, ",\"end\":");
  out_json_cstr(o, info ? info->end_time : NULL);
  out_str(o, ",\"duration\":");
  out_double(o, info ? info->duration_s : 0);
  out_str(o, ",\"unit\":");
  out_json_cstr(o, info && info->unit ? info->unit : "samples");

  out_str(o, ",\n\"kinds\":[");
  for (unsigned k = 0; k < PP_FRAME_KIND_COUNT; k++) {
    out_str(o, k ? ",[" : "[");
    out_json_cstr(o, pp_frame_kind_name(k));
    out_ch(o, ',');
    out_json_cstr(o, pp_frame_kind_suffix(k));
    out_ch(o, ']');
  }

  out_str(o, "],\n\"plugins\":[");
  for (size_t i = 0; info && info->plugins && i < info->plugin_count; i++) {
    const struct pp_html_plugin_stat *ps = &info->plugins[i];
    out_str(o, i ? ",[" : "[");
    out_json_cstr(o, ps->name);
    out_ch(o, ',');
    out_u64(o, ps->samples);
    out_ch(o, ',');
    out_double(o, ps->rate_hz);
    out_ch(o, ',');
    out_json_cstr(o, ps->status ? ps->status : "ok");
    out_ch(o, ']');
  }

  out_str(o, "],\n\"strings\":[");
  for (uint32_t i = 0; i < m->st.n; i++) {
    if (i) out_put(o, i % 16 ? "," : ",\n", i % 16 ? 1 : 2);
    out_json_string(o, m->st.arena + m->st.off[i], m->st.len[i]);
  }

  out_str(o, "],\n\"frames\":[");
  for (uint32_t i = 0; i < m->nfr; i++) {
    out_num(o, i ? ',' : 0, m->fr_str[i]);
    out_num(o, ',', m->fr_kind[i]);
  }

  out_str(o, "],\n\"procs\":[");
  for (uint32_t i = 0; i < m->nprocs; i++) {
    const struct proc *pr = &m->procs[i];
    if (i) out_ch(o, ',');
    out_u64(o, pr->pid);
    out_ch(o, ',');
    out_idx(o, pr->comm);
    out_ch(o, ',');
    out_idx(o, pr->container);
    out_ch(o, ',');
    out_idx(o, pr->appid);
    out_ch(o, ',');
    out_idx(o, pr->thread);
  }

  if (m->fr_file) {
    /* frames that have a line in the heatmap: [frame, file string, line] */
    out_str(o, "],\n\"heatmap\":");
    out_json_cstr(o, info->heatmap_href);
    out_str(o, ",\n\"src\":[");
    bool first = true;
    for (uint32_t i = 0; i < m->nfr; i++) {
      if (m->fr_file[i] == NONE) continue;
      out_num(o, first ? 0 : ',', i);
      out_num(o, ',', m->fr_file[i]);
      out_num(o, ',', m->fr_line[i]);
      first = false;
    }
  }
  out_str(o, "],\n\"stacks\":[");
  for (size_t i = 0; i < m->nents; i++) {
    const struct ent *e = &m->ents[i];
    if (i && i % 64 == 0) out_ch(o, '\n'); /* keeps lines editor-friendly */
    out_num(o, i ? ',' : 0, e->proc);
    out_num(o, ',', e->count);
    out_num(o, ',', e->shared);
    out_num(o, ',', e->n - e->shared);
    for (uint32_t j = e->shared; j < e->n; j++)
      out_num(o, ',', e->map[e->fr[j]]);
  }
  if (info && info->base) {
    /* the base's samples per stack record, and what the page compares */
    uint64_t bt = 0, nt = 0;
    out_str(o, "],\n\"base\":[");
    for (size_t i = 0; i < m->nents; i++) {
      out_num(o, i ? ',' : 0, m->ents[i].base);
      bt += m->ents[i].base;
      nt += m->ents[i].count;
    }
    out_str(o, "],\n\"diff\":{\"base_name\":");
    out_json_cstr(o, info->base_name);
    out_str(o, ",\"new_name\":");
    out_json_cstr(o, info->new_name);
    out_str(o, ",\"base_total\":");
    out_u64(o, bt);
    out_str(o, ",\"new_total\":");
    out_u64(o, nt);
    out_ch(o, '}');
    out_ch(o, '}');
    return;
  }
  out_str(o, "]}");
}

int pp_html_write(FILE *f, const struct pp_profile *merged, const struct pp_html_info *info) {
  if (!f || !merged) return -EINVAL;
  struct model m = {0};
  int rc = model_build(&m, merged, info ? info->base : NULL, info && info->heatmap_href);
  struct out *o = rc == 0 ? malloc(sizeof(*o)) : NULL;
  if (rc == 0 && !o) rc = -ENOMEM;
  if (rc < 0) {
    model_free(&m);
    return rc;
  }
  o->f = f;
  o->len = 0;
  o->err = 0;

  /* Fill the template's {{NAME}} markers; anything else is copied as is. */
  const char *t = (const char *)pp_asset_flamegraph_html;
  size_t n = pp_asset_flamegraph_html_len, i = 0, run = 0;
  while (i + 1 < n) {
    if (t[i] != '{' || t[i + 1] != '{') {
      i++;
      continue;
    }
    const char *end = memmem(t + i + 2, n - i - 2, "}}", 2);
    if (!end) break;
    size_t klen = (size_t)(end - (t + i + 2));
    const char *key = t + i + 2;
#define IS(k) (klen == sizeof(k) - 1 && memcmp(key, k, klen) == 0)
    if (!IS("TITLE") && !IS("DATA")) {
      i += 2;
      continue;
    }
    out_put(o, t + run, i - run);
    if (IS("TITLE"))
      out_html_text(o, info && info->title ? info->title : "polyprof flame graph");
    else
      write_data(o, &m, info);
#undef IS
    i = (size_t)(end - t) + 2;
    run = i;
  }
  out_put(o, t + run, n - run);
  out_flush(o);
  if (!o->err && fflush(f) != 0) o->err = errno ? errno : EIO;
  rc = o->err ? -o->err : 0;
  free(o);
  model_free(&m);
  return rc;
}
