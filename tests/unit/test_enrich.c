/* SPDX-License-Identifier: Apache-2.0 */
/* pp_enrich on real processes: comm, appid, application metadata (ELF build
 * ids checked against readelf, AT_EXECFN, arch), plugin metadata merged
 * over the core's, dedup of equal metadata, vanished and reused pids,
 * container names through a real cgroup and a fake Docker API, and ELF
 * parsing of corrupted files. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "app_metadata.h"
#include "enrich.h"
#include "metadata.h"
#include "polyprof/kit/proc.h"
#include "profile.h"
#include "testlib.h"

#define A(...) ((const char *const[]){__VA_ARGS__, NULL})
#define CID "c0ffee0123456789abcdef0123456789abcdef0123456789abcdef0123456789"

static char tmp[PATH_MAX];

static void write_file(const char *dir, const char *name, const char *text) {
  char p[PATH_MAX * 2];
  snprintf(p, sizeof(p), "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  if (!f) exit(2);
  fputs(text, f);
  fclose(f);
}

static pid_t spawn(const char *const *argv, const char *cwd) {
  pid_t pid = fork();
  if (pid == 0) {
    if (chdir(cwd) != 0) _exit(126);
    int fd = open("/dev/null", O_RDWR);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  return pid;
}

static bool wait_exec(pid_t pid, const char *exe_prefix) {
  for (int i = 0; i < 1000; i++) {
    char exe[PATH_MAX];
    if (pp_proc_exe((uint32_t)pid, exe, sizeof(exe)) == 0) {
      const char *b = strrchr(exe, '/');
      /* /proc/PID/exe switches before execve has laid out argv and auxv:
       * wait for the command line too, or a loaded machine sees the gap */
      char cmd[64], path[64];
      size_t n = 0;
      snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
      if (b && strncmp(b + 1, exe_prefix, strlen(exe_prefix)) == 0 &&
          pp_read_file(path, cmd, sizeof(cmd), &n) == 0 && n > 0)
        return true;
    }
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return false;
}

static void reap(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
}

static uint64_t start_of(pid_t pid) {
  uint64_t st = 0;
  pp_proc_start_time((uint32_t)pid, &st);
  return st;
}

static struct pp_pid_rec *add_pid(struct pp_profile *p, pid_t pid, uint64_t start) {
  struct pp_pid_rec *r = pp_profile_pid_upsert(p, (uint32_t)pid);
  r->start_time = start;
  return r;
}

static const char *rec_str(struct pp_profile *p, uint32_t pid, int which) {
  struct pp_pid_rec *r = pp_profile_pid(p, pid);
  if (!r) return NULL;
  uint32_t id = which == 0 ? r->comm : which == 1 ? r->appid : r->container;
  return id == PP_NO_STR ? NULL : pp_profile_str(p, id);
}
#define COMM(p, pid) rec_str(p, (uint32_t)(pid), 0)
#define APPID(p, pid) rec_str(p, (uint32_t)(pid), 1)
#define CONTAINER(p, pid) rec_str(p, (uint32_t)(pid), 2)

static bool readelf_build_id(const char *path, char *out, size_t len) {
  char cmd[PATH_MAX + 64];
  snprintf(cmd, sizeof(cmd), "readelf -n '%s' 2>/dev/null", path);
  FILE *f = popen(cmd, "r");
  if (!f) return false;
  char line[512];
  bool ok = false;
  while (fgets(line, sizeof(line), f)) {
    char *b = strstr(line, "Build ID: ");
    if (b && !ok) {
      snprintf(out, len, "buildid:%s", b + 10);
      out[strcspn(out, "\n")] = '\0';
      ok = true;
    }
  }
  pclose(f);
  return ok;
}

static void test_real_enrich(void) {
  write_file(tmp, "app.py", "import time\ntime.sleep(30)\n");
  write_file(tmp, "other.py", "import time\ntime.sleep(30)\n");
  write_file(tmp, "server.js", "setTimeout(() => {}, 30000);\n");
  char py[PATH_MAX] = "/usr/bin/python3";
  if (access(py, X_OK) != 0) {
    printf("SKIPPED enrichment of real processes: /usr/bin/python3 not found\n");
    return;
  }
  pid_t p1 = spawn(A(py, "app.py"), tmp);
  pid_t p2 = spawn(A(py, "other.py"), tmp);
  pid_t p3 = spawn(A(py, "-c", "import time; time.sleep(30)"), tmp);
  pid_t ps = spawn(A("/bin/sleep", "30"), tmp);
  bool node = access("/usr/bin/node", X_OK) == 0;
  pid_t pn = node ? spawn(A("/usr/bin/node", "server.js"), tmp) : -1;
  CHECK(wait_exec(p1, "python") && wait_exec(p2, "python") && wait_exec(p3, "python"));
  CHECK(wait_exec(ps, "sleep"));
  if (node) CHECK(wait_exec(pn, "node"));

  struct pp_enrich_opts opts = {
      .appids = true, .containers = false, .app_metadata = true, .cache_size = 64};
  struct pp_enricher *en = pp_enricher_new(&opts);
  struct pp_profile *p = pp_profile_new();
  add_pid(p, p1, start_of(p1));
  add_pid(p, p2, start_of(p2));
  struct pp_pid_rec *r3 = add_pid(p, p3, start_of(p3));
  /* a plugin's appid and metadata for p3 */
  r3->appid = pp_profile_intern_cstr(p, "from plugin");
  pp_profile_pid(p, (uint32_t)p3)->app_meta =
      pp_profile_intern_cstr(p, "{\"python_version\": \"Python 3.11.7\", \"extra\": [1]}");
  add_pid(p, ps, 0); /* start time unknown: taken from /proc */
  if (node) add_pid(p, pn, start_of(pn));
  add_pid(p, 0, 0); /* the idle task */

  json_t *list = json_array();
  json_array_append_new(list, json_null()); /* what the session does */
  json_t *containers = json_array();
  CHECK_EQ_INT(pp_enrich(en, p, list, containers), 0);

  char expect[PATH_MAX * 4];
  CHECK_EQ_STR(COMM(p, p1), "python3");
  snprintf(expect, sizeof(expect), "python: app.py (%s/app.py)", tmp);
  CHECK_EQ_STR(APPID(p, p1), expect);
  snprintf(expect, sizeof(expect), "python: other.py (%s/other.py)", tmp);
  CHECK_EQ_STR(APPID(p, p2), expect);
  CHECK_EQ_STR(APPID(p, p3), "from plugin");
  CHECK_EQ_STR(COMM(p, ps), "sleep");
  CHECK(APPID(p, ps) == NULL);
  CHECK(COMM(p, 0) == NULL);
  CHECK_EQ_INT(json_array_size(containers), 0);

  /* p1 and p2 have equal metadata: one entry; p3's plugin keys make another */
  uint32_t i1 = pp_profile_pid(p, (uint32_t)p1)->app_meta_index;
  uint32_t i2 = pp_profile_pid(p, (uint32_t)p2)->app_meta_index;
  uint32_t i3 = pp_profile_pid(p, (uint32_t)p3)->app_meta_index;
  CHECK_EQ_INT(i1, 1);
  CHECK_EQ_INT(i2, 1);
  CHECK_EQ_INT(i3, 2);
  CHECK_EQ_INT(pp_profile_pid(p, (uint32_t)ps)->app_meta_index, 0);
  CHECK_EQ_INT(pp_profile_pid(p, 0)->app_meta_index, 0);
  CHECK(json_is_null(json_array_get(list, 0)));

  char *md = pp_json_dumps_python(json_array_get(list, 1));
  char exe[1024] = "", build_id[256] = "";
  pp_proc_exe((uint32_t)p1, exe, sizeof(exe));
  bool have_id = readelf_build_id(exe, build_id, sizeof(build_id));
  const char *b = strrchr(exe, '/');
  char ver[16] = "";
  unsigned maj, min;
  if (b && sscanf(b + 1, "python%u.%u", &maj, &min) == 2)
    snprintf(ver, sizeof(ver), "%u.%u", maj, min);
  snprintf(expect, sizeof(expect),
           "{\"python_version\": \"Python %s\", \"exe_elfid\": \"%s\", \"libpython_elfid\": null, "
           "\"sys_maxunicode\": null, \"exe\": \"%s\", \"execfn\": \"%s\", \"arch\": \"x86_64\"}",
           ver, have_id ? build_id : "?", exe, py);
  printf("python metadata: %s\n", md);
#if defined(__x86_64__)
  if (have_id && ver[0])
    CHECK_EQ_STR(md, expect);
  else
    printf("SKIPPED exact python metadata: no readelf build id or versioned exe name\n");
#endif
  CHECK_CONTAINS(md, "\"execfn\": \"/usr/bin/python3\"");
  free(md);
  md = pp_json_dumps_python(json_array_get(list, 2));
  /* plugin value replaces the core's in place; new keys come before exe */
  CHECK_CONTAINS(md, "{\"python_version\": \"Python 3.11.7\", \"exe_elfid\": ");
  CHECK_CONTAINS(md, "\"sys_maxunicode\": null, \"extra\": [1], \"exe\": ");
  free(md);
  if (node) {
    snprintf(expect, sizeof(expect), "nodejs: server.js (%s/server.js)", tmp);
    CHECK_EQ_STR(APPID(p, pn), expect);
    CHECK_EQ_STR(COMM(p, pn), "node");
    uint32_t in = pp_profile_pid(p, (uint32_t)pn)->app_meta_index;
    CHECK_EQ_INT(in, 3);
    md = pp_json_dumps_python(json_array_get(list, in));
    CHECK_CONTAINS(md, "{\"link\": \"dynamic\", \"libc\": \"glibc\", \"exe\": \"/usr/");
    CHECK_CONTAINS(md, "\"execfn\": \"/usr/bin/node\", \"arch\": \"");
    free(md);
  }
  CHECK_EQ_INT(json_array_size(list), node ? 4 : 3);

  /* next session: p1 exited; what was learnt while it lived is kept; a
   * record whose start time is not the live process's gets nothing. */
  uint64_t st1 = start_of(p1), st2 = start_of(p2);
  reap(p1);
  struct pp_profile *q = pp_profile_new();
  add_pid(q, p1, st1);
  add_pid(q, p2, st2 + 12345); /* the pid now names another process */
  json_t *list2 = json_array(), *c2 = json_array();
  CHECK_EQ_INT(pp_enrich(en, q, list2, c2), 0);
  CHECK_EQ_STR(COMM(q, p1), "python3");
  snprintf(expect, sizeof(expect), "python: app.py (%s/app.py)", tmp);
  CHECK_EQ_STR(APPID(q, p1), expect);
  CHECK_EQ_INT(pp_profile_pid(q, (uint32_t)p1)->app_meta_index, 1);
  CHECK(json_is_null(json_array_get(list2, 0)));
  CHECK(COMM(q, p2) == NULL);
  CHECK(APPID(q, p2) == NULL);
  CHECK_EQ_INT(pp_profile_pid(q, (uint32_t)p2)->app_meta_index, 0);
  json_decref(list2);
  json_decref(c2);
  pp_profile_free(q);

  /* a fresh enricher never saw p1: a vanished pid costs nothing */
  struct pp_enricher *en2 = pp_enricher_new(&opts);
  q = pp_profile_new();
  add_pid(q, p1, st1);
  add_pid(q, 999999999, 0);
  list2 = json_array();
  CHECK_EQ_INT(pp_enrich(en2, q, list2, NULL), 0);
  CHECK(COMM(q, p1) == NULL);
  CHECK_EQ_INT(pp_profile_pid(q, (uint32_t)p1)->app_meta_index, 0);
  CHECK_EQ_INT(json_array_size(list2), 1);
  json_decref(list2);
  pp_profile_free(q);
  pp_enricher_free(en2);

  /* everything off: comm only; a cache of 1 entry still gives right answers */
  struct pp_enrich_opts off = {.cache_size = 1};
  en2 = pp_enricher_new(&off);
  q = pp_profile_new();
  add_pid(q, p2, st2);
  add_pid(q, ps, 0);
  list2 = json_array();
  CHECK_EQ_INT(pp_enrich(en2, q, list2, NULL), 0);
  CHECK_EQ_STR(COMM(q, p2), "python3");
  CHECK_EQ_STR(COMM(q, ps), "sleep");
  CHECK(APPID(q, p2) == NULL);
  CHECK_EQ_INT(pp_profile_pid(q, (uint32_t)p2)->app_meta_index, 0);
  CHECK_EQ_INT(json_array_size(list2), 1);
  json_decref(list2);
  pp_profile_free(q);
  pp_enricher_free(en2);

  json_decref(list);
  json_decref(containers);
  pp_profile_free(p);
  pp_enricher_free(en);
  reap(p2);
  reap(p3);
  reap(ps);
  if (node) reap(pn);
}

/* A Python with a shared libpython (pyenv builds): libpython_elfid and the
 * version from the library's name. */
static void test_libpython(void) {
  const char *home = getenv("PYENV_ROOT");
  char pattern[PATH_MAX];
  if (home)
    snprintf(pattern, sizeof(pattern), "%s/versions/3.*/bin/python3.[0-9]*", home);
  else
    snprintf(pattern, sizeof(pattern), "%s/.pyenv/versions/3.*/bin/python3.[0-9]*",
             getenv("HOME") ? getenv("HOME") : "/root");
  glob_t g;
  char exe[1024] = "";
  if (glob(pattern, 0, NULL, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc && !exe[0]; i++)
      if (!strstr(g.gl_pathv[i], "-config") && access(g.gl_pathv[i], X_OK) == 0)
        snprintf(exe, sizeof(exe), "%s", g.gl_pathv[i]);
    globfree(&g);
  }
  if (!exe[0]) {
    printf("SKIPPED libpython metadata: no pyenv python with a shared libpython\n");
    return;
  }
  pid_t pid = spawn(A(exe, "-c", "import time; time.sleep(30)"), tmp);
  CHECK(wait_exec(pid, "python"));
  /* the loader maps libpython right after exec: wait for it */
  char maps[64], lib[1024] = "";
  snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
  for (int i = 0; i < 500 && !lib[0]; i++) {
    FILE *f = fopen(maps, "r");
    char line[2048];
    while (f && fgets(line, sizeof(line), f)) {
      char *p = strstr(line, "/libpython");
      if (p && !lib[0]) {
        p = strchr(line, '/');
        p[strcspn(p, "\n")] = 0;
        snprintf(lib, sizeof(lib), "%s", p);
      }
    }
    if (f) fclose(f);
    if (!lib[0]) usleep(10000);
  }
  if (!lib[0]) {
    printf("SKIPPED libpython metadata: %s maps no libpython\n", exe);
    reap(pid);
    return;
  }
  struct pp_enrich_opts opts = {.app_metadata = true, .cache_size = 4};
  struct pp_enricher *en = pp_enricher_new(&opts);
  struct pp_profile *p = pp_profile_new();
  add_pid(p, pid, start_of(pid));
  json_t *list = json_array();
  CHECK_EQ_INT(pp_enrich(en, p, list, NULL), 0);
  json_t *md = json_array_get(list, pp_profile_pid(p, (uint32_t)pid)->app_meta_index);
  char want[256];
  if (readelf_build_id(lib, want, sizeof(want)))
    CHECK_EQ_STR(json_string_value(json_object_get(md, "libpython_elfid")), want);
  const char *b = strrchr(exe, '/') + 1;
  char ver[32];
  snprintf(ver, sizeof(ver), "Python %s", b + strlen("python"));
  CHECK_EQ_STR(json_string_value(json_object_get(md, "python_version")), ver);
  char *t = pp_json_dumps_python(md);
  printf("pyenv python metadata: %s\n", t);
  free(t);
  json_decref(list);
  pp_profile_free(p);
  pp_enricher_free(en);
  reap(pid);
}

/* ---- containers: a real cgroup named like Docker's, a fake Docker API ---- */

static pid_t fake_docker(const char *path) {
  unlink(path);
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof(sa.sun_path)) exit(2);
  memcpy(sa.sun_path, path, strlen(path) + 1);
  if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(s, 4) != 0) exit(2);
  pid_t pid = fork();
  if (pid == 0) {
    const char *body = "[{\"Id\":\"" CID "\",\"Names\":[\"/web\"]}]";
    char hdr[128];
    snprintf(hdr, sizeof(hdr), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", strlen(body));
    for (;;) {
      int c = accept(s, NULL, NULL);
      if (c < 0) _exit(0);
      char req[4096];
      ssize_t n = read(c, req, sizeof(req));
      (void)n;
      if (write(c, hdr, strlen(hdr)) < 0 || write(c, body, strlen(body)) < 0) {
      }
      close(c);
    }
  }
  close(s);
  return pid;
}

static void test_containers(void) {
  const char *cg = "/sys/fs/cgroup/systemd/docker/" CID;
  mkdir("/sys/fs/cgroup/systemd/docker", 0755);
  if (mkdir(cg, 0755) != 0 && errno != EEXIST) {
    printf("SKIPPED container names of a real process: cannot create %s (%s)\n", cg,
           strerror(errno));
    return;
  }
  pid_t child = spawn(A("/bin/sleep", "30"), "/");
  wait_exec(child, "sleep");
  char procs[PATH_MAX], pidtext[32];
  snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg);
  snprintf(pidtext, sizeof(pidtext), "%d\n", (int)child);
  int fd = open(procs, O_WRONLY);
  bool moved = fd >= 0 && write(fd, pidtext, strlen(pidtext)) > 0;
  if (fd >= 0) close(fd);
  if (!moved) {
    printf("SKIPPED container names of a real process: cannot move a process into %s\n", cg);
  } else {
    char sock[128];
    snprintf(sock, sizeof(sock), "/tmp/pp_test_enrich.%d.sock", (int)getpid());
    pid_t srv = fake_docker(sock);
    struct {
      const char *socket;
      bool empty;
      const char *expect;
    } cases[] = {
        {sock, false, "web"},                                /* named by the runtime */
        {"/nonexistent/docker.sock", false, "c0ffee012345"}, /* short id fallback */
        {"/nonexistent/docker.sock", true, NULL},            /* gProfiler's empty name */
    };
    for (size_t i = 0; i < 3; i++) {
      struct pp_enrich_opts o = {.containers = true,
                                 .cache_size = 8,
                                 .docker_socket = cases[i].socket,
                                 .container_empty_if_unnamed = cases[i].empty};
      struct pp_enricher *en = pp_enricher_new(&o);
      struct pp_profile *p = pp_profile_new();
      add_pid(p, child, start_of(child));
      add_pid(p, getpid(), start_of(getpid())); /* not in a container */
      json_t *list = json_array(), *names = json_array();
      CHECK_EQ_INT(pp_enrich(en, p, list, names), 0);
      if (cases[i].expect) {
        CHECK_EQ_STR(CONTAINER(p, child), cases[i].expect);
        CHECK_EQ_INT(json_array_size(names), 1);
        CHECK_EQ_STR(json_string_value(json_array_get(names, 0)), cases[i].expect);
      } else {
        CHECK(CONTAINER(p, child) == NULL);
        CHECK_EQ_INT(json_array_size(names), 0);
      }
      CHECK(CONTAINER(p, getpid()) == NULL);
      json_decref(list);
      json_decref(names);
      pp_profile_free(p);
      pp_enricher_free(en);
    }
    kill(srv, SIGKILL);
    waitpid(srv, NULL, 0);
    unlink(sock);
  }
  reap(child);
  for (int i = 0; i < 100 && rmdir(cg) != 0; i++)
    usleep(10000);
  rmdir("/sys/fs/cgroup/systemd/docker");
}

/* ---- ELF and auxv ---- */

static void test_elf(void) {
  struct pp_elf_facts ef;
  int fd = open("/proc/self/exe", O_RDONLY);
  CHECK_EQ_INT(pp_elf_facts_fd(fd, &ef), 0);
  close(fd);
  CHECK_EQ_INT(ef.elf_class, ELFCLASS64);
  CHECK(ef.dynamic);
  CHECK_CONTAINS(ef.interp, "ld-linux");
#if defined(__x86_64__)
  CHECK_EQ_STR(pp_elf_machine_name(ef.machine), "x86_64");
#elif defined(__aarch64__)
  CHECK_EQ_STR(pp_elf_machine_name(ef.machine), "aarch64");
#endif
  CHECK(pp_elf_machine_name(0xffff) == NULL);
  char exe[PATH_MAX], want[256];
  if (pp_proc_exe((uint32_t)getpid(), exe, sizeof(exe)) == 0 &&
      readelf_build_id(exe, want, sizeof(want)))
    CHECK_EQ_STR(strlen(want) > 8 ? want + 8 : "", ef.build_id);
  /* not ELF */
  fd = open("/proc/self/cmdline", O_RDONLY);
  CHECK_EQ_INT(pp_elf_facts_fd(fd, &ef), -ENOEXEC);
  close(fd);

  /* corrupted copies of a real binary: any answer, never a crash */
  int in = open("/bin/true", O_RDONLY);
  static unsigned char orig[1 << 16];
  ssize_t n = in >= 0 ? read(in, orig, sizeof(orig)) : -1;
  if (in >= 0) close(in);
  CHECK(n > 1024);
  char path[PATH_MAX + 16];
  snprintf(path, sizeof(path), "%s/fuzz.elf", tmp);
  unsigned seed = 7;
  static unsigned char buf[1 << 16];
  for (int iter = 0; n > 1024 && iter < 600; iter++) {
    memcpy(buf, orig, (size_t)n);
    size_t len = (size_t)n;
    int flips = 1 + iter % 8;
    for (int k = 0; k < flips; k++) {
      seed = seed * 1103515245u + 12345u;
      size_t at = (seed >> 8) % (iter % 3 == 0 ? 64 : 1024); /* headers, phdrs, notes */
      seed = seed * 1103515245u + 12345u;
      buf[at] = (unsigned char)(seed >> 16);
    }
    if (iter % 5 == 0) len = 16 + (seed % 200); /* truncated */
    int wfd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (write(wfd, buf, len) != (ssize_t)len) break;
    close(wfd);
    int rfd = open(path, O_RDONLY);
    int rc = pp_elf_facts_fd(rfd, &ef);
    close(rfd);
    CHECK(rc == 0 || rc == -ENOEXEC);
    CHECK(strlen(ef.build_id) < sizeof(ef.build_id) && strlen(ef.interp) < sizeof(ef.interp));
  }
  unlink(path);

  /* AT_EXECFN of ourselves, read the way we read other processes */
  char execfn[PATH_MAX];
  CHECK_EQ_INT(pp_proc_execfn((uint32_t)getpid(), ELFCLASS64, execfn, sizeof(execfn)), 0);
  CHECK_EQ_STR(execfn, (const char *)getauxval(AT_EXECFN));
  CHECK(pp_proc_execfn(999999999, ELFCLASS64, execfn, sizeof(execfn)) < 0);
  CHECK(pp_proc_execfn((uint32_t)getpid(), ELFCLASS64, execfn, 1) < 0);

  /* collect on ourselves: no runtime, so nothing unless forced */
  CHECK(pp_app_metadata_collect((uint32_t)getpid(), PP_RT_UNKNOWN, NULL, false) == NULL);
  json_t *md = pp_app_metadata_collect((uint32_t)getpid(), PP_RT_UNKNOWN, NULL, true);
  CHECK_EQ_STR(json_string_value(json_object_get(md, "execfn")),
               (const char *)getauxval(AT_EXECFN));
  CHECK(json_object_get(md, "exe") && json_object_get(md, "arch"));
  json_decref(md);
  CHECK(pp_app_metadata_collect(0, PP_RT_PYTHON, NULL, true) == NULL);
  CHECK(pp_app_metadata_collect(999999999, PP_RT_PYTHON, NULL, true) == NULL);

  /* merging: bad plugin JSON is ignored, plugin wins, order kept */
  json_t *core = json_pack("{s:s, s:s, s:s, s:s}", "python_version", "Python 3.9", "exe", "/x",
                           "execfn", "/y", "arch", "x86_64");
  json_t *m = pp_app_metadata_merge(core, "not json");
  CHECK(json_equal(m, core));
  json_decref(m);
  m = pp_app_metadata_merge(core, "[1,2]");
  CHECK(json_equal(m, core));
  json_decref(m);
  m = pp_app_metadata_merge(core, "{\"exe\": \"/plugin\", \"k\": 1}");
  char *t = pp_json_dumps_python(m);
  CHECK_EQ_STR(t,
               "{\"python_version\": \"Python 3.9\", \"exe\": \"/plugin\", \"k\": 1, "
               "\"execfn\": \"/y\", \"arch\": \"x86_64\"}");
  free(t);
  json_decref(m);
  m = pp_app_metadata_merge(NULL, "{\"java_version\": \"17\"}");
  t = pp_json_dumps_python(m);
  CHECK_EQ_STR(t, "{\"java_version\": \"17\"}");
  free(t);
  json_decref(m);
  CHECK(pp_app_metadata_merge(NULL, NULL) == NULL);
  json_decref(core);
}

/* A process that execs keeps pid and start time: the next session's
 * enrichment must describe the new program (comm, appid), not the cached
 * launcher. */
static void test_exec_refreshes(void) {
  char py[PATH_MAX] = "/usr/bin/python3";
  if (access(py, X_OK) != 0) {
    printf("SKIPPED exec refresh: /usr/bin/python3 not found\n");
    return;
  }
  write_file(tmp, "after_exec.py", "import time\ntime.sleep(30)\n");
  /* sh reads one line, then becomes python3 in place */
  char script[PATH_MAX * 2];
  snprintf(script, sizeof(script), "read x; exec %s after_exec.py", py);
  int go[2];
  CHECK(pipe(go) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(go[0], 0);
    close(go[1]);
    if (chdir(tmp) != 0) _exit(126);
    execl("/bin/sh", "sh", "-c", script, (char *)NULL);
    _exit(127);
  }
  close(go[0]);
  char comm[64] = "";
  for (int i = 0; i < 500 && strcmp(comm, "sh") != 0; i++) { /* until sh runs */
    usleep(10000);
    pp_proc_comm((uint32_t)pid, comm, sizeof(comm));
  }
  CHECK_EQ_STR(comm, "sh");
  uint64_t start = start_of(pid);
  struct pp_enrich_opts opts = {.appids = true, .app_metadata = false, .cache_size = 64};
  struct pp_enricher *en = pp_enricher_new(&opts);
  struct pp_profile *p = pp_profile_new();
  add_pid(p, pid, start);
  CHECK_EQ_INT(pp_enrich(en, p, NULL, NULL), 0);
  CHECK_EQ_STR(COMM(p, pid), "sh");
  CHECK(APPID(p, pid) == NULL);

  CHECK(write(go[1], "\n", 1) == 1);
  CHECK(wait_exec(pid, "python"));
  CHECK(start_of(pid) == start);
  pp_profile_clear(p);
  add_pid(p, pid, start);
  CHECK_EQ_INT(pp_enrich(en, p, NULL, NULL), 0);
  CHECK_EQ_STR(COMM(p, pid), "python3");
  char expect[PATH_MAX * 4];
  snprintf(expect, sizeof(expect), "python: after_exec.py (%s/after_exec.py)", tmp);
  CHECK_EQ_STR(APPID(p, pid), expect);
  close(go[1]);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  pp_profile_free(p);
  pp_enricher_free(en);
}

/* What was learnt about a process that exited serves the session it exited
 * in and the next one (late stacks), then it is forgotten. */
static void test_forget_exited(void) {
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sleep", "sleep", "30", (char *)NULL);
    _exit(127);
  }
  char comm[64] = "";
  for (int i = 0; i < 500 && strcmp(comm, "sleep") != 0; i++) {
    usleep(10000);
    pp_proc_comm((uint32_t)pid, comm, sizeof(comm));
  }
  uint64_t start = start_of(pid);
  struct pp_enrich_opts opts = {.appids = true, .cache_size = 64};
  struct pp_enricher *en = pp_enricher_new(&opts);
  struct pp_profile *p = pp_profile_new();
  pp_enrich_remember(en, (uint32_t)pid, start);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  /* the session it exited in: learnt while alive */
  add_pid(p, pid, start);
  CHECK_EQ_INT(pp_enrich(en, p, NULL, NULL), 0);
  CHECK_EQ_STR(COMM(p, pid), "sleep");
  /* the next session: still known (seen gone once), also by its pid alone
   * (plugins report pids without start times: the last process remembered
   * with that pid answers for it once it is gone) */
  pp_profile_clear(p);
  add_pid(p, pid, 0);
  CHECK_EQ_INT(pp_enrich(en, p, NULL, NULL), 0);
  CHECK_EQ_STR(COMM(p, pid), "sleep");
  /* forgotten after that, by (pid, start) and by pid alone */
  pp_profile_clear(p);
  add_pid(p, pid, start);
  CHECK_EQ_INT(pp_enrich(en, p, NULL, NULL), 0);
  CHECK(COMM(p, pid) == NULL);
  pp_profile_clear(p);
  add_pid(p, pid, 0);
  CHECK_EQ_INT(pp_enrich(en, p, NULL, NULL), 0);
  CHECK(COMM(p, pid) == NULL);
  pp_profile_free(p);
  pp_enricher_free(en);
}

int main(void) {
  snprintf(tmp, sizeof(tmp), "/tmp/pp_test_enrich.XXXXXX");
  if (!mkdtemp(tmp)) return 2;
  test_elf();
  test_real_enrich();
  test_libpython();
  test_exec_refreshes();
  test_containers();
  test_forget_exited();
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
  if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", tmp);
  return pp_test_finish("test_enrich");
}
