/* SPDX-License-Identifier: Apache-2.0 */
/* Remote reads and symbol lookup against a real child process. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "polyprof/kit/elf_lookup.h"
#include "polyprof/kit/remote.h"
#include "testlib.h"

/* The child inherits these at the same addresses (fork). */
static volatile long marker = 0x5eed1234;
static char text[] = "hello from the target";

int main(void) {
  int pipefd[2];
  if (pipe(pipefd) != 0) return 1;
  pid_t child = fork();
  if (child == 0) {
    marker = 0x7a7a7a7a; /* differs from the parent's copy: proves a remote read */
    close(pipefd[0]);
    char c = 1;
    if (write(pipefd[1], &c, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char c;
  CHECK(read(pipefd[0], &c, 1) == 1);

  long v = 0;
  CHECK_EQ_INT(pp_remote_read(child, (uint64_t)(uintptr_t)&marker, &v, sizeof(v)), 0);
  CHECK_EQ_INT(v, 0x7a7a7a7a);
  char buf[64];
  CHECK_EQ_INT(pp_remote_read_str(child, (uint64_t)(uintptr_t)text, buf, sizeof(buf)),
               (long)strlen(text));
  CHECK_EQ_STR(buf, text);
  /* truncation keeps the terminator */
  CHECK_EQ_INT(pp_remote_read_str(child, (uint64_t)(uintptr_t)text, buf, 6), 5);
  CHECK_EQ_STR(buf, "hello");
  /* hostile addresses and lengths fail cleanly */
  CHECK(pp_remote_read(child, 8, &v, sizeof(v)) < 0);
  CHECK_EQ_INT(pp_remote_read(child, 0, &v, sizeof(v)), -EINVAL);
  CHECK_EQ_INT(pp_remote_read(child, 0x1000, buf, PP_REMOTE_MAX_READ + 1), -EINVAL);
  CHECK_EQ_INT(pp_remote_read(child, UINT64_MAX - 2, &v, sizeof(v)), -EINVAL);
  struct pp_remote_iov iov[2] = {{(uint64_t)(uintptr_t)&marker, &v, sizeof(v)},
                                 {(uint64_t)(uintptr_t)text, buf, 5}};
  CHECK_EQ_INT(pp_remote_readv(child, iov, 2), 0);
  CHECK(memcmp(buf, "hello", 5) == 0);

  /* libc in the child: the symbol address computed from the file plus the
   * load bias equals where the dynamic linker put it */
  struct pp_module m;
  CHECK_EQ_INT(pp_find_module((uint32_t)child, "libc.so*", &m, NULL, 0), 0);
  CHECK(m.fd >= 0);
  CHECK(strstr(m.path, "libc.so") != NULL);
  CHECK(!m.is_exe);
  const char *names[] = {"getpid", "no_such_symbol_xyz"};
  uint64_t values[2], sizes[2];
  CHECK_EQ_INT(pp_elf_lookup_symbols(m.fd, names, 2, 0, values, sizes), 1);
  CHECK(values[1] == 0);
  void *real = dlsym(RTLD_DEFAULT, "getpid");
  CHECK_EQ_INT(m.bias + values[0], (uint64_t)(uintptr_t)real);
  uint64_t sv, ss;
  CHECK_EQ_INT(pp_elf_find_section(m.fd, ".dynsym", &sv, &ss), 0);
  CHECK(ss > 0);
  CHECK_EQ_INT(pp_elf_find_section(m.fd, ".no_such_section", &sv, &ss), -ENOENT);
  pp_module_close(&m);
  CHECK_EQ_INT(m.fd, -1);

  /* the executable itself */
  CHECK_EQ_INT(pp_find_module((uint32_t)child, "test_remote", &m, NULL, 0), 0);
  CHECK(m.is_exe);
  /* a static symbol: not in .dynsym's hash table, found by the walk */
  const char *self_names[] = {"marker"};
  CHECK_EQ_INT(pp_elf_lookup_symbols(m.fd, self_names, 1, 0, values, NULL), 1);
  CHECK_EQ_INT(m.bias + values[0], (uint64_t)(uintptr_t)&marker);
  CHECK_EQ_INT(pp_elf_lookup_symbols(m.fd, self_names, 1, PP_ELF_EXPORTED_ONLY, values, NULL), 0);
  pp_module_close(&m);
  CHECK_EQ_INT(pp_find_module((uint32_t)child, "libnothere*", &m, NULL, 0), -ENOENT);

  /* garbage is not an ELF file */
  int notelf = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  CHECK_EQ_INT(pp_elf_lookup_symbols(notelf, names, 1, 0, values, NULL), -ENOEXEC);
  close(notelf);

  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  CHECK(pp_remote_read(child, (uint64_t)(uintptr_t)&marker, &v, sizeof(v)) < 0);
  return pp_test_finish("test_remote");
}
