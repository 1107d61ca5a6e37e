/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pp_elf_lookup_symbols on exported names, answered through the GNU hash
 * table of real files (the libc this test runs on; Node when the machine
 * has it), and truncated or corrupted copies refused without a crash.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "polyprof/kit/elf_lookup.h"
#include "testlib.h"

static char tmpdir[] = "/tmp/pp-elf-lookup-XXXXXX";

/* The libc.so this process maps, from /proc/self/maps. */
static int libc_path(char *out, size_t cap) {
  FILE *f = fopen("/proc/self/maps", "re");
  if (!f) return -1;
  char line[4096];
  int rc = -1;
  while (rc < 0 && fgets(line, sizeof(line), f)) {
    char *p = strchr(line, '/');
    if (!p || !strstr(p, "/libc.so")) continue;
    p[strcspn(p, "\n")] = '\0';
    snprintf(out, cap, "%s", p);
    rc = 0;
  }
  fclose(f);
  return rc;
}

/* Bit i of *found set when names[i] is exported; 0 or -errno. */
static int exports_of(const char *path, const char *const *names, size_t n, unsigned *found) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  uint64_t values[8];
  *found = 0;
  int rc = pp_elf_lookup_symbols(fd, names, n, PP_ELF_EXPORTED_ONLY, values, NULL);
  close(fd);
  for (size_t i = 0; rc >= 0 && i < n; i++)
    if (values[i]) *found |= 1u << i;
  return rc < 0 ? rc : 0;
}

static void test_libc(const char *libc) {
  static const char *const names[] = {"malloc", "napi_module_register", "pthread_create",
                                      "no_such_symbol_anywhere", "free"};
  unsigned found = 0;
  CHECK_EQ_INT(exports_of(libc, names, 5, &found), 0);
  CHECK_EQ_INT(found, (1u << 0) | (1u << 2) | (1u << 4));
}

static void test_node(void) {
  static const char *const node = "/usr/bin/node";
  static const char *const names[] = {"napi_module_register", "_ZN2v87Isolate10GetCurrentEv",
                                      "napi_module_registe"};
  if (access(node, R_OK) != 0) {
    printf("SKIPPED node part: %s not on this machine\n", node);
    return;
  }
  unsigned found = 0;
  CHECK_EQ_INT(exports_of(node, names, 3, &found), 0);
  CHECK_EQ_INT(found, 3u); /* a prefix of an exported name is not exported */
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  CHECK(fwrite(data, 1, n, f) == n);
  fclose(f);
}

static void test_malformed(const char *libc) {
  int fd = open(libc, O_RDONLY | O_CLOEXEC);
  struct stat st;
  CHECK(fd >= 0 && fstat(fd, &st) == 0);
  if (fd < 0) return;
  size_t size = (size_t)st.st_size;
  unsigned char *img = malloc(size);
  CHECK(img && read(fd, img, size) == (ssize_t)size);
  close(fd);
  if (!img) return;
  static const char *const names[] = {"malloc", "free"};
  char path[512];
  snprintf(path, sizeof(path), "%s/bad.so", tmpdir);
  unsigned found;
  /* cut before the section headers: refused, never read past the end */
  size_t cuts[] = {0, 4, 63, 64, 4096, size / 2};
  for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
    write_file(path, img, cuts[c]);
    CHECK(exports_of(path, names, 2, &found) < 0);
  }
  /* only the last section header cut short: the tables are all there, so
   * either answer is right as long as nothing past the end is read */
  write_file(path, img, size - 1);
  int rc = exports_of(path, names, 2, &found);
  CHECK(rc < 0 || found == 3u);
  /* bytes flipped in the ELF header, the hash table region and the
   * section headers: any answer but a crash or a hang */
  unsigned seed = 777;
  unsigned char *copy = malloc(size);
  CHECK(copy != NULL);
  for (int round = 0; copy && round < 300; round++) {
    memcpy(copy, img, size);
    for (int k = 0; k < 8; k++) {
      seed = seed * 1103515245u + 12345u;
      size_t at = (seed >> 8) % (round % 3 == 0 ? 64 : round % 3 == 1 ? 65536 : size);
      if (round % 3 == 2 && size > 8192) at = size - 1 - (seed >> 8) % 8192;
      copy[at] = (unsigned char)(seed >> 16);
    }
    write_file(path, copy, size);
    exports_of(path, names, 2, &found);
  }
  free(copy);
  /* not ELF at all */
  write_file(path, "#!/bin/sh\necho hi\n", 18);
  CHECK_EQ_INT(exports_of(path, names, 2, &found), -ENOEXEC);
  free(img);
}

int main(void) {
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  char libc[4096];
  CHECK_EQ_INT(libc_path(libc, sizeof(libc)), 0);
  test_libc(libc);
  test_node();
  test_malformed(libc);
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "cleanup failed\n");
  return pp_test_finish("test_elf_lookup");
}
