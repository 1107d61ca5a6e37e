/* SPDX-License-Identifier: Apache-2.0 */
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

/* A connected socket from which the input can be read, as if a peer (the
 * profiled process, a server) had sent it and stopped sending: a reader
 * meets end-of-stream instead of waiting. Input past what the socket
 * buffers (1 MiB asked) is cut. With peer NULL the peer's end is closed;
 * else it is returned (shut for writing), so that what the code under test
 * sends is still accepted. The caller closes the fds. */
int pp_fuzz_peer_socket(const uint8_t *data, size_t size, int *peer);

/* libFuzzer's entry point, also called by replay.c over a corpus. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
