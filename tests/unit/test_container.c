/* SPDX-License-Identifier: Apache-2.0 */
/* Container ids from literal /proc/PID/cgroup texts of every runtime, and
 * container names from a fake Docker Engine API served by a child process
 * on a temporary unix socket: normal, chunked, garbage, oversized, hanging,
 * non-200 and non-JSON replies, caching and re-listing. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "container.h"
#include "enrich.h"
#include "k8s_labels.h"
#include "testlib.h"

#define ID_A "3f2a9c1b8e7d6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a"
#define ID_B "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define ID_C "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

struct cg_case {
  const char *what, *text, *expect;
};

static void test_cgroup_parse(void) {
  const struct cg_case cases[] = {
      {"docker v1", "12:pids:/docker/" ID_A "\n11:memory:/docker/" ID_A "\n0::/\n", ID_A},
      {"docker v2 systemd", "0::/system.slice/docker-" ID_A ".scope\n", ID_A},
      {"docker v1 systemd driver", "9:name=systemd:/system.slice/docker-" ID_B ".scope\n", ID_B},
      {"containerd CRI v2",
       "0::/kubepods.slice/kubepods-burstable.slice/"
       "kubepods-burstable-pod1234abcd_5678_90ab_cdef_1234567890ab.slice/cri-containerd-" ID_A
       ".scope\n",
       ID_A},
      {"kubepods v1 cgroupfs",
       "11:memory:/kubepods/burstable/pod0f0b5c3e-1d2a-4c4e-9a37-7c2b1c0d9e11/" ID_B "\n", ID_B},
      {"kubepods besteffort systemd",
       "1:cpu:/kubepods.slice/kubepods-besteffort.slice/"
       "kubepods-besteffort-pod0f0b5c3e_1d2a_4c4e_9a37_7c2b1c0d9e11.slice/docker-" ID_C ".scope\n",
       ID_C},
      {"CRI-O", "0::/kubepods.slice/kubepods-pod11.slice/crio-" ID_C ".scope\n", ID_C},
      {"CRI-O conmon", "0::/machine.slice/crio-conmon-" ID_A ".scope\n", ID_A},
      {"podman rootful", "0::/machine.slice/libpod-" ID_B ".scope/container\n", ID_B},
      {"podman rootless",
       "0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" ID_C ".scope\n", ID_C},
      {"ECS", "9:perf_event:/ecs/0123456789abcdef0123456789abcdef/" ID_A "\n", ID_A},
      {"first line with an id wins", "5:cpu:/docker/" ID_A "\n4:memory:/docker/" ID_B "\n", ID_A},
      {"last id of that line", "5:cpu:/docker/" ID_A "/nested/" ID_B "\n", ID_B},
      {"lines without ids first", "3:cpuset:/\n2:cpu:/user.slice\n1:memory:/docker/" ID_C, ID_C},
      {"a 65-hex run: its first 64", "0::/x/" ID_A "f\n", ID_A},
      {"128 hex: two matches, the second", "0::/" ID_A ID_B "\n", ID_B},
      {"host process", "0::/user.slice/user-1000.slice/session-3.scope\n", NULL},
      {"uppercase is not an id",
       "0::/docker/3F2A9C1B8E7D6F5A4B3C2D1E0F9A8B7C6D5E4F3A2B1C0D9E8F7A6B5C4D3E2F1A\n", NULL},
      {"63 hex", "0::/docker/3f2a9c1b8e7d6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1\n",
       NULL},
      {"sandbox memory path", "4:memory:/process_api/eb4fff4657e76f020110f08e5978df16\n0::/\n",
       NULL},
      {"id in the controller field is ignored", "1:" ID_A ":/\n", NULL},
      {"garbage without colons", ID_B "\n", ID_B},
      {"empty", "", NULL},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char id[65] = "unset";
    int rc = pp_container_id_from_cgroup(cases[i].text, id);
    if (cases[i].expect) {
      CHECK_EQ_INT(rc, 0);
      CHECK_EQ_STR(id, cases[i].expect);
    } else {
      CHECK_EQ_INT(rc, -ENOENT);
    }
    if ((rc == 0) != (cases[i].expect != NULL)) fprintf(stderr, "  case: %s\n", cases[i].what);
  }
  char id[65];
  CHECK_EQ_INT(pp_container_id_from_cgroup(NULL, id), -ENOENT);
}

/* ---- fake Docker API ---- */

enum mode {
  OK_LENGTH,
  OK_CHUNKED,
  OK_EOF,
  GARBAGE,
  OVERSIZED,
  HANG,
  ERROR_500,
  NOT_JSON,
  NOT_ARRAY
};

static char sock_path[96], count_path[128];

static const char *list_json =
    "[{\"Id\":\"" ID_A
    "\",\"Names\":[\"/web\"],\"Image\":\"nginx\","
    "\"Labels\":{\"app\":\"nginx\",\"team\":\"a b\",\"other\":\"x\"}},"
    /* the kubelet's dockershim: a pod sandbox carries its pod's labels */
    "{\"Id\":\"" ID_B
    "\",\"Names\":[\"/db;x\\nz\",\"/alias\"],\"Labels\":{"
    "\"io.kubernetes.docker.type\":\"podsandbox\",\"io.kubernetes.pod.name\":\"web-1\","
    "\"io.kubernetes.pod.namespace\":\"prod\",\"app\":\"shop\",\"team\":\"checkout\"}},"
    "{\"Id\":\"" ID_C
    "\",\"Names\":[]},"
    "{\"Id\":5,\"Names\":[\"/badid\"]},"
    "{\"Names\":[\"/noid\"]},"
    "\"not an object\","
    "{\"Id\":\"caf\\u00e9\",\"Names\":[\"/caf\\u00e9-\\ud83d\\ude00\"]}]";

static void write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) return;
    p += w;
    n -= (size_t)w;
  }
}

#define W(fd, lit) write_all(fd, lit, sizeof(lit) - 1)

static void serve_one(int c, enum mode m) {
  char req[8192];
  size_t got = 0;
  while (got < sizeof(req) - 1) {
    ssize_t r = read(c, req + got, sizeof(req) - 1 - got);
    if (r <= 0) break;
    got += (size_t)r;
    req[got] = 0;
    if (strstr(req, "\r\n\r\n")) break;
  }
  int cf = open(count_path, O_WRONLY | O_APPEND | O_CREAT, 0600);
  if (cf >= 0) {
    write_all(cf, "x", 1);
    close(cf);
  }
  if (!strstr(req, "GET /containers/json HTTP/1.1\r\n")) {
    W(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    return;
  }
  char hdr[256];
  size_t jl = strlen(list_json);
  switch (m) {
    case OK_LENGTH:
      snprintf(hdr, sizeof(hdr),
               "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
               jl);
      write_all(c, hdr, strlen(hdr));
      write_all(c, list_json, jl);
      break;
    case OK_CHUNKED: {
      const char *h = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
      write_all(c, h, strlen(h));
      for (size_t off = 0; off < jl; off += 7) {
        size_t n = jl - off < 7 ? jl - off : 7;
        snprintf(hdr, sizeof(hdr), "%zx;ext=1\r\n", n);
        write_all(c, hdr, strlen(hdr));
        write_all(c, list_json + off, n);
        write_all(c, "\r\n", 2);
      }
      write_all(c, "0\r\n\r\n", 5);
      break;
    }
    case OK_EOF: /* no length, no chunks: the body ends with the connection */
      W(c, "HTTP/1.0 200 OK\r\n\r\n");
      write_all(c, list_json, jl);
      break;
    case GARBAGE:
      W(c, "\x01\x02garbage\nnot http at all\0\xff\r\n\r\n[]");
      break;
    case OVERSIZED: {
      const char *h = "HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\n[";
      write_all(c, h, strlen(h));
      static char junk[65536];
      memset(junk, '[', sizeof(junk));
      for (int i = 0; i < 400; i++)
        write_all(c, junk, sizeof(junk)); /* 25 MiB */
      break;
    }
    case HANG:
      sleep(5);
      break;
    case ERROR_500:
      W(c, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 2\r\n\r\n{}");
      break;
    case NOT_JSON:
      W(c, "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n[{\"Id\":1,");
      break;
    case NOT_ARRAY:
      W(c, "HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n{\"message\":\"x\"}");
      break;
  }
}

static pid_t start_server(enum mode m) {
  unlink(sock_path);
  unlink(count_path);
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
  if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(s, 8) != 0) {
    perror("fake docker: bind");
    exit(2);
  }
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGPIPE, SIG_IGN);
    for (;;) {
      int c = accept(s, NULL, NULL);
      if (c < 0) _exit(0);
      serve_one(c, m);
      close(c);
    }
  }
  close(s);
  return pid;
}

static void stop_server(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  unlink(sock_path);
}

static int requests(void) {
  struct stat st;
  return stat(count_path, &st) == 0 ? (int)st.st_size : 0;
}

struct listed {
  char ids[8][129];
  char names[8][64];
  int n;
};

static void on_listed(void *ctx, const char *id, const char *name) {
  struct listed *l = ctx;
  if (l->n < 8) {
    snprintf(l->ids[l->n], sizeof(l->ids[0]), "%s", id);
    snprintf(l->names[l->n], sizeof(l->names[0]), "%s", name);
    l->n++;
  }
}

static void collect_label(void *ctx, const char *key, const char *value) {
  char *out = ctx;
  size_t n = strlen(out);
  snprintf(out + n, 256 - n, "%s=%s;", key, value);
}

static void test_docker_list(void) {
  const enum mode good[] = {OK_LENGTH, OK_CHUNKED, OK_EOF};
  for (size_t i = 0; i < 3; i++) {
    pid_t srv = start_server(good[i]);
    struct listed l = {0};
    int rc = pp_docker_list(sock_path, 2000, 1 << 20, on_listed, &l);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(l.n, 3); /* malformed entries skipped */
    CHECK_EQ_STR(l.ids[0], ID_A);
    CHECK_EQ_STR(l.names[0], "web");
    CHECK_EQ_STR(l.names[1], "db_x_z"); /* ';' and newlines would break .col lines */
    CHECK_EQ_STR(l.ids[2], "caf\xc3\xa9");
    CHECK_EQ_STR(l.names[2], "caf\xc3\xa9-\xf0\x9f\x98\x80");
    stop_server(srv);
  }
  /* selected labels: a container's own, a pod sandbox's for its pod */
  char why[128];
  CHECK_EQ_INT(pp_k8s_labels_configure("app,team", why, sizeof(why)), 0);
  pid_t lsrv = start_server(OK_LENGTH);
  struct listed l0 = {0};
  CHECK_EQ_INT(pp_docker_list(sock_path, 2000, 1 << 20, on_listed, &l0), 0);
  stop_server(lsrv);
  char got[256] = "";
  CHECK_EQ_INT((int)pp_k8s_labels_each("web", collect_label, got), 1);
  CHECK_EQ_STR(got, "app=nginx;"); /* "a b" is no label value */
  got[0] = '\0';
  CHECK_EQ_INT((int)pp_k8s_labels_each("k8s_api_web-1_prod_uid_0", collect_label, got), 2);
  CHECK_EQ_STR(got, "app=shop;team=checkout;");
  CHECK_EQ_INT(pp_k8s_labels_configure(NULL, why, sizeof(why)), 0);
  struct {
    enum mode m;
    int expect;
  } bad[] = {
      {GARBAGE, -EPROTO},   {OVERSIZED, -E2BIG}, {HANG, -ETIMEDOUT},
      {ERROR_500, -EPROTO}, {NOT_JSON, -EPROTO}, {NOT_ARRAY, -EPROTO},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    pid_t srv = start_server(bad[i].m);
    struct listed l = {0};
    int rc = pp_docker_list(sock_path, 300, 256 * 1024, on_listed, &l);
    CHECK_EQ_INT(rc, bad[i].expect);
    CHECK_EQ_INT(l.n, 0);
    if (rc != bad[i].expect) fprintf(stderr, "  mode %d\n", (int)bad[i].m);
    stop_server(srv);
  }
  struct listed l = {0};
  CHECK_EQ_INT(pp_docker_list("/nonexistent/docker.sock", 300, 1024, on_listed, &l), -ENOENT);
  char longp[200];
  memset(longp, 'a', sizeof(longp) - 1);
  longp[sizeof(longp) - 1] = 0;
  CHECK_EQ_INT(pp_docker_list(longp, 300, 1024, on_listed, &l), -ENAMETOOLONG);
}

static void test_name_cache(void) {
  pid_t srv = start_server(OK_LENGTH);
  struct pp_containers *c = pp_containers_new(sock_path, 16);
  char *name = NULL;
  CHECK_EQ_INT(pp_containers_name(c, ID_A, &name), 0);
  CHECK_EQ_STR(name, "web");
  free(name);
  CHECK_EQ_INT(requests(), 1);
  CHECK_EQ_INT(pp_containers_name(c, ID_B, &name), 0); /* listed with A: no request */
  CHECK_EQ_STR(name, "db_x_z");
  free(name);
  CHECK_EQ_INT(requests(), 1);
  /* an unknown id re-lists once, then is remembered as unknown */
  CHECK_EQ_INT(pp_containers_name(c, ID_C, &name), -ENOENT);
  CHECK(name == NULL);
  CHECK_EQ_INT(requests(), 2);
  CHECK_EQ_INT(pp_containers_name(c, ID_C, &name), -ENOENT);
  CHECK_EQ_INT(requests(), 2);
  CHECK_EQ_INT(pp_containers_name(c, ID_A, &name), 0);
  free(name);
  CHECK_EQ_INT(requests(), 2);
  CHECK_EQ_INT(pp_containers_name(c, "", &name), -EINVAL);
  pp_containers_free(c);
  stop_server(srv);

  /* a daemon that answers garbage is no runtime at all */
  srv = start_server(GARBAGE);
  c = pp_containers_new(sock_path, 16);
  CHECK_EQ_INT(pp_containers_name(c, ID_A, &name), -ENOTCONN);
  pp_containers_free(c);
  stop_server(srv);

  /* the real-size cap holds against an endless reply */
  srv = start_server(OVERSIZED);
  c = pp_containers_new(sock_path, 16);
  CHECK_EQ_INT(pp_containers_name(c, ID_A, &name), -ENOTCONN);
  pp_containers_free(c);
  stop_server(srv);

  /* no socket: no names, and no retry storm (answers from the cache) */
  c = pp_containers_new("/nonexistent/docker.sock", 16);
  CHECK_EQ_INT(pp_containers_name(c, ID_A, &name), -ENOTCONN);
  CHECK_EQ_INT(pp_containers_name(c, ID_B, &name), -ENOTCONN);
  pp_containers_free(c);

  /* the default socket list works where nothing listens (this host) */
  c = pp_containers_new(NULL, 16);
  CHECK(c != NULL);
  int rc = pp_containers_name(c, ID_A, &name);
  CHECK(rc == -ENOTCONN || rc == -ENOENT || rc == 0);
  free(name);
  pp_containers_free(c);
}

int main(void) {
  snprintf(sock_path, sizeof(sock_path), "/tmp/pp_test_docker.%d.sock", (int)getpid());
  snprintf(count_path, sizeof(count_path), "/tmp/pp_test_docker.%d.count", (int)getpid());
  test_cgroup_parse();
  test_docker_list();
  test_name_cache();
  unlink(count_path);
  return pp_test_finish("test_container");
}
