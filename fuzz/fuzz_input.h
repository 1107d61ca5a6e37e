/*
 * Helpers shared by the fuzz targets: parsers that take a path (the YAML
 * loader, kallsyms, ELF by fd) get the fuzz input through one memfd that is
 * rewritten per input, so no file is created and nothing is left behind.
 */
#ifndef PP_FUZZ_INPUT_H
#define PP_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Replaces the memfd's content with data. Returns its fd (kept open for the
 * process lifetime) and writes "/proc/self/fd/N" into path; -1 on error. */
int pp_fuzz_memfd(const uint8_t *data, size_t size, char *path, size_t cap);

/* A FILE that discards what is written: writers run on parsed hostile input
 * without filling the disk. Opened once. */
FILE *pp_fuzz_devnull(void);

/* libFuzzer's entry point, also called by replay.c over a corpus. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
