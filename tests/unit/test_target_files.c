/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kit's safe access to a target's files (sdk/target_files.c), against a
 * real child process running as an unprivileged user: links, FIFOs,
 * devices, directories, files of other owners, identity checks, sockets,
 * with openat2 and with the walk kernels without it get.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "polyprof/kit/maps.h"
#include "polyprof/kit/target_files.h"
#include "testlib.h"

#define NOBODY 65534

static char tmpdir[] = "/tmp/pp_tf_XXXXXX";
static pid_t child;

static void make_file(const char *path, uid_t owner) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  CHECK(fd >= 0);
  if (fd >= 0) {
    CHECK_EQ_INT(write(fd, "x", 1), 1);
    close(fd);
  }
  CHECK_EQ_INT(chown(path, owner, owner), 0);
}

static int topen(const char *path, unsigned flags, const struct pp_file_id *id, char *why) {
  why[0] = '\0';
  int fd = pp_target_open((uint32_t)child, path, flags, id, NULL, why, 256);
  if (fd >= 0) close(fd);
  return fd < 0 ? fd : 0;
}

/* walk: the kernel's openat2 is refused (seccomp), as on kernels before
 * 5.6: the fallback walk refuses every link, even one inside the root. */
static void test_files(bool walk) {
  char own[600], roots[600], link[600], why[256];
  snprintf(own, sizeof(own), "%s/own", tmpdir);
  snprintf(roots, sizeof(roots), "%s/roots", tmpdir);
  if (!walk) {
    make_file(own, NOBODY);
    make_file(roots, 0);
  }
  CHECK_EQ_INT(topen(own, 0, NULL, why), 0);
  /* another user's file, directly or through a link: refused, said why */
  CHECK_EQ_INT(topen(roots, 0, NULL, why), -EPERM);
  CHECK(strstr(why, "owned by uid 0") != NULL);
  snprintf(link, sizeof(link), "%s/to_roots", tmpdir);
  if (!walk) CHECK_EQ_INT(symlink(roots, link), 0);
  CHECK_EQ_INT(topen(link, 0, NULL, why), walk ? -ELOOP : -EPERM);
  CHECK_EQ_INT(topen("/etc/shadow", 0, NULL, why), -EPERM);
  /* unless the caller says the owner does not matter */
  CHECK_EQ_INT(topen(roots, PP_TF_ANY_OWNER, NULL, why), 0);
  /* or that the target may read it, whoever owns it: by its mode, checked
   * before anything is opened */
  CHECK_EQ_INT(topen(roots, PP_TF_READABLE, NULL, why), 0);
  CHECK_EQ_INT(chmod(roots, 0600), 0);
  CHECK_EQ_INT(topen(roots, PP_TF_READABLE, NULL, why), -EACCES);
  CHECK(strstr(why, "not readable by the process") != NULL);
  CHECK_EQ_INT(topen(link, PP_TF_READABLE, NULL, why), walk ? -ELOOP : -EACCES);
  CHECK_EQ_INT(chmod(roots, 0644), 0);
  /* a link inside the root to the target's own file is fine (refused by
   * the stricter walk) */
  snprintf(link, sizeof(link), "%s/to_own", tmpdir);
  if (!walk) CHECK_EQ_INT(symlink(own, link), 0);
  CHECK_EQ_INT(topen(link, 0, NULL, why), walk ? -ELOOP : 0);
  /* never a FIFO (no blocking), a device, a directory as a file */
  snprintf(link, sizeof(link), "%s/fifo", tmpdir);
  if (!walk) {
    CHECK_EQ_INT(mkfifo(link, 0666), 0);
    CHECK_EQ_INT(chown(link, NOBODY, NOBODY), 0);
  }
  CHECK_EQ_INT(topen(link, 0, NULL, why), -EINVAL);
  CHECK(strstr(why, "FIFO") != NULL);
  CHECK_EQ_INT(topen("/dev/null", PP_TF_ANY_OWNER, NULL, why), -EINVAL);
  CHECK(strstr(why, "character device") != NULL);
  CHECK_EQ_INT(topen(tmpdir, PP_TF_ANY_OWNER, NULL, why), -EINVAL);
  CHECK_EQ_INT(topen(tmpdir, PP_TF_DIR, NULL, why), 0);
  CHECK_EQ_INT(topen(own, PP_TF_DIR, NULL, why), -EINVAL);
  CHECK_EQ_INT(topen("relative/path", 0, NULL, why), -EINVAL);
  CHECK(topen("/nonexistent/x", 0, NULL, why) < 0);
  /* identity: the inode the caller expects, or refused */
  struct stat st;
  CHECK_EQ_INT(stat(roots, &st), 0);
  struct pp_file_id id = {major(st.st_dev), minor(st.st_dev), st.st_ino};
  CHECK_EQ_INT(topen(roots, 0, &id, why), 0);
  CHECK_EQ_INT(topen(own, 0, &id, why), -EXDEV);
  CHECK(strstr(why, "not the file it maps") != NULL);
}

static void test_walk(void) {
  char dir[600], file[600], link[600];
  int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  snprintf(dir, sizeof(dir), "%s/d", tmpdir);
  CHECK_EQ_INT(mkdir(dir, 0755), 0);
  snprintf(file, sizeof(file), "%s/d/f", tmpdir);
  make_file(file, 0);
  int fd = pp_open_beneath(root, file);
  CHECK(fd >= 0);
  if (fd >= 0) close(fd);
  snprintf(link, sizeof(link), "%s/lf", tmpdir);
  CHECK_EQ_INT(symlink(file, link), 0);
  CHECK(pp_open_beneath(root, link) < 0);
  snprintf(link, sizeof(link), "%s/ld", tmpdir);
  CHECK_EQ_INT(symlink(dir, link), 0);
  snprintf(link, sizeof(link), "%s/ld/f", tmpdir);
  CHECK_EQ_INT(pp_open_beneath(root, link), -ENOTDIR);
  snprintf(link, sizeof(link), "%s/d/../d/f", tmpdir);
  CHECK_EQ_INT(pp_open_beneath(root, link), -EACCES);
  CHECK_EQ_INT(pp_open_beneath(root, dir), -EINVAL);
  CHECK_EQ_INT(pp_open_beneath(root, "/dev/null"), -EINVAL);
  CHECK_EQ_INT(pp_open_beneath(root, ""), -ENOENT);
  close(root);
}

static void test_socket(const char *name) {
  char path[100], why[256] = "";
  snprintf(path, sizeof(path), "%.80s/%s", tmpdir, name);
  int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
  CHECK_EQ_INT(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
  CHECK_EQ_INT(listen(ls, 4), 0);
  /* root's socket: not the target's to offer */
  CHECK_EQ_INT(pp_target_connect_unix((uint32_t)child, path, why, sizeof(why)), -EPERM);
  CHECK(strstr(why, "owned by uid 0") != NULL);
  CHECK_EQ_INT(chown(path, NOBODY, NOBODY), 0);
  int s = pp_target_connect_unix((uint32_t)child, path, why, sizeof(why));
  CHECK(s >= 0);
  if (s >= 0) {
    int a = accept(ls, NULL, NULL);
    CHECK(a >= 0);
    if (a >= 0) close(a);
    close(s);
  }
  /* checked but not connected: the caller connects through the handle */
  int h = pp_target_socket((uint32_t)child, path, why, sizeof(why));
  CHECK(h >= 0);
  if (h >= 0) {
    struct sockaddr_un via = {.sun_family = AF_UNIX};
    snprintf(via.sun_path, sizeof(via.sun_path), "/proc/self/fd/%d", h);
    s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_EQ_INT(connect(s, (struct sockaddr *)&via, sizeof(via)), 0);
    int a = accept(ls, NULL, NULL);
    CHECK(a >= 0);
    if (a >= 0) close(a);
    close(s);
    close(h);
  }
  /* a regular file where a socket should be */
  char own[600];
  snprintf(own, sizeof(own), "%s/own", tmpdir);
  CHECK_EQ_INT(pp_target_connect_unix((uint32_t)child, own, why, sizeof(why)), -EINVAL);
  CHECK_EQ_INT(pp_target_socket((uint32_t)child, own, why, sizeof(why)), -EINVAL);
  CHECK(strstr(why, "is a regular file, not a socket") != NULL);
  /* a listener that accepts nothing: full queue, EAGAIN at once, no wait */
  int held[64], nheld = 0;
  for (int i = 0; i < 64; i++) {
    held[nheld] = pp_target_connect_unix((uint32_t)child, path, why, sizeof(why));
    if (held[nheld] < 0) break;
    nheld++;
  }
  CHECK(nheld < 64);
  CHECK_EQ_INT(pp_target_connect_unix((uint32_t)child, path, why, sizeof(why)), -EAGAIN);
  CHECK(strstr(why, "listen queue full") != NULL);
  for (int i = 0; i < nheld; i++)
    close(held[i]);
  close(ls);
}

/* Refuses openat2 with ENOSYS in this process, as an old kernel would. */
static int no_openat2(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return -1;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

/* A file the child maps: its libc, by path with identity, and by the
 * mapping itself when the path shows another inode. */
static void test_mapped(void) {
  struct pp_map *maps = NULL;
  size_t n = 0;
  CHECK_EQ_INT(pp_maps_read((uint32_t)child, 1, 0, &maps, &n), 0);
  const struct pp_map *libc = NULL;
  for (size_t i = 0; i < n; i++)
    if (maps[i].path && strstr(maps[i].path, "/libc.so")) libc = &maps[i];
  CHECK(libc != NULL);
  if (libc) {
    struct pp_file_id id = {libc->dev_major, libc->dev_minor, libc->inode};
    char why[256] = "";
    int fd = pp_target_open_mapped((uint32_t)child, libc->path, &id, libc->start, libc->end, why,
                                   sizeof(why));
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    struct pp_file_id wrong = id;
    wrong.inode++;
    fd = pp_target_open_mapped((uint32_t)child, libc->path, &wrong, libc->start, libc->end, why,
                               sizeof(why));
    CHECK(fd >= 0); /* map_files: the mapping's own file */
    if (fd >= 0) {
      struct stat st;
      CHECK_EQ_INT(fstat(fd, &st), 0);
      CHECK_EQ_INT(st.st_ino, libc->inode);
      close(fd);
    }
  }
  pp_maps_free(maps, n);
}

int main(void) {
  if (!mkdtemp(tmpdir) || chmod(tmpdir, 0755) < 0) {
    perror("mkdtemp");
    return 1;
  }
  child = fork();
  if (child == 0) {
    if (setresgid(NOBODY, NOBODY, NOBODY) < 0 || setresuid(NOBODY, NOBODY, NOBODY) < 0) _exit(1);
    pause();
    _exit(0);
  }
  usleep(100000); /* let it drop its ids */
  test_files(false);
  test_walk();
  test_socket("sock");
  test_mapped();
  /* the same without openat2, in a child (a seccomp filter is for good) */
  fflush(NULL);
  pid_t w = fork();
  if (w == 0) {
    if (no_openat2() < 0) _exit(2);
    pp_test_failures = 0;
    test_files(true);
    test_socket("sock2");
    test_mapped();
    _exit(pp_test_failures ? 1 : 0);
  }
  int ws = 0;
  waitpid(w, &ws, 0);
  CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "cleanup failed\n");
  return pp_test_finish("test_target_files");
}
