/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the jitdump reader (sdk/jitdump.c) on hand-built
 * dumps: code loads and moves, records it skips, a tail still being
 * written, broken sizes and headers, the byte budget, incremental reads of a
 * growing file in small chunks, and opening through a process's root
 * through the kit's safe target-root access (sdk/target_files.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "polyprof/kit/jitdump.h"
#include "polyprof/kit/target_files.h"
#include "testlib.h"

static char tmpdir[] = "/tmp/pp-jitdump-XXXXXX";

/* ---- building dumps ---- */

struct dump {
  uint8_t b[65536];
  size_t n;
};

static void put(struct dump *d, const void *p, size_t n) {
  if (d->n + n > sizeof(d->b)) abort();
  memcpy(d->b + d->n, p, n);
  d->n += n;
}
static void put32(struct dump *d, uint32_t v) {
  put(d, &v, 4);
}
static void put64(struct dump *d, uint64_t v) {
  put(d, &v, 8);
}

static void header(struct dump *d, uint32_t magic, uint32_t version, uint32_t size) {
  put32(d, magic);
  put32(d, version);
  put32(d, size);
  put32(d, 62); /* EM_X86_64 */
  put32(d, 0);
  put32(d, 4242);
  put64(d, 1);
  put64(d, 0);
  while (d->n < size && d->n < sizeof(d->b))
    put(d, "", 1);
}

static void rec_prefix(struct dump *d, uint32_t id, uint32_t total) {
  put32(d, id);
  put32(d, total);
  put64(d, 7);
}

/* A CODE_LOAD whose total_size is what the fields take. Returns its start. */
static size_t load(struct dump *d, uint64_t addr, uint64_t size, uint64_t index, const char *name,
                   size_t code_bytes) {
  size_t at = d->n;
  size_t nl = strlen(name) + 1;
  rec_prefix(d, 0, (uint32_t)(56 + nl + code_bytes));
  put32(d, 4242);
  put32(d, 4243);
  put64(d, addr);
  put64(d, addr);
  put64(d, size);
  put64(d, index);
  put(d, name, nl);
  for (size_t i = 0; i < code_bytes; i++)
    put(d, "\xcc", 1);
  return at;
}

static void move(struct dump *d, uint64_t from, uint64_t to, uint64_t size, uint64_t index) {
  rec_prefix(d, 1, 64);
  put32(d, 4242);
  put32(d, 4243);
  put64(d, to);
  put64(d, from);
  put64(d, to);
  put64(d, size);
  put64(d, index);
}

/* A record the reader has no use for, skipped by its size. */
static void opaque(struct dump *d, uint32_t id, uint32_t payload) {
  rec_prefix(d, id, 16 + payload);
  for (uint32_t i = 0; i < payload; i++)
    put(d, "\x5a", 1);
}

static const char *look(const struct pp_jitdump *j, uint64_t addr) {
  return pp_perfmap_lookup(pp_jitdump_map(j), addr, NULL);
}

/* ---- the tests ---- */

static void test_records(void) {
  struct dump d = {.n = 0};
  header(&d, 0x4A695444, 1, 40);
  opaque(&d, 4, 40); /* UNWINDING_INFO: V8 writes one before each load */
  load(&d, 0x1000, 0x100, 1, "JS:*first app.js:1:1", 16);
  load(&d, 0x2000, 0x10, 2, "JS:^second app.js:9:3", 0);
  opaque(&d, 2, 24); /* DEBUG_INFO */
  opaque(&d, 99, 8); /* an id from a later spec */
  move(&d, 0x2000, 0x5000, 0x10, 2);
  load(&d, 0x3000, 0x20, 3, "bad\nname\twith\x7f controls  ", 4);
  load(&d, 0x1000, 0x80, 4, "JS:*first_recompiled app.js:1:1", 0);
  load(&d, 0x6000, 0, 5, "zero size", 0);
  load(&d, UINT64_MAX - 8, 0x100, 6, "wraps", 0);
  load(&d, 0x7000, 0x10, 7, "", 0);
  move(&d, 0x9000, 0xa000, 0x10, 77); /* index never loaded */

  struct pp_jitdump *j = NULL;
  CHECK_EQ_INT(pp_jitdump_new(0, &j), 0);
  CHECK_EQ_INT(pp_jitdump_parse(j, d.b, d.n), 5);
  CHECK_EQ_INT(pp_jitdump_offset(j), d.n);
  uint64_t start = 0;
  CHECK_EQ_STR(pp_perfmap_lookup(pp_jitdump_map(j), 0x1010, &start),
               "JS:*first_recompiled app.js:1:1");
  CHECK_EQ_INT(start, 0x1000);
  /* beyond the recompiled blob, the first one still covers it */
  CHECK_EQ_STR(look(j, 0x10f0), "JS:*first app.js:1:1");
  CHECK_EQ_STR(look(j, 0x2008), "JS:^second app.js:9:3");
  CHECK_EQ_STR(look(j, 0x500f), "JS:^second app.js:9:3"); /* moved, name kept */
  CHECK(look(j, 0x5010) == NULL);
  CHECK_EQ_STR(look(j, 0x3000), "bad?name?with? controls");
  CHECK(look(j, 0x6000) == NULL);
  CHECK(look(j, 0x7000) == NULL);
  CHECK(look(j, 0xa000) == NULL);
  CHECK_EQ_INT(pp_perfmap_count(pp_jitdump_map(j)), 5);
  /* nothing new: nothing happens */
  CHECK_EQ_INT(pp_jitdump_parse(j, d.b + d.n, 0), 0);
  pp_jitdump_free(j);
}

static void test_truncated_tail(void) {
  struct dump d = {.n = 0};
  header(&d, 0x4A695444, 1, 40);
  load(&d, 0x1000, 0x10, 1, "one", 8);
  size_t last = load(&d, 0x2000, 0x10, 2, "two", 8);
  struct pp_jitdump *j = NULL;
  CHECK_EQ_INT(pp_jitdump_new(0, &j), 0);
  /* the writer is in the middle of the last record, then of its prefix */
  CHECK_EQ_INT(pp_jitdump_parse(j, d.b, d.n - 3), 1);
  CHECK_EQ_INT(pp_jitdump_offset(j), last);
  CHECK(look(j, 0x2000) == NULL);
  CHECK_EQ_INT(pp_jitdump_parse(j, d.b + last, 10), 0);
  CHECK_EQ_INT(pp_jitdump_offset(j), last);
  /* later the rest is there: read from where it stopped */
  CHECK_EQ_INT(pp_jitdump_parse(j, d.b + last, d.n - last), 1);
  CHECK_EQ_STR(look(j, 0x2000), "two");
  CHECK_EQ_STR(look(j, 0x1000), "one");
  pp_jitdump_free(j);

  /* a header still being written */
  CHECK_EQ_INT(pp_jitdump_new(0, &j), 0);
  CHECK_EQ_INT(pp_jitdump_parse(j, d.b, 20), 0);
  CHECK_EQ_INT(pp_jitdump_offset(j), 0);
  CHECK_EQ_INT(pp_jitdump_parse(j, d.b, d.n), 2);
  pp_jitdump_free(j);
}

static int parse_all(const struct dump *d, size_t max_bytes, struct pp_jitdump **out) {
  CHECK_EQ_INT(pp_jitdump_new(max_bytes, out), 0);
  return pp_jitdump_parse(*out, d->b, d->n);
}

static void test_bad_sizes(void) {
  struct pp_jitdump *j = NULL;
  /* a record smaller than its own prefix cannot be skipped: reading stops,
   * what came before stays */
  struct dump d = {.n = 0};
  header(&d, 0x4A695444, 1, 40);
  load(&d, 0x1000, 0x10, 1, "kept", 0);
  rec_prefix(&d, 0, 8);
  load(&d, 0x2000, 0x10, 2, "after", 0);
  CHECK_EQ_INT(parse_all(&d, 0, &j), -EPROTO);
  CHECK_EQ_STR(look(j, 0x1000), "kept");
  CHECK(look(j, 0x2000) == NULL);
  CHECK_EQ_INT(pp_jitdump_parse(j, d.b, d.n), -EPROTO); /* stays stopped */
  pp_jitdump_free(j);

  /* loads and moves shorter than their fixed part, a name without its NUL
   * in the record: skipped by size, the next record is read */
  d.n = 0;
  header(&d, 0x4A695444, 1, 40);
  rec_prefix(&d, 0, 40);
  put64(&d, 0x1000);
  put64(&d, 0x1000);
  put64(&d, 0x10);
  rec_prefix(&d, 1, 48);
  for (int i = 0; i < 4; i++)
    put64(&d, 0x1000);
  size_t at = load(&d, 0x3000, 0x10, 3, "no-nul", 0);
  d.b[d.n - 1] = 'x';
  (void)at;
  load(&d, 0x4000, 0x10, 4, "good", 0);
  CHECK_EQ_INT(parse_all(&d, 0, &j), 1);
  CHECK(look(j, 0x3000) == NULL);
  CHECK(look(j, 0x1000) == NULL);
  CHECK_EQ_STR(look(j, 0x4000), "good");
  CHECK_EQ_INT(pp_jitdump_offset(j), d.n);
  pp_jitdump_free(j);

  /* a size beyond what the file holds: waited for, never read past */
  d.n = 0;
  header(&d, 0x4A695444, 1, 40);
  load(&d, 0x1000, 0x10, 1, "ok", 0);
  rec_prefix(&d, 0, 0xfffffff0u);
  put64(&d, 0);
  CHECK_EQ_INT(parse_all(&d, 0, &j), 1);
  CHECK_EQ_INT(pp_jitdump_offset(j), d.n - 24);
  pp_jitdump_free(j);

  /* the byte budget */
  d.n = 0;
  header(&d, 0x4A695444, 1, 40);
  load(&d, 0x1000, 0x10, 1, "in budget", 0);
  size_t budget = d.n;
  load(&d, 0x2000, 0x10, 2, "over budget", 0);
  CHECK_EQ_INT(parse_all(&d, budget + 10, &j), -EFBIG);
  CHECK_EQ_STR(look(j, 0x1000), "in budget");
  CHECK(look(j, 0x2000) == NULL);
  pp_jitdump_free(j);

  /* CODE_CLOSE: the writer is done, nothing after it counts */
  d.n = 0;
  header(&d, 0x4A695444, 1, 40);
  load(&d, 0x1000, 0x10, 1, "before", 0);
  opaque(&d, 3, 0);
  load(&d, 0x2000, 0x10, 2, "after close", 0);
  CHECK_EQ_INT(parse_all(&d, 0, &j), 1);
  CHECK(look(j, 0x2000) == NULL);
  pp_jitdump_free(j);

  /* long names are cut */
  d.n = 0;
  header(&d, 0x4A695444, 1, 40);
  char longname[3000];
  memset(longname, 'n', sizeof(longname) - 1);
  longname[sizeof(longname) - 1] = '\0';
  load(&d, 0x1000, 0x10, 1, longname, 0);
  CHECK_EQ_INT(parse_all(&d, 0, &j), 1);
  CHECK_EQ_INT(strlen(look(j, 0x1000)), PP_JITDUMP_NAME_MAX);
  pp_jitdump_free(j);
  /* ... but not inside a UTF-8 sequence: a 2-byte one across the bound */
  d.n = 0;
  header(&d, 0x4A695444, 1, 40);
  memcpy(longname + PP_JITDUMP_NAME_MAX - 1, "\xc3\xa9", 2);
  load(&d, 0x1000, 0x10, 1, longname, 0);
  CHECK_EQ_INT(parse_all(&d, 0, &j), 1);
  CHECK_EQ_INT(strlen(look(j, 0x1000)), PP_JITDUMP_NAME_MAX - 1);
  pp_jitdump_free(j);
}

static void test_headers(void) {
  struct pp_jitdump *j = NULL;
  struct {
    uint32_t magic, version, size;
    int want;
  } cases[] = {
      {0x4A695444, 1, 40, 1},         {0x4454694A, 1, 40, -EPROTO}, /* other endianness */
      {0x12345678, 1, 40, -EPROTO},   {0x4A695444, 2, 40, -EPROTO},
      {0x4A695444, 1, 39, -EPROTO},   {0x4A695444, 1, 64, 1}, /* longer header: skipped */
      {0x4A695444, 1, 5000, -EPROTO},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct dump d = {.n = 0};
    header(&d, cases[i].magic, cases[i].version, cases[i].size < 4096 ? cases[i].size : 40);
    if (cases[i].size >= 4096) memcpy(d.b + 8, &cases[i].size, 4);
    load(&d, 0x1000, 0x10, 1, "x", 0);
    CHECK_EQ_INT(parse_all(&d, 0, &j), cases[i].want);
    pp_jitdump_free(j);
  }
  CHECK_EQ_INT(pp_jitdump_new(0, &j), 0);
  CHECK_EQ_INT(pp_jitdump_parse(j, (const uint8_t *)"", 0), 0);
  pp_jitdump_free(j);
}

static void write_at(const char *path, const void *p, size_t n, int flags) {
  int fd = open(path, O_WRONLY | O_CREAT | flags, 0644);
  CHECK(fd >= 0);
  if (fd < 0) return;
  CHECK_EQ_INT(write(fd, p, n), (long long)n);
  close(fd);
}

static void test_file(void) {
  /* big records (code bytes, a long name) read in chunks smaller than them */
  struct dump d = {.n = 0};
  header(&d, 0x4A695444, 1, 40);
  for (int i = 0; i < 10; i++) {
    char name[64];
    snprintf(name, sizeof(name), "JS:*fn%d big.js:%d:1", i, i);
    load(&d, 0x10000 + 0x100 * (uint64_t)i, 0x100, (uint64_t)i + 1, name, i % 2 ? 3000 : 100);
  }
  char longname[2000];
  memset(longname, 'L', sizeof(longname) - 1);
  longname[sizeof(longname) - 1] = '\0';
  load(&d, 0x20000, 0x10, 100, longname, 0);
  size_t first = d.n;
  move(&d, 0x10000, 0x30000, 0x100, 1);
  size_t tail = load(&d, 0x40000, 0x10, 101, "JS:*late x.js:1:1", 700);

  char path[512];
  snprintf(path, sizeof(path), "%s/jit-4242.dump", tmpdir);
  write_at(path, d.b, first, O_TRUNC);
  struct pp_jitdump *j = NULL;
  CHECK_EQ_INT(pp_jitdump_new(0, &j), 0);
  int fd = open(path, O_RDONLY);
  CHECK_EQ_INT(pp_jitdump_read_fd(j, fd, 64), 11); /* 64: raised to the minimum */
  close(fd);
  CHECK_EQ_STR(look(j, 0x100a0), "JS:*fn0 big.js:0:1");
  CHECK_EQ_STR(look(j, 0x1093f), "JS:*fn9 big.js:9:1");
  const char *ln = look(j, 0x20000);
  CHECK(ln && strlen(ln) == PP_JITDUMP_NAME_MAX && ln[0] == 'L');
  CHECK_EQ_INT(pp_jitdump_offset(j), first);

  /* the runtime appends: the move and half of the next load */
  write_at(path, d.b + first, tail + 100 - first, O_APPEND);
  CHECK_EQ_INT(pp_jitdump_update(j, (uint32_t)getpid(), path), 1);
  CHECK_EQ_STR(look(j, 0x30000), "JS:*fn0 big.js:0:1");
  CHECK(look(j, 0x40000) == NULL);
  CHECK_EQ_INT(pp_jitdump_offset(j), tail);
  CHECK_EQ_INT(pp_jitdump_update(j, (uint32_t)getpid(), path), 0);
  write_at(path, d.b + tail + 100, d.n - tail - 100, O_APPEND);
  CHECK_EQ_INT(pp_jitdump_update(j, (uint32_t)getpid(), path), 1);
  CHECK_EQ_STR(look(j, 0x40008), "JS:*late x.js:1:1");
  CHECK_EQ_INT(pp_jitdump_offset(j), d.n);

  /* replaced by another file (a new inode): read from its start */
  struct dump e = {.n = 0};
  header(&e, 0x4A695444, 1, 40);
  load(&e, 0x50000, 0x10, 1, "JS:*fresh y.js:1:1", 0);
  char other[512];
  snprintf(other, sizeof(other), "%s/other.dump", tmpdir);
  write_at(other, e.b, e.n, O_TRUNC);
  CHECK_EQ_INT(rename(other, path), 0);
  CHECK_EQ_INT(pp_jitdump_update(j, (uint32_t)getpid(), path), 1);
  CHECK_EQ_STR(look(j, 0x50000), "JS:*fresh y.js:1:1");
  CHECK(look(j, 0x10000) == NULL);
  pp_jitdump_free(j);
}

/* A dump last written before the process started belongs to an earlier
 * process with the same pid: refused, until it is written again. */
static void test_stale_file(void) {
  struct dump d = {.n = 0};
  header(&d, 0x4A695444, 1, 40);
  load(&d, 0x60000, 0x10, 1, "JS:*old z.js:1:1", 0);
  char path[512];
  snprintf(path, sizeof(path), "%s/jit-stale.dump", tmpdir);
  write_at(path, d.b, d.n, O_TRUNC);
  struct timespec hour_ago[2];
  clock_gettime(CLOCK_REALTIME, &hour_ago[0]);
  hour_ago[0].tv_sec -= 3600;
  hour_ago[1] = hour_ago[0];
  CHECK_EQ_INT(utimensat(AT_FDCWD, path, hour_ago, 0), 0);
  struct pp_jitdump *j = NULL;
  CHECK_EQ_INT(pp_jitdump_new(0, &j), 0);
  CHECK_EQ_INT(pp_jitdump_update(j, (uint32_t)getpid(), path), -ESTALE);
  CHECK(look(j, 0x60000) == NULL);
  CHECK_EQ_INT(utimensat(AT_FDCWD, path, NULL, 0), 0); /* written now */
  CHECK_EQ_INT(pp_jitdump_update(j, (uint32_t)getpid(), path), 1);
  CHECK_EQ_STR(look(j, 0x60000), "JS:*old z.js:1:1");
  pp_jitdump_free(j);
}

/* A link in place of the dump: refused when it leads to another user's
 * file (the checks themselves are test_target_files'). */
static void test_update_refuses_foreign_link(void) {
  char link[600], other[600];
  snprintf(other, sizeof(other), "%s/other", tmpdir);
  write_at(other, "x", 1, O_TRUNC);
  CHECK_EQ_INT(chown(other, 65534, 65534), 0);
  snprintf(link, sizeof(link), "%s/l", tmpdir);
  CHECK_EQ_INT(symlink(other, link), 0);
  struct pp_jitdump *j = NULL;
  CHECK_EQ_INT(pp_jitdump_new(0, &j), 0);
  CHECK(pp_jitdump_update(j, (uint32_t)getpid(), link) < 0);
  snprintf(link, sizeof(link), "%s/fifo", tmpdir);
  CHECK_EQ_INT(mkfifo(link, 0600), 0);
  CHECK_EQ_INT(pp_jitdump_update(j, (uint32_t)getpid(), link), -EINVAL);
  pp_jitdump_free(j);
}

int main(void) {
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  test_records();
  test_truncated_tail();
  test_bad_sizes();
  test_headers();
  test_file();
  test_stale_file();
  test_update_refuses_foreign_link();
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "cleanup failed\n");
  return pp_test_finish("test_jitdump");
}
