/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the ReadyToRun reader (sdk/pe_r2r.c and the PE, metadata
 * and NativeFormat decoders under it) on the real framework images of this
 * machine: the installed runtime's System.Private.CoreLib and those of the
 * self-contained .NET 8/9/10 test workloads. The code blocks are listed
 * here by a parse of their own (PE section table, CLI header, READYTORUN
 * header, RUNTIME_FUNCTIONS); every block must read as a plausible method
 * name, well-known methods must be among them, funclets must answer with
 * their method's entry. Then the refusals: an IL-only facade, a non-PE
 * file, truncated and budget-capped images.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "polyprof/kit/pe_r2r.h"
#include "testlib.h"

struct image {
  uint8_t *b;
  size_t n;
};

static uint32_t u32(const struct image *im, size_t off) {
  if (off + 4 > im->n) return 0;
  return (uint32_t)im->b[off] | ((uint32_t)im->b[off + 1] << 8) | ((uint32_t)im->b[off + 2] << 16) |
         ((uint32_t)im->b[off + 3] << 24);
}
static uint16_t u16(const struct image *im, size_t off) {
  return off + 2 > im->n ? 0 : (uint16_t)(im->b[off] | (im->b[off + 1] << 8));
}

static int read_all(const char *path, struct image *im) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  im->n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  im->b = malloc(im->n);
  size_t got = im->b ? fread(im->b, 1, im->n, f) : 0;
  fclose(f);
  return got == im->n ? 0 : -1;
}

/* The test's own reading of the image: RVA -> file offset by section. */
struct layout {
  unsigned nsec;
  uint32_t va[96], vsize[96], raw[96], raw_size[96];
};

static size_t rva_off(const struct layout *l, uint32_t rva) {
  for (unsigned i = 0; i < l->nsec; i++)
    if (rva >= l->va[i] && rva - l->va[i] < l->raw_size[i]) return l->raw[i] + (rva - l->va[i]);
  return SIZE_MAX;
}

/* RUNTIME_FUNCTIONS of a single-image R2R file (x64 layout). */
static uint32_t *code_blocks(const struct image *im, struct layout *l, size_t *count,
                             uint32_t **end) {
  uint32_t pe = u32(im, 0x3c);
  unsigned nsec = u16(im, pe + 6), optsz = u16(im, pe + 20);
  size_t opt = pe + 24, sh = opt + optsz;
  l->nsec = nsec < 96 ? nsec : 96;
  for (unsigned i = 0; i < l->nsec; i++) {
    l->vsize[i] = u32(im, sh + 40 * i + 8);
    l->va[i] = u32(im, sh + 40 * i + 12);
    l->raw_size[i] = u32(im, sh + 40 * i + 16);
    l->raw[i] = u32(im, sh + 40 * i + 20);
  }
  size_t cli = rva_off(l, u32(im, opt + 112 + 14 * 8));
  if (cli == SIZE_MAX) return NULL;
  size_t rtr = rva_off(l, u32(im, cli + 64));
  if (rtr == SIZE_MAX) return NULL;
  uint32_t nr2r = u32(im, rtr + 12);
  for (uint32_t i = 0; i < nr2r; i++) {
    if (u32(im, rtr + 16 + 12 * i) != 102) continue;
    size_t rf = rva_off(l, u32(im, rtr + 16 + 12 * i + 4));
    size_t n = u32(im, rtr + 16 + 12 * i + 8) / 12;
    uint32_t *begin = malloc(n * sizeof(*begin));
    *end = malloc(n * sizeof(**end));
    if (rf == SIZE_MAX || !begin || !*end) return NULL;
    for (size_t k = 0; k < n; k++) {
      begin[k] = u32(im, rf + 12 * k);
      (*end)[k] = u32(im, rf + 12 * k + 4);
    }
    *count = n;
    return begin;
  }
  return NULL;
}

static bool plausible(const char *name) {
  if (!name || !name[0] || name[0] == '.' || !strchr(name, '.')) return false;
  for (const char *p = name; *p; p++)
    if ((unsigned char)*p < 0x20) return false;
  return true;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static long max_rss_kib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

static void check_image(const char *path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    printf("SKIPPED %s: cannot open it\n", path);
    return;
  }
  CHECK_EQ_INT(pp_r2r_probe(fd), 0);
  struct pp_r2r *t = NULL;
  char why[256];
  /* the cost figures (docs/performance.md): the build's time and the
   * process's peak growing with it (what it reads from the file, then the
   * table), before this test reads the whole image for itself */
  long rss0 = max_rss_kib();
  double t0 = now_ms();
  int rc = pp_r2r_load(fd, 0, &t, why, sizeof(why));
  double ms = now_ms() - t0;
  long peak = max_rss_kib() - rss0;
  if (rc < 0) fprintf(stderr, "%s: %s\n", path, why);
  CHECK_EQ_INT(rc, 0);
  struct image im = {0};
  if (read_all(path, &im) < 0) {
    printf("SKIPPED %s: cannot read it\n", path);
    pp_r2r_free(t);
    close(fd);
    return;
  }
  struct layout l;
  size_t n = 0;
  uint32_t *end = NULL;
  uint32_t *begin = code_blocks(&im, &l, &n, &end);
  CHECK(begin && n > 10000);
  if (!t || !begin) goto out;
  CHECK_EQ_INT(pp_r2r_blocks(t), n);
  /* every generic instantiation's signature decoded */
  CHECK_EQ_INT(pp_r2r_skipped(t), 0);
  size_t named = 0, funclets = 0, bad = 0, inside_bad = 0, owner_bad = 0;
  unsigned found = 0;
  static const char *const known[] = {
      "System.String.Concat",
      "System.Collections.Generic.Dictionary`2.TryInsert", /* generic: instance entry points */
      "System.Array.Sort",
      "System.Number.Int32ToDecStr",
      "System.Collections.Generic.ArraySortHelper`1.IntroSort",
  };
  for (size_t i = 0; i < n; i++) {
    uint32_t start = 0;
    const char *name = pp_r2r_lookup(t, begin[i], &start);
    if (!name) continue;
    named++;
    if (!plausible(name)) {
      if (bad++ < 5) fprintf(stderr, "%s: implausible name \"%s\"\n", path, name);
    }
    for (unsigned k = 0; k < sizeof(known) / sizeof(known[0]); k++)
      if (strcmp(name, known[k]) == 0) found |= 1u << k;
    if (start != begin[i]) {
      /* a funclet or cold part: its method's entry reads the same name */
      funclets++;
      const char *owner = pp_r2r_lookup(t, start, NULL);
      if (!owner || strcmp(owner, name) != 0) owner_bad++;
    }
    /* the last byte of the block too, and not the byte after it (the next
     * block may start later) */
    const char *last = pp_r2r_lookup(t, end[i] - 1, NULL);
    if (!last || strcmp(last, name) != 0) inside_bad++;
    if (i + 1 < n && begin[i + 1] > end[i] && pp_r2r_lookup(t, end[i], NULL)) inside_bad++;
  }
  printf(
      "%s: %zu of %zu blocks named (%zu funclets), table %zu KiB, built in %.1f ms, "
      "peak RSS +%ld KiB\n",
      path, named, n, funclets, pp_r2r_bytes(t) / 1024, ms, peak);
  CHECK(named >= n - n / 100); /* methods named in another module's metadata: few */
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(inside_bad, 0);
  CHECK_EQ_INT(owner_bad, 0);
  CHECK(funclets > 100);
  CHECK_EQ_INT(found, (1u << (sizeof(known) / sizeof(known[0]))) - 1);
  CHECK(pp_r2r_lookup(t, 0, NULL) == NULL); /* the headers are no code */
  /* a file offset reads as the RVA the section table gives */
  for (unsigned s = 0; s < l.nsec; s++) {
    if (l.raw_size[s] < 0x200) continue;
    uint32_t rva = 0;
    CHECK_EQ_INT(pp_r2r_offset_to_rva(t, (uint64_t)l.raw[s] + 0x100, &rva), 0);
    CHECK_EQ_INT(rva, l.va[s] + 0x100);
  }
  uint32_t rva;
  CHECK_EQ_INT(pp_r2r_offset_to_rva(t, (uint64_t)im.n + 4096, &rva), -ERANGE);
out:
  pp_r2r_free(t);
  free(begin);
  free(end);
  /* a truncated image is refused, never read past */
  for (size_t cut = 64; cut < im.n; cut *= 4) {
    int mfd = memfd_create("r2r-cut", 0);
    if (mfd < 0 || write(mfd, im.b, cut) != (ssize_t)cut) abort();
    struct pp_r2r *c = NULL;
    rc = pp_r2r_load(mfd, 0, &c, why, sizeof(why));
    CHECK(rc < 0 && c == NULL && why[0]);
    close(mfd);
  }
  /* over the byte budget */
  struct pp_r2r *c = NULL;
  CHECK_EQ_INT(pp_r2r_load(fd, 4096, &c, why, sizeof(why)), -EFBIG);
  CHECK(c == NULL);
  close(fd);
  free(im.b);
}

static void check_refusals(const char *dir) {
  char path[4200];
  char why[256];
  struct pp_r2r *t = NULL;
  /* a facade: metadata and forwarders, no precompiled code */
  snprintf(path, sizeof(path), "%s/System.Runtime.dll", dir);
  int fd = open(path, O_RDONLY);
  if (fd >= 0) {
    CHECK_EQ_INT(pp_r2r_probe(fd), 0);
    CHECK_EQ_INT(pp_r2r_load(fd, 0, &t, why, sizeof(why)), -ENOTSUP);
    CHECK_CONTAINS(why, "IL only");
    close(fd);
  }
  /* an ELF file */
  fd = open("/proc/self/exe", O_RDONLY);
  CHECK_EQ_INT(pp_r2r_probe(fd), -ENOEXEC);
  CHECK_EQ_INT(pp_r2r_load(fd, 0, &t, why, sizeof(why)), -ENOEXEC);
  CHECK_CONTAINS(why, "MZ");
  CHECK(t == NULL);
  close(fd);
}

int main(void) {
  glob_t g;
  const char *pattern =
      "/usr/share/dotnet/shared/Microsoft.NETCore.App/*/System.Private.CoreLib.dll";
  if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0) {
    printf("SKIPPED: no .NET runtime (%s); scripts/install-deps.sh test installs one\n", pattern);
    return pp_test_finish("test_pe_r2r");
  }
  const char *newest = g.gl_pathv[g.gl_pathc - 1];
  check_image(newest);
  char dir[4096];
  snprintf(dir, sizeof(dir), "%.*s", (int)(strrchr(newest, '/') - newest), newest);
  check_refusals(dir);
  globfree(&g);
  for (int major = 8; major <= 10; major++) {
    char p[128];
    snprintf(p, sizeof(p), "/opt/polyprof-test/dotnet-%d/System.Private.CoreLib.dll", major);
    if (access(p, R_OK) == 0)
      check_image(p);
    else
      printf("SKIPPED .NET %d: %s absent (scripts/install-deps.sh test)\n", major, p);
  }
  return pp_test_finish("test_pe_r2r");
}
