/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Whether a sampled thread was running, where the runtime's sample type
 * cannot say (see dotnet.h, dotnet_sample_type_unreliable): the share of
 * time each thread ran, from its schedstat run time, read at most every
 * RUNSHARE_LOOK_NS per thread. The table is allocated only for the sessions
 * of such runtimes, and bounded (DOTNET_MAX_THREADS slots; threads whose
 * ids collide share a slot and start their window again).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dotnet.h"

#define RUNSHARE_LOOK_NS 50000000ull  /* a thread's schedstat at most this often */
#define RUNSHARE_SCAN_NS 200000000ull /* /proc/PID/task at most this often */
#define RUNSHARE_ONE 1024u            /* a share of 1 */

struct runshare_slot {
  uint64_t tid;      /* the stream's thread id (namespace tid in a pid namespace) */
  uint32_t host_tid; /* 0: not known yet */
  int32_t share;     /* of RUNSHARE_ONE over the latest window, -1: none yet */
  uint64_t run_ns, look_ns;
  uint32_t credit; /* weight x share carried to the next sample */
};

struct dotnet_runshare {
  uint32_t pid;
  bool host_tids;
  uint64_t last_scan_ns;
  struct runshare_slot slot[DOTNET_MAX_THREADS];
};

struct dotnet_runshare *dotnet_runshare_new(uint32_t pid, bool host_tids) {
  struct dotnet_runshare *r = calloc(1, sizeof(*r));
  if (!r) return NULL;
  r->pid = pid;
  r->host_tids = host_tids;
  return r;
}

void dotnet_runshare_free(struct dotnet_runshare *r) {
  free(r);
}

void dotnet_runshare_reset(struct dotnet_runshare *r) {
  if (!r) return;
  memset(r->slot, 0, sizeof(r->slot));
  r->last_scan_ns = 0;
}

static struct runshare_slot *slot_of(struct dotnet_runshare *r, uint64_t tid) {
  return &r->slot[(tid * 0x9e3779b97f4a7c15ull >> 52) % DOTNET_MAX_THREADS];
}

static void claim(struct runshare_slot *sl, uint64_t tid) {
  if (sl->tid != tid) *sl = (struct runshare_slot){.tid = tid, .share = -1};
}

/* In a pid namespace the stream names threads by their namespace tid: one
 * pass over /proc/PID/task maps every thread (NSpid of /proc/TID/status). */
static void scan_tasks(struct dotnet_runshare *r, uint64_t now) {
  if (r->last_scan_ns && now - r->last_scan_ns < RUNSHARE_SCAN_NS) return;
  r->last_scan_ns = now;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/task", r->pid);
  DIR *d = opendir(path);
  if (!d) return;
  struct dirent *de;
  unsigned seen = 0;
  while ((de = readdir(d)) && seen < DOTNET_MAX_THREADS) {
    char *end;
    unsigned long host = strtoul(de->d_name, &end, 10);
    if (*end || host == 0 || host > UINT32_MAX) continue;
    seen++;
    uint32_t ns = 0;
    if (pp_proc_ns_pid((uint32_t)host, &ns) < 0) continue;
    struct runshare_slot *sl = slot_of(r, ns);
    claim(sl, ns);
    sl->host_tid = (uint32_t)host;
  }
  closedir(d);
}

uint32_t dotnet_runshare_weight(struct dotnet_runshare *r, uint64_t tid, uint32_t weight,
                                uint64_t *looks) {
  uint64_t now = pp_clock_ns();
  struct runshare_slot *sl = slot_of(r, tid);
  claim(sl, tid);
  if (!sl->host_tid) {
    if (r->host_tids) {
      sl->host_tid = tid <= UINT32_MAX ? (uint32_t)tid : 0;
    } else {
      scan_tasks(r, now);
      if (sl->tid != tid) claim(sl, tid); /* the scan gave the slot to another */
    }
    if (!sl->host_tid) return 0;
  }
  if (!sl->look_ns || now - sl->look_ns >= RUNSHARE_LOOK_NS) {
    char path[96], buf[96];
    unsigned long long run = 0;
    snprintf(path, sizeof(path), "/proc/%u/task/%u/schedstat", r->pid, sl->host_tid);
    (*looks)++;
    if (pp_read_file(path, buf, sizeof(buf), NULL) < 0 || sscanf(buf, "%llu", &run) != 1) {
      /* gone; in a pid namespace its tid may be another thread's by now:
       * map it again. Either way not looked at again before
       * RUNSHARE_LOOK_NS. */
      if (!r->host_tids) sl->host_tid = 0;
      sl->share = -1;
      sl->look_ns = now;
      return 0;
    }
    if (sl->look_ns && run >= sl->run_ns && now > sl->look_ns) {
      uint64_t share = (run - sl->run_ns) * RUNSHARE_ONE / (now - sl->look_ns);
      sl->share = share > RUNSHARE_ONE ? (int32_t)RUNSHARE_ONE : (int32_t)share;
    } else {
      sl->share = -1;
    }
    sl->run_ns = run;
    sl->look_ns = now;
  }
  if (sl->share <= 0) return 0;
  uint64_t credit = sl->credit + (uint64_t)weight * (uint32_t)sl->share;
  sl->credit = (uint32_t)(credit % RUNSHARE_ONE);
  return (uint32_t)(credit / RUNSHARE_ONE);
}
