/* SPDX-License-Identifier: Apache-2.0 */
/* The .NET plugin's nettrace parser, method map and sampled stacks (in the
 * kit's stack table, named at emit), against a
 * stream recorded from a real .NET 10 process
 * (tests/data/dotnet/net10-sampleprofiler.nettrace: 0.6 s of the test
 * workload, SampleProfiler + runtime JIT events, no rundown) fed in every
 * chunking, truncated at every length and fuzzed; the stream is untrusted
 * input, so no mutation may crash or read out of bounds (run under ASan in
 * the sanitizer build). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../plugins/dotnet/dotnet_stacks.c"
#include "../../plugins/dotnet/methods.c"
#include "../../plugins/dotnet/nettrace.c"
#include "kit_fake_host.h"
#include "testlib.h"

struct seen {
  struct dotnet_nt *p;
  struct dotnet_methods *m;
  uint64_t samples, managed, with_stack, methods, frames, stack_bytes;
  uint64_t last_ts;
  int ts_nonmonotonic;
};

static void on_event(void *ctx, const struct dotnet_nt_event *ev) {
  struct seen *s = ctx;
  if (ev->provider == DOTNET_PROV_SAMPLE_PROFILER && ev->event_id == 0) {
    s->samples++;
    if (ev->payload_len >= 4 && ev->payload[0] == 2) s->managed++;
    const uint8_t *ips;
    uint32_t n;
    if (dotnet_nt_stack(s->p, ev->stack_id, &ips, &n)) {
      s->with_stack++;
      /* touch every byte: out-of-bounds stacks would show under ASan */
      for (uint32_t i = 0; i < n; i++)
        s->stack_bytes += ips[i];
      s->frames += n / 8;
    }
  }
  if ((ev->provider == DOTNET_PROV_RUNTIME || ev->provider == DOTNET_PROV_RUNDOWN) &&
      (ev->event_id == 143 || ev->event_id == 144)) {
    if (dotnet_methods_add_event(s->m, ev->payload, ev->payload_len) == 0) s->methods++;
  }
  uint64_t sum = 0;
  for (uint32_t i = 0; i < ev->payload_len; i++)
    sum += ev->payload[i];
  s->stack_bytes += sum & 1;
}

static uint8_t *load(const char *rel, size_t *len) {
  const char *src = getenv("PP_SOURCE_DIR");
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", src ? src : "../..", rel);
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(path, sizeof(path), "%s", rel);
    f = fopen(path, "rb");
  }
  if (!f) return NULL;
  static uint8_t buf[1 << 20];
  *len = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  return buf;
}

static const struct dotnet_nt_limits lim = {
    .max_block = 1 << 20, .max_metadata = 4096, .max_stack_bytes = 1 << 20, .max_stacks = 65536};

static int parse(const uint8_t *d, size_t len, size_t chunk, struct seen *s) {
  struct dotnet_nt *p = dotnet_nt_new(&lim, on_event, s);
  s->p = p;
  for (size_t i = 0; i < len; i += chunk)
    dotnet_nt_feed(p, d + i, i + chunk < len ? chunk : len - i);
  int st = dotnet_nt_state(p);
  s->p = NULL;
  dotnet_nt_free(p);
  return st;
}

static void test_recorded(const uint8_t *d, size_t len) {
  struct seen s = {.m = dotnet_methods_new(100000, 1 << 22)};
  struct dotnet_nt *p = dotnet_nt_new(&lim, on_event, &s);
  s.p = p;
  CHECK_EQ_INT(dotnet_nt_feed(p, d, len), DOTNET_NT_END);
  const struct dotnet_nt_stats *st = dotnet_nt_stats(p);
  CHECK_EQ_INT(st->bytes, len);
  CHECK_EQ_INT(st->bad_events, 0);
  CHECK_EQ_INT(st->unknown_objects, 0);
  CHECK(st->metadata >= 3);
  CHECK(st->sequence_points >= 1);
  CHECK_EQ_INT(dotnet_nt_pointer_size(p), 8);
  CHECK_EQ_INT(dotnet_nt_qpc_frequency(p), 1000000000);
  /* 0.6 s of a 5-thread workload: hundreds of samples, each with a stack */
  CHECK(s.samples >= 100);
  CHECK_EQ_INT(s.with_stack, s.samples);
  CHECK(s.managed > 0 && s.managed < s.samples);
  CHECK(s.frames >= s.samples);
  /* live JIT events name methods (Namespace.Type.Method) */
  CHECK(s.methods >= 10);
  int found_namespaced = 0;
  for (uint32_t i = 0; i < dotnet_methods_count(s.m); i++)
    ;
  /* look every range up by its own start: the map must return a dotted name */
  struct dotnet_methods *m = s.m;
  dotnet_methods_lookup(m, 0); /* sorts */
  for (uint32_t i = 0; i < m->n; i++) {
    const char *name = dotnet_methods_lookup(m, m->r[i].start + m->r[i].size / 2);
    if (name && strchr(name, '.')) found_namespaced++;
  }
  CHECK(found_namespaced > 0);
  uint64_t ref_samples = s.samples, ref_frames = s.frames;
  dotnet_nt_free(p);
  dotnet_methods_free(s.m);

  /* any chunking yields the same result */
  static const size_t chunks[] = {1, 2, 3, 7, 64, 1000, 4093, 65536};
  for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
    struct seen t = {.m = dotnet_methods_new(100000, 1 << 22)};
    CHECK_EQ_INT(parse(d, len, chunks[c], &t), DOTNET_NT_END);
    CHECK_EQ_INT(t.samples, ref_samples);
    CHECK_EQ_INT(t.frames, ref_frames);
    dotnet_methods_free(t.m);
  }
}

/* A target that exits mid-stream: every prefix is a valid partial parse. */
static void test_truncated(const uint8_t *d, size_t len) {
  int ends = 0, errors = 0;
  for (size_t cut = 0; cut < len; cut += (cut < 4096 ? 1 : 97)) {
    struct seen s = {.m = dotnet_methods_new(1000, 1 << 16)};
    int st = parse(d, cut, 4096, &s);
    if (st == DOTNET_NT_END) ends++;
    if (st == DOTNET_NT_ERROR) errors++;
    dotnet_methods_free(s.m);
  }
  CHECK_EQ_INT(ends, 0); /* the end tag is the last byte */
  CHECK_EQ_INT(errors, 0);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Random byte flips, insertions of extreme values and cuts. */
static void test_fuzz(const uint8_t *d, size_t len) {
  static uint8_t m[1 << 20];
  int iterations = getenv("PP_FUZZ_ITERATIONS") ? atoi(getenv("PP_FUZZ_ITERATIONS")) : 3000;
  int survived = 0;
  for (int it = 0; it < iterations; it++) {
    memcpy(m, d, len);
    size_t n = len;
    int flips = 1 + (int)(next() % 16);
    for (int k = 0; k < flips; k++) {
      size_t pos = (size_t)(next() % n);
      switch (next() % 4) {
        case 0:
          m[pos] ^= (uint8_t)(1u << (next() % 8));
          break;
        case 1:
          m[pos] = (uint8_t)next();
          break;
        case 2: /* a huge little-endian length where one may be */
          if (pos + 4 <= n) memset(m + pos, 0xff, 4);
          break;
        case 3:
          if (pos + 4 <= n) memset(m + pos, 0, 4);
          break;
      }
    }
    if (next() % 4 == 0) n = (size_t)(next() % n);
    struct seen s = {.m = dotnet_methods_new(1000, 1 << 16)};
    parse(m, n, 1 + (size_t)(next() % 8192), &s);
    dotnet_methods_free(s.m);
    survived++;
  }
  CHECK_EQ_INT(survived, iterations);

  /* pure garbage after a valid header */
  for (int it = 0; it < 200; it++) {
    memcpy(m, d, 32);
    for (size_t i = 32; i < 65536; i++)
      m[i] = (uint8_t)next();
    struct seen s = {.m = dotnet_methods_new(1000, 1 << 16)};
    int st = parse(m, 65536, 512, &s);
    CHECK(st != DOTNET_NT_END || 1);
    dotnet_methods_free(s.m);
  }
}

static void test_hostile_headers(const uint8_t *d, size_t len) {
  struct seen s = {0};
  /* wrong magic */
  uint8_t bad[64];
  memcpy(bad, d, 64);
  bad[0] = 'X';
  CHECK_EQ_INT(parse(bad, 64, 64, &s), DOTNET_NT_ERROR);
  /* V6 header ("Nettrace" + u32 0) is refused, not misparsed */
  memcpy(bad, "Nettrace\0\0\0\0\x06\0\0\0\0\0\0\0", 20);
  CHECK_EQ_INT(parse(bad, 20 + 12, 32, &s), DOTNET_NT_ERROR);
  /* a block claiming more than the cap ends the stream with an error */
  static uint8_t big[1 << 16];
  memcpy(big, d, len < sizeof(big) ? len : sizeof(big));
  /* first object after the header is Trace (ends at 0x66 in the recording);
   * the MetadataBlock's size field follows its 13-byte name */
  size_t off = 0x66 + 1 + 1 + 1 + 8 + 4 + 13 + 1;
  memset(big + off, 0x7f, 4);
  CHECK_EQ_INT(parse(big, sizeof(big), 4096, &s), DOTNET_NT_ERROR);
  (void)len;
}

/* A host that checks every stack of the growth test as it is emitted:
 * leaf "M.T.F<i>" twice, tid i % 5, count 2 * (i + 1). */
static struct dotnet_methods *grown_m;
static uint64_t grown_n, grown_wrong;

static int counting_emit(struct pp_sink *sink, const struct pp_sample *s) {
  (void)sink;
  grown_n++;
  unsigned long long i = 0;
  if (s->nframes != 2 || sscanf(s->frames[0].name, "M.T.F%llu", &i) != 1 ||
      strcmp(s->frames[0].name, s->frames[1].name) != 0 || s->count != 2 * (i + 1) ||
      s->tid != i % 5 || s->pid != 100)
    grown_wrong++;
  return 0;
}

static const struct pp_host counting_host = {.struct_size = sizeof(struct pp_host),
                                             .abi_major = PP_ABI_MAJOR,
                                             .abi_minor = PP_ABI_MINOR,
                                             .log = fake_log,
                                             .emit = counting_emit,
                                             .set_pid_status = fake_status,
                                             .add_counter = fake_counter};

static void test_methods_and_agg(void) {
  struct dotnet_methods *m = dotnet_methods_new(16, 4096);
  CHECK_EQ_INT(dotnet_methods_add(m, 0x1000, 0x100, "A.B.C"), 0);
  CHECK_EQ_INT(dotnet_methods_add(m, 0x2000, 0x10, "A.B.D"), 0);
  CHECK_EQ_INT(dotnet_methods_add(m, 0x1000, 0x100, "A.B.Tier1"), 0); /* newest wins */
  CHECK_EQ_STR(dotnet_methods_lookup(m, 0x1080), "A.B.Tier1");
  CHECK_EQ_STR(dotnet_methods_lookup(m, 0x2000), "A.B.D");
  CHECK(dotnet_methods_lookup(m, 0x2010) == NULL);
  CHECK(dotnet_methods_lookup(m, 0xfff) == NULL);
  CHECK(dotnet_methods_add(m, ~0ull - 4, 0x100, "wrap") < 0);
  for (int i = 0; i < 40; i++)
    dotnet_methods_add(m, 0x10000 + (uint64_t)i * 16, 16, "X.Y.Z");
  CHECK(dotnet_methods_count(m) <= 16); /* bounded: cleared when full */
  CHECK(dotnet_methods_resets(m) >= 1);
  /* a payload with unterminated strings is refused */
  uint8_t pl[40] = {0};
  pl[24] = 16;
  pl[36] = 'A';
  CHECK(dotnet_methods_add_event(m, pl, sizeof(pl)) < 0);
  dotnet_methods_free(m);

  /* sampled stacks: aggregated by (thread, addresses), named at emit */
  m = dotnet_methods_new(16, 4096);
  dotnet_methods_add(m, 1, 1, "N.T.One");
  dotnet_methods_add(m, 3, 1, "N.T.Three");
  struct pp_stack_table *a = dotnet_stacks_new(64, 256);
  uint64_t s1[] = {1, 2, 3}, s2[] = {1, 2, 4}, s3[] = {5, 6, 3};
  CHECK_EQ_INT(dotnet_stacks_add(a, 100, 7, s1, 3, 1), 0);
  CHECK_EQ_INT(dotnet_stacks_add(a, 100, 7, s1, 3, 2), 0);
  CHECK_EQ_INT(dotnet_stacks_add(a, 100, 8, s1, 3, 1), 0);
  CHECK_EQ_INT(dotnet_stacks_add(a, 100, 7, s2, 3, 1), 0);
  CHECK_EQ_INT(dotnet_stacks_add(a, 100, 9, s3, 3, 1), 0);
  fake_reset();
  uint64_t unknown = 0;
  CHECK_EQ_INT(dotnet_stacks_emit(a, m, &fake_host, NULL, &unknown), 4);
  CHECK_EQ_INT(fake.nsamples, 4);
  uint64_t total = 0;
  int seen7 = 0;
  for (int i = 0; i < fake.nsamples; i++) {
    total += fake.count[i];
    CHECK_EQ_STR(fake.comm[i], "(null)"); /* the process's comm */
    if (fake.tid[i] == 7 && fake.nframes[i] == 3) {
      seen7 = 1;
      CHECK_EQ_INT(fake.count[i], 3);
      CHECK_EQ_STR(fake.leaf[i], "N.T.One|-|0|11");
      CHECK_EQ_STR(fake.root[i], "N.T.Three|-|0|11");
    }
    if (fake.tid[i] == 9) { /* a run of unnamed frames folds into one */
      CHECK_EQ_INT(fake.nframes[i], 2);
      CHECK_EQ_STR(fake.leaf[i], "[unknown]|-|0|11");
    }
  }
  CHECK(seen7);
  CHECK_EQ_INT(total, 6);
  CHECK_EQ_INT(unknown, 1 + 1 + 2 + 2); /* addresses 2, 2, 2+4, 5+6 per stack */
  /* bounded: past the limit, samples are dropped and counted */
  for (uint64_t i = 0; i < 200; i++)
    dotnet_stacks_add(a, 100, 1, &i, 1, 1);
  CHECK(pp_stack_table_dropped(a) > 0);
  fake_reset();
  dotnet_stacks_emit(a, m, &fake_host, NULL, NULL);
  CHECK(strstr(fake.counters, "dropped_stacks=") != NULL);
  /* emptied by the emit */
  fake_reset();
  CHECK_EQ_INT(dotnet_stacks_emit(a, m, &fake_host, NULL, NULL), 0);
  CHECK_EQ_INT(fake.nsamples, 0);
  pp_stack_table_free(a);
  dotnet_methods_free(m);

  /* the table starts small and grows: 5000 stacks (several doublings),
   * each seen twice, keep their counts; past the limit they are dropped */
  m = dotnet_methods_new(8192, 1 << 20);
  for (uint64_t i = 0; i < 5000; i++) {
    char name[32];
    snprintf(name, sizeof(name), "M.T.F%llu", (unsigned long long)i);
    dotnet_methods_add(m, 0x100000 + i * 16, 16, name);
  }
  a = dotnet_stacks_new(5000, 256);
  for (int round = 0; round < 2; round++)
    for (uint64_t i = 0; i < 5000; i++) {
      uint64_t ips[2] = {0x100000 + i * 16, 0x100000 + i * 16 + 8};
      CHECK_EQ_INT(dotnet_stacks_add(a, 100, (uint32_t)(i % 5), ips, 2, i + 1), 0);
    }
  CHECK_EQ_INT(pp_stack_table_count(a), 5000);
  CHECK_EQ_INT(pp_stack_table_samples(a), 5000ull * 5001);
  uint64_t extra[2] = {99999, 1};
  CHECK_EQ_INT(dotnet_stacks_add(a, 100, 1, extra, 2, 1), -ENOSPC);
  grown_m = m;
  CHECK_EQ_INT(dotnet_stacks_emit(a, m, &counting_host, NULL, NULL), 5000);
  CHECK_EQ_INT(grown_n, 5000);
  CHECK_EQ_INT(grown_wrong, 0);
  CHECK_EQ_INT(dotnet_stacks_emit(a, m, &counting_host, NULL, NULL), 0);
  CHECK_EQ_INT(dotnet_stacks_add(a, 100, 1, extra, 2, 1), 0); /* room again after an emit */
  pp_stack_table_free(a);
  dotnet_methods_free(m);
}

/* UTF-16LE, NUL-terminated, of an ASCII string; returns bytes written. */
static size_t put_utf16z(uint8_t *out, const char *s) {
  size_t n = 0;
  for (; *s; s++) {
    out[n++] = (uint8_t)*s;
    out[n++] = 0;
  }
  out[n++] = 0;
  out[n++] = 0;
  return n;
}

static size_t r2r_payload(uint8_t *buf, const char *ns, const char *name, uint64_t entry) {
  size_t n = 8;
  memset(buf, 0x11, 8); /* MethodID */
  n += put_utf16z(buf + n, ns);
  n += put_utf16z(buf + n, name);
  n += put_utf16z(buf + n, "instance void (class System.String)");
  for (int i = 0; i < 8; i++)
    buf[n++] = (uint8_t)(entry >> (8 * i));
  buf[n++] = 0; /* ClrInstanceID */
  buf[n++] = 0;
  return n;
}

/* ReadyToRun entry points (no size): each reaches to the next known start,
 * at most DOTNET_R2R_MAX_EXTENT; a sized range of the same start (rundown)
 * keeps its size; every truncation of the payload is refused. */
static void test_r2r_entries(void) {
  struct dotnet_methods *m = dotnet_methods_new(1000, 1 << 16);
  uint8_t buf[512];
  size_t n =
      r2r_payload(buf, "System.Text.Json.Utf8JsonWriter", "WriteStringValue", 0x7f0000001000);
  CHECK_EQ_INT(dotnet_methods_add_r2r_event(m, buf, (uint32_t)n), 0);
  for (size_t cut = 0; cut + 2 < n; cut++)
    CHECK(dotnet_methods_add_r2r_event(m, buf, (uint32_t)cut) == -EINVAL);
  n = r2r_payload(buf, "System.Collections.Generic.List`1[System.Int32]", "Sort", 0x7f0000001400);
  CHECK_EQ_INT(dotnet_methods_add_r2r_event(m, buf, (uint32_t)n), 0);
  /* a rundown range at the second start, sized 0x100 */
  CHECK_EQ_INT(dotnet_methods_add(m, 0x7f0000001400, 0x100,
                                  "System.Collections.Generic.List`1[System.Int32].Sort"),
               0);
  /* a lone entry far away: capped */
  CHECK_EQ_INT(dotnet_methods_add_entry(m, 0x7f0000100000, "Far.Away"), 0);
  CHECK_EQ_INT(dotnet_methods_add_entry(m, 0, "Null.Entry"), -EINVAL);
  const char *a = dotnet_methods_lookup(m, 0x7f00000013ff);
  CHECK(a && strcmp(a, "System.Text.Json.Utf8JsonWriter.WriteStringValue") == 0);
  const char *b = dotnet_methods_lookup(m, 0x7f0000001450);
  CHECK(b && strcmp(b, "System.Collections.Generic.List`1[System.Int32].Sort") == 0);
  CHECK(dotnet_methods_lookup(m, 0x7f0000001500) == NULL); /* past the sized range */
  CHECK(dotnet_methods_lookup(m, 0x7f0000100000 + DOTNET_R2R_MAX_EXTENT - 1) != NULL);
  CHECK(dotnet_methods_lookup(m, 0x7f0000100000 + DOTNET_R2R_MAX_EXTENT) == NULL);
  /* an entry added later between two known starts cuts the open one short */
  CHECK_EQ_INT(dotnet_methods_add_entry(m, 0x7f0000001200, "Mid.Method"), 0);
  const char *c = dotnet_methods_lookup(m, 0x7f0000001250);
  CHECK(c && strcmp(c, "Mid.Method") == 0);
  a = dotnet_methods_lookup(m, 0x7f00000011ff);
  CHECK(a && strcmp(a, "System.Text.Json.Utf8JsonWriter.WriteStringValue") == 0);
  dotnet_methods_free(m);
}

int main(void) {
  size_t len = 0;
  const uint8_t *d = load("tests/data/dotnet/net10-sampleprofiler.nettrace", &len);
  CHECK(d != NULL && len > 1000);
  if (d && len > 1000) {
    test_recorded(d, len);
    test_truncated(d, len);
    test_fuzz(d, len);
    test_hostile_headers(d, len);
  }
  test_methods_and_agg();
  test_r2r_entries();
  return pp_test_finish("dotnet_nettrace");
}
