/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Writes the seeds of fuzz_python_object_reader: for each layout family
 * (2.7; 3.6, 3.9, 3.10; 3.11, 3.12, 3.13) a memory image holding what
 * thread_names.c follows in a real target, laid out as that version lays
 * it out: the interpreter, sys.modules, the threading module and its
 * dict, _active mapping a thread's ident (an int) to a Thread whose name
 * is an instance attribute (in a __dict__, or in 3.11-3.13 shared keys
 * with values before or inline after the object), and the thread's tid
 * (struct pthread, or 3.11+ the thread state). Usage:
 *   seed_python_objects DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_python_object_reader.h"
#include "python.h"

#define BASE 0x10000000ull
#define TID 4243
#define PTHREAD_TID_OFF 720

static _Alignas(64) uint8_t img[40960];
static size_t used;

static uint64_t alloc(size_t n) {
  n = (n + 63) & ~(size_t)63;
  if (used + n > sizeof(img)) abort();
  uint64_t a = BASE + used;
  used += n;
  return a;
}

static uint8_t *at(uint64_t a) {
  return img + (a - BASE);
}

static void put64(uint64_t a, uint64_t v) {
  memcpy(at(a), &v, 8);
}

static uint64_t make_type(const char *name, size_t size) {
  uint64_t t = alloc(size), s = alloc(strlen(name) + 1);
  memcpy(at(s), name, strlen(name) + 1);
  put64(t + 24, s);
  return t;
}

static uint64_t str_type, int_type, dict_type, module_type;

static uint64_t make_str(const struct py_proc *p, const char *text) {
  uint64_t o = alloc(96);
  size_t len = strlen(text);
  put64(o + 8, str_type);
  put64(o + 16, len);
  if (p->major == 2) {
    memcpy(at(o + 36), text, len);
    return o;
  }
  uint32_t state = (1u << 2) | (1u << 5) | (1u << 6); /* kind 1, compact, ascii */
  memcpy(at(o + 32), &state, 4);
  memcpy(at(o + (p->minor >= 12 ? 40 : 48)), text, len);
  return o;
}

/* An int holding v (two 30-bit digits). */
static uint64_t make_int(const struct py_proc *p, uint64_t v) {
  uint64_t o = alloc(40);
  put64(o + 8, int_type);
  if (p->major == 2) {
    put64(o + 16, v);
    return o;
  }
  uint32_t d[2] = {(uint32_t)(v & 0x3fffffff), (uint32_t)((v >> 30) & 0x3fffffff)};
  put64(o + 16, p->minor >= 12 ? 2u << 3 : 2);
  memcpy(at(o + 24), d, 8);
  return o;
}

/* A dict of n entries in p's layout; split: 3.x keys without values,
 * the values in their own array (*keys_out: the key table). */
static uint64_t make_dict(const struct py_proc *p, const uint64_t *keys, const uint64_t *vals,
                          int n, bool split, uint64_t *keys_out) {
  uint64_t d = alloc(48);
  put64(d + 8, dict_type);
  if (p->major == 2) {
    uint64_t table = alloc(24 * 8);
    for (int i = 0; i < n; i++) {
      put64(table + 24 * (uint64_t)(i + 1), 1000 + (uint64_t)i);
      put64(table + 24 * (uint64_t)(i + 1) + 8, keys[i]);
      put64(table + 24 * (uint64_t)(i + 1) + 16, vals[i]);
    }
    put64(d + 32, 7);
    put64(d + 40, table);
    return d;
  }
  uint64_t k, values = split ? alloc(8 + 8 * 8) : 0, v0 = values;
  if (p->minor <= 10) {
    k = alloc(48 + 24 * 8);
    put64(k + 8, 8);
    put64(k + 32, (uint64_t)n);
    for (int i = 0; i < n; i++) {
      put64(k + 48 + 24 * (uint64_t)i, 1000 + (uint64_t)i);
      put64(k + 48 + 24 * (uint64_t)i + 8, keys[i]);
      if (!split) put64(k + 48 + 24 * (uint64_t)i + 16, vals[i]);
    }
  } else {
    k = alloc(32 + 8 + 16 * 8);
    at(k)[8] = 3, at(k)[9] = 3, at(k)[10] = split ? 2 : 1;
    put64(k + 24, (uint64_t)n);
    for (int i = 0; i < n; i++) {
      put64(k + 40 + 16 * (uint64_t)i, keys[i]);
      if (!split) put64(k + 40 + 16 * (uint64_t)i + 8, vals[i]);
    }
    if (p->minor >= 13) v0 += 8;
  }
  for (int i = 0; split && i < n; i++)
    put64(v0 + 8 * (uint64_t)i, vals[i]);
  put64(d + 32, k);
  if (split) put64(d + 40, values);
  if (keys_out) *keys_out = k;
  return d;
}

/* A Thread named name, its attributes where p's version keeps them. */
static uint64_t make_thread(const struct py_proc *p, const char *name) {
  uint64_t target = make_str(p, "run"), nm = make_str(p, name);
  uint64_t keys[] = {make_str(p, "_target"),
                     make_str(p, p->major == 2 ? "_Thread__name" : "_name")};
  uint64_t vals[] = {target, nm};
  if (p->major == 2 || p->minor <= 10) {
    uint64_t t = make_type("Thread", 320), o = alloc(32);
    put64(t + 288, 16);
    put64(o + 8, t);
    put64(o + 16, make_dict(p, keys, vals, 2, false, NULL));
    return o;
  }
  uint64_t t = make_type("Thread", 896), k = 0;
  make_dict(p, keys, vals, 2, true, &k);
  put64(t + (p->minor == 11 ? 872 : 880), k);
  put64(t + 168, (1u << 4) | (p->minor == 13 ? 1u << 2 : 0));
  put64(t + 32, 16);
  uint64_t buf = alloc(96), o = buf + 32, values = alloc(16);
  put64(values, target);
  put64(values + 8, nm);
  put64(o + 8, t);
  if (p->minor == 11) {
    put64(buf, values);
  } else if (p->minor == 12) {
    put64(buf + 8, values - 1);
  } else {
    at(o)[16] = 4, at(o)[19] = 1; /* capacity, valid */
    put64(o + 24, target);
    put64(o + 32, nm);
  }
  return o;
}

static int write_seed(const char *dir, int major, int minor) {
  struct py_proc p;
  memset(&p, 0, sizeof(p));
  p.major = major, p.minor = minor;
  if (python_offsets_for(major, minor, 0, &p.off) < 0) return -1;
  used = 0;
  memset(img, 0, sizeof(img));
  str_type = make_type("str", 64);
  int_type = make_type("int", 64);
  dict_type = make_type("dict", 64);
  module_type = make_type("module", 64);

  /* the thread: 2.7-3.10 name it by its pthread_t, whose struct holds
   * the tid; 3.11+ keep the tid in the thread state */
  uint64_t pthread = alloc(PTHREAD_TID_OFF + 64);
  uint32_t tid = TID;
  memcpy(at(pthread + PTHREAD_TID_OFF), &tid, 4);
  uint64_t ident = pthread;
  uint64_t thread = make_thread(&p, "worker-1");
  uint64_t ak[] = {make_int(&p, ident)}, av[] = {thread};
  uint64_t active = make_dict(&p, ak, av, 1, false, NULL);
  uint64_t tk[] = {make_str(&p, "_limbo"), make_str(&p, "_active")}, tv[] = {active, active};
  uint64_t tdict = make_dict(&p, tk, tv, 2, false, NULL);
  uint64_t mod = alloc(64);
  put64(mod + 8, module_type);
  put64(mod + 16, tdict);
  uint64_t mk[] = {make_str(&p, "sys"), make_str(&p, "threading")}, mv[] = {mod, mod};
  uint64_t modules = make_dict(&p, mk, mv, 2, false, NULL);
  uint64_t interp = alloc(p.off.is_modules + 64);
  put64(interp + p.off.is_modules, modules);
  if (p.off.ts_native_tid) {
    uint64_t ts = alloc(p.off.ts_read);
    put64(ts + p.off.ts_thread_id, ident);
    put64(ts + p.off.ts_native_tid, TID);
    put64(interp + p.off.is_tstate_head, ts);
  }
  uint64_t head = alloc(8);
  put64(head, interp);

  struct py_objimg_hdr h = {.major = (uint8_t)major,
                            .minor = (uint8_t)minor,
                            .types = major == 3 && minor >= 12 ? 3 : 1,
                            .ns_tid = TID,
                            .pthread_tid_off = PTHREAD_TID_OFF,
                            .interp_head = head,
                            .dict = tdict,
                            .obj = thread,
                            .ival = ak[0],
                            .str_type = str_type,
                            .long_type = int_type};
  char path[512];
  snprintf(path, sizeof(path), "%s/cpython-%d.%d.img", dir, major, minor);
  FILE *f = fopen(path, "wbe");
  if (!f) return -1;
  uint64_t base = BASE;
  uint32_t len = (uint32_t)used;
  fwrite(&h, sizeof(h), 1, f);
  fwrite(&base, 8, 1, f);
  fwrite(&len, 4, 1, f);
  fwrite(img, 1, used, f);
  return fclose(f) == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: seed_python_objects DIR\n");
    return 2;
  }
  static const int versions[][2] = {{2, 7}, {3, 6}, {3, 9}, {3, 10}, {3, 11}, {3, 12}, {3, 13}};
  for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
    if (write_seed(argv[1], versions[i][0], versions[i][1]) < 0) {
      fprintf(stderr, "seed_python_objects: cannot write %d.%d\n", versions[i][0], versions[i][1]);
      return 1;
    }
  return 0;
}
