/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the support code the perf plugin adds (and other plugins
 * reuse): /proc maps parsing, kallsyms, perf maps, demangling, ELF symbols,
 * build-ids and debug-file lookup. Malformed input must be refused, never
 * crash (run under ASan/UBSan in CI).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "polyprof/kit/demangle.h"
#include "polyprof/kit/elf_symbols.h"
#include "polyprof/kit/kallsyms.h"
#include "polyprof/kit/maps.h"
#include "polyprof/kit/perfmap.h"
#include "testlib.h"

static char tmpdir[] = "/tmp/pp-perf-support-XXXXXX";

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fwrite(data, 1, n, f);
  fclose(f);
}

static void test_maps(void) {
  struct pp_map m;
  char path[256];
  CHECK_EQ_INT(pp_maps_parse_line("7f0c1a000000-7f0c1a1c8000 r-xp 00028000 fd:01 1311 "
                                  "  /usr/lib/x86_64-linux-gnu/libc.so.6\n",
                                  &m, path, sizeof(path)),
               0);
  CHECK_EQ_INT(m.start, 0x7f0c1a000000ull);
  CHECK_EQ_INT(m.end, 0x7f0c1a1c8000ull);
  CHECK_EQ_INT(m.offset, 0x28000);
  CHECK_EQ_INT(m.dev_major, 0xfd);
  CHECK_EQ_INT(m.dev_minor, 1);
  CHECK_EQ_INT(m.inode, 1311);
  CHECK_EQ_INT(m.prot, PP_MAP_READ | PP_MAP_EXEC);
  CHECK_EQ_STR(m.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");

  CHECK_EQ_INT(pp_maps_parse_line("7ffd1000-7ffd3000 rw-p 00000000 00:00 0", &m, path, 256), 0);
  CHECK(m.path == NULL);
  CHECK_EQ_INT(pp_maps_parse_line("1000-2000 r-xp 00000000 08:02 12 /my dir/a b (deleted)", &m,
                                  path, sizeof(path)),
               0);
  CHECK_EQ_STR(m.path, "/my dir/a b (deleted)");
  /* malformed */
  CHECK(pp_maps_parse_line("", &m, path, sizeof(path)) < 0);
  CHECK(pp_maps_parse_line("2000-1000 r-xp 0 0:0 0", &m, path, sizeof(path)) < 0);
  CHECK(pp_maps_parse_line("10000000000000000-2 r-xp 0 0:0 0", &m, path, sizeof(path)) < 0);
  CHECK(pp_maps_parse_line("1000-2000 r-", &m, path, sizeof(path)) < 0);
  CHECK(pp_maps_parse_line("1000-2000 r-xp zz 0:0 0", &m, path, sizeof(path)) < 0);
  /* truncated path */
  char small[8];
  CHECK_EQ_INT(pp_maps_parse_line("1000-2000 r-xp 0 0:0 1 /usr/lib/long", &m, small, 8), 0);
  CHECK_EQ_STR(m.path, "/usr/li");

  /* our own maps: the mapping holding this function is executable */
  struct pp_map *maps = NULL;
  size_t n = 0;
  CHECK_EQ_INT(pp_maps_read((uint32_t)getpid(), 1, 0, &maps, &n), 0);
  long i = pp_maps_find(maps, n, (uint64_t)(uintptr_t)&test_maps);
  CHECK(i >= 0);
  if (i >= 0) CHECK(maps[i].prot & PP_MAP_EXEC);
  CHECK(pp_maps_find(maps, n, 0) < 0);
  pp_maps_free(maps, n);
  CHECK_EQ_INT(pp_maps_read(0x7ffffff0, 1, 0, &maps, &n), -ESRCH);
}

static void test_kallsyms(void) {
  char path[512];
  snprintf(path, sizeof(path), "%s/kallsyms", tmpdir);
  const char *text =
      "ffffffff81000000 T _stext\n"
      "ffffffff810000f0 t __pfx_do_one\n"
      "ffffffff81000100 t do_one\n"
      "ffffffff81000200 D some_data\n"
      "ffffffff810002f0 T __pfx_lonely\n"
      "garbage line\n"
      "ffffffff81000300 T do_two\n"
      "ffffffffc0000ff0 t __pfx_ext4_fill_super\t[ext4]\n"
      "ffffffffc0001000 t ext4_fill_super\t[ext4]\n"
      "ffffffffc0002000 t ext4_other\t[ext4]\n"
      "ffffffffc00ffff0 t __pfx_xfs_thing\t[ext4]\n"
      "ffffffffc0100000 t xfs_thing\t[xfs]\n"
      "ffffffffc01ffff0 t __pfx_\n";
  write_file(path, text, strlen(text));
  struct pp_kallsyms *k = NULL;
  CHECK_EQ_INT(pp_kallsyms_load(path, &k), 0);
  CHECK_EQ_INT(pp_kallsyms_count(k), 11);
  /* padding symbols: shared with the function they pad, or on their own
   * when the next line is another function, module or nothing */
  CHECK_EQ_STR(pp_kallsyms_lookup(k, 0xffffffff810000f8ull, NULL, NULL), "__pfx_do_one");
  CHECK_EQ_STR(pp_kallsyms_lookup(k, 0xffffffff810002f8ull, NULL, NULL), "__pfx_lonely");
  const char *pmod = NULL;
  CHECK_EQ_STR(pp_kallsyms_lookup(k, 0xffffffffc0000ff8ull, NULL, &pmod), "__pfx_ext4_fill_super");
  CHECK_EQ_STR(pmod, "ext4");
  CHECK_EQ_STR(pp_kallsyms_lookup(k, 0xffffffffc00ffff8ull, NULL, &pmod), "__pfx_xfs_thing");
  CHECK_EQ_STR(pmod, "ext4");
  CHECK_EQ_STR(pp_kallsyms_lookup(k, 0xffffffffc01ffff8ull, NULL, NULL), "__pfx_");
  uint64_t start = 0;
  const char *mod = "x";
  CHECK_EQ_STR(pp_kallsyms_lookup(k, 0xffffffff81000150ull, &start, &mod), "do_one");
  CHECK_EQ_INT(start, 0xffffffff81000100ull);
  CHECK(mod == NULL);
  /* data symbols are not functions: the address belongs to do_one */
  CHECK_EQ_STR(pp_kallsyms_lookup(k, 0xffffffff81000250ull, NULL, NULL), "do_one");
  CHECK_EQ_STR(pp_kallsyms_lookup(k, 0xffffffffc0001010ull, NULL, &mod), "ext4_fill_super");
  CHECK_EQ_STR(mod, "ext4");
  CHECK_EQ_STR(pp_kallsyms_lookup(k, 0xffffffffc0100010ull, NULL, &mod), "xfs_thing");
  CHECK_EQ_STR(mod, "xfs");
  CHECK(pp_kallsyms_lookup(k, 0x1000, NULL, NULL) == NULL);
  CHECK(pp_kallsyms_lookup(k, 0xffffffffff000000ull, NULL, NULL) == NULL); /* far past the end */
  pp_kallsyms_free(k);

  /* kptr_restrict: every address reads as zero */
  const char *hidden = "0000000000000000 T _stext\n0000000000000000 t do_one\n";
  write_file(path, hidden, strlen(hidden));
  CHECK_EQ_INT(pp_kallsyms_load(path, &k), -EPERM);
  write_file(path, "", 0);
  CHECK_EQ_INT(pp_kallsyms_load(path, &k), -ENODATA);
  CHECK(pp_kallsyms_load("/nonexistent/kallsyms", &k) < 0);
}

static void test_perfmap(void) {
  const char *text =
      "1000 100 first\n"
      "0x2000 0x10 LazyCompile:*foo app.js:1\n"
      "not a line\n"
      "3000 zz bad size\n"
      "1000 100 first_recompiled\n"
      "5000 0 zero_size\n"
      "ffffffffffffff00 1000 wraps\n"
      "4000 10 half written"; /* no newline: the writer is mid-line */
  struct pp_perfmap *m = NULL;
  CHECK_EQ_INT(pp_perfmap_parse(text, strlen(text), 0, &m), 0);
  CHECK_EQ_INT(pp_perfmap_count(m), 3);
  uint64_t start = 0;
  CHECK_EQ_STR(pp_perfmap_lookup(m, 0x1050, &start), "first_recompiled");
  CHECK_EQ_INT(start, 0x1000);
  CHECK_EQ_STR(pp_perfmap_lookup(m, 0x200f, NULL), "LazyCompile:*foo app.js:1");
  CHECK(pp_perfmap_lookup(m, 0x2010, NULL) == NULL);
  CHECK(pp_perfmap_lookup(m, 0x4005, NULL) == NULL);
  CHECK(pp_perfmap_lookup(m, 0x10, NULL) == NULL);
  pp_perfmap_free(m);
  CHECK_EQ_INT(pp_perfmap_parse(text, strlen(text), 1, &m), 0);
  CHECK_EQ_INT(pp_perfmap_count(m), 1);
  pp_perfmap_free(m);

  char path[512];
  snprintf(path, sizeof(path), "%s/perf-1.map", tmpdir);
  write_file(path, text, strlen(text));
  CHECK_EQ_INT(pp_perfmap_load(path, 16, 0, &m), 0); /* capped: only the first line */
  CHECK_EQ_INT(pp_perfmap_count(m), 1);
  pp_perfmap_free(m);
  CHECK(pp_perfmap_load("/nonexistent/perf-1.map", 0, 0, &m) < 0);
  /* from a descriptor the caller opened (through the kit) */
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  CHECK(fd >= 0);
  CHECK_EQ_INT(pp_perfmap_load_fd(fd, 0, 0, &m), 0);
  CHECK_EQ_INT(pp_perfmap_count(m), 3);
  pp_perfmap_free(m);
  CHECK_EQ_INT(pp_perfmap_load_fd(fd, 16, 0, &m), 0); /* from the start again */
  CHECK_EQ_INT(pp_perfmap_count(m), 1);
  pp_perfmap_free(m);
  close(fd);
  fd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  CHECK_EQ_INT(pp_perfmap_load_fd(fd, 0, 0, &m), -EINVAL);
  close(fd);
}

static void test_demangle(void) {
  char buf[256];
  CHECK_EQ_STR(pp_demangle("_ZN3foo3barEv", buf, sizeof(buf)), "foo::bar");
  CHECK_EQ_STR(pp_demangle("_ZNSt6vectorIiSaIiEE9push_backERKi", buf, sizeof(buf)),
               "std::vector<int, std::allocator<int> >::push_back");
  CHECK_EQ_STR(pp_demangle("_ZN4core3fmt5write17h0123456789abcdefE", buf, sizeof(buf)),
               "core::fmt::write");
  CHECK_EQ_STR(pp_demangle("_RNvCs1234_7mycrate3foo", buf, sizeof(buf)), "mycrate::foo");
  CHECK(pp_demangle("main", buf, sizeof(buf)) == NULL);
  CHECK(pp_demangle("_Zgarbage", buf, sizeof(buf)) == NULL);
  CHECK(pp_demangle("_R", buf, sizeof(buf)) == NULL);
  char tiny[5];
  CHECK_EQ_STR(pp_demangle("_ZN3foo3barEv", tiny, sizeof(tiny)), "foo:");
}

__attribute__((noinline)) int pp_test_marker_function(int x) {
  return x * 3 + 1;
}

static void test_elf(void) {
  int fd = open("/proc/self/exe", O_RDONLY);
  CHECK(fd >= 0);
  struct pp_elf_info info;
  struct pp_elf_symtab *t = NULL;
  CHECK_EQ_INT(pp_elf_load(fd, PP_ELF_WANT_SYMTAB | PP_ELF_WANT_DYNSYM, &info, &t), 0);
  close(fd);
  CHECK(t != NULL);
  CHECK(info.has_symtab);
  CHECK(info.build_id_len == 20);
  CHECK(info.eh_frame_hdr_size > 0 && info.eh_frame_size > 0);
  CHECK(!info.is_go);
  /* runtime address -> ELF vaddr through our own mapping */
  struct pp_map *maps = NULL;
  size_t n = 0;
  uint64_t addr = (uint64_t)(uintptr_t)&pp_test_marker_function;
  CHECK_EQ_INT(pp_maps_read((uint32_t)getpid(), 1, 0, &maps, &n), 0);
  long i = pp_maps_find(maps, n, addr);
  CHECK(i >= 0);
  if (i >= 0 && t) {
    uint64_t vaddr = 0;
    CHECK_EQ_INT(pp_elf_offset_to_vaddr(&info, maps[i].offset, &vaddr), 0);
    uint64_t bias = maps[i].start - vaddr, start = 0;
    char name[64];
    CHECK_EQ_STR(pp_elf_symtab_lookup(t, addr - bias + 3, &start, name, sizeof(name)),
                 "pp_test_marker_function");
    CHECK_EQ_INT(start, addr - bias);
    CHECK(!pp_elf_symtab_has_file(t));
    CHECK(pp_elf_symtab_lookup(t, 16, NULL, name, sizeof(name)) == NULL);
    CHECK(pp_elf_symtab_find(t, addr - bias + 3, &start) && start == addr - bias);

    /* names left in the file: read at lookup from a descriptor the table
     * holds, cut to the caller's buffer, refused once the file no longer
     * holds them (a hostile or rewritten file) */
    char copy[600], cmd[1400];
    snprintf(copy, sizeof(copy), "%s/self-copy", tmpdir);
    snprintf(cmd, sizeof(cmd), "cp /proc/%d/exe %s", getpid(), copy);
    CHECK_EQ_INT(system(cmd), 0);
    int cfd = open(copy, O_RDWR);
    CHECK(cfd >= 0);
    struct pp_elf_info cinfo;
    struct pp_elf_symtab *ft = NULL;
    CHECK_EQ_INT(pp_elf_load(cfd, PP_ELF_WANT_SYMTAB | PP_ELF_NAMES_IN_FILE, &cinfo, &ft), 0);
    CHECK(ft && pp_elf_symtab_has_file(ft));
    CHECK(pp_elf_symtab_bytes(ft) < pp_elf_symtab_bytes(t));
    CHECK_EQ_STR(pp_elf_symtab_lookup(ft, addr - bias + 3, &start, name, sizeof(name)),
                 "pp_test_marker_function");
    CHECK_EQ_STR(pp_elf_symtab_lookup(ft, addr - bias, NULL, name, 8), "pp_test");
    CHECK(pp_elf_symtab_lookup(ft, addr - bias, NULL, name, 1) == NULL);
    CHECK_EQ_INT(ftruncate(cfd, 4096), 0);
    close(cfd);
    CHECK(pp_elf_symtab_lookup(ft, addr - bias + 3, &start, name, sizeof(name)) == NULL);
    pp_elf_symtab_free(ft);
  }
  pp_maps_free(maps, n);
  char hex[41];
  CHECK_EQ_INT(strlen(pp_elf_build_id_hex(&info, hex, sizeof(hex))), 40);

  /* a separate debug file by build-id under a process root */
  char dir[600], dbg[700], found[1024];
  snprintf(dir, sizeof(dir), "%s/root/usr/lib/debug/.build-id/%.2s", tmpdir, hex);
  char cmd[1400];
  snprintf(cmd, sizeof(cmd), "mkdir -p %s && cp /proc/%d/exe %s/%s.debug", dir, getpid(), dir,
           hex + 2);
  CHECK_EQ_INT(system(cmd), 0);
  snprintf(dbg, sizeof(dbg), "%s/root", tmpdir);
  CHECK_EQ_INT(pp_elf_find_debug_file(dbg, "/usr/bin/prog", &info, found, sizeof(found)), 0);
  CHECK_CONTAINS(found, "/usr/lib/debug/.build-id/");
  struct pp_elf_info nobid = info;
  nobid.build_id_len = 0;
  CHECK_EQ_INT(pp_elf_find_debug_file(dbg, "/usr/bin/prog", &nobid, found, sizeof(found)), -ENOENT);
  /* .gnu_debuglink next to the object, in the process root */
  snprintf(nobid.debuglink, sizeof(nobid.debuglink), "prog.debug");
  snprintf(cmd, sizeof(cmd),
           "mkdir -p %s/root/usr/bin/.debug && cp /proc/%d/exe %s/root/usr/bin/.debug/prog.debug",
           tmpdir, getpid(), tmpdir);
  CHECK_EQ_INT(system(cmd), 0);
  CHECK_EQ_INT(pp_elf_find_debug_file(dbg, "/usr/bin/prog", &nobid, found, sizeof(found)), 0);
  CHECK_CONTAINS(found, "/usr/bin/.debug/prog.debug");
  /* a debuglink candidate with another build-id is refused */
  struct pp_elf_info other = info;
  other.build_id[0] ^= 0xff;
  snprintf(other.debuglink, sizeof(other.debuglink), "prog.debug");
  CHECK_EQ_INT(pp_elf_find_debug_file(dbg, "/usr/bin/prog", &other, found, sizeof(found)), -ENOENT);

  /* the same search through a process's root (ours): the debuglink next to
   * the object, only with the object's build-id, never a name with '/' */
  char obj[700];
  snprintf(obj, sizeof(obj), "%s/root/usr/bin/prog", tmpdir);
  struct pp_elf_info same = info;
  snprintf(same.debuglink, sizeof(same.debuglink), "prog.debug");
  int dfd = pp_elf_open_debug_file((uint32_t)getpid(), obj, &same);
  CHECK(dfd >= 0);
  if (dfd >= 0) close(dfd);
  CHECK_EQ_INT(pp_elf_open_debug_file((uint32_t)getpid(), obj, &other), -ENOENT);
  struct pp_elf_info slash = same;
  snprintf(slash.debuglink, sizeof(slash.debuglink), "../.debug/prog.debug");
  CHECK_EQ_INT(pp_elf_open_debug_file((uint32_t)getpid(), obj, &slash), -ENOENT);
  /* a FIFO at the candidate is passed over, never opened (no blocking) */
  snprintf(cmd, sizeof(cmd),
           "rm %s/root/usr/bin/.debug/prog.debug && mkfifo %s/root/usr/bin/.debug/prog.debug",
           tmpdir, tmpdir);
  CHECK_EQ_INT(system(cmd), 0);
  CHECK_EQ_INT(pp_elf_open_debug_file((uint32_t)getpid(), obj, &same), -ENOENT);
  pp_elf_symtab_free(t);
}

/* Truncated, corrupted and random files must be refused or read without
 * crashing. */
static void test_elf_malformed(void) {
  int fd = open("/proc/self/exe", O_RDONLY);
  struct stat st;
  fstat(fd, &st);
  size_t size = (size_t)st.st_size;
  unsigned char *img = malloc(size);
  CHECK(img && read(fd, img, size) == (ssize_t)size);
  close(fd);
  if (!img) return;
  char path[512];
  snprintf(path, sizeof(path), "%s/bad.elf", tmpdir);
  unsigned seed = 12345;
  size_t cuts[] = {0, 4, 16, 63, 64, 200, 4096, size / 2, size - 1};
  for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
    write_file(path, img, cuts[c]);
    int f = open(path, O_RDONLY);
    struct pp_elf_info info;
    struct pp_elf_symtab *t = NULL;
    pp_elf_load(f, PP_ELF_WANT_SYMTAB | PP_ELF_WANT_DYNSYM | PP_ELF_NAMES_IN_FILE, &info, &t);
    char name[256];
    for (unsigned l = 0; t && l < info.nloads; l++)
      pp_elf_symtab_lookup(t, info.loads[l].vaddr + 64, NULL, name, sizeof(name));
    pp_elf_symtab_free(t);
    close(f);
  }
  for (int round = 0; round < 200; round++) {
    unsigned char *copy = malloc(size);
    memcpy(copy, img, size);
    /* flip bytes in the headers, where offsets and counts live */
    for (int k = 0; k < 16; k++) {
      seed = seed * 1103515245u + 12345u;
      size_t at = round % 2 ? (seed >> 8) % 128 : (seed >> 8) % size;
      if (round % 3 == 0 && size > 4096) at = size - 1 - (seed >> 8) % 4096; /* section headers */
      copy[at] = (unsigned char)(seed >> 16);
    }
    struct pp_elf_info info;
    struct pp_elf_symtab *t = NULL;
    int rc = pp_elf_load_memory(copy, size, PP_ELF_WANT_SYMTAB | PP_ELF_WANT_DYNSYM, &info, &t);
    char name[256];
    if (rc == 0 && t) pp_elf_symtab_lookup(t, 0x1234, NULL, name, sizeof(name));
    pp_elf_symtab_free(t);
    free(copy);
  }
  unsigned char junk[4096];
  for (size_t k = 0; k < sizeof(junk); k++)
    junk[k] = (unsigned char)(k * 7 + 3);
  struct pp_elf_info info;
  struct pp_elf_symtab *t = NULL;
  CHECK(pp_elf_load_memory(junk, sizeof(junk), PP_ELF_WANT_SYMTAB, &info, &t) < 0);
  free(img);
}

/* Random bytes through the text parsers. */
static void test_parsers_fuzz(void) {
  unsigned seed = 777;
  char buf[512];
  for (int round = 0; round < 2000; round++) {
    size_t n = 0;
    for (; n < sizeof(buf) - 1; n++) {
      seed = seed * 1103515245u + 12345u;
      static const char alphabet[] = "0123456789abcdefx- :\n/[]rwxp()";
      buf[n] = round % 2 ? (char)(seed >> 16) : alphabet[(seed >> 16) % (sizeof(alphabet) - 1)];
      if (buf[n] == 0) buf[n] = '1';
      if ((seed >> 24) % 97 == 0) break;
    }
    buf[n] = '\0';
    struct pp_map m;
    char path[64];
    pp_maps_parse_line(buf, &m, path, sizeof(path));
    struct pp_perfmap *pm = NULL;
    if (pp_perfmap_parse(buf, n, 0, &pm) == 0) {
      pp_perfmap_lookup(pm, 0x1000, NULL);
      pp_perfmap_free(pm);
    }
  }
  CHECK(1);
}

int main(void) {
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  test_maps();
  test_kallsyms();
  test_perfmap();
  test_demangle();
  test_elf();
  test_elf_malformed();
  test_parsers_fuzz();
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "cleanup failed\n");
  return pp_test_finish("test_perf_support");
}
