/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Seed generator of the unwind fuzz target, compiled and run at seed time
 * by make-seeds.sh with the compiler and flags under test:
 *   seed_unwind OUT
 * A few calls deep, it takes its registers and a copy of its stack as
 * perf's PERF_SAMPLE_REGS_USER / STACK_USER would, and writes them with
 * its own executable's .eh_frame_hdr, .eh_frame and .debug_frame (read
 * from /proc/self/exe) in the layout of fuzz_unwind.h. x86-64 only.
 */
#define _GNU_SOURCE
#include <asm/perf_regs.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_unwind.h"

#define STACK_MAX 8192

static struct fuzz_unwind_hdr h;
static uint8_t stack_copy[STACK_MAX];
static const char *out_path;

static int first_object(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  *(uint64_t *)arg = info->dlpi_addr;
  return 1; /* the executable comes first */
}

/* How many bytes of stack lie above sp (the [stack] mapping's end). */
static uint64_t stack_above(uint64_t sp) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  uint64_t lo, hi, n = 0;
  while (f && fgets(line, sizeof(line), f))
    if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && sp >= lo && sp < hi) n = hi - sp;
  if (f) fclose(f);
  return n;
}

static uint8_t *read_exe(size_t *len) {
  FILE *f = fopen("/proc/self/exe", "rb");
  if (!f) return NULL;
  size_t cap = 1 << 20, n = 0;
  uint8_t *b = malloc(cap);
  size_t k;
  while (b && (k = fread(b + n, 1, cap - n, f)) > 0) {
    n += k;
    if (n == cap) b = realloc(b, cap *= 2);
  }
  fclose(f);
  *len = n;
  return b;
}

static void write_seed(void) {
  size_t elen;
  uint8_t *e = read_exe(&elen);
  if (!e || elen < sizeof(Elf64_Ehdr)) exit(1);
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)e;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(e + eh->e_shoff);
  const Elf64_Phdr *ph = (const Elf64_Phdr *)(e + eh->e_phoff);
  const char *names = (const char *)e + sh[eh->e_shstrndx].sh_offset;
  const Elf64_Shdr *hdr = NULL, *frame = NULL, *dbg = NULL;
  for (unsigned i = 0; i < eh->e_shnum; i++) {
    const char *n = names + sh[i].sh_name;
    if (!strcmp(n, ".eh_frame_hdr")) hdr = &sh[i];
    if (!strcmp(n, ".eh_frame")) frame = &sh[i];
    if (!strcmp(n, ".debug_frame")) dbg = &sh[i];
  }
  dl_iterate_phdr(first_object, &h.bias);
  for (unsigned i = 0; i < eh->e_phnum; i++) {
    if (ph[i].p_type != PT_LOAD) continue;
    if (ph[i].p_vaddr + ph[i].p_memsz > h.load_top) h.load_top = ph[i].p_vaddr + ph[i].p_memsz;
    if (ph[i].p_flags & PF_X) {
      h.map_start = (h.bias + ph[i].p_vaddr) & ~0xfffull;
      h.map_end = h.bias + ph[i].p_vaddr + ph[i].p_memsz;
    }
  }
  if (hdr) h.eh_frame_hdr_vaddr = hdr->sh_addr, h.hdr_len = (uint32_t)hdr->sh_size;
  if (frame) h.eh_frame_vaddr = frame->sh_addr, h.frame_len = (uint32_t)frame->sh_size;
  if (dbg) h.dbg_len = (uint32_t)dbg->sh_size;
  FILE *o = fopen(out_path, "wb");
  if (!o) exit(1);
  fwrite(&h, sizeof(h), 1, o);
  fwrite(stack_copy, 1, h.stack_len, o);
  if (hdr) fwrite(e + hdr->sh_offset, 1, hdr->sh_size, o);
  if (frame) fwrite(e + frame->sh_offset, 1, frame->sh_size, o);
  if (dbg) fwrite(e + dbg->sh_offset, 1, dbg->sh_size, o);
  fclose(o);
  free(e);
}

/* The sample: every register perf would copy that unwinding can use. */
__attribute__((noinline)) static void sample(void) {
  uint64_t ip, r[8];
  __asm__ volatile(
      "lea 0(%%rip), %0\n\t"
      "mov %%rsp, %1\n\t"
      "mov %%rbp, %2\n\t"
      "mov %%rbx, %3\n\t"
      "mov %%r12, %4\n\t"
      "mov %%r13, %5\n\t"
      "mov %%r14, %6\n\t"
      "mov %%r15, %7\n\t"
      : "=&r"(ip), "=m"(r[1]), "=m"(r[2]), "=m"(r[3]), "=m"(r[4]), "=m"(r[5]), "=m"(r[6]),
        "=m"(r[7]));
  h.regs[PERF_REG_X86_IP] = ip;
  h.regs[PERF_REG_X86_SP] = r[1];
  h.regs[PERF_REG_X86_BP] = r[2];
  h.regs[PERF_REG_X86_BX] = r[3];
  h.regs[PERF_REG_X86_R12] = r[4];
  h.regs[PERF_REG_X86_R13] = r[5];
  h.regs[PERF_REG_X86_R14] = r[6];
  h.regs[PERF_REG_X86_R15] = r[7];
  uint64_t n = stack_above(r[1]);
  h.stack_len = (uint32_t)(n < STACK_MAX ? n : STACK_MAX);
  memcpy(stack_copy, (const void *)(uintptr_t)r[1], h.stack_len);
  write_seed();
}

__attribute__((noinline)) static int recurse(int n) {
  if (n <= 0) {
    sample();
    return 1;
  }
  volatile int keep = n * recurse(n - 1); /* not a tail call */
  return keep + 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: seed_unwind OUT\n");
    return 2;
  }
  out_path = argv[1];
  return recurse(4) > 0 ? 0 : 1;
}
