/* SPDX-License-Identifier: Apache-2.0 */
/* Target discovery: pattern matching and real /proc scans of real children. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "polyprof/kit/proc.h"
#include "targets.h"
#include "testlib.h"

static void test_patterns(void) {
  const char *const py[] = {"python*", "uwsgi", NULL};
  CHECK(pp_targets_match_exe(py, "/usr/bin/python3.11"));
  CHECK(pp_targets_match_exe(py, "/opt/app/bin/uwsgi (deleted)"));
  CHECK(!pp_targets_match_exe(py, "/usr/bin/ruby"));
  CHECK(!pp_targets_match_exe(py, "/usr/lib/python3/xpython/ruby"));
  CHECK(!pp_targets_match_exe(py, ""));
  const char *const lib[] = {"libpython3*.so*", NULL};
  const char *maps =
      "55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 1 /usr/bin/app\n"
      "7f00 r-xp 0 08:01 2 /usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0\n";
  CHECK(pp_targets_match_maps(lib, maps));
  CHECK(!pp_targets_match_maps(lib, "7f00 r-xp 0 08:01 2 /usr/lib/libruby.so.3.1\n[vdso]\n"));
  CHECK(!pp_targets_match_maps(lib, ""));
}

struct seen {
  uint32_t pids[64];
  uint64_t starts[64];
  size_t plugin[64];
  size_t n;
};

static void on_new(void *ctx, size_t plugin, const struct pp_target *t) {
  struct seen *s = ctx;
  if (s->n < 64) {
    s->pids[s->n] = t->pid;
    s->starts[s->n] = t->start_time;
    s->plugin[s->n] = plugin;
    s->n++;
  }
}

static int count_pid(const struct seen *s, uint32_t pid, size_t plugin) {
  int c = 0;
  for (size_t i = 0; i < s->n; i++)
    c += s->pids[i] == pid && s->plugin[i] == plugin;
  return c;
}

/* A child that execs `sleep 30` once told to (one byte on go). */
static pid_t start_execer(int go[2]) {
  if (pipe(go) != 0) return -1;
  pid_t child = fork();
  if (child == 0) {
    char c;
    close(go[1]);
    if (read(go[0], &c, 1) == 1) execlp("sleep", "sleep", "30", (char *)NULL);
    _exit(127);
  }
  close(go[0]);
  return child;
}

/* Tells the child to exec and waits (2 s at most) until it has. */
static void exec_now(pid_t child, int go[2]) {
  CHECK(write(go[1], "x", 1) == 1);
  close(go[1]);
  char exe[4096] = "";
  for (int i = 0; i < 200 && !strstr(exe, "sleep"); i++) {
    usleep(10000);
    pp_proc_exe((uint32_t)child, exe, sizeof(exe));
  }
  CHECK(strstr(exe, "sleep") != NULL);
}

/* A table that looks at `child` alone. */
static struct pp_targets *targets_of_child(const struct pp_plugin *const *descs, size_t n,
                                           pid_t child) {
  struct pp_targets *t = pp_targets_new(descs, n);
  uint32_t only = (uint32_t)child;
  pp_targets_set_filter(t, &only, 1);
  return t;
}

static void end_child(pid_t child) {
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
}

static void test_real_scan(void) {
  pid_t child = fork();
  if (child == 0) {
    execlp("sleep", "sleep", "30", (char *)NULL);
    _exit(127);
  }
  usleep(200000); /* let exec happen */
  const char *const sleep_exe[] = {"sleep", NULL};
  const char *const libc_maps[] = {"libc.so*", NULL};
  struct pp_plugin by_exe = {.name = "a", .match_exe = sleep_exe};
  struct pp_plugin by_maps = {.name = "b", .match_maps = libc_maps};
  struct pp_plugin system_wide = {
      .name = "c", .capabilities = PP_CAP_SYSTEM_WIDE, .match_exe = sleep_exe};
  const struct pp_plugin *descs[] = {&by_exe, &by_maps, &system_wide};
  struct pp_targets *t = targets_of_child(descs, 3, child);
  uint32_t only = (uint32_t)child;

  struct seen s = {0};
  int n = pp_targets_scan(t, true, on_new, &s);
  CHECK_EQ_INT(n, 1);
  CHECK_EQ_INT(count_pid(&s, only, 0), 1);
  CHECK_EQ_INT(count_pid(&s, only, 1), 1);
  CHECK_EQ_INT(count_pid(&s, only, 2), 0); /* system-wide plugins get no targets */
  uint64_t st = 0;
  pp_proc_start_time(only, &st);
  CHECK(s.n > 0 && s.starts[0] == st);

  /* known process: not announced again */
  s.n = 0;
  pp_targets_scan(t, false, on_new, &s);
  pp_targets_scan(t, true, on_new, &s);
  CHECK_EQ_INT(s.n, 0);
  const struct pp_target *list;
  CHECK_EQ_INT(pp_targets_of(t, 0, &list), 1);
  CHECK(list && list[0].pid == only);

  /* excluded processes are never matched */
  pid_t excl = child;
  struct pp_targets *t2 = pp_targets_new(descs, 3);
  pp_targets_set_filter(t2, &only, 1);
  pp_targets_set_excluded(t2, &excl, 1);
  s.n = 0;
  pp_targets_scan(t2, true, on_new, &s);
  CHECK_EQ_INT(s.n, 0);
  pp_targets_free(t2);

  /* gone process drops out of the lists */
  end_child(child);
  pp_targets_scan(t, true, on_new, &s);
  CHECK_EQ_INT(pp_targets_of(t, 0, &list), 0);
  pp_targets_free(t);
}

static void test_whole_machine_scan(void) {
  /* no filter: at least this process and pid 1 are seen, and cheaply */
  const char *const any[] = {"*", NULL};
  struct pp_plugin all = {.name = "all", .match_exe = any};
  const struct pp_plugin *descs[] = {&all};
  struct pp_targets *t = pp_targets_new(descs, 1);
  int n = pp_targets_scan(t, true, NULL, NULL);
  CHECK(n >= 2);
  const struct pp_target *list;
  size_t m = pp_targets_of(t, 0, &list);
  int found_self = 0;
  for (size_t i = 0; i < m; i++)
    found_self |= list[i].pid == (uint32_t)getpid();
  CHECK(found_self);
  pp_targets_free(t);
}

/* A process that execs keeps its pid and start time: the session-boundary
 * recheck must still notice the new image at once (a launcher that became a
 * runtime), not after the unmatched-process backoff (up to 10 minutes). */
static void test_exec_reclassified(void) {
  int go[2];
  pid_t child = start_execer(go);
  CHECK(child > 0);
  const char *const sleep_exe[] = {"sleep", NULL};
  const char *const self_exe[] = {"test_targets", NULL};
  struct pp_plugin by_exe = {.name = "a", .match_exe = sleep_exe};
  struct pp_plugin old_image = {.name = "b", .match_exe = self_exe}; /* before the exec */
  const struct pp_plugin *descs[] = {&by_exe, &old_image};
  struct pp_targets *t = targets_of_child(descs, 2, child);
  uint32_t only = (uint32_t)child;
  struct seen s = {0};
  /* classified as "not sleep" twice, 1.1 s apart: its next classification
   * is >= 2 s away (1 s, then 2 s backoff), far beyond the scans below */
  pp_targets_scan(t, true, on_new, &s);
  usleep(1100000);
  pp_targets_scan(t, true, on_new, &s);
  CHECK_EQ_INT(count_pid(&s, only, 0), 0);
  CHECK_EQ_INT(count_pid(&s, only, 1), 1); /* the old image, once */
  uint64_t st_before = 0, st_after = 0;
  pp_proc_start_time(only, &st_before);
  exec_now(child, go);
  pp_proc_start_time(only, &st_after);
  CHECK(st_before == st_after);
  pp_targets_scan(t, false, on_new, &s); /* per-second path: no file reads, may miss it */
  pp_targets_scan(t, true, on_new, &s);  /* session boundary: must see it */
  CHECK_EQ_INT(count_pid(&s, only, 0), 1);
  const struct pp_target *list;
  CHECK_EQ_INT(pp_targets_of(t, 0, &list), 1);
  CHECK_EQ_INT(pp_targets_of(t, 1, &list), 0); /* the old image's match is gone */
  end_child(child);
  pp_targets_free(t);
}

/* The whole maps file: a sanitizer build's child lists hundreds of
 * shadow mappings before the library it maps last. */
static bool maps_has(pid_t pid, const char *needle) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  char line[4096];
  bool found = false;
  while (!found && fgets(line, sizeof(line), f))
    found = strstr(line, needle) != NULL;
  fclose(f);
  return found;
}

/* A child that maps `lib` once told to (one byte on go), then waits. */
static pid_t start_mapper(const char *lib, int go[2]) {
  if (pipe(go) != 0) return -1;
  pid_t child = fork();
  if (child == 0) {
    char c;
    close(go[1]);
    if (read(go[0], &c, 1) == 1) {
      int fd = open(lib, O_RDONLY);
      if (fd >= 0) (void)mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    }
    pause();
    _exit(0);
  }
  close(go[0]);
  return child;
}

static void map_now(pid_t child, int go[2], const char *name) {
  CHECK(write(go[1], "x", 1) == 1);
  close(go[1]);
  for (int i = 0; i < 200 && !maps_has(child, name); i++)
    usleep(5000);
  CHECK(maps_has(child, name));
}

/* A runtime maps its library a moment after it starts: a process first
 * seen without it is looked at again by the young recheck (no scan), and
 * handed to its plugin once; a process older than PP_TARGETS_YOUNG_MS is
 * left to the scan's backoff. */
static void test_young_recheck(void) {
  char dir[] = "/tmp/pptest-young-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char lib[128];
  snprintf(lib, sizeof(lib), "%s/libppyoung.so", dir);
  int fd = open(lib, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0);
  CHECK(ftruncate(fd, 4096) == 0);
  close(fd);

  const char *const young_lib[] = {"libppyoung.so", NULL};
  struct pp_plugin by_maps = {.name = "m", .match_maps = young_lib};
  const struct pp_plugin *descs[] = {&by_maps};

  int go[2];
  pid_t child = start_mapper(lib, go);
  CHECK(child > 0);
  struct pp_targets *t = targets_of_child(descs, 1, child);
  uint32_t only = (uint32_t)child;
  struct seen s = {0};
  pp_targets_scan(t, false, on_new, &s);
  CHECK_EQ_INT(s.n, 0);
  CHECK_EQ_INT(pp_targets_young(t), 1);
  CHECK_EQ_INT(pp_targets_recheck_young(t, on_new, &s), 1); /* still nothing mapped */
  CHECK_EQ_INT(s.n, 0);
  CHECK_EQ_INT(pp_targets_recheck_young(t, on_new, &s), 1); /* not its turn yet */
  map_now(child, go, "libppyoung.so");
  usleep(PP_TARGETS_YOUNG_TICK_MS * 1000); /* its next turn */
  CHECK_EQ_INT(pp_targets_recheck_young(t, on_new, &s), 0);
  CHECK_EQ_INT(count_pid(&s, only, 0), 1);
  const struct pp_target *list;
  CHECK_EQ_INT(pp_targets_of(t, 0, &list), 1);
  CHECK(list && list[0].pid == only);
  /* matched: neither the recheck nor the next scan announces it again */
  CHECK_EQ_INT(pp_targets_recheck_young(t, on_new, &s), 0);
  pp_targets_scan(t, false, on_new, &s);
  CHECK_EQ_INT(s.n, 1);
  CHECK_EQ_INT(pp_targets_of(t, 0, &list), 1);
  end_child(child);
  /* gone: its turn ends at the first look */
  pp_targets_free(t);

  /* old: seen young, mapped only once past the young window */
  child = start_mapper(lib, go);
  CHECK(child > 0);
  t = targets_of_child(descs, 1, child);
  s.n = 0;
  pp_targets_scan(t, false, on_new, &s);
  CHECK_EQ_INT(pp_targets_young(t), 1);
  usleep((PP_TARGETS_YOUNG_MS + 100) * 1000);
  map_now(child, go, "libppyoung.so");
  CHECK_EQ_INT(pp_targets_recheck_young(t, on_new, &s), 0);
  CHECK_EQ_INT(s.n, 0);
  CHECK_EQ_INT(pp_targets_young(t), 0);
  end_child(child);
  pp_targets_free(t);
  unlink(lib);
  rmdir(dir);
}

/* An exec seen by the young recheck alone (no process events, no scan):
 * the new image is classified at once, by its executable too. */
static void test_young_exec(void) {
  int go[2];
  pid_t child = start_execer(go);
  CHECK(child > 0);
  const char *const sleep_exe[] = {"sleep", NULL};
  struct pp_plugin by_exe = {.name = "a", .match_exe = sleep_exe};
  const struct pp_plugin *descs[] = {&by_exe};
  struct pp_targets *t = targets_of_child(descs, 1, child);
  uint32_t only = (uint32_t)child;
  struct seen s = {0};
  pp_targets_scan(t, false, on_new, &s);
  CHECK_EQ_INT(s.n, 0);
  CHECK_EQ_INT(pp_targets_young(t), 1);
  exec_now(child, go);
  CHECK_EQ_INT(pp_targets_recheck_young(t, on_new, &s), 0);
  CHECK_EQ_INT(count_pid(&s, only, 0), 1);
  end_child(child);
  pp_targets_free(t);
}

int main(void) {
  test_patterns();
  test_real_scan();
  test_exec_reclassified();
  test_young_recheck();
  test_young_exec();
  test_whole_machine_scan();
  return pp_test_finish("test_targets");
}
