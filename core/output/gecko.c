/* SPDX-License-Identifier: Apache-2.0 */
/* Firefox Profiler (processed format) writer (see gecko.h). */
#include "output/gecko.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "support/json_string.h"

/* The processed-format version the tables below follow; the profiler
 * upgrades older versions on load, so this only has to be one it knows. */
#define GECKO_VERSION 32
#define PROCESSED_VERSION 57

#define NONE UINT32_MAX

enum category {
  CAT_OTHER,
  CAT_NATIVE,
  CAT_KERNEL,
  CAT_PYTHON,
  CAT_JAVA,
  CAT_RUBY,
  CAT_PHP,
  CAT_DOTNET,
  CAT_JS,
  CAT_GC,
  CAT_COUNT
};

/* Colours are names the profiler knows. */
static const struct {
  const char *name, *color, *subcategories; /* the last as JSON */
} categories[CAT_COUNT] = {
    [CAT_OTHER] = {"Other", "grey", "[\"Other\"]"},
    [CAT_NATIVE] = {"Native", "blue", "[\"Other\"]"},
    [CAT_KERNEL] = {"Kernel", "orange", "[\"Other\"]"},
    [CAT_PYTHON] = {"Python", "yellow", "[\"Other\",\"Error\"]"},
    [CAT_JAVA] = {"Java", "green", "[\"Other\",\"JIT\",\"Inlined\",\"Interpreted\",\"C1\"]"},
    [CAT_RUBY] = {"Ruby", "red", "[\"Other\"]"},
    [CAT_PHP] = {"PHP", "purple", "[\"Other\"]"},
    [CAT_DOTNET] = {"DotNet", "lightblue", "[\"Other\"]"},
    [CAT_JS] = {"JavaScript", "magenta", "[\"Other\"]"},
    [CAT_GC] = {"GC", "brown", "[\"Other\"]"},
};

static unsigned kind_category(unsigned kind, unsigned *sub) {
  *sub = 0;
  switch (kind) {
    case PP_FRAME_NATIVE:
    case PP_FRAME_PYTHON_NATIVE:
      return CAT_NATIVE;
    case PP_FRAME_KERNEL:
      return CAT_KERNEL;
    case PP_FRAME_PYTHON_ERROR:
      *sub = 1;
      return CAT_PYTHON;
    case PP_FRAME_PYTHON:
      return CAT_PYTHON;
    case PP_FRAME_JAVA_JIT:
      *sub = 1;
      return CAT_JAVA;
    case PP_FRAME_JAVA_INLINED:
      *sub = 2;
      return CAT_JAVA;
    case PP_FRAME_JAVA_INTERPRETED:
      *sub = 3;
      return CAT_JAVA;
    case PP_FRAME_JAVA_C1:
      *sub = 4;
      return CAT_JAVA;
    case PP_FRAME_RUBY:
      return CAT_RUBY;
    case PP_FRAME_PHP:
      return CAT_PHP;
    case PP_FRAME_DOTNET:
      return CAT_DOTNET;
    case PP_FRAME_JS:
    case PP_FRAME_JS_INTERPRETED:
    case PP_FRAME_JS_BASELINE:
    case PP_FRAME_JS_OPTIMIZED:
    case PP_FRAME_JS_INLINED:
    case PP_FRAME_JS_BUILTIN:
      return CAT_JS;
    default:
      return CAT_OTHER;
  }
}

/* Frame names that are a runtime's garbage collector at work: CPython's
 * collector and its pseudo-frame, HotSpot's collector threads and VM
 * operations, the .NET GC, V8's pseudo-frame and heap, Ruby's and PHP's
 * collectors. A name merely mentioning "gc" is not enough. */
static const char *const gc_names[] = {
    "<GC>",
    "(garbage collect",
    "gc_collect_main",
    "VM_GC_Operation",
    "GCTaskThread",
    "G1CollectedHeap::",
    "ConcurrentGCThread",
    "gc_heap::garbage_collect",
    "GCHeap::GarbageCollect",
    "Heap::CollectGarbage",
    "garbage_collect_with_gvl",
    "gc_start_internal",
    "zend_gc_collect_cycles",
    "gc_possible_root",
};

static bool is_gc_frame(const struct pp_profile *p, uint32_t fid) {
  const struct pp_frame_rec *f = pp_profile_frame(p, fid);
  if (!f) return false;
  const char *name = pp_profile_str(p, f->name);
  size_t n = pp_profile_str_len(p, f->name);
  for (size_t i = 0; i < sizeof(gc_names) / sizeof(gc_names[0]); i++)
    if (memmem(name, n, gc_names[i], strlen(gc_names[i]))) return true;
  return false;
}

struct sample_ref {
  uint32_t pid, comm; /* comm: the stack's own, else the pid's */
  uint32_t gc;        /* 1 when any frame is the collector: sorts last */
  uint32_t idx;       /* stack index */
};

static int ref_cmp(const void *a, const void *b) {
  const struct sample_ref *x = a, *y = b;
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  if (x->comm != y->comm) return x->comm < y->comm ? -1 : 1;
  if (x->gc != y->gc) return x->gc < y->gc ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* An open-addressing table of 64-bit keys to dense ids, reset between
 * threads by bumping a stamp rather than clearing it. */
struct idmap {
  uint64_t *key;
  uint32_t *val, *stamp, mask, cur;
};

static int idmap_init(struct idmap *m, size_t max_entries) {
  size_t cap = 64;
  while (cap < max_entries * 2)
    cap *= 2;
  m->key = malloc(cap * sizeof(*m->key));
  m->val = malloc(cap * sizeof(*m->val));
  m->stamp = calloc(cap, sizeof(*m->stamp));
  m->mask = (uint32_t)(cap - 1);
  m->cur = 1;
  return m->key && m->val && m->stamp ? 0 : -ENOMEM;
}

static void idmap_free(struct idmap *m) {
  free(m->key);
  free(m->val);
  free(m->stamp);
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

/* The id of key, or `fresh` (recorded) if it is new; *added tells which. */
static uint32_t idmap_get(struct idmap *m, uint64_t key, uint32_t fresh, bool *added) {
  uint32_t pos = (uint32_t)mix(key) & m->mask;
  while (m->stamp[pos] == m->cur) {
    if (m->key[pos] == key) {
      *added = false;
      return m->val[pos];
    }
    pos = (pos + 1) & m->mask;
  }
  m->stamp[pos] = m->cur;
  m->key[pos] = key;
  m->val[pos] = fresh;
  *added = true;
  return fresh;
}

/* One thread's tables, sized for the largest thread and reused. */
struct thread_tables {
  struct idmap funcs, stacks;
  uint32_t *fmap, *fmap_stamp; /* profile frame id -> thread frame */
  uint32_t *frame_func, *frame_pfid, nframes;
  uint32_t *func_pfid, nfuncs; /* a profile frame carrying the func's name */
  uint32_t *stack_frame, *stack_prefix, nstacks;
  uint32_t *sample_stack, nsamples;
  uint64_t *sample_weight;
};

/* A decimal number: the tables are millions of them, and fprintf's format
 * parsing was most of the writer's time. */
static void put_u(FILE *f, uint64_t v) {
  char buf[24], *e = buf + sizeof(buf), *d = e;
  do {
    *--d = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  fwrite(d, 1, (size_t)(e - d), f);
}

/* milliseconds with three decimals */
static void put_ms(FILE *f, double ms) {
  uint64_t us = ms > 0 ? (uint64_t)(ms * 1000.0 + 0.5) : 0;
  put_u(f, us / 1000);
  char frac[5] = {'.', (char)('0' + us / 100 % 10), (char)('0' + us / 10 % 10),
                  (char)('0' + us % 10), 0};
  fputs(frac, f);
}

static void put_u32_column(FILE *f, const char *name, const uint32_t *v, uint32_t n,
                           bool none_null) {
  fprintf(f, "\"%s\":[", name);
  for (uint32_t i = 0; i < n; i++) {
    if (i) putc(',', f);
    if (none_null && v[i] == NONE)
      fputs("null", f);
    else
      put_u(f, v[i]);
  }
  fputs("],", f);
}

static void put_repeat(FILE *f, const char *name, const char *value, uint32_t n) {
  fprintf(f, "\"%s\":[", name);
  for (uint32_t i = 0; i < n; i++) {
    if (i) putc(',', f);
    fputs(value, f);
  }
  fputs("],", f);
}

static void put_cstr(FILE *f, const char *s) {
  pp_json_put_string(f, s, strlen(s));
}

static uint32_t thread_frame(struct thread_tables *t, const struct pp_profile *p, uint32_t fid,
                             uint32_t stamp) {
  if (t->fmap_stamp[fid] == stamp) return t->fmap[fid];
  const struct pp_frame_rec *fr = pp_profile_frame(p, fid);
  /* a function is (name, file, kind); its frames differ by line */
  uint64_t key = ((uint64_t)fr->name << 32) ^ ((uint64_t)fr->file * 0x9e3779b97f4a7c15ull) ^
                 ((uint64_t)fr->kind << 59);
  bool added;
  uint32_t func = idmap_get(&t->funcs, key, t->nfuncs, &added);
  if (!added) {
    /* a 64-bit mix can collide: confirm, and keep the frame's own function
     * on a mismatch */
    const struct pp_frame_rec *g = pp_profile_frame(p, t->func_pfid[func]);
    if (g->name != fr->name || g->file != fr->file || g->kind != fr->kind) added = true;
  }
  if (added) {
    func = t->nfuncs++;
    t->func_pfid[func] = fid;
  }
  uint32_t id = t->nframes++;
  t->frame_func[id] = func;
  t->frame_pfid[id] = fid;
  t->fmap_stamp[fid] = stamp;
  t->fmap[fid] = id;
  return id;
}

/* Stack ids are prefix-then-frame pairs, so (prefix, frame) is an exact key. */
static uint32_t thread_stack(struct thread_tables *t, uint32_t prefix, uint32_t frame) {
  bool added;
  uint64_t key = ((uint64_t)(prefix + 1) << 32) | frame;
  uint32_t id = idmap_get(&t->stacks, key, t->nstacks, &added);
  if (added) {
    t->stack_frame[id] = frame;
    t->stack_prefix[id] = prefix;
    t->nstacks++;
  }
  return id;
}

static void write_thread(FILE *f, const struct pp_profile *p, struct thread_tables *t,
                         const struct sample_ref *refs, size_t a, size_t b, uint32_t thread_no,
                         double interval_ms, uint32_t gc_str, uint8_t *gc) {
  t->nframes = t->nfuncs = t->nstacks = t->nsamples = 0;
  t->funcs.cur++;
  t->stacks.cur++;
  uint32_t stamp = thread_no + 1;
  double time = 0, gc_start = -1;
  uint64_t gc_samples = 0;
  fputs("{\"samples\":{\"stack\":[", f);
  for (size_t i = a; i < b; i++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, refs[i].idx);
    const uint32_t *fr = pp_profile_stack_frames(p, s);
    uint32_t prefix = NONE;
    for (uint32_t k = 0; k < s->nframes; k++) {
      if (!pp_profile_frame(p, fr[k])) continue;
      prefix = thread_stack(t, prefix, thread_frame(t, p, fr[k], stamp));
    }
    if (prefix == NONE) continue; /* no frame at all: nothing to show */
    if (refs[i].gc && gc_start < 0) gc_start = time;
    if (refs[i].gc) gc_samples += s->count;
    if (t->nsamples) putc(',', f);
    put_u(f, prefix);
    t->sample_weight[t->nsamples++] = s->count;
    time += (double)s->count * interval_ms;
  }
  fputs("],\"time\":[", f);
  double at = 0;
  for (uint32_t i = 0; i < t->nsamples; i++) {
    if (i) putc(',', f);
    put_ms(f, at);
    at += (double)t->sample_weight[i] * interval_ms;
  }
  fputs("],\"weight\":[", f);
  for (uint32_t i = 0; i < t->nsamples; i++) {
    if (i) putc(',', f);
    put_u(f, t->sample_weight[i]);
  }
  fprintf(f, "],\"weightType\":\"samples\",\"length\":%u},", t->nsamples);

  /* markers: the GC stacks sorted last, so one interval spans them */
  fputs("\"markers\":{", f);
  if (gc_start >= 0) {
    fprintf(f,
            "\"data\":[{\"type\":\"GC\",\"samples\":%llu}],\"name\":[%u],\"startTime\":[%.3f],"
            "\"endTime\":[%.3f],\"phase\":[1],\"category\":[%d],\"length\":1},",
            (unsigned long long)gc_samples, gc_str, gc_start, time, CAT_GC);
  } else {
    fputs(
        "\"data\":[],\"name\":[],\"startTime\":[],\"endTime\":[],\"phase\":[],\"category\":[],"
        "\"length\":0},",
        f);
  }

  /* a frame's category is its runtime's, or GC for the collector */
  uint32_t *cat = malloc((t->nframes ? t->nframes : 1) * 2 * sizeof(*cat));
  uint32_t *sub = cat ? cat + t->nframes : NULL;
  for (uint32_t i = 0; cat && i < t->nframes; i++) {
    unsigned s;
    const struct pp_frame_rec *fr = pp_profile_frame(p, t->frame_pfid[i]);
    cat[i] = kind_category(fr->kind, &s);
    sub[i] = s;
    uint32_t fid = t->frame_pfid[i];
    if (!gc[fid]) gc[fid] = is_gc_frame(p, fid) ? 2 : 1;
    if (gc[fid] == 2) cat[i] = CAT_GC, sub[i] = 0;
  }

  fputs("\"stackTable\":{", f);
  put_u32_column(f, "frame", t->stack_frame, t->nstacks, false);
  put_u32_column(f, "prefix", t->stack_prefix, t->nstacks, true);
  fputs("\"category\":[", f);
  for (uint32_t i = 0; i < t->nstacks; i++) {
    if (i) putc(',', f);
    put_u(f, cat ? cat[t->stack_frame[i]] : 0);
  }
  fputs("],\"subcategory\":[", f);
  for (uint32_t i = 0; i < t->nstacks; i++) {
    if (i) putc(',', f);
    put_u(f, sub ? sub[t->stack_frame[i]] : 0);
  }
  fprintf(f, "],\"length\":%u},", t->nstacks);

  fputs("\"frameTable\":{", f);
  put_repeat(f, "address", "-1", t->nframes);
  put_repeat(f, "inlineDepth", "0", t->nframes);
  fputs("\"category\":[", f);
  for (uint32_t i = 0; i < t->nframes; i++) {
    if (i) putc(',', f);
    put_u(f, cat ? cat[i] : 0);
  }
  fputs("],\"subcategory\":[", f);
  for (uint32_t i = 0; i < t->nframes; i++) {
    if (i) putc(',', f);
    put_u(f, sub ? sub[i] : 0);
  }
  fputs("],", f);
  put_u32_column(f, "func", t->frame_func, t->nframes, false);
  put_repeat(f, "nativeSymbol", "null", t->nframes);
  put_repeat(f, "innerWindowID", "null", t->nframes);
  put_repeat(f, "implementation", "null", t->nframes);
  fputs("\"line\":[", f);
  for (uint32_t i = 0; i < t->nframes; i++) {
    const struct pp_frame_rec *fr = pp_profile_frame(p, t->frame_pfid[i]);
    if (i) putc(',', f);
    if (fr->line)
      put_u(f, fr->line);
    else
      fputs("null", f);
  }
  fputs("],", f);
  put_repeat(f, "column", "null", t->nframes);
  put_repeat(f, "optimizations", "null", t->nframes);
  fprintf(f, "\"length\":%u},", t->nframes);
  free(cat);

  fputs("\"funcTable\":{\"name\":[", f);
  for (uint32_t i = 0; i < t->nfuncs; i++) {
    if (i) putc(',', f);
    put_u(f, pp_profile_frame(p, t->func_pfid[i])->name);
  }
  fputs("],\"isJS\":[", f);
  for (uint32_t i = 0; i < t->nfuncs; i++) {
    unsigned s, c = kind_category(pp_profile_frame(p, t->func_pfid[i])->kind, &s);
    /* "JS" in the profiler means the program's own language: its JS-only
     * call tree then shows the interpreted frames of any runtime */
    bool managed = c != CAT_NATIVE && c != CAT_KERNEL && c != CAT_OTHER;
    fputs(i ? (managed ? ",true" : ",false") : (managed ? "true" : "false"), f);
  }
  fputs("],", f);
  put_repeat(f, "relevantForJS", "false", t->nfuncs);
  put_repeat(f, "resource", "-1", t->nfuncs);
  fputs("\"fileName\":[", f);
  for (uint32_t i = 0; i < t->nfuncs; i++) {
    const struct pp_frame_rec *fr = pp_profile_frame(p, t->func_pfid[i]);
    if (i) putc(',', f);
    if (fr->file != PP_NO_STR && pp_profile_str_len(p, fr->file))
      put_u(f, fr->file);
    else
      fputs("null", f);
  }
  fputs("],", f);
  put_repeat(f, "lineNumber", "null", t->nfuncs);
  put_repeat(f, "columnNumber", "null", t->nfuncs);
  fprintf(f, "\"length\":%u},", t->nfuncs);
  fputs(
      "\"resourceTable\":{\"lib\":[],\"name\":[],\"host\":[],\"type\":[],\"length\":0},"
      "\"nativeSymbols\":{\"libIndex\":[],\"address\":[],\"name\":[],\"functionSize\":[],"
      "\"length\":0},",
      f);
}

int pp_gecko_write(FILE *f, const struct pp_profile *p, const struct pp_gecko_info *info) {
  size_t nst = pp_profile_stack_count(p), nfr = pp_profile_frame_count(p);
  size_t nstr = pp_profile_str_count(p);
  if (nst >= NONE || nfr >= NONE || nstr + 1 >= NONE) return -EOVERFLOW;
  struct sample_ref *refs = malloc((nst ? nst : 1) * sizeof(*refs));
  uint8_t *gc = calloc(nfr ? nfr : 1, 1); /* per profile frame: 1 no, 2 yes */
  struct thread_tables t;
  memset(&t, 0, sizeof(t));
  int rc = refs && gc ? 0 : -ENOMEM;
  size_t nref = 0;
  size_t max_frames = 1, max_samples = 1;
  for (size_t i = 0; !rc && i < nst; i++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, i);
    if (!s->count) continue;
    const struct pp_pid_rec *pr = pp_profile_pid(p, s->pid);
    struct sample_ref r = {.pid = s->pid,
                           .comm = s->comm != PP_NO_STR ? s->comm
                                   : pr                 ? pr->comm
                                                        : PP_NO_STR,
                           .idx = (uint32_t)i};
    const uint32_t *fr = pp_profile_stack_frames(p, s);
    for (uint32_t k = 0; k < s->nframes && !r.gc; k++) {
      if (fr[k] >= nfr) continue;
      if (!gc[fr[k]]) gc[fr[k]] = is_gc_frame(p, fr[k]) ? 2 : 1;
      r.gc = gc[fr[k]] == 2;
    }
    refs[nref++] = r;
  }
  if (!rc) qsort(refs, nref, sizeof(*refs), ref_cmp);
  /* the largest thread bounds every per-thread table */
  for (size_t a = 0; !rc && a < nref;) {
    size_t b = a, frames = 0;
    while (b < nref && refs[b].pid == refs[a].pid && refs[b].comm == refs[a].comm)
      frames += pp_profile_stack(p, refs[b++].idx)->nframes;
    if (frames > max_frames) max_frames = frames;
    if (b - a > max_samples) max_samples = b - a;
    a = b;
  }
  if (!rc) {
    size_t nf = nfr ? nfr : 1;
    t.fmap = malloc(nf * sizeof(uint32_t));
    t.fmap_stamp = calloc(nf, sizeof(uint32_t));
    t.frame_func = malloc(nf * sizeof(uint32_t));
    t.frame_pfid = malloc(nf * sizeof(uint32_t));
    t.func_pfid = malloc(nf * sizeof(uint32_t));
    t.stack_frame = malloc(max_frames * sizeof(uint32_t));
    t.stack_prefix = malloc(max_frames * sizeof(uint32_t));
    t.sample_weight = malloc(max_samples * sizeof(uint64_t));
    if (!t.fmap || !t.fmap_stamp || !t.frame_func || !t.frame_pfid || !t.func_pfid ||
        !t.stack_frame || !t.stack_prefix || !t.sample_weight || idmap_init(&t.funcs, nf) ||
        idmap_init(&t.stacks, max_frames))
      rc = -ENOMEM;
  }
  if (!rc) {
    double interval_ms = info && info->frequency > 0 ? 1000.0 / info->frequency : 1.0;
    double start_ms = info && info->start > 0 ? (double)info->start * 1000.0 : 0.0;
    fprintf(f, "{\"meta\":{\"interval\":%.6g,\"startTime\":%.0f,\"processType\":0,\"product\":",
            interval_ms, start_ms);
    put_cstr(f, info && info->product && info->product[0] ? info->product : "polyprof");
    fprintf(f,
            ",\"importedFrom\":\"polyprof " POLYPROF_VERSION
            "\",\"stackwalk\":0,\"debug\":false,\"version\":%d,"
            "\"preprocessedProfileVersion\":%d,\"symbolicated\":true,\"platform\":\"Linux\","
            "\"categories\":[",
            GECKO_VERSION, PROCESSED_VERSION);
    for (int c = 0; c < CAT_COUNT; c++)
      fprintf(f, "%s{\"name\":\"%s\",\"color\":\"%s\",\"subcategories\":%s}", c ? "," : "",
              categories[c].name, categories[c].color, categories[c].subcategories);
    fputs(
        "],\"markerSchema\":[{\"name\":\"GC\",\"display\":[\"marker-chart\",\"marker-table\","
        "\"timeline-overview\"],\"chartLabel\":\"GC\",\"tableLabel\":\"GC: "
        "{marker.data.samples} samples\",\"tooltipLabel\":\"GC: {marker.data.samples} "
        "samples\",\"fields\":[{\"key\":\"samples\",\"label\":\"Samples\",\"format\":"
        "\"integer\"}]}],"
        "\"extensions\":{\"id\":[],\"name\":[],\"baseURL\":[],\"length\":0}},"
        "\"libs\":[],\"pages\":[],\"counters\":[],\"threads\":[",
        f);
    uint32_t thread_no = 0;
    for (size_t a = 0; a < nref; thread_no++) {
      size_t b = a;
      while (b < nref && refs[b].pid == refs[a].pid && refs[b].comm == refs[a].comm)
        b++;
      if (thread_no) putc(',', f);
      write_thread(f, p, &t, refs, a, b, thread_no, interval_ms, (uint32_t)nstr, gc);
      const struct pp_pid_rec *pr = pp_profile_pid(p, refs[a].pid);
      uint32_t pcomm = pr ? pr->comm : PP_NO_STR;
      fputs("\"name\":", f);
      if (refs[a].comm != PP_NO_STR)
        pp_json_put_string(f, pp_profile_str(p, refs[a].comm), pp_profile_str_len(p, refs[a].comm));
      else
        put_cstr(f, "?");
      fputs(",\"processName\":", f);
      if (pcomm != PP_NO_STR)
        pp_json_put_string(f, pp_profile_str(p, pcomm), pp_profile_str_len(p, pcomm));
      else
        put_cstr(f, "?");
      fprintf(f,
              ",\"isMainThread\":%s,\"processType\":\"default\",\"pid\":\"%u\",\"tid\":%u,"
              "\"processStartupTime\":0,\"processShutdownTime\":null,\"registerTime\":0,"
              "\"unregisterTime\":null,\"pausedRanges\":[]}",
              refs[a].comm == pcomm ? "true" : "false", refs[a].pid, thread_no + 1);
      a = b;
    }
    fputs("],\"shared\":{\"stringArray\":[", f);
    for (size_t i = 0; i < nstr; i++) {
      if (i) putc(',', f);
      pp_json_put_string(f, pp_profile_str(p, (uint32_t)i), pp_profile_str_len(p, (uint32_t)i));
    }
    fputs(nstr ? ",\"GC\"" : "\"GC\"", f);
    fputs("],\"sources\":{\"uuid\":[],\"filename\":[],\"length\":0}}}\n", f);
  }
  free(refs);
  free(gc);
  free(t.fmap);
  free(t.fmap_stamp);
  free(t.frame_func);
  free(t.frame_pfid);
  free(t.func_pfid);
  free(t.stack_frame);
  free(t.stack_prefix);
  free(t.sample_weight);
  idmap_free(&t.funcs);
  idmap_free(&t.stacks);
  if (rc) return rc;
  errno = 0;
  if (fflush(f) != 0 || ferror(f)) return -(errno ? errno : EIO);
  return 0;
}
