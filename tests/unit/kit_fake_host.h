/* SPDX-License-Identifier: Apache-2.0 */
/* A host for testing kit code without the agent: records what reaches the
 * sink (stacks, statuses, counters) and the log. */
#ifndef PP_KIT_FAKE_HOST_H
#define PP_KIT_FAKE_HOST_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "polyprof/plugin.h"

#define FAKE_MAX 256

struct fake_record {
  int nsamples;
  char leaf[FAKE_MAX][128]; /* "name|file|line|kind" of each sample's leaf */
  char root[FAKE_MAX][128];
  char comm[FAKE_MAX][32];
  uint32_t nframes[FAKE_MAX];
  uint64_t count[FAKE_MAX];
  uint32_t tid[FAKE_MAX];
  uint32_t type[FAKE_MAX];
  int nstatus;
  uint32_t status_pid[FAKE_MAX];
  int status[FAKE_MAX];
  char reason[FAKE_MAX][200];
  char counters[2048]; /* "name=value " ... */
  char last_log[512];
};

static struct fake_record fake;

static void fake_frame(char *out, const struct pp_frame *f) {
  snprintf(out, 128, "%s|%s|%u|%u", f->name, f->file ? f->file : "-", f->line, f->kind);
}

static int fake_emit(struct pp_sink *sink, const struct pp_sample *s) {
  (void)sink;
  if (fake.nsamples == FAKE_MAX) return -1;
  int i = fake.nsamples++;
  fake_frame(fake.leaf[i], &s->frames[0]);
  fake_frame(fake.root[i], &s->frames[s->nframes - 1]);
  snprintf(fake.comm[i], sizeof(fake.comm[i]), "%s", s->comm ? s->comm : "(null)");
  fake.nframes[i] = s->nframes;
  fake.count[i] = s->count;
  fake.tid[i] = s->tid;
  fake.type[i] = s->type;
  return 0;
}

static int fake_status(struct pp_sink *sink, uint32_t pid, int status, const char *reason) {
  (void)sink;
  if (fake.nstatus == FAKE_MAX) return -1;
  int i = fake.nstatus++;
  fake.status_pid[i] = pid;
  fake.status[i] = status;
  snprintf(fake.reason[i], sizeof(fake.reason[i]), "%s", reason ? reason : "");
  return 0;
}

static int fake_counter(struct pp_sink *sink, const char *name, uint64_t delta) {
  (void)sink;
  size_t n = strlen(fake.counters);
  snprintf(fake.counters + n, sizeof(fake.counters) - n, "%s=%llu ", name,
           (unsigned long long)delta);
  return 0;
}

static void fake_log(const struct pp_host *host, int level, const char *fmt, ...) {
  (void)host;
  (void)level;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(fake.last_log, sizeof(fake.last_log), fmt, ap);
  va_end(ap);
}

static const struct pp_host fake_host = {.struct_size = sizeof(struct pp_host),
                                         .abi_major = PP_ABI_MAJOR,
                                         .abi_minor = PP_ABI_MINOR,
                                         .log = fake_log,
                                         .emit = fake_emit,
                                         .set_pid_status = fake_status,
                                         .add_counter = fake_counter};

static void fake_reset(void) {
  memset(&fake, 0, sizeof(fake));
}

#endif
