/* SPDX-License-Identifier: Apache-2.0 */
/* speedscope JSON writer (see speedscope.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "output/speedscope.h"
#include "support/json_string.h"

static void put_cstr(FILE *f, const char *s) {
  pp_json_put_string(f, s, strlen(s));
}

static char *utoa(uint64_t v, char buf[24]) {
  char *e = buf + 23;
  *e = '\0';
  do {
    *--e = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  return e;
}

/* qsort has no context argument: the profile being written, per thread */
static __thread const struct pp_profile *sort_profile;

static int by_pid(const void *a, const void *b) {
  const struct pp_stack_rec *x = pp_profile_stack(sort_profile, *(const size_t *)a);
  const struct pp_stack_rec *y = pp_profile_stack(sort_profile, *(const size_t *)b);
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

int pp_speedscope_write(FILE *f, const struct pp_profile *p, const char *name) {
  size_t nfr = pp_profile_frame_count(p), nst = pp_profile_stack_count(p);
  uint32_t *idx = calloc(nfr ? nfr : 1, sizeof(*idx)); /* frame id -> index + 1 */
  if (!idx) return -ENOMEM;
  fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"name\":", f);
  put_cstr(f, name ? name : "polyprof");
  fputs(",\"exporter\":\"polyprof " POLYPROF_VERSION
        "\",\"activeProfileIndex\":0,"
        "\"shared\":{\"frames\":[",
        f);
  uint32_t nused = 0;
  for (size_t i = 0; i < nst; i++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, i);
    if (!s->count) continue;
    const uint32_t *fr = pp_profile_stack_frames(p, s);
    for (uint32_t k = 0; k < s->nframes; k++) {
      if (fr[k] >= nfr || idx[fr[k]]) continue;
      idx[fr[k]] = ++nused;
      const struct pp_frame_rec *r = pp_profile_frame(p, fr[k]);
      if (nused > 1) putc(',', f);
      fputs("{\"name\":", f);
      pp_json_put_string(f, pp_profile_str(p, r->name), pp_profile_str_len(p, r->name));
      if (r->file != PP_NO_STR && pp_profile_str_len(p, r->file)) {
        fputs(",\"file\":", f);
        pp_json_put_string(f, pp_profile_str(p, r->file), pp_profile_str_len(p, r->file));
        if (r->line) fprintf(f, ",\"line\":%u", r->line);
      }
      putc('}', f);
    }
  }
  fputs("]},\"profiles\":[", f);
  /* one profile per process: stack indices sorted by pid, one pass each */
  size_t *order = malloc((nst ? nst : 1) * sizeof(*order));
  if (!order) {
    free(idx);
    return -ENOMEM;
  }
  size_t no = 0;
  for (size_t i = 0; i < nst; i++)
    if (pp_profile_stack(p, i)->count) order[no++] = i;
  sort_profile = p;
  qsort(order, no, sizeof(*order), by_pid);
  bool first_prof = true;
  for (size_t a = 0; a < no;) {
    uint32_t pid = pp_profile_stack(p, order[a])->pid;
    size_t b = a;
    uint64_t total = 0;
    while (b < no && pp_profile_stack(p, order[b])->pid == pid)
      total += pp_profile_stack(p, order[b++])->count;
    const struct pp_pid_rec *pr = pp_profile_pid(p, pid);
    char pname[320];
    const char *comm = pr && pr->comm != PP_NO_STR ? pp_profile_str(p, pr->comm) : "?";
    snprintf(pname, sizeof(pname), "%.250s (pid %u)", comm, pid);
    if (!first_prof) putc(',', f);
    first_prof = false;
    fputs("{\"type\":\"sampled\",\"name\":", f);
    put_cstr(f, pname);
    fprintf(f, ",\"unit\":\"none\",\"startValue\":0,\"endValue\":%llu,\"samples\":[",
            (unsigned long long)total);
    char num[24];
    for (size_t i = a; i < b; i++) {
      const struct pp_stack_rec *s = pp_profile_stack(p, order[i]);
      const uint32_t *fr = pp_profile_stack_frames(p, s);
      fputs(i == a ? "[" : ",[", f);
      bool fk = true;
      for (uint32_t k = 0; k < s->nframes; k++) {
        if (fr[k] >= nfr) continue;
        if (!fk) putc(',', f);
        fputs(utoa(idx[fr[k]] - 1, num), f);
        fk = false;
      }
      putc(']', f);
    }
    fputs("],\"weights\":[", f);
    for (size_t i = a; i < b; i++) {
      if (i > a) putc(',', f);
      fputs(utoa(pp_profile_stack(p, order[i])->count, num), f);
    }
    fputs("]}", f);
    a = b;
  }
  free(order);
  fputs("]}\n", f);
  free(idx);
  errno = 0;
  if (fflush(f) != 0 || ferror(f)) return -(errno ? errno : EIO);
  return 0;
}
