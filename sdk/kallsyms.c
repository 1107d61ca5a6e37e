/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /proc/kallsyms loader. Lines look like
 *   ffffffff81000000 T _stext
 *   ffffffffc0a01000 t ext4_fill_super	[ext4]
 * Names and module names go into one string blob; entries are 12 bytes
 * (address, name offset). A module symbol's name is preceded in the blob by
 * the 4-byte offset of its module's name (stored once per run of symbols),
 * so only module symbols pay for a module reference.
 *
 * Kernels built with function padding list a "__pfx_<name>" symbol right
 * before every function (57,848 of 122,086 text symbols on a 6.18 kernel,
 * 1.6 MB of names): such an entry shares the name of the function it pads
 * and is flagged, and its name is rebuilt at lookup.
 */
#include "polyprof/kit/kallsyms.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* packed: 12 bytes, not 16, for 100,000+ entries */
struct __attribute__((packed, aligned(4))) ksym {
  uint64_t addr;
  uint32_t name; /* offset into blob | KSYM_PFX | KSYM_MOD */
};
_Static_assert(sizeof(struct ksym) == 12, "kallsyms entry layout");

struct pp_kallsyms {
  struct ksym *syms;
  size_t n;
  char *blob;
  size_t blob_len, blob_cap;
};

/* Symbols past the last one resolve only this far, so garbage addresses in
 * the kernel range do not all become the last module's last function. */
#define KSYM_MAX_GAP (1u << 20)

#define KSYM_PFX (1u << 31) /* the name is "__pfx_" + the blob's */
#define KSYM_MOD (1u << 30) /* 4 bytes before the name: the module name's offset */
#define KSYM_OFF_MASK (KSYM_MOD - 1)
#define NO_MODULE UINT32_MAX
#define PFX "__pfx_"
#define PFX_LEN 6
#define KSYM_NAME_MAX 512 /* the kernel's KSYM_NAME_LEN */

/* Appends s (n bytes) and a NUL, preceded by mod's offset when mod is not
 * NO_MODULE. Returns the name's offset with KSYM_MOD set in that case. */
static int64_t blob_add(struct pp_kallsyms *k, const char *s, size_t n, uint32_t mod) {
  size_t pre = mod == NO_MODULE ? 0 : sizeof(mod);
  size_t need = k->blob_len + pre + n + 1;
  if (need > k->blob_cap) {
    size_t ncap = k->blob_cap ? k->blob_cap * 2 : 1 << 20;
    while (ncap < need)
      ncap *= 2;
    if (ncap > KSYM_MOD) return -ENOMEM; /* offsets leave the flag bits free */
    char *g = realloc(k->blob, ncap);
    if (!g) return -ENOMEM;
    k->blob = g;
    k->blob_cap = ncap;
  }
  if (pre) memcpy(k->blob + k->blob_len, &mod, sizeof(mod));
  int64_t off = (int64_t)(k->blob_len + pre);
  memcpy(k->blob + off, s, n);
  k->blob[off + (int64_t)n] = '\0';
  k->blob_len = need;
  return pre ? off | KSYM_MOD : off;
}

static int cmp_ksym(const void *a, const void *b) {
  const struct ksym *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int push(struct pp_kallsyms *k, size_t *cap, uint64_t addr, uint32_t name) {
  if (k->n == *cap) {
    size_t ncap = *cap ? *cap * 2 : 65536;
    struct ksym *g = realloc(k->syms, ncap * sizeof(*g));
    if (!g) return -ENOMEM;
    k->syms = g;
    *cap = ncap;
  }
  k->syms[k->n++] = (struct ksym){.addr = addr, .name = name};
  return 0;
}

/* A "__pfx_" symbol waiting for the next line: if that is the function it
 * pads, the two share one name. */
struct pending_pfx {
  bool set;
  uint64_t addr;
  uint32_t mod;
  size_t len;
  char name[KSYM_NAME_MAX]; /* without the prefix */
};

static int pfx_flush(struct pp_kallsyms *k, size_t *cap, struct pending_pfx *pp) {
  if (!pp->set) return 0;
  pp->set = false;
  char full[PFX_LEN + KSYM_NAME_MAX];
  memcpy(full, PFX, PFX_LEN);
  memcpy(full + PFX_LEN, pp->name, pp->len);
  int64_t off = blob_add(k, full, PFX_LEN + pp->len, pp->mod);
  if (off < 0) return (int)off;
  return push(k, cap, pp->addr, (uint32_t)off);
}

int pp_kallsyms_load(const char *path, struct pp_kallsyms **out) {
  FILE *f = fopen(path ? path : "/proc/kallsyms", "re");
  if (!f) return -errno;
  struct pp_kallsyms *k = calloc(1, sizeof(*k));
  if (!k) {
    fclose(f);
    return -ENOMEM;
  }
  size_t cap = 0;
  char line[512];
  char last_mod[128] = "";
  int64_t last_mod_off = -1;
  struct pending_pfx pfx = {.set = false};
  int rc = 0;
  size_t nonzero = 0;
  while (fgets(line, sizeof(line), f)) {
    char *p = line, *end;
    unsigned long long addr = strtoull(p, &end, 16);
    if (end == p || *end != ' ') continue;
    p = end + 1;
    char type = *p;
    if (!type || p[1] != ' ') continue;
    p += 2;
    if (type != 't' && type != 'T' && type != 'w' && type != 'W') continue;
    size_t nlen = strcspn(p, "\t \n");
    if (nlen == 0) continue;
    char *rest = p + nlen;
    uint32_t mod = NO_MODULE;
    char *lb = strchr(rest, '[');
    if (lb) {
      char *rb = strchr(lb, ']');
      if (rb && rb > lb + 1) {
        size_t mlen = (size_t)(rb - lb - 1);
        if (mlen >= sizeof(last_mod)) mlen = sizeof(last_mod) - 1;
        /* modules come in runs: reuse the previous copy */
        if (last_mod_off < 0 || strncmp(last_mod, lb + 1, mlen) != 0 || last_mod[mlen]) {
          memcpy(last_mod, lb + 1, mlen);
          last_mod[mlen] = '\0';
          last_mod_off = blob_add(k, last_mod, mlen, NO_MODULE);
          if (last_mod_off < 0) {
            rc = -ENOMEM;
            break;
          }
        }
        mod = (uint32_t)last_mod_off;
      }
    }
    if (addr) nonzero++;
    bool pads_this = pfx.set && pfx.mod == mod && pfx.len == nlen && pfx.addr <= addr &&
                     memcmp(pfx.name, p, nlen) == 0;
    if (!pads_this && (rc = pfx_flush(k, &cap, &pfx)) < 0) break;
    if (nlen > PFX_LEN && nlen - PFX_LEN < KSYM_NAME_MAX && memcmp(p, PFX, PFX_LEN) == 0) {
      pfx = (struct pending_pfx){.set = true, .addr = addr, .mod = mod, .len = nlen - PFX_LEN};
      memcpy(pfx.name, p + PFX_LEN, nlen - PFX_LEN);
      continue;
    }
    int64_t noff = blob_add(k, p, nlen, mod);
    if (noff < 0) {
      rc = -ENOMEM;
      break;
    }
    if (pads_this) {
      pfx.set = false;
      if ((rc = push(k, &cap, pfx.addr, (uint32_t)noff | KSYM_PFX)) < 0) break;
    }
    if ((rc = push(k, &cap, addr, (uint32_t)noff)) < 0) break;
  }
  if (rc == 0) rc = pfx_flush(k, &cap, &pfx);
  fclose(f);
  if (rc == 0 && k->n == 0) rc = -ENODATA;
  if (rc == 0 && nonzero == 0) rc = -EPERM;
  if (rc < 0) {
    pp_kallsyms_free(k);
    return rc;
  }
  qsort(k->syms, k->n, sizeof(*k->syms), cmp_ksym);
  *out = k;
  return 0;
}

void pp_kallsyms_free(struct pp_kallsyms *k) {
  if (!k) return;
  free(k->syms);
  free(k->blob);
  free(k);
}

const char *pp_kallsyms_lookup(const struct pp_kallsyms *k, uint64_t addr, uint64_t *start,
                               const char **module) {
  if (!k || k->n == 0 || addr < k->syms[0].addr) return NULL;
  size_t lo = 0, hi = k->n; /* first index with syms[i].addr > addr */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (k->syms[mid].addr <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  const struct ksym *s = &k->syms[lo - 1];
  if (lo == k->n && addr - s->addr > KSYM_MAX_GAP) return NULL;
  if (start) *start = s->addr;
  const char *name = k->blob + (s->name & KSYM_OFF_MASK);
  if (module) {
    uint32_t mod = NO_MODULE;
    if (s->name & KSYM_MOD) memcpy(&mod, name - sizeof(mod), sizeof(mod));
    *module = mod == NO_MODULE ? NULL : k->blob + mod;
  }
  if (!(s->name & KSYM_PFX)) return name;
  static _Thread_local char full[PFX_LEN + KSYM_NAME_MAX];
  snprintf(full, sizeof(full), PFX "%s", name);
  return full;
}

size_t pp_kallsyms_count(const struct pp_kallsyms *k) {
  return k ? k->n : 0;
}

size_t pp_kallsyms_bytes(const struct pp_kallsyms *k) {
  return k ? k->n * sizeof(struct ksym) + k->blob_cap + sizeof(*k) : 0;
}
