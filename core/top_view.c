/* SPDX-License-Identifier: Apache-2.0 */
/* `polyprof top`'s model and screen (see top_view.h). */
#include "top_view.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NONE UINT32_MAX
#define MAX_NAMES 65536
#define MAX_ENTRIES 65536
#define MAX_NAME_BYTES (8u << 20)
#define MAX_PROCS 1024
#define NAME_CAP 512 /* a function's text as shown: longer ones are cut */

enum runtime {
  RT_NATIVE,
  RT_KERNEL,
  RT_PYTHON,
  RT_JAVA,
  RT_RUBY,
  RT_PHP,
  RT_DOTNET,
  RT_JS,
  RT_OTHER,
  RT_COUNT
};
static const char *const runtime_names[RT_COUNT] = {"native", "kernel", "python", "java", "ruby",
                                                    "php",    "dotnet", "js",     "other"};

static unsigned runtime_of(unsigned kind) {
  switch (kind) {
    case PP_FRAME_NATIVE:
    case PP_FRAME_PYTHON_NATIVE:
      return RT_NATIVE;
    case PP_FRAME_KERNEL:
      return RT_KERNEL;
    case PP_FRAME_PYTHON:
    case PP_FRAME_PYTHON_ERROR:
      return RT_PYTHON;
    case PP_FRAME_JAVA_JIT:
    case PP_FRAME_JAVA_INLINED:
    case PP_FRAME_JAVA_INTERPRETED:
    case PP_FRAME_JAVA_C1:
      return RT_JAVA;
    case PP_FRAME_RUBY:
      return RT_RUBY;
    case PP_FRAME_PHP:
      return RT_PHP;
    case PP_FRAME_DOTNET:
      return RT_DOTNET;
    case PP_FRAME_JS:
    case PP_FRAME_JS_INTERPRETED:
    case PP_FRAME_JS_BASELINE:
    case PP_FRAME_JS_OPTIMIZED:
    case PP_FRAME_JS_INLINED:
    case PP_FRAME_JS_BUILTIN:
      return RT_JS;
    default:
      return RT_OTHER;
  }
}

/* What a row is: a function (name and file), a source line (name, file
 * and line), or a thread (its name and process). Each tick feeds all three,
 * so switching the view shows its totals at once. */
enum view { VIEW_FUNCTIONS, VIEW_LINES, VIEW_THREADS, VIEW_COUNT };
static const char *const view_names[VIEW_COUNT] = {"functions", "lines", "threads"};
static const char *const view_columns[VIEW_COUNT] = {"Function", "Line", "Thread"};

enum sort_key { SORT_SELF, SORT_TOTAL, SORT_SELF_TIME, SORT_TOTAL_TIME, SORT_NAME, SORT_COUNT };
static const char *const sort_names[SORT_COUNT] = {"%self", "%total", "self time", "total time",
                                                   "name"};

struct entry {
  uint32_t pid, name;
  uint8_t rt, view;
  uint64_t tick_self, tick_total, cum_self, cum_total;
  uint64_t stamp; /* the last stack counted in tick_total */
};

struct proc {
  uint32_t pid;
  char comm[20];
  uint64_t tick, cum; /* samples */
};

struct pp_top {
  int hz;
  /* names: interned function texts */
  char *arena;
  size_t alen;
  uint32_t *name_off, *name_len, nnames, *name_ix; /* name_ix: 2*MAX_NAMES slots */
  struct entry *ents;
  uint32_t nents, *ent_ix; /* 2*MAX_ENTRIES slots */
  uint32_t overflow_name;
  struct proc procs[MAX_PROCS];
  uint32_t nprocs;
  struct fslot {
    uint32_t entry, line_entry, pid;
    uint64_t tick;
  } * fmap; /* this tick's frame id (under one pid) -> its function's and line's entries */
  size_t fmap_cap;
  uint64_t stack_no;
  /* the last tick */
  double seconds;
  uint64_t missed, cum_missed, ticks;
  time_t tick_time;
  /* the view */
  bool paused;
  enum view view;
  enum sort_key sort;
  int proc_filter; /* index into procs, -1: all */
  int rt_filter;   /* runtime, -1: all */
};

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
  return h ^ (h >> 31);
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

static uint32_t intern(struct pp_top *t, const char *s, size_t n) {
  const uint32_t mask = 2 * MAX_NAMES - 1;
  uint32_t pos = (uint32_t)hash_bytes(s, n) & mask;
  for (uint32_t id; (id = t->name_ix[pos]) != NONE; pos = (pos + 1) & mask)
    if (t->name_len[id] == n && memcmp(t->arena + t->name_off[id], s, n) == 0) return id;
  if (t->nnames >= MAX_NAMES || t->alen + n > MAX_NAME_BYTES) return NONE;
  uint32_t id = t->nnames++;
  memcpy(t->arena + t->alen, s, n);
  t->name_off[id] = (uint32_t)t->alen;
  t->name_len[id] = (uint32_t)n;
  t->alen += n;
  t->name_ix[pos] = id;
  return id;
}

static uint32_t entry_of(struct pp_top *t, uint32_t pid, unsigned rt, uint32_t name,
                         enum view view) {
  const uint32_t mask = 2 * MAX_ENTRIES - 1;
  uint32_t pos =
      (uint32_t)mix(((uint64_t)pid << 36) ^ ((uint64_t)view << 60) ^ ((uint64_t)rt << 32) ^ name) &
      mask;
  for (uint32_t id; (id = t->ent_ix[pos]) != NONE; pos = (pos + 1) & mask) {
    const struct entry *e = &t->ents[id];
    if (e->pid == pid && e->rt == rt && e->name == name && e->view == view) return id;
  }
  if (t->nents >= MAX_ENTRIES) return NONE;
  uint32_t id = t->nents++;
  memset(&t->ents[id], 0, sizeof(t->ents[id]));
  t->ents[id].pid = pid;
  t->ents[id].rt = (uint8_t)rt;
  t->ents[id].view = (uint8_t)view;
  t->ents[id].name = name;
  t->ent_ix[pos] = id;
  return id;
}

struct pp_top *pp_top_new(int requested_hz) {
  struct pp_top *t = calloc(1, sizeof(*t));
  if (!t) return NULL;
  t->hz = requested_hz;
  t->arena = malloc(MAX_NAME_BYTES);
  t->name_off = malloc(MAX_NAMES * sizeof(uint32_t));
  t->name_len = malloc(MAX_NAMES * sizeof(uint32_t));
  t->name_ix = malloc(2 * MAX_NAMES * sizeof(uint32_t));
  t->ents = malloc(MAX_ENTRIES * sizeof(*t->ents));
  t->ent_ix = malloc(2 * MAX_ENTRIES * sizeof(uint32_t));
  if (!t->arena || !t->name_off || !t->name_len || !t->name_ix || !t->ents || !t->ent_ix) {
    pp_top_free(t);
    return NULL;
  }
  memset(t->name_ix, 0xff, 2 * MAX_NAMES * sizeof(uint32_t));
  memset(t->ent_ix, 0xff, 2 * MAX_ENTRIES * sizeof(uint32_t));
  static const char over[] = "[more functions than top keeps]";
  t->overflow_name = intern(t, over, sizeof(over) - 1);
  t->proc_filter = t->rt_filter = -1;
  return t;
}

void pp_top_free(struct pp_top *t) {
  if (!t) return;
  free(t->arena);
  free(t->name_off);
  free(t->name_len);
  free(t->name_ix);
  free(t->ents);
  free(t->ent_ix);
  free(t->fmap);
  free(t);
}

/* A text's entry in a view; what does not fit goes to the overflow row. */
static uint32_t text_entry(struct pp_top *t, uint32_t pid, unsigned rt, const char *text, int n,
                           enum view view) {
  size_t len = n < 0 ? 0 : (size_t)n < NAME_CAP ? (size_t)n : NAME_CAP - 1;
  uint32_t name = intern(t, text, len);
  if (name == NONE) name = t->overflow_name, rt = RT_OTHER;
  return entry_of(t, pid, rt, name, view);
}

/* The functions view: "name (file)", or "name": a function, whatever line
 * of it ran. The lines view: "name (file:line)" where the frame has a
 * line, the function otherwise. */
static void frame_entries(struct pp_top *t, const struct pp_profile *p, uint32_t pid, uint32_t fid,
                          struct fslot *slot) {
  const struct pp_frame_rec *f = pp_profile_frame(p, fid);
  slot->entry = slot->line_entry = NONE;
  if (!f) return;
  char text[NAME_CAP];
  unsigned rt = runtime_of(f->kind);
  bool has_file =
      f->file != PP_NO_STR && pp_profile_str_len(p, f->file) && rt != RT_NATIVE && rt != RT_KERNEL;
  const char *name = pp_profile_str(p, f->name);
  int n = has_file ? snprintf(text, sizeof(text), "%s (%s)", name, pp_profile_str(p, f->file))
                   : snprintf(text, sizeof(text), "%s", name);
  slot->entry = text_entry(t, pid, rt, text, n, VIEW_FUNCTIONS);
  if (has_file && f->line)
    n = snprintf(text, sizeof(text), "%s (%s:%u)", name, pp_profile_str(p, f->file), f->line);
  slot->line_entry = text_entry(t, pid, rt, text, n, VIEW_LINES);
}

/* The threads view: a stack's thread by its name (the process's name when
 * the plugin gave none) and process, under the runtime of its innermost
 * frame that is not native or kernel code. */
static uint32_t thread_entry(struct pp_top *t, const struct pp_profile *p,
                             const struct pp_stack_rec *s, const uint32_t *fr) {
  uint32_t comm = s->comm;
  if (comm == PP_NO_STR) {
    const struct pp_pid_rec *r = pp_profile_pid(p, s->pid);
    comm = r ? r->comm : PP_NO_STR;
  }
  unsigned rt = RT_NATIVE;
  for (uint32_t k = 0; k < s->nframes; k++) {
    const struct pp_frame_rec *f = pp_profile_frame(p, fr[k]);
    unsigned r = f ? runtime_of(f->kind) : RT_NATIVE;
    if (r != RT_NATIVE && r != RT_KERNEL) {
      rt = r;
      break;
    }
  }
  char text[NAME_CAP];
  int n = snprintf(text, sizeof(text), "%s (pid %u)",
                   comm != PP_NO_STR ? pp_profile_str(p, comm) : "?", s->pid);
  return text_entry(t, s->pid, rt, text, n, VIEW_THREADS);
}

static void count(struct entry *e, uint64_t n, bool leaf, uint64_t stamp) {
  if (leaf) e->tick_self += n, e->cum_self += n;
  if (e->stamp != stamp) {
    e->stamp = stamp;
    e->tick_total += n;
    e->cum_total += n;
  }
}

static struct proc *proc_of(struct pp_top *t, const struct pp_profile *p, uint32_t pid) {
  for (uint32_t i = 0; i < t->nprocs; i++)
    if (t->procs[i].pid == pid) return &t->procs[i];
  if (t->nprocs >= MAX_PROCS) return NULL;
  struct proc *pr = &t->procs[t->nprocs++];
  memset(pr, 0, sizeof(*pr));
  pr->pid = pid;
  const struct pp_pid_rec *r = pp_profile_pid(p, pid);
  snprintf(pr->comm, sizeof(pr->comm), "%s",
           r && r->comm != PP_NO_STR ? pp_profile_str(p, r->comm) : "?");
  return pr;
}

void pp_top_add_tick(struct pp_top *t, const struct pp_profile *p, double seconds,
                     uint64_t missed) {
  if (t->paused) return;
  size_t nfr = pp_profile_frame_count(p);
  if (nfr > t->fmap_cap) {
    struct fslot *m = realloc(t->fmap, nfr * sizeof(*m));
    if (!m) return;
    t->fmap = m;
    t->fmap_cap = nfr;
  }
  for (uint32_t i = 0; i < t->nents; i++)
    t->ents[i].tick_self = t->ents[i].tick_total = 0;
  for (uint32_t i = 0; i < t->nprocs; i++)
    t->procs[i].tick = 0;
  t->seconds = seconds;
  t->missed = missed;
  t->cum_missed += missed;
  t->ticks++;
  t->tick_time = time(NULL);
  /* the map is valid for one tick and one pid: frame ids are the tick's
   * profile's, entries are per pid */
  if (nfr) memset(t->fmap, 0, nfr * sizeof(*t->fmap));
  for (size_t i = 0; i < pp_profile_stack_count(p); i++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, i);
    if (!s->count || !s->nframes) continue;
    struct proc *pr = proc_of(t, p, s->pid);
    if (pr) pr->tick += s->count, pr->cum += s->count;
    const uint32_t *fr = pp_profile_stack_frames(p, s);
    if (!fr) continue;
    uint64_t stamp = ++t->stack_no;
    uint32_t th = thread_entry(t, p, s, fr);
    if (th != NONE) count(&t->ents[th], s->count, true, stamp);
    bool leaf = true;
    for (uint32_t k = s->nframes; k > 0; k--) {
      uint32_t fid = fr[k - 1];
      if (fid >= nfr) continue;
      struct fslot *slot = &t->fmap[fid];
      if (slot->tick != t->ticks || slot->pid != s->pid) {
        frame_entries(t, p, s->pid, fid, slot);
        slot->pid = s->pid;
        slot->tick = t->ticks;
      }
      if (slot->entry != NONE) count(&t->ents[slot->entry], s->count, leaf, stamp);
      if (slot->line_entry != NONE) count(&t->ents[slot->line_entry], s->count, leaf, stamp);
      leaf = false;
    }
  }
}

bool pp_top_key(struct pp_top *t, int key, bool *quit) {
  switch (key) {
    case 'q':
    case 'Q':
    case 3: /* Ctrl-C when the terminal does not turn it into SIGINT */
      *quit = true;
      return false;
    case ' ':
      t->paused = !t->paused;
      return true;
    case 's':
      t->sort = (t->sort + 1) % SORT_COUNT;
      return true;
    case 'v':
      t->view = (t->view + 1) % VIEW_COUNT;
      return true;
    case 'p':
      t->proc_filter = t->proc_filter + 1 < (int)t->nprocs ? t->proc_filter + 1 : -1;
      return true;
    case 'r':
      t->rt_filter = t->rt_filter + 1 < RT_COUNT ? t->rt_filter + 1 : -1;
      return true;
    case 'c':
      for (uint32_t i = 0; i < t->nents; i++)
        t->ents[i].cum_self = t->ents[i].cum_total = 0;
      for (uint32_t i = 0; i < t->nprocs; i++)
        t->procs[i].cum = 0;
      t->cum_missed = 0;
      return true;
    default:
      return false;
  }
}

/* --- rendering --------------------------------------------------------- */

struct row {
  uint32_t name;
  uint8_t rt;
  uint64_t tick_self, tick_total, cum_self, cum_total;
};

static __thread const struct pp_top *sort_top;
static __thread enum sort_key sort_by;

static int by_key(const void *a, const void *b) {
  const struct row *x = a, *y = b;
  if (x->rt != y->rt) return x->rt < y->rt ? -1 : 1;
  return x->name < y->name ? -1 : x->name > y->name;
}

static int by_sort(const void *a, const void *b) {
  const struct row *x = a, *y = b;
  uint64_t u = 0, v = 0;
  switch (sort_by) {
    case SORT_SELF:
      u = x->tick_self, v = y->tick_self;
      break;
    case SORT_TOTAL:
      u = x->tick_total, v = y->tick_total;
      break;
    case SORT_SELF_TIME:
      u = x->cum_self, v = y->cum_self;
      break;
    case SORT_TOTAL_TIME:
      u = x->cum_total, v = y->cum_total;
      break;
    default: {
      const struct pp_top *t = sort_top;
      uint32_t lx = t->name_len[x->name], ly = t->name_len[y->name];
      int c = memcmp(t->arena + t->name_off[x->name], t->arena + t->name_off[y->name],
                     lx < ly ? lx : ly);
      if (c) return c;
      return lx < ly ? -1 : lx > ly;
    }
  }
  if (u != v) return u > v ? -1 : 1;
  return by_key(a, b);
}

struct screen {
  char *buf;
  size_t cap, len;
  int cols;
};

/* One line, cut to the terminal's width (a code point is one column:
 * good enough for the names profiles hold), control bytes shown as '?'. */
static void line(struct screen *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(struct screen *s, const char *fmt, ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  int col = 0;
  for (const unsigned char *c = (const unsigned char *)text; *c && s->len + 8 < s->cap; c++) {
    bool cont = (*c & 0xc0) == 0x80;
    if (!cont && col >= s->cols) break;
    if (!cont) col++;
    s->buf[s->len++] = *c < 0x20 || *c == 0x7f ? '?' : (char)*c;
  }
  /* a multi-byte sequence cut by the buffer is dropped, not half-written */
  while (s->len && (s->buf[s->len - 1] & 0xc0) == 0x80)
    s->len--;
  if (s->len && ((unsigned char)s->buf[s->len - 1] & 0xc0) == 0xc0) s->len--;
  const char *eol = "\x1b[K\r\n";
  size_t n = strlen(eol);
  if (s->len + n < s->cap) memcpy(s->buf + s->len, eol, n), s->len += n;
}

static double pct(uint64_t v, uint64_t total) {
  return total ? 100.0 * (double)v / (double)total : 0.0;
}

size_t pp_top_render(const struct pp_top *t, char *buf, size_t cap, int rows, int cols) {
  struct screen s = {.buf = buf, .cap = cap, .len = 0, .cols = cols};
  if (cap < 16) return 0;
  memcpy(buf, "\x1b[H", 3);
  s.len = 3;
  if (rows < PP_TOP_MIN_ROWS || cols < PP_TOP_MIN_COLS) {
    line(&s, "terminal too small (%dx%d): top needs %dx%d", cols, rows, PP_TOP_MIN_COLS,
         PP_TOP_MIN_ROWS);
    goto done;
  }
  uint32_t want_pid = t->proc_filter >= 0 && (uint32_t)t->proc_filter < t->nprocs
                          ? t->procs[t->proc_filter].pid
                          : NONE;
  uint64_t tick_total = 0, cum_total = 0;
  for (uint32_t i = 0; i < t->nprocs; i++)
    if (want_pid == NONE || t->procs[i].pid == want_pid)
      tick_total += t->procs[i].tick, cum_total += t->procs[i].cum;
  /* rows: the entries that pass the filters, merged across processes */
  struct row *r = malloc(((size_t)t->nents + 1) * sizeof(*r));
  size_t nr = 0;
  for (uint32_t i = 0; r && i < t->nents; i++) {
    const struct entry *e = &t->ents[i];
    if (e->view != t->view) continue;
    if (want_pid != NONE && e->pid != want_pid) continue;
    if (t->rt_filter >= 0 && e->rt != t->rt_filter) continue;
    if (!e->tick_total && !e->cum_total) continue;
    r[nr++] = (struct row){e->name, e->rt, e->tick_self, e->tick_total, e->cum_self, e->cum_total};
  }
  if (r) qsort(r, nr, sizeof(*r), by_key);
  size_t m = 0;
  for (size_t i = 0; i < nr; i++) {
    if (m && r[m - 1].name == r[i].name && r[m - 1].rt == r[i].rt) {
      r[m - 1].tick_self += r[i].tick_self;
      r[m - 1].tick_total += r[i].tick_total;
      r[m - 1].cum_self += r[i].cum_self;
      r[m - 1].cum_total += r[i].cum_total;
    } else {
      r[m++] = r[i];
    }
  }
  sort_top = t;
  sort_by = t->sort;
  if (r) qsort(r, m, sizeof(*r), by_sort);

  char when[16] = "--:--:--";
  if (t->tick_time) {
    struct tm tm;
    localtime_r(&t->tick_time, &tm);
    strftime(when, sizeof(when), "%H:%M:%S", &tm);
  }
  char procs[256] = "";
  size_t pl = 0;
  for (uint32_t i = 0; i < t->nprocs && pl + 40 < sizeof(procs); i++)
    pl += (size_t)snprintf(procs + pl, sizeof(procs) - pl, "%s%u %s", i ? ", " : "",
                           t->procs[i].pid, t->procs[i].comm);
  line(&s, "polyprof top  %s  %s%s", when, t->paused ? "[PAUSED]  " : "",
       t->nprocs ? procs : "waiting for samples...");
  double secs = t->seconds > 0 ? t->seconds : 1;
  uint64_t all_tick = 0;
  for (uint32_t i = 0; i < t->nprocs; i++)
    all_tick += t->procs[i].tick;
  line(&s, "rate: %.0f samples/s achieved (requested %d Hz per thread), missed %llu (%llu in all)",
       (double)all_tick / secs, t->hz, (unsigned long long)t->missed,
       (unsigned long long)t->cum_missed);
  char pf[64];
  if (want_pid != NONE)
    snprintf(pf, sizeof(pf), "%u %s", want_pid, t->procs[t->proc_filter].comm);
  else
    snprintf(pf, sizeof(pf), "all");
  line(&s, "view: %s   process: %s   runtime: %s   sort: %s   samples: %llu last tick, %llu in all",
       view_names[t->view], pf, t->rt_filter >= 0 ? runtime_names[t->rt_filter] : "all",
       sort_names[t->sort], (unsigned long long)tick_total, (unsigned long long)cum_total);
  line(&s, "%s", "");
  line(&s, "%7s %7s %9s %9s  %-7s %s", "%Self", "%Total", "SelfTime", "TotalTime", "Runtime",
       view_columns[t->view]);
  int body = rows - 7; /* header 5, blank + keys 2 */
  double hz = t->hz > 0 ? t->hz : 1;
  for (size_t i = 0; i < m && (int)i < body; i++) {
    const struct row *w = &r[i];
    line(&s, "%6.1f%% %6.1f%% %8.2fs %8.2fs  %-7s %.*s", pct(w->tick_self, tick_total),
         pct(w->tick_total, tick_total), (double)w->cum_self / hz, (double)w->cum_total / hz,
         runtime_names[w->rt], (int)t->name_len[w->name], t->arena + t->name_off[w->name]);
  }
  for (int i = (int)m; i < body; i++)
    line(&s, "%s", "");
  line(&s, "%s", "");
  free(r);
  /* the last line has no line break, so the screen never scrolls */
  line(&s, "keys: q quit  space pause  v view  s sort  p process  r runtime  c clear totals");
  if (s.len >= 5 && !memcmp(s.buf + s.len - 5, "\x1b[K\r\n", 5)) s.len -= 2;
done:
  if (s.len + 4 < cap) memcpy(s.buf + s.len, "\x1b[J", 3), s.len += 3;
  s.buf[s.len] = '\0';
  return s.len;
}
