/* SPDX-License-Identifier: Apache-2.0 */
/* The process tree below one process (polyprof/kit/proc_tree.h). */
#include "polyprof/kit/proc_tree.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "polyprof/kit/proc.h"

struct proc_link {
  uint32_t pid, ppid;
};

static int by_ppid(const void *x, const void *y) {
  const struct proc_link *a = x, *b = y;
  return a->ppid < b->ppid ? -1 : a->ppid > b->ppid;
}

/* A /proc entry's name as a pid, 0 if it is not one. */
static uint32_t pid_of_name(const char *s) {
  uint64_t v = 0;
  if (!*s) return 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return 0;
    v = v * 10 + (uint64_t)(*s - '0');
    if (v > 0x7fffffff) return 0;
  }
  return (uint32_t)v;
}

/* Every process with its parent; NULL (and *n 0) when none could be read. */
static struct proc_link *read_links(size_t *n) {
  *n = 0;
  DIR *d = opendir("/proc");
  if (!d) return NULL;
  struct proc_link *links = NULL;
  size_t cap = 0;
  struct dirent *de;
  while ((de = readdir(d)) && *n < PP_PROC_TREE_MAX_PROCS) {
    uint32_t pid = pid_of_name(de->d_name);
    if (!pid) continue;
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%u/stat", pid);
    if (pp_read_file(path, buf, sizeof(buf), NULL) < 0) continue;
    /* "pid (comm) S ppid": the comm may hold ')' and spaces */
    const char *p = strrchr(buf, ')');
    long ppid;
    if (!p || sscanf(p + 1, " %*c %ld", &ppid) != 1 || ppid <= 0 || ppid > 0x7fffffff) continue;
    if (*n == cap) {
      size_t nc = cap ? cap * 2 : 1024;
      struct proc_link *g = realloc(links, nc * sizeof(*g));
      if (!g) break;
      links = g;
      cap = nc;
    }
    links[(*n)++] = (struct proc_link){pid, (uint32_t)ppid};
  }
  closedir(d);
  return links;
}

size_t pp_proc_descendants(uint32_t root, uint32_t *out, size_t cap) {
  size_t n;
  struct proc_link *links = read_links(&n);
  if (!n) {
    free(links);
    return 0;
  }
  qsort(links, n, sizeof(*links), by_ppid);
  /* breadth first from root: out[] is its own queue */
  size_t got = 0, next = 0;
  uint32_t parent = root;
  for (;;) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (links[mid].ppid < parent)
        lo = mid + 1;
      else
        hi = mid;
    }
    for (size_t i = lo; i < n && links[i].ppid == parent && got < cap; i++)
      out[got++] = links[i].pid;
    if (next == got) break;
    parent = out[next++];
  }
  free(links);
  return got;
}

int pp_proc_threads(uint32_t pid, uint32_t *tids, size_t cap, size_t *n) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/task", pid);
  *n = 0;
  DIR *d = opendir(path);
  if (!d) return -errno;
  struct dirent *e;
  while ((e = readdir(d)) && *n < cap) {
    uint32_t tid = pid_of_name(e->d_name);
    if (tid) tids[(*n)++] = tid;
  }
  closedir(d);
  return 0;
}
