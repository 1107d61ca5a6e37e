/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: what servers answer the agent over HTTP (core/upload/
 * http.c through libcurl, studio.c, cloud_metadata.c): the profiling
 * server's reply to a profile upload (status, the gpid echoed back next
 * time, the error message logged) and to the health check, and the
 * metadata service's replies to the whole cloud probe (token, then AWS,
 * GCP and Azure documents). fuzz_server.c answers every request with the
 * input, on a loopback port; the agent's own clients do the rest.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cloud_metadata.h"
#include "fuzz_input.h"
#include "fuzz_server.h"
#include "upload/studio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char base[64];
  snprintf(base, sizeof(base), "http://127.0.0.1:%u", pp_fuzz_server_tcp());
  pp_fuzz_server_reply(data, size);
  struct pp_studio_conf c = {.server_host = base,
                             .token = "t0k3n",
                             .service_name = "fuzz",
                             .hostname = "fuzzhost",
                             .http = {.connect_timeout_ms = 1000, .timeout_ms = 3000}};
  char gpid[PP_GPID_MAX + 1] = "";
  char err[256] = "";
  static const char body[] = "{}";
  (void)pp_studio_send(&c, "0123456789abcdef0123456789abcdef", body, sizeof(body) - 1, gpid, err,
                       sizeof(err));
  for (const char *p = gpid; *p; p++)
    if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e) abort(); /* echoed in a header */
  for (const char *p = err; *p; p++)
    if ((unsigned char)*p < 0x20) abort(); /* one log line */
  err[0] = '\0';
  (void)pp_studio_health(&c, err, sizeof(err));
  json_t *info = NULL;
  (void)pp_cloud_metadata_probe(base, &info);
  json_decref(info);
  pp_fuzz_server_end();
  return 0;
}
