/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: cloud instance metadata replies (core/cloud_metadata.c):
 * the AWS identity document and instance life cycle, GCP's recursive
 * instance JSON, Azure's compute JSON, each turned into the metadata the
 * agent reports. The metadata service is reached over the network from
 * the instance, so its replies are input like any other. The input is
 * each of them in turn (the AWS life cycle is the text after the first
 * NUL, if any).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cloud_metadata.h"
#include "fuzz_input.h"

static void check(json_t *info) {
  if (!info) return;
  char *s = json_dumps(info, JSON_COMPACT);
  if (!s) abort(); /* it is written into the session metadata */
  free(s);
  json_decref(info);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 2);
  if (!text) abort();
  memcpy(text, data, size);
  text[size] = text[size + 1] = '\0';
  const char *lc = text + strlen(text) + 1;
  check(pp_cloud_parse_aws(text, lc <= text + size ? lc : NULL));
  check(pp_cloud_parse_aws(text, NULL));
  check(pp_cloud_parse_gcp(text));
  check(pp_cloud_parse_azure(text));
  free(text);
  return 0;
}
