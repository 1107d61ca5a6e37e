/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: container facts (core/container.c) from what a container
 * controls: /proc/PID/cgroup text (the container id), and the reply of
 * a container runtime's API to GET /containers/json (status line,
 * headers, chunked or Content-Length bodies, the JSON list of ids and
 * names that end up in .col lines). Every input is both: the cgroup text,
 * and the reply that fuzz_server.c serves on a Unix socket to the
 * agent's own client.
 */
#include <stdlib.h>
#include <string.h>

#include "container.h"
#include "enrich.h"
#include "fuzz_input.h"
#include "fuzz_server.h"

static void on_container(void *ctx, const char *id, const char *name) {
  (void)ctx;
  if (strlen(id) > 128 || strpbrk(name, ";\n\r")) abort(); /* must fit a .col field */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) abort();
  memcpy(text, data, size);
  text[size] = '\0';
  char id[65];
  if (pp_container_id_from_cgroup(text, id) == 0 && strlen(id) > 64) abort();
  free(text);
  const char *sock = pp_fuzz_server_unix();
  pp_fuzz_server_reply(data, size);
  (void)pp_docker_list(sock, 2000, 64 * 1024, on_container, NULL);
  pp_fuzz_server_end();
  return 0;
}
