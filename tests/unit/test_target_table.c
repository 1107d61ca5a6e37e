/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kit's target table against real processes: first attach, retry with
 * backoff, not-mine and skipped processes, exec in place (same pid and
 * start time, new image), pid reuse, exit, and the statuses and counters
 * each snapshot reports.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kit_fake_host.h"
#include "polyprof/kit/log.h"
#include "polyprof/kit/proc.h"
#include "polyprof/kit/target_table.h"
#include "testlib.h"

/* What attach() answers, per pid: a script of return codes. */
struct script {
  uint32_t pid;
  int codes[8];
  int ncodes, at;
};

struct plugin {
  struct script s[8];
  int ns;
  int attaches, releases;
  int data_live; /* per-target states allocated and not released */
};

static int fake_attach(void *p, struct pp_target_entry *t) {
  struct plugin *pl = p;
  pl->attaches++;
  int rc = 0;
  for (int i = 0; i < pl->ns; i++)
    if (pl->s[i].pid == t->pid && pl->s[i].at < pl->s[i].ncodes) rc = pl->s[i].codes[pl->s[i].at++];
  /* state is allocated before the verdict, as a plugin's would be */
  t->data = malloc(16);
  pl->data_live++;
  if (rc != 0 && rc != PP_ATTACH_IGNORE) snprintf(t->reason, sizeof(t->reason), "code %d", rc);
  return rc;
}

static void fake_release(void *p, struct pp_target_entry *t) {
  struct plugin *pl = p;
  pl->releases++;
  pl->data_live--;
  free(t->data);
}

static const struct pp_target_ops ops = {fake_attach, fake_release};

static pid_t spawn_sleeper(void) {
  pid_t p = fork();
  if (p == 0) {
    execl("/bin/sleep", "sleep", "60", (char *)NULL);
    _exit(127);
  }
  usleep(50000);
  return p;
}

static struct pp_target target_of(pid_t pid) {
  struct pp_target t = {.pid = (uint32_t)pid};
  CHECK_EQ_INT(pp_proc_start_time((uint32_t)pid, &t.start_time), 0);
  return t;
}

static void reap(pid_t p) {
  kill(p, SIGKILL);
  waitpid(p, NULL, 0);
}

static void test_lifecycle(void) {
  struct plugin pl = {0};
  pid_t a = spawn_sleeper(), b = spawn_sleeper(), c = spawn_sleeper(), d = spawn_sleeper();
  pl.s[pl.ns++] = (struct script){(uint32_t)b, {-EAGAIN, -EAGAIN, 0}, 3, 0};
  pl.s[pl.ns++] = (struct script){(uint32_t)c, {PP_ATTACH_IGNORE}, 1, 0};
  pl.s[pl.ns++] = (struct script){(uint32_t)d, {PP_ATTACH_SKIP}, 1, 0};
  struct pp_target_table_config cfg = {.retry_first_ns = 1000000, .retry_max_ns = 4000000};
  struct pp_target_table *tt = pp_target_table_new(&fake_host, &ops, &pl, &cfg);
  struct pp_target set[4] = {target_of(a), target_of(b), target_of(c), target_of(d)};
  CHECK_EQ_INT(pp_target_table_add(tt, set, 4), 0);
  CHECK_EQ_INT(pl.attaches, 4);
  CHECK_EQ_INT(pp_target_table_find(tt, (uint32_t)a)->state, PP_TARGET_ATTACHED);
  CHECK_EQ_INT(pp_target_table_find(tt, (uint32_t)b)->state, PP_TARGET_PENDING);
  CHECK_EQ_INT(pp_target_table_find(tt, (uint32_t)c)->state, PP_TARGET_IGNORED);
  CHECK_EQ_INT(pp_target_table_find(tt, (uint32_t)d)->state, PP_TARGET_SKIPPED);
  CHECK(pp_target_table_find(tt, 1) == NULL);
  /* refused targets hold nothing */
  CHECK_EQ_INT(pl.data_live, 1);

  /* not due yet: no attach */
  pp_target_table_poll(tt, pp_clock_ns());
  CHECK_EQ_INT(pl.attaches, 4);
  /* due: retried, then retried again after a doubled wait, then attached */
  for (int i = 0; i < 50 && pp_target_table_find(tt, (uint32_t)b)->state != PP_TARGET_ATTACHED;
       i++) {
    usleep(1000);
    pp_target_table_poll(tt, pp_clock_ns());
  }
  CHECK_EQ_INT(pp_target_table_find(tt, (uint32_t)b)->state, PP_TARGET_ATTACHED);
  CHECK_EQ_INT(pp_target_table_find(tt, (uint32_t)b)->attempts, 3);
  CHECK_EQ_INT(pl.attaches, 6);

  /* a session's re-announcement of the same images: nothing happens */
  CHECK_EQ_INT(pp_target_table_add(tt, set, 4), 0);
  CHECK_EQ_INT(pl.attaches, 6);

  /* the report: a status for the skipped one only, counters */
  fake_reset();
  pp_target_table_report(tt, NULL);
  CHECK_EQ_INT(fake.nstatus, 1);
  CHECK_EQ_INT(fake.status_pid[0], (uint32_t)d);
  CHECK_EQ_INT(fake.status[0], PP_PID_SKIPPED);
  CHECK_EQ_STR(fake.reason[0], "code 2");
  CHECK(strstr(fake.counters, "targets_attached=2") != NULL);

  /* iteration over the attached ones */
  struct pp_target_entry *t;
  int n = 0;
  PP_TARGETS_FOREACH(tt, t, PP_TARGET_ATTACHED) n++;
  CHECK_EQ_INT(n, 2);
  CHECK_EQ_INT(pp_target_table_count(tt, -1), 4);

  /* pid reuse: same pid, another start time: the old state released */
  struct pp_target reused = set[0];
  reused.start_time += 1;
  int rel = pl.releases;
  CHECK_EQ_INT(pp_target_table_add(tt, &reused, 1), 0);
  CHECK_EQ_INT(pl.releases, rel + 1);
  CHECK_EQ_INT(pl.attaches, 7);
  CHECK_EQ_INT(pp_target_table_find(tt, (uint32_t)a)->start_time, reused.start_time);

  /* exit: released at the report, its entry gone, and the dead one with
   * the made-up start time too */
  reap(b);
  reap(a);
  fake_reset();
  pp_target_table_report(tt, NULL);
  CHECK(pp_target_table_find(tt, (uint32_t)b) == NULL);
  CHECK(pp_target_table_find(tt, (uint32_t)a) == NULL);
  CHECK_EQ_INT(pp_target_table_count(tt, -1), 2);
  CHECK_EQ_INT(pl.data_live, 0);

  /* exit seen by the plugin: released at once */
  pl.s[pl.ns++] = (struct script){(uint32_t)c, {0}, 1, 0};
  pp_target_table_free(tt);
  CHECK_EQ_INT(pl.data_live, 0);
  reap(c);
  reap(d);
}

static void test_exhausted(void) {
  struct plugin pl = {0};
  pid_t a = spawn_sleeper();
  pl.s[pl.ns++] = (struct script){(uint32_t)a, {-EAGAIN, -EAGAIN, -EAGAIN, -EAGAIN}, 4, 0};
  struct pp_target_table_config cfg = {
      .retry_attempts = 3, .retry_first_ns = 1000000, .retry_max_ns = 1000000};
  struct pp_target_table *tt = pp_target_table_new(&fake_host, &ops, &pl, &cfg);
  struct pp_target g = target_of(a);
  pp_target_table_add(tt, &g, 1);
  for (int i = 0; i < 50; i++) {
    usleep(1000);
    pp_target_table_poll(tt, pp_clock_ns());
  }
  struct pp_target_entry *t = pp_target_table_find(tt, (uint32_t)a);
  CHECK_EQ_INT(t->state, PP_TARGET_FAILED);
  CHECK_EQ_INT(t->attempts, 3);
  CHECK_EQ_INT(pl.data_live, 0);
  fake_reset();
  pp_target_table_report(tt, NULL);
  CHECK_EQ_INT(fake.nstatus, 1);
  CHECK_EQ_INT(fake.status[0], PP_PID_ERROR);
  CHECK(strstr(fake.counters, "targets_failed=1") != NULL);
  /* gone seen by the plugin */
  pp_target_table_gone(tt, t);
  CHECK_EQ_INT(t->state, PP_TARGET_GONE);
  pp_target_table_free(tt);
  reap(a);
}

/* A process that execs after it was attached: same pid, same start time,
 * a new image: looked at again. */
static void test_exec(void) {
  int go[2];
  CHECK_EQ_INT(pipe(go), 0);
  pid_t p = fork();
  if (p == 0) {
    char c;
    close(go[1]);
    if (read(go[0], &c, 1) != 1) _exit(1);
    execl("/bin/sleep", "sleep", "60", (char *)NULL);
    _exit(127);
  }
  close(go[0]);
  usleep(50000);
  struct plugin pl = {0}, polled = {0};
  struct pp_target_table *tt = pp_target_table_new(&fake_host, &ops, &pl, NULL);
  /* a second table that checks liveness itself (no re-announcement) */
  struct pp_target_table_config live = {.liveness_ns = 1};
  struct pp_target_table *tp = pp_target_table_new(&fake_host, &ops, &polled, &live);
  struct pp_target g = target_of(p);
  pp_target_table_add(tt, &g, 1);
  pp_target_table_add(tp, &g, 1);
  CHECK_EQ_INT(pl.attaches, 1);
  pp_target_table_add(tt, &g, 1);
  CHECK_EQ_INT(pl.attaches, 1); /* same image */
  CHECK_EQ_INT(write(go[1], "x", 1), 1);
  close(go[1]);
  usleep(100000);
  struct pp_target again = target_of(p);
  CHECK_EQ_INT(again.start_time, g.start_time);
  pp_target_table_add(tt, &again, 1);
  CHECK_EQ_INT(pl.attaches, 2);
  CHECK_EQ_INT(pl.releases, 1);
  CHECK_EQ_INT(pp_target_table_find(tt, (uint32_t)p)->attempts, 1);
  pp_target_table_poll(tp, pp_clock_ns() + 1000);
  CHECK_EQ_INT(polled.attaches, 2);
  CHECK_EQ_INT(polled.releases, 1);
  /* and a reattach the plugin asks for */
  pp_target_table_reattach(tp, pp_target_table_find(tp, (uint32_t)p));
  CHECK_EQ_INT(polled.attaches, 3);
  CHECK_EQ_INT(polled.data_live, 1);
  pp_target_table_free(tp);
  pp_target_table_free(tt);
  reap(p);
}

/* Many targets: the pid index finds each; dead ones all go at the report. */
static void test_many(void) {
  struct plugin pl = {0};
  struct pp_target_table *tt = pp_target_table_new(&fake_host, &ops, &pl, NULL);
  enum { N = 5000 };
  static struct pp_target g[N];
  for (int i = 0; i < N; i++)
    g[i] = (struct pp_target){.pid = 4000000 + (uint32_t)i * 7, .start_time = 1};
  CHECK_EQ_INT(pp_target_table_add(tt, g, N), 0);
  int found = 0;
  for (int i = 0; i < N; i++)
    found += pp_target_table_find(tt, g[i].pid) != NULL;
  CHECK_EQ_INT(found, N);
  pp_target_table_report(tt, NULL);
  CHECK_EQ_INT(pp_target_table_count(tt, -1), 0);
  CHECK_EQ_INT(pl.data_live, 0);
  pp_target_table_free(tt);
}

/* A target the plugin loses after attaching it: pending with its reason,
 * attached again after the delay asked for, as a new attach cycle. */
static void test_retry(void) {
  struct plugin pl = {0};
  pid_t a = spawn_sleeper();
  struct pp_target_table_config cfg = {.retry_attempts = 2};
  struct pp_target_table *tt = pp_target_table_new(&fake_host, &ops, &pl, &cfg);
  struct pp_target g = target_of(a);
  pp_target_table_add(tt, &g, 1);
  struct pp_target_entry *t = pp_target_table_find(tt, (uint32_t)a);
  CHECK_EQ_INT(t->state, PP_TARGET_ATTACHED);
  snprintf(t->reason, sizeof(t->reason), "session closed");
  pp_target_table_retry(tt, t, -ECONNRESET, 20000000ull);
  CHECK_EQ_INT(t->state, PP_TARGET_PENDING);
  CHECK_EQ_INT(t->last_error, -ECONNRESET);
  CHECK_EQ_INT(pl.data_live, 0);
  fake_reset();
  pp_target_table_report(tt, NULL);
  CHECK_EQ_INT(fake.nstatus, 1);
  CHECK_EQ_INT(fake.status[0], PP_PID_ERROR);
  pp_target_table_poll(tt, pp_clock_ns());
  CHECK_EQ_INT(t->state, PP_TARGET_PENDING); /* not before the delay */
  usleep(30000);
  pp_target_table_poll(tt, pp_clock_ns());
  CHECK_EQ_INT(t->state, PP_TARGET_ATTACHED); /* attempts counted afresh */
  CHECK_EQ_INT(pl.data_live, 1);
  pp_target_table_free(tt);
  CHECK_EQ_INT(pl.data_live, 0);
  reap(a);
}

int main(void) {
  test_lifecycle();
  test_exhausted();
  test_exec();
  test_retry();
  test_many();
  return pp_test_finish("test_target_table");
}
