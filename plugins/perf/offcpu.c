/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Off-CPU profile: where threads block, weighted by how long they stay off
 * the CPU.
 *
 * The kernel facility: the software context-switch event, one per CPU,
 * sampled on every switch (period 1) with callchains. Its sample is taken
 * in the context of the task being switched out, so its kernel callchain
 * is the wait path (schedule <- futex_wait <- ...) and its user callchain
 * the blocked thread's own stack. The same event with context_switch set
 * also writes a small SWITCH record for every switch-in (pid/tid of the
 * incoming task, time) and marks switch-outs of preempted tasks, which are
 * runnable, not blocked. This needs neither tracefs nor eBPF, only what
 * the cpu profile needs already (CAP_PERFMON).
 *
 * Pairing: a blocked thread's switch-out callchain (raw addresses) is kept
 * in a bounded table keyed by tid until its switch-in; then, if it stayed
 * off the CPU at least the threshold, the chain is symbolized and its stack
 * gets the blocked time. Symbolizing only what is recorded keeps the cost
 * of short switches to a hash insert and delete. Threads still blocked at
 * a snapshot get their time so far (and keep blocking into the next one),
 * so a thread asleep for minutes shows in every session.
 *
 * Under a context-switch storm the cost stays bounded: the ring per CPU is
 * fixed (records that do not fit are lost and counted by the kernel), the
 * kernel throttles the event past kernel.perf_event_max_sample_rate, and
 * the table holds at most offcpu_max_threads blocked threads (switch-outs
 * beyond it are dropped and counted).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"

#define TRAILER 16 /* sample_id_all: pid/tid + time */

struct offcpu_entry {
  uint32_t tid; /* 0: free slot */
  uint32_t pid;
  uint64_t since;  /* switch-out time, or the last snapshot's (ns, CLOCK_MONOTONIC) */
  uint32_t nips;   /* addresses in ips, context markers included */
  uint32_t ips_at; /* index into the address pool (OFFCPU_MAX_IPS per entry) */
  char comm[PERF_COMM_LEN];
};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int perf_offcpu_init(struct perf_offcpu *o, size_t max_threads, uint64_t threshold_us) {
  memset(o, 0, sizeof(*o));
  size_t slots = 64;
  while (slots < max_threads * 2)
    slots *= 2;
  o->nslots = slots;
  o->max = max_threads;
  o->threshold_ns = threshold_us * 1000ull;
  o->slots = calloc(slots, sizeof(*o->slots));
  /* the address pool: one fixed block per entry slot, handed out by a free list */
  o->pool = malloc(max_threads * OFFCPU_MAX_IPS * sizeof(*o->pool));
  o->free_blocks = malloc(max_threads * sizeof(*o->free_blocks));
  if (!o->slots || !o->pool || !o->free_blocks) {
    perf_offcpu_fini(o);
    return -ENOMEM;
  }
  for (size_t i = 0; i < max_threads; i++)
    o->free_blocks[i] = (uint32_t)(max_threads - 1 - i);
  o->nfree = max_threads;
  perf_stacks_init(&o->stacks, 65536);
  return 0;
}

void perf_offcpu_fini(struct perf_offcpu *o) {
  perf_offcpu_close(o);
  free(o->slots);
  free(o->pool);
  free(o->free_blocks);
  perf_stacks_fini(&o->stacks);
  memset(o, 0, sizeof(*o));
}

static size_t slot_of(const struct perf_offcpu *o, uint32_t tid) {
  return (tid * 2654435761u) & (o->nslots - 1);
}

static struct offcpu_entry *find(struct perf_offcpu *o, uint32_t tid) {
  for (size_t j = slot_of(o, tid);; j = (j + 1) & (o->nslots - 1)) {
    if (!o->slots[j].tid) return NULL;
    if (o->slots[j].tid == tid) return &o->slots[j];
  }
}

/* Linear probing with backward-shift deletion: no tombstones, so a table
 * churning through millions of switches never degrades. */
static void remove_entry(struct perf_offcpu *o, struct offcpu_entry *e) {
  o->free_blocks[o->nfree++] = e->ips_at;
  o->n--;
  size_t mask = o->nslots - 1, hole = (size_t)(e - o->slots);
  for (size_t j = (hole + 1) & mask; o->slots[j].tid; j = (j + 1) & mask) {
    size_t home = slot_of(o, o->slots[j].tid);
    /* move j into the hole unless its home lies cyclically in (hole, j] */
    bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (stays) continue;
    o->slots[hole] = o->slots[j];
    hole = j;
  }
  o->slots[hole].tid = 0;
}

int perf_offcpu_open(struct perf_offcpu *o, uint32_t data_pages, uint16_t max_stack, char *err,
                     size_t errlen) {
  struct perf_events *ev = &o->ev;
  memset(ev, 0, sizeof(*ev));
  snprintf(ev->event_name, sizeof(ev->event_name), "context-switches");
  struct perf_event_attr a;
  memset(&a, 0, sizeof(a));
  a.size = sizeof(a);
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_CONTEXT_SWITCHES;
  a.sample_period = 1;
  a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;
  a.sample_max_stack = max_stack;
  a.context_switch = 1;
  a.sample_id_all = 1;
  a.use_clockid = 1;
  a.clockid = CLOCK_MONOTONIC;
  a.exclude_hv = 1;
  a.disabled = 1;
  a.watermark = 1;
  a.wakeup_watermark = (uint32_t)((uint64_t)data_pages * (uint64_t)sysconf(_SC_PAGESIZE) / 2);
  ev->sample_type = a.sample_type;
  int cpus[4096];
  int ncpu = perf_online_cpus(cpus, 4096);
  int rc = perf_events_alloc(ev, ncpu, err, errlen);
  if (rc < 0) return rc;
  for (int i = 0; i < ncpu; i++) {
    int fd = perf_sys_event_open(&a, -1, cpus[i], -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
      int e = errno;
      if (e == ENODEV) continue; /* a CPU went offline */
      struct perf_events_config cfg = {.frequency = 1};
      perf_events_explain(e, &cfg, "context-switches", err, errlen);
      perf_events_close(ev);
      return -e;
    }
    if (perf_ring_map(ev, fd, cpus[i], data_pages, err, errlen) < 0) {
      int e = errno;
      close(fd);
      perf_events_close(ev);
      return -e;
    }
  }
  if (ev->nrings == 0) {
    snprintf(err, errlen, "no online CPU accepted the context-switch event");
    perf_events_close(ev);
    return -ENODEV;
  }
  perf_events_enable(ev);
  o->open = true;
  return 0;
}

void perf_offcpu_close(struct perf_offcpu *o) {
  if (o->open) perf_events_close(&o->ev);
  o->open = false;
  /* the blocked threads' chains mean nothing without the event */
  for (size_t j = 0; o->slots && j < o->nslots; j++)
    o->slots[j].tid = 0;
  o->n = 0;
  o->nfree = o->max;
  for (size_t i = 0; o->free_blocks && i < o->max; i++)
    o->free_blocks[i] = (uint32_t)(o->max - 1 - i);
}

/* The stack of a stored chain, symbolized now, counted `ns`. */
static void record(struct perf_state *st, struct perf_offcpu *o, const struct offcpu_entry *e,
                   uint64_t ns) {
  const uint64_t *chain = o->pool + (size_t)e->ips_at * OFFCPU_MAX_IPS;
  uint32_t fr[OFFCPU_MAX_IPS], kfr[OFFCPU_MAX_IPS], n = 0, nk = 0;
  struct perf_proc *p = perf_proc_get(st, e->pid, true);
  if (!p) return;
  bool maps_ok = false, maps_tried = false, uleaf = true;
  uint64_t ctx = 0;
  for (uint32_t i = 0; i < e->nips; i++) {
    uint64_t ip = chain[i];
    if (ip >= (uint64_t)PERF_CONTEXT_MAX) {
      ctx = ip;
      continue;
    }
    if (ctx == (uint64_t)PERF_CONTEXT_KERNEL) {
      if (st->kernel && nk < OFFCPU_MAX_IPS) kfr[nk++] = perf_sym_kernel(st, ip);
    } else if (ctx == (uint64_t)PERF_CONTEXT_USER) {
      if (!maps_tried) {
        maps_ok = perf_proc_need_maps(st, p) == 0;
        maps_tried = true;
      }
      if (n < OFFCPU_MAX_IPS)
        fr[n++] = maps_ok ? perf_sym_user(st, p, ip, uleaf) : PERF_FRAME_ID_UNKNOWN;
      uleaf = false;
    }
  }
  /* leaf first: the kernel wait path, then the user stack */
  uint32_t all[2 * OFFCPU_MAX_IPS], m = 0;
  for (uint32_t i = 0; i < nk; i++)
    all[m++] = kfr[i];
  for (uint32_t i = 0; i < n; i++)
    all[m++] = fr[i];
  m = perf_sym_fold_jit(st, all, m);
  if (m == 0) all[m++] = PERF_FRAME_ID_UNKNOWN;
  p->sampled = true;
  p->last_used = st->tick;
  perf_stacks_add_n(&o->stacks, e->pid, e->comm, all, m, ns);
  o->recorded++;
}

static void on_switch_out_sample(struct perf_state *st, struct perf_offcpu *o, const uint8_t *rec,
                                 size_t size) {
  size_t off = sizeof(struct perf_event_header);
  if (size < off + 32) {
    o->ev.malformed++;
    return;
  }
  uint32_t pt[2];
  uint64_t t, nchain;
  memcpy(pt, rec + off + 8, 8);
  memcpy(&t, rec + off + 16, 8);
  memcpy(&nchain, rec + off + 24, 8);
  off += 32;
  if (nchain > (size - off) / 8) {
    o->ev.malformed++;
    return;
  }
  uint32_t pid = pt[0], tid = pt[1];
  o->switches++;
  if (!tid || pid == st->self_pid) return; /* the idle task; ourselves */
  if (!perf_pid_wanted(st, pid)) return;
  struct offcpu_entry *e = find(o, tid);
  if (!e) {
    if (!o->nfree || o->n >= o->max) {
      o->table_full++;
      return;
    }
    size_t j = slot_of(o, tid);
    while (o->slots[j].tid)
      j = (j + 1) & (o->nslots - 1);
    e = &o->slots[j];
    e->tid = tid;
    e->ips_at = o->free_blocks[--o->nfree];
    o->n++;
  }
  e->pid = pid;
  e->since = t;
  uint32_t n = nchain > OFFCPU_MAX_IPS ? OFFCPU_MAX_IPS : (uint32_t)nchain;
  memcpy(o->pool + (size_t)e->ips_at * OFFCPU_MAX_IPS, rec + off, (size_t)n * 8);
  e->nips = n;
  snprintf(e->comm, sizeof(e->comm), "%s", perf_thread_comm(st, pid, tid));
}

static void on_switch(struct perf_state *st, struct perf_offcpu *o,
                      const struct perf_event_header *h, const uint8_t *rec) {
  size_t size = h->size, hs = sizeof(*h);
  if (size < hs + 8 + TRAILER) return;
  uint32_t pt[2];
  uint64_t t;
  memcpy(pt, rec + size - TRAILER, 8); /* the task now on the CPU */
  memcpy(&t, rec + size - 8, 8);
  if (h->misc & PERF_RECORD_MISC_SWITCH_OUT) {
    /* preempted: runnable, so not off-CPU time; its sample came first */
    if (!(h->misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT)) return;
    struct offcpu_entry *e = pt[1] ? find(o, pt[1]) : NULL;
    if (e) remove_entry(o, e);
    return;
  }
  struct offcpu_entry *e = pt[1] ? find(o, pt[1]) : NULL;
  if (!e) return;
  uint64_t ns = t > e->since ? t - e->since : 0;
  if (ns >= o->threshold_ns && ns > 0)
    record(st, o, e, ns);
  else
    o->below_threshold++;
  remove_entry(o, e);
}

static void on_offcpu_record(void *arg, const struct perf_event_header *h, const uint8_t *rec) {
  struct perf_state *st = arg;
  struct perf_offcpu *o = &st->offcpu;
  switch (h->type) {
    case PERF_RECORD_SAMPLE:
      on_switch_out_sample(st, o, rec, h->size);
      break;
    case PERF_RECORD_SWITCH_CPU_WIDE:
      on_switch(st, o, h, rec);
      break;
    case PERF_RECORD_LOST: {
      uint64_t lost;
      if (h->size < sizeof(*h) + 16) break;
      memcpy(&lost, rec + sizeof(*h) + 8, 8);
      o->lost += lost;
      break;
    }
    case PERF_RECORD_THROTTLE:
      o->throttled++;
      break;
    default:
      break;
  }
}

void perf_offcpu_drain(struct perf_state *st) {
  if (st->offcpu.open) perf_events_drain(&st->offcpu.ev, on_offcpu_record, st);
}

void perf_offcpu_emit(struct perf_state *st, struct pp_sink *sink) {
  struct perf_offcpu *o = &st->offcpu;
  if (!o->open) return;
  perf_offcpu_drain(st);
  /* threads blocked right now: their time so far is this session's */
  uint64_t now = now_ns();
  uint64_t carried = 0;
  for (size_t j = 0; j < o->nslots; j++) {
    struct offcpu_entry *e = &o->slots[j];
    if (!e->tid || now <= e->since) continue;
    if (now - e->since >= o->threshold_ns) {
      record(st, o, e, now - e->since);
      e->since = now;
      carried++;
    }
  }
  /* counts are nanoseconds here, microseconds in the profile */
  for (size_t i = 0; i < o->stacks.n; i++) {
    struct perf_stack *s = &o->stacks.v[i];
    uint64_t us = (s->count + 500) / 1000;
    if (us) perf_emit_stack(st, sink, &o->stacks, s, us, PP_PROFILE_OFFCPU);
  }
  const struct pp_host *h = st->host;
  h->add_counter(sink, "offcpu_switches", o->switches);
  h->add_counter(sink, "offcpu_recorded", o->recorded);
  h->add_counter(sink, "offcpu_below_threshold", o->below_threshold);
  h->add_counter(sink, "offcpu_table_full", o->table_full);
  h->add_counter(sink, "offcpu_lost", o->lost);
  h->add_counter(sink, "offcpu_throttled", o->throttled);
  h->add_counter(sink, "offcpu_dropped_stacks", o->stacks.dropped);
  h->add_counter(sink, "offcpu_blocked_now", o->n);
  if (o->lost || o->table_full || o->throttled || o->stacks.dropped)
    PP_WARNING(h,
               "off-CPU: %llu switches, %llu lost (ring full: raise perf.offcpu_mmap_pages), "
               "%llu throttle events, %llu not tracked (perf.offcpu_max_threads blocked threads "
               "at once), %llu stacks dropped",
               (unsigned long long)o->switches, (unsigned long long)o->lost,
               (unsigned long long)o->throttled, (unsigned long long)o->table_full,
               (unsigned long long)o->stacks.dropped);
  PP_DEBUG(h, "off-CPU: %llu switches, %llu recorded, %llu carried over a snapshot",
           (unsigned long long)o->switches, (unsigned long long)o->recorded,
           (unsigned long long)carried);
  perf_stacks_reset(&o->stacks);
  o->switches = o->recorded = o->below_threshold = o->table_full = o->lost = o->throttled = 0;
  o->ev.malformed = 0;
}
