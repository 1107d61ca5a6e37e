/* SPDX-License-Identifier: Apache-2.0 */
#include "inspector_list.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The path goes verbatim into our WebSocket request line: a space, CR or
 * LF in it would end the line early and inject what follows as headers. */
static bool request_token(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f) return false;
  return true;
}

int nodejs_inspector_ws_path(const char *body, char *path, size_t plen) {
  json_t *list = json_loads(body, JSON_REJECT_DUPLICATES, NULL);
  int rc = -EPROTO;
  size_t i;
  json_t *e;
  json_array_foreach(list, i, e) {
    const char *url = json_string_value(json_object_get(e, "webSocketDebuggerUrl"));
    if (!url || strncmp(url, "ws://", 5) != 0) continue;
    const char *slash = strchr(url + 5, '/');
    if (!slash || strlen(slash + 1) >= plen || !request_token(slash + 1)) continue;
    snprintf(path, plen, "%s", slash + 1);
    rc = 0;
    break;
  }
  json_decref(list);
  return rc;
}
