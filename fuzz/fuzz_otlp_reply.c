/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: an OTLP collector's reply to an export
 * (ExportProfilesServiceResponse, core/upload/otlp.c), parsed with a full
 * and a 1-byte message buffer; the message kept must be printable and
 * NUL-terminated inside its buffer.
 */
#include <stdlib.h>
#include <string.h>

#include "upload/otlp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *copy = malloc(size ? size : 1); /* exact size: ASan sees any overread */
  if (!copy) abort();
  memcpy(copy, data, size);
  int64_t rejected;
  char msg[200], tiny[1];
  if (pp_otlp_parse_response(copy, size, &rejected, msg, sizeof(msg)) == 0) {
    size_t n = strnlen(msg, sizeof(msg));
    if (n == sizeof(msg)) abort();
    for (size_t i = 0; i < n; i++)
      if (msg[i] < 0x20 || msg[i] > 0x7e) abort();
  }
  if (pp_otlp_parse_response(copy, size, &rejected, tiny, sizeof(tiny)) == 0 && tiny[0]) abort();
  free(copy);
  return 0;
}
