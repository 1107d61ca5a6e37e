/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Streaming parser for the nettrace format (V4/V5, "!FastSerialization.1")
 * that a .NET runtime writes on an EventPipe IPC session.
 *
 * The parser is push-based: bytes arrive in any chunking (straight from the
 * socket via dotnet_nt_space()/dotnet_nt_commit(), or dotnet_nt_feed()), and
 * each complete top-level object is decoded as soon as it is buffered. The
 * buffer never holds more than one object (cap: max_block), so memory is
 * bounded whatever the trace length. Every length and count in the stream is
 * untrusted: a malformed stream puts the parser into the ERROR state (with a
 * reason), never reads outside the buffer, and stays there.
 */
#ifndef DOTNET_NETTRACE_H
#define DOTNET_NETTRACE_H

#include <stddef.h>
#include <stdint.h>

/* Providers the plugin cares about (metadata is classified by name once). */
enum dotnet_provider {
  DOTNET_PROV_OTHER = 0,
  DOTNET_PROV_SAMPLE_PROFILER = 1, /* Microsoft-DotNETCore-SampleProfiler */
  DOTNET_PROV_RUNTIME = 2,         /* Microsoft-Windows-DotNETRuntime */
  DOTNET_PROV_RUNDOWN = 3,         /* Microsoft-Windows-DotNETRuntimeRundown */
};

enum dotnet_nt_state {
  DOTNET_NT_HEADER = 0, /* waiting for the stream magic */
  DOTNET_NT_OBJECTS,    /* top-level objects */
  DOTNET_NT_END,        /* end-of-stream tag seen */
  DOTNET_NT_ERROR,      /* malformed: see dotnet_nt_error() */
};

struct dotnet_nt_event {
  uint32_t provider; /* enum dotnet_provider */
  uint32_t event_id;
  uint32_t version;
  uint32_t stack_id;  /* 0: no stack */
  uint64_t thread_id; /* the thread the event describes (OS tid) */
  uint64_t timestamp; /* QPC ticks (CLOCK_MONOTONIC ns on Linux) */
  const uint8_t *payload;
  uint32_t payload_len;
};

typedef void (*dotnet_nt_event_fn)(void *ctx, const struct dotnet_nt_event *ev);

struct dotnet_nt_limits {
  uint32_t max_block;       /* largest object accepted (bytes) */
  uint32_t max_metadata;    /* metadata ids tracked (ids are dense small ints) */
  uint32_t max_stack_bytes; /* stack cache between sequence points */
  uint32_t max_stacks;      /* stack ids cached between sequence points */
};

struct dotnet_nt_stats {
  uint64_t bytes, blocks, events, metadata, stacks, sequence_points;
  uint64_t unknown_objects, dropped_stacks, bad_events;
};

struct dotnet_nt;

struct dotnet_nt *dotnet_nt_new(const struct dotnet_nt_limits *lim, dotnet_nt_event_fn fn,
                                void *ctx);
/* Back to the initial state for a new stream, keeping the allocations. */
void dotnet_nt_reset(struct dotnet_nt *p);
void dotnet_nt_free(struct dotnet_nt *p);

/* Where to write up to *room more bytes (NULL on error / full). */
uint8_t *dotnet_nt_space(struct dotnet_nt *p, size_t *room);
/* n bytes were written at dotnet_nt_space(); parses what is complete. */
int dotnet_nt_commit(struct dotnet_nt *p, size_t n);
/* Copies and parses (tests, fuzzing). Returns the state. */
int dotnet_nt_feed(struct dotnet_nt *p, const void *data, size_t n);

int dotnet_nt_state(const struct dotnet_nt *p);
const char *dotnet_nt_error(const struct dotnet_nt *p);
const struct dotnet_nt_stats *dotnet_nt_stats(const struct dotnet_nt *p);
/* Trace header facts (valid once an object was parsed). */
uint32_t dotnet_nt_pointer_size(const struct dotnet_nt *p);
uint64_t dotnet_nt_qpc_frequency(const struct dotnet_nt *p);
uint64_t dotnet_nt_sync_qpc(const struct dotnet_nt *p);
uint32_t dotnet_nt_expected_sample_ns(const struct dotnet_nt *p);

/* The IPs of a stack id seen since the last sequence point (leaf first),
 * as little-endian words of pointer_size bytes. 0 if unknown. */
int dotnet_nt_stack(const struct dotnet_nt *p, uint32_t stack_id, const uint8_t **ips,
                    uint32_t *nbytes);

/* Bounded UTF-16LE (NUL-terminated within len) to UTF-8; returns bytes
 * consumed from src including the NUL, or -1 if no NUL inside len. */
long dotnet_utf16z_to_utf8(const uint8_t *src, size_t len, char *out, size_t outcap);

#endif
