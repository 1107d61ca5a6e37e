/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the dump file the polyprof JVMTI agent writes inside the
 * JVM (plugins/java/collect.c): written as the target's user, so parsed
 * as hostile. Every stack line becomes samples through a host whose emit
 * checks what reaches it (frame count, kinds, strings), with and without
 * thread names; the failed-load error line is looked up too.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "java.h"

static uint64_t sink;

static int check_emit(struct pp_sink *s, const struct pp_sample *sample) {
  (void)s;
  if (sample->nframes == 0 || sample->nframes > 256 || sample->count == 0) abort();
  for (uint32_t i = 0; i < sample->nframes; i++) {
    const struct pp_frame *f = &sample->frames[i];
    if (!f->name || !f->name[0] || f->kind >= PP_FRAME_KIND_COUNT) abort();
    sink += strlen(f->name);
  }
  if (sample->comm) sink += strlen(sample->comm);
  return 0;
}

/* the warning lines the dump may carry are logged: formatted, not kept */
static void check_log(const struct pp_host *host, int level, const char *fmt, ...) PP_PRINTF(3, 4);
static void check_log(const struct pp_host *host, int level, const char *fmt, ...) {
  (void)host;
  (void)level;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  sink += strlen(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* java_read_result hands the parser a NUL-terminated copy */
  char *text = malloc(size + 1);
  if (!text) abort();
  memcpy(text, data, size);
  text[size] = '\0';
  struct pp_host host = {.struct_size = sizeof(host), .emit = check_emit, .log = check_log};
  for (int names = 0; names < 2; names++) {
    struct java_collect_stats st = {0};
    (void)java_collect_emit(&host, NULL, 1, text, size, names, &st);
  }
  char err[64];
  if (java_collect_error(text, err, sizeof(err)) && strlen(err) >= sizeof(err)) abort();
  free(text);
  return 0;
}
