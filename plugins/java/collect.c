/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Turning the agent's dump file into samples.
 *
 * The file was written inside the target by code running as the target's
 * user: it is parsed as hostile input. Lines are bounded, counts are checked,
 * at most JAVA_MAX_FRAMES frames are kept per stack, and a malformed line is
 * counted and skipped, never trusted.
 */
#include <stdlib.h>
#include <string.h>

#include "java.h"

#define JAVA_MAX_FRAMES 256

static uint32_t kind_of(char c) {
  switch (c) {
    case 'j':
      return PP_FRAME_JAVA_JIT;
    case 'i':
      return PP_FRAME_JAVA_INLINED;
    case '0':
      return PP_FRAME_JAVA_INTERPRETED;
    case '1':
      return PP_FRAME_JAVA_C1;
    case 'n':
      return PP_FRAME_JAVA_JIT; /* a Java native method, as async-profiler shows it */
    case 'e':
      return PP_FRAME_PSEUDO;
    default:
      return UINT32_MAX;
  }
}

static uint64_t info_value(const char *line, const char *key) {
  const char *p = strstr(line, key);
  return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

int java_collect_emit(const struct pp_host *host, struct pp_sink *sink, uint32_t pid,
                      const char *text, size_t len, int thread_names,
                      struct java_collect_stats *st) {
  struct pp_frame frames[JAVA_MAX_FRAMES];
  const char *p = text, *end = text + len;
  char *line = NULL; /* one buffer for every line of this dump */
  size_t line_cap = 0;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    size_t ll = (size_t)(le - p);
    /* S <count> <tid> <thread> <frames>; O <microseconds> <tid> <thread>
     * <frames> (off-CPU); A <bytes> <samples> <class> <frames> */
    int is_alloc = p[0] == 'A', is_off = p[0] == 'O';
    if (ll > 2 && (p[0] == 'S' || p[0] == 'A' || is_off) && p[1] == '\t' && ll < (1u << 20)) {
      if (ll + 1 > line_cap) {
        char *g = realloc(line, ll + 1);
        if (!g) {
          free(line);
          return -1;
        }
        line = g;
        line_cap = ll + 1;
      }
      memcpy(line, p, ll);
      line[ll] = '\0';
      char *f_count = line + 2;
      char *f_tid = strchr(f_count, '\t');
      char *f_name = f_tid ? strchr(f_tid + 1, '\t') : NULL;
      char *f_frames = f_name ? strchr(f_name + 1, '\t') : NULL;
      if (!f_frames) {
        st->bad_lines++;
        p = le + 1;
        continue;
      }
      *f_tid++ = '\0';
      *f_name++ = '\0';
      *f_frames++ = '\0';
      char *cend;
      unsigned long long count = strtoull(f_count, &cend, 10);
      uint32_t n = 0;
      int bad = *cend != '\0' || count == 0;
      /* an allocation stack ends with the allocated class (named: a line
       * without one is malformed) */
      if (is_alloc && !*f_name) bad = 1;
      if (is_alloc && !bad)
        frames[n++] = (struct pp_frame){.name = f_name, .kind = PP_FRAME_PSEUDO};
      for (char *fr = f_frames; fr && *fr && n < JAVA_MAX_FRAMES && !bad;) {
        char *sep = strchr(fr, '\x1f');
        if (sep) *sep = '\0';
        uint32_t kind = kind_of(fr[0]);
        if (kind == UINT32_MAX || !fr[1]) {
          bad = 1;
          break;
        }
        frames[n++] = (struct pp_frame){.name = fr + 1, .kind = kind};
        fr = sep ? sep + 1 : NULL;
      }
      if (bad || n == 0) {
        st->bad_lines++;
      } else {
        struct pp_sample s = {.pid = pid,
                              .tid = 0,
                              .comm = !is_alloc && thread_names && *f_name ? f_name : NULL,
                              .frames = frames,
                              .nframes = n,
                              .type = is_alloc ? PP_PROFILE_ALLOC
                                      : is_off ? PP_PROFILE_OFFCPU
                                               : PP_PROFILE_CPU,
                              .count = count};
        host->emit(sink, &s);
        if (is_alloc) {
          st->alloc_stacks++;
          st->alloc_bytes += count;
        } else if (is_off) {
          st->offcpu_stacks++;
        } else {
          st->stacks++;
          st->samples += count;
        }
      }
    } else if (ll > 2 && p[0] == 'I' && p[1] == '\t') {
      char info[512];
      size_t il = ll < sizeof(info) - 1 ? ll : sizeof(info) - 1;
      memcpy(info, p, il);
      info[il] = '\0';
      st->dropped += info_value(info, "\tdropped=");
      st->alloc_dropped += info_value(info, "\talloc_dropped=");
    } else if (ll > 2 && p[0] == 'W' && p[1] == '\t') {
      /* the agent could not do something asked (allocation sampling) */
      int wl = (int)(ll - 2 < 200 ? ll - 2 : 200);
      if (!st->warned) host->log(host, PP_LOG_WARNING, "pid %u: %.*s", pid, wl, p + 2);
      st->warned = 1;
    }
    p = le + 1;
  }
  free(line);
  return 0;
}

int java_collect_error(const char *text, char *err, size_t errlen) {
  const char *e = text ? strstr(text, "\nE\t") : NULL;
  if (!e) return 0;
  e += 3;
  size_t l = strcspn(e, "\n");
  if (l >= errlen) l = errlen - 1;
  memcpy(err, e, l);
  err[l] = '\0';
  return 1;
}
