/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /proc scan and target matching (see targets.h for the model).
 *
 * Cost model: a scan lists /proc (one getdents pass) and only reads files of
 * processes it has not seen before. Unmatched processes get their maps
 * re-read with exponential backoff (1 s, 2 s, 4 s ... 10 min), because a
 * runtime loaded after start usually shows up early in a process's life.
 * That keeps a host with thousands of idle processes cheap. Young unmatched
 * processes (see targets.h) are the exception: for their first
 * PP_TARGETS_YOUNG_MS they are looked at every tick for half a second, then
 * every fourth tick, a bounded number per tick. A look reads the process's
 * size (statm) and goes on to its executable and maps only when the size
 * changed (a library mapped, an exec); a process that exits ends its turn
 * at its first failed look.
 */
#include "targets.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "polyprof/kit/proc.h"

#define RECHECK_MIN_S 1
#define RECHECK_MAX_S 600
#define MAPS_MAX_BYTES (16u << 20) /* stop reading absurdly large maps */

struct proc_ent {
  uint32_t pid;
  uint32_t recheck_s; /* current backoff interval */
  uint64_t start_time;
  uint64_t exe_id;         /* identity of /proc/PID/exe: an exec keeps pid and start time */
  uint64_t matched;        /* bit per plugin */
  uint64_t reported;       /* bits already handed to on_new */
  time_t next_check;       /* monotonic seconds; 0 = never again */
  uint64_t young_until_ms; /* monotonic ms: looked at again until then while
                              unmatched; 0 = not young */
  uint64_t young_next_ms;  /* its next look (0: at the next recheck) */
  uint64_t vm_pages;       /* its size at the last look (statm), 0 unknown */
};

struct pp_targets {
  const struct pp_plugin *descs[PP_TARGETS_MAX_PLUGINS];
  size_t n;
  uint64_t maps_plugins; /* plugins with match_maps patterns */
  uint64_t exe_plugins;

  struct proc_ent *ents;
  size_t nents, cap;
  uint32_t *index; /* open addressing pid -> ent index + 1 (0 empty) */
  size_t index_cap;

  uint32_t *filter;
  size_t nfilter;
  pid_t *excluded;
  size_t nexcluded;

  pp_process_cb observer;
  void *observer_ctx;

  struct pp_target *per_plugin[PP_TARGETS_MAX_PLUGINS];
  size_t per_count[PP_TARGETS_MAX_PLUGINS];
  size_t per_cap[PP_TARGETS_MAX_PLUGINS];
  size_t live;
  size_t nyoung;       /* young unmatched entries */
  size_t young_cursor; /* round robin when more are young than the budget */
  long clk_tck;
};

static time_t mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec;
}

static uint64_t clock_ms(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Until when (monotonic ms) a process that started at start_ticks (clock
 * ticks since boot, which CLOCK_BOOTTIME counts) is young; 0: already old. */
static uint64_t young_until(const struct pp_targets *t, uint64_t start_ticks, uint64_t now_ms) {
  if (t->clk_tck <= 0) return 0;
  uint64_t started_ms = start_ticks * 1000 / (uint64_t)t->clk_tck;
  uint64_t boot_ms = clock_ms(CLOCK_BOOTTIME);
  if (started_ms + PP_TARGETS_YOUNG_MS <= boot_ms) return 0;
  uint64_t left = started_ms + PP_TARGETS_YOUNG_MS - boot_ms;
  /* a start time ahead of the clock is not to be believed for long */
  return now_ms + (left < PP_TARGETS_YOUNG_MS ? left : PP_TARGETS_YOUNG_MS);
}

struct pp_targets *pp_targets_new(const struct pp_plugin *const *descs, size_t n) {
  if (n > PP_TARGETS_MAX_PLUGINS) return NULL;
  struct pp_targets *t = calloc(1, sizeof(*t));
  if (!t) return NULL;
  t->n = n;
  t->clk_tck = sysconf(_SC_CLK_TCK);
  for (size_t i = 0; i < n; i++) {
    const struct pp_plugin *d = descs[i];
    if (!d || (d->capabilities & PP_CAP_SYSTEM_WIDE)) continue;
    t->descs[i] = d;
    if (d->match_maps && d->match_maps[0]) t->maps_plugins |= 1ull << i;
    if (d->match_exe && d->match_exe[0]) t->exe_plugins |= 1ull << i;
  }
  return t;
}

void pp_targets_free(struct pp_targets *t) {
  if (!t) return;
  free(t->ents);
  free(t->index);
  free(t->filter);
  free(t->excluded);
  for (size_t i = 0; i < PP_TARGETS_MAX_PLUGINS; i++)
    free(t->per_plugin[i]);
  free(t);
}

void pp_targets_set_filter(struct pp_targets *t, const uint32_t *pids, size_t n) {
  free(t->filter);
  t->filter = NULL;
  t->nfilter = 0;
  if (n == 0) return;
  t->filter = malloc(n * sizeof(*pids));
  if (!t->filter) return;
  /* no duplicates: with a filter the scan visits these pids, not /proc */
  for (size_t i = 0; i < n; i++) {
    size_t j = 0;
    while (j < t->nfilter && t->filter[j] != pids[i])
      j++;
    if (j == t->nfilter) t->filter[t->nfilter++] = pids[i];
  }
}

void pp_targets_set_excluded(struct pp_targets *t, const pid_t *pids, size_t n) {
  free(t->excluded);
  t->excluded = NULL;
  t->nexcluded = 0;
  if (n == 0) return;
  t->excluded = malloc(n * sizeof(*pids));
  if (!t->excluded) return;
  memcpy(t->excluded, pids, n * sizeof(*pids));
  t->nexcluded = n;
}

void pp_targets_set_observer(struct pp_targets *t, pp_process_cb cb, void *ctx) {
  t->observer = cb;
  t->observer_ctx = ctx;
}

static bool basename_matches(const char *const *patterns, const char *base) {
  for (size_t i = 0; patterns && patterns[i]; i++)
    if (fnmatch(patterns[i], base, 0) == 0) return true;
  return false;
}

bool pp_targets_match_exe(const char *const *patterns, const char *exe_path) {
  if (!exe_path || !*exe_path) return false;
  char buf[4096];
  snprintf(buf, sizeof(buf), "%s", exe_path);
  size_t len = strlen(buf);
  static const char deleted[] = " (deleted)";
  if (len > sizeof(deleted) - 1 && strcmp(buf + len - (sizeof(deleted) - 1), deleted) == 0)
    buf[len - (sizeof(deleted) - 1)] = '\0';
  const char *base = strrchr(buf, '/');
  return basename_matches(patterns, base ? base + 1 : buf);
}

/* Checks one maps line's path against every undecided plugin; returns the
 * updated match mask. `line` is NUL-terminated without the newline. */
static uint64_t match_maps_line(const struct pp_targets *t, const char *line, uint64_t undecided) {
  const char *path = strchr(line, '/');
  if (!path) return 0;
  size_t plen = strlen(path);
  static const char deleted[] = " (deleted)";
  char tmp[4096];
  if (plen > sizeof(deleted) - 1 && strcmp(path + plen - (sizeof(deleted) - 1), deleted) == 0 &&
      plen < sizeof(tmp)) {
    memcpy(tmp, path, plen - (sizeof(deleted) - 1));
    tmp[plen - (sizeof(deleted) - 1)] = '\0';
    path = tmp;
  }
  const char *base = strrchr(path, '/') + 1;
  uint64_t hit = 0;
  for (size_t i = 0; i < t->n; i++) {
    if (!(undecided & (1ull << i))) continue;
    if (basename_matches(t->descs[i]->match_maps, base)) hit |= 1ull << i;
  }
  return hit;
}

bool pp_targets_match_maps(const char *const *patterns, const char *maps_text) {
  struct pp_plugin d = {.match_maps = patterns};
  struct pp_targets t = {.n = 1};
  t.descs[0] = &d;
  const char *p = maps_text;
  char line[4200];
  while (p && *p) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    if (n >= sizeof(line)) n = sizeof(line) - 1;
    memcpy(line, p, n);
    line[n] = '\0';
    if (match_maps_line(&t, line, 1)) return true;
    p = nl ? nl + 1 : NULL;
  }
  return false;
}

/* Streams /proc/PID/maps, stopping as soon as every maps plugin matched. */
static uint64_t scan_maps(const struct pp_targets *t, uint32_t pid, uint64_t want) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/maps", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[65536];
  char last_path[4096] = "";
  size_t have = 0, total = 0;
  uint64_t hit = 0;
  for (;;) {
    ssize_t r = read(fd, buf + have, sizeof(buf) - 1 - have);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    have += (size_t)r;
    total += (size_t)r;
    buf[have] = '\0';
    char *start = buf;
    char *nl;
    while ((nl = memchr(start, '\n', have - (size_t)(start - buf)))) {
      *nl = '\0';
      const char *pth = strchr(start, '/');
      /* consecutive mappings of one file are common: check each file once */
      if (pth && strcmp(pth, last_path) != 0) {
        snprintf(last_path, sizeof(last_path), "%s", pth);
        hit |= match_maps_line(t, start, want & ~hit);
        if ((hit & want) == want) goto done;
      }
      start = nl + 1;
    }
    size_t rest = have - (size_t)(start - buf);
    if (rest == sizeof(buf) - 1) rest = 0; /* a line longer than the buffer: drop it */
    memmove(buf, start, rest);
    have = rest;
    if (total > MAPS_MAX_BYTES) break;
  }
done:
  close(fd);
  return hit;
}

static bool is_filtered_out(const struct pp_targets *t, uint32_t pid) {
  for (size_t i = 0; i < t->nexcluded; i++)
    if ((uint32_t)t->excluded[i] == pid) return true;
  if (t->nfilter == 0) return false;
  for (size_t i = 0; i < t->nfilter; i++)
    if (t->filter[i] == pid) return false;
  return true;
}

static uint64_t classify(const struct pp_targets *t, uint32_t pid, uint64_t already) {
  uint64_t hit = 0;
  uint64_t exe_want = t->exe_plugins & ~already;
  if (exe_want) {
    char exe[4096];
    if (pp_proc_exe(pid, exe, sizeof(exe)) == 0) {
      for (size_t i = 0; i < t->n; i++)
        if ((exe_want & (1ull << i)) && pp_targets_match_exe(t->descs[i]->match_exe, exe))
          hit |= 1ull << i;
    }
  }
  uint64_t maps_want = t->maps_plugins & ~(already | hit);
  if (maps_want) hit |= scan_maps(t, pid, maps_want);
  return hit;
}

static struct proc_ent *old_lookup(struct proc_ent *ents, const uint32_t *index, size_t icap,
                                   uint32_t pid) {
  if (!icap) return NULL;
  for (size_t pos = (pid * 2654435761u) & (icap - 1);; pos = (pos + 1) & (icap - 1)) {
    uint32_t v = index[pos];
    if (!v) return NULL;
    if (ents[v - 1].pid == pid) return &ents[v - 1];
  }
}

static int add_target(struct pp_targets *t, size_t plugin, const struct proc_ent *e) {
  if (t->per_count[plugin] == t->per_cap[plugin]) {
    size_t ncap = t->per_cap[plugin] ? t->per_cap[plugin] * 2 : 16;
    void *n = realloc(t->per_plugin[plugin], ncap * sizeof(struct pp_target));
    if (!n) return -ENOMEM;
    t->per_plugin[plugin] = n;
    t->per_cap[plugin] = ncap;
  }
  struct pp_target *tg = &t->per_plugin[plugin][t->per_count[plugin]++];
  memset(tg, 0, sizeof(*tg));
  tg->pid = e->pid;
  tg->start_time = e->start_time;
  return 0;
}

/* Where a scan's pids come from: every numeric /proc entry; with --pids,
 * only the given pids that still exist (listing all of /proc every second
 * costs more than the handful of targets on a busy host); or, for an update
 * from process events, a list built from the known processes and the
 * changed ones. */
struct pid_source {
  DIR *d;
  size_t fi;
  const uint32_t *list;
  size_t nlist;
};

/* The next pid to look at, 0 at the end. */
static uint32_t next_pid(const struct pp_targets *t, struct pid_source *src) {
  if (src->list) return src->fi < src->nlist ? src->list[src->fi++] : 0;
  if (!src->d) {
    while (src->fi < t->nfilter) {
      uint32_t pid = t->filter[src->fi++];
      char path[32];
      snprintf(path, sizeof(path), "/proc/%u", pid);
      if (access(path, F_OK) == 0) return pid;
    }
    return 0;
  }
  struct dirent *de;
  while ((de = readdir(src->d))) {
    if (!isdigit((unsigned char)de->d_name[0])) continue;
    char *end;
    unsigned long v = strtoul(de->d_name, &end, 10);
    if (*end || v == 0 || v > UINT32_MAX) continue;
    return (uint32_t)v;
  }
  return 0;
}

static bool in_sorted(const uint32_t *v, size_t n, uint32_t pid) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (v[mid] == pid) return true;
    if (v[mid] < pid)
      lo = mid + 1;
    else
      hi = mid;
  }
  return false;
}

static int rebuild(struct pp_targets *t, struct pid_source *src, bool recheck,
                   const uint32_t *changed, size_t nchanged, pp_target_cb on_new, void *ctx);

int pp_targets_scan(struct pp_targets *t, bool recheck, pp_target_cb on_new, void *ctx) {
  struct pid_source src = {0};
  if (t->nfilter == 0 && !(src.d = opendir("/proc"))) return -errno;
  int rc = rebuild(t, &src, recheck, NULL, 0, on_new, ctx);
  if (src.d) closedir(src.d);
  return rc;
}

int pp_targets_update(struct pp_targets *t, const uint32_t *changed, size_t nchanged,
                      const uint32_t *gone, size_t ngone, pp_target_cb on_new, void *ctx) {
  uint32_t *list = malloc((t->nents + nchanged + 1) * sizeof(*list));
  if (!list) return -ENOMEM;
  size_t n = 0;
  for (size_t i = 0; i < t->nents; i++)
    if (!in_sorted(gone, ngone, t->ents[i].pid)) list[n++] = t->ents[i].pid;
  for (size_t i = 0; i < nchanged; i++)
    if (!old_lookup(t->ents, t->index, t->index_cap, changed[i])) list[n++] = changed[i];
  struct pid_source src = {.list = list, .nlist = n};
  int rc = rebuild(t, &src, false, changed, nchanged, on_new, ctx);
  free(list);
  return rc;
}

/* One pass over the pids of src: known processes are kept without a file
 * read unless recheck or listed in changed (sorted). */
static int rebuild(struct pp_targets *t, struct pid_source *src, bool recheck,
                   const uint32_t *changed, size_t nchanged, pp_target_cb on_new, void *ctx) {
  struct proc_ent *nents = NULL;
  size_t nn = 0, ncap = 0;
  time_t now = mono_s();
  uint64_t now_ms = clock_ms(CLOCK_MONOTONIC);
  uint32_t pid;
  while ((pid = next_pid(t, src))) {
    if (is_filtered_out(t, pid)) continue;
    if (nn == ncap) {
      ncap = ncap ? ncap * 2 : 1024;
      struct proc_ent *g = realloc(nents, ncap * sizeof(*nents));
      if (!g) {
        free(nents);
        return -ENOMEM;
      }
      nents = g;
    }
    struct proc_ent *old = old_lookup(t->ents, t->index, t->index_cap, pid);
    struct proc_ent e;
    if (old && !recheck && !in_sorted(changed, nchanged, pid)) {
      e = *old; /* known process: no file reads on the per-second path */
    } else {
      uint64_t st = 0;
      if (pp_proc_start_time(pid, &st) < 0) continue; /* gone */
      if (old && old->start_time == st) {
        e = *old;
        uint64_t id = pp_proc_exe_id(pid);
        /* 0: exiting (exe unreadable), not an exec (see proc_memory.c) */
        if (id != 0 && id != old->exe_id) {
          /* exec'd since: a new program in the same process. What matched
           * the old image (e.g. a Python parent between fork and exec) no
           * longer holds, and every plugin the new image matches hears of
           * it again (a plugin that had ignored it looks again). */
          e.exe_id = id;
          e.matched = e.reported = 0;
          e.recheck_s = RECHECK_MIN_S;
          e.next_check = now;
          e.young_until_ms = now_ms + PP_TARGETS_YOUNG_MS;
          e.young_next_ms = e.vm_pages = 0;
        }
      } else {
        memset(&e, 0, sizeof(e));
        e.pid = pid;
        e.start_time = st;
        e.exe_id = pp_proc_exe_id(pid);
        e.recheck_s = RECHECK_MIN_S;
        e.next_check = now; /* classify right away */
        e.young_until_ms = young_until(t, st, now_ms);
      }
    }
    if (e.young_until_ms && now_ms >= e.young_until_ms) e.young_until_ms = 0;
    if (e.next_check && now >= e.next_check) {
      e.matched |= classify(t, pid, e.matched);
      if (t->observer) t->observer(t->observer_ctx, pid, e.start_time);
      if (e.recheck_s >= RECHECK_MAX_S) {
        e.next_check = 0;
      } else {
        e.next_check = now + e.recheck_s;
        e.recheck_s *= 2;
      }
    }
    nents[nn++] = e;
  }

  /* new index */
  size_t icap = 16;
  while (icap < nn * 2)
    icap *= 2;
  uint32_t *index = calloc(icap, sizeof(uint32_t));
  if (!index) {
    free(nents);
    return -ENOMEM;
  }
  for (size_t i = 0; i < nn; i++) {
    size_t pos = (nents[i].pid * 2654435761u) & (icap - 1);
    while (index[pos])
      pos = (pos + 1) & (icap - 1);
    index[pos] = (uint32_t)i + 1;
  }
  free(t->ents);
  free(t->index);
  t->ents = nents;
  t->nents = nn;
  t->cap = ncap;
  t->index = index;
  t->index_cap = icap;

  for (size_t p = 0; p < t->n; p++)
    t->per_count[p] = 0;
  t->live = 0;
  t->nyoung = 0;
  for (size_t i = 0; i < nn; i++) {
    struct proc_ent *e = &t->ents[i];
    if (e->matched) t->live++;
    if (e->young_until_ms && !e->matched) t->nyoung++;
    for (size_t p = 0; p < t->n; p++) {
      uint64_t bit = 1ull << p;
      if (!(e->matched & bit)) continue;
      add_target(t, p, e);
      if (!(e->reported & bit)) {
        e->reported |= bit;
        if (on_new) {
          struct pp_target tg = {.pid = e->pid, .start_time = e->start_time};
          on_new(ctx, p, &tg);
        }
      }
    }
  }
  return (int)nn;
}

/* The process's size in pages (/proc/PID/statm), 0 if gone or exiting. A
 * library mapped or an exec changes it; reading it costs a fraction of
 * reading the maps. */
static uint64_t vm_pages(uint32_t pid) {
  char path[64], buf[128];
  snprintf(path, sizeof(path), "/proc/%u/statm", pid);
  size_t len = 0;
  if (pp_read_file(path, buf, sizeof(buf), &len) < 0) return 0;
  return strtoull(buf, NULL, 10);
}

/* How long until a young process's next look: every tick at first (a JVM
 * maps libjvm.so within milliseconds, a .NET host libcoreclr.so within a
 * few hundred), then less often. */
static uint64_t young_interval_ms(const struct proc_ent *e, uint64_t now_ms) {
  uint64_t since = now_ms + PP_TARGETS_YOUNG_MS - e->young_until_ms;
  uint64_t ms = since < 500 ? PP_TARGETS_YOUNG_TICK_MS : 4 * PP_TARGETS_YOUNG_TICK_MS;
  return ms - PP_TARGETS_YOUNG_TICK_MS / 5; /* slack: a tick that wakes a little early */
}

/* Hands every plugin e newly matches to on_new, as rebuild does. */
static void report_new(struct pp_targets *t, struct proc_ent *e, pp_target_cb on_new, void *ctx) {
  for (size_t p = 0; p < t->n; p++) {
    uint64_t bit = 1ull << p;
    if (!(e->matched & bit) || (e->reported & bit)) continue;
    /* without room in its list the plugin still hears of it; the list is
     * rebuilt whole at the next scan */
    (void)add_target(t, p, e);
    e->reported |= bit;
    if (on_new) {
      struct pp_target tg = {.pid = e->pid, .start_time = e->start_time};
      on_new(ctx, p, &tg);
    }
  }
}

size_t pp_targets_recheck_young(struct pp_targets *t, pp_target_cb on_new, void *ctx) {
  if (!t->nyoung || !t->nents || !(t->maps_plugins | t->exe_plugins)) {
    t->nyoung = 0;
    return 0;
  }
  uint64_t now_ms = clock_ms(CLOCK_MONOTONIC);
  size_t budget = PP_TARGETS_YOUNG_BUDGET, left = 0;
  size_t start = t->young_cursor % t->nents;
  for (size_t k = 0; k < t->nents; k++) {
    size_t i = (start + k) % t->nents;
    struct proc_ent *e = &t->ents[i];
    if (!e->young_until_ms || e->matched) continue;
    if (now_ms >= e->young_until_ms) {
      e->young_until_ms = 0;
      continue;
    }
    if (!budget || now_ms < e->young_next_ms) {
      left++;
      continue;
    }
    budget--;
    t->young_cursor = i + 1;
    uint64_t pages = vm_pages(e->pid);
    if (pages == 0) { /* gone or exiting: the next scan or update drops it */
      e->young_until_ms = 0;
      continue;
    }
    e->young_next_ms = now_ms + young_interval_ms(e, now_ms);
    if (pages == e->vm_pages) { /* nothing mapped, no exec since the last look */
      left++;
      continue;
    }
    e->vm_pages = pages;
    uint64_t id = pp_proc_exe_id(e->pid);
    if (id == 0) {
      e->young_until_ms = 0;
      continue;
    }
    if (id != e->exe_id) {
      /* exec'd (no process events, or not applied yet): a new program,
       * classified afresh as an update would */
      e->exe_id = id;
      e->reported = 0;
      e->young_until_ms = now_ms + PP_TARGETS_YOUNG_MS;
      e->young_next_ms = now_ms + PP_TARGETS_YOUNG_TICK_MS - PP_TARGETS_YOUNG_TICK_MS / 5;
      e->matched = classify(t, e->pid, 0);
      if (t->observer) t->observer(t->observer_ctx, e->pid, e->start_time);
    } else if (t->maps_plugins) {
      /* same image: only a library mapped since can have changed */
      e->matched = scan_maps(t, e->pid, t->maps_plugins);
    }
    if (e->matched) {
      t->live++;
      report_new(t, e, on_new, ctx);
    } else {
      left++;
    }
  }
  t->nyoung = left;
  return left;
}

size_t pp_targets_young(const struct pp_targets *t) {
  return t->nyoung;
}

size_t pp_targets_of(const struct pp_targets *t, size_t plugin, const struct pp_target **out) {
  if (plugin >= t->n) {
    *out = NULL;
    return 0;
  }
  *out = t->per_plugin[plugin];
  return t->per_count[plugin];
}

size_t pp_targets_process_count(const struct pp_targets *t) {
  return t->live;
}
