/*
 * Per-session aggregation of sampled stacks: (thread, IP array) -> count,
 * in a preallocated open-addressing table with a bounded IP arena, so the
 * per-sample path allocates nothing. Names are resolved only at snapshot,
 * after the rundown has named the code that existed before the session.
 */
#ifndef DOTNET_AGG_H
#define DOTNET_AGG_H

#include <stddef.h>
#include <stdint.h>

struct dotnet_agg;

struct dotnet_agg_entry {
  uint32_t tid;
  uint32_t nips;
  const uint64_t *ips; /* leaf first */
  uint64_t count;
};

struct dotnet_agg *dotnet_agg_new(uint32_t max_stacks, uint32_t max_ips);
void dotnet_agg_free(struct dotnet_agg *a);
void dotnet_agg_clear(struct dotnet_agg *a);
/* Returns 0, or -ENOSPC when the table or arena is full (sample dropped). */
int dotnet_agg_add(struct dotnet_agg *a, uint32_t tid, const uint64_t *ips, uint32_t n,
                   uint64_t count);
/* Iterates entries: *pos starts at 0; returns 0 at the end. */
int dotnet_agg_next(const struct dotnet_agg *a, size_t *pos, struct dotnet_agg_entry *out);
uint64_t dotnet_agg_dropped(const struct dotnet_agg *a);
uint64_t dotnet_agg_total(const struct dotnet_agg *a);

#endif
