/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CDP request/reply matching over the inspector WebSocket.
 *
 * Replies carry the request id; events have none and are skipped. The JSON
 * comes from the target: it is parsed with jansson under the frame size cap
 * the WebSocket already enforces, and every field is type-checked.
 */
#include "cdp.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int nodejs_cdp_send(struct nodejs_cdp *c, const char *method, json_t *params,
                    uint64_t deadline_ns) {
  if (c->next_id <= 0 || c->next_id > 1000000000) c->next_id = 1;
  int id = c->next_id++;
  json_t *req = json_object();
  if (!req) return -ENOMEM;
  json_object_set_new(req, "id", json_integer(id));
  json_object_set_new(req, "method", json_string(method));
  if (params) json_object_set(req, "params", params);
  char *text = json_dumps(req, JSON_COMPACT);
  json_decref(req);
  if (!text) return -ENOMEM;
  int rc = nodejs_ws_send_text(&c->ws, text, strlen(text), deadline_ns);
  free(text);
  return rc < 0 ? rc : id;
}

int nodejs_cdp_wait(struct nodejs_cdp *c, int id, json_t **result, char *err, size_t errlen,
                    uint64_t deadline_ns) {
  if (result) *result = NULL;
  if (err && errlen) err[0] = '\0';
  for (;;) {
    const char *msg;
    size_t len;
    int rc = nodejs_ws_recv(&c->ws, &msg, &len, deadline_ns);
    if (rc < 0) return rc;
    json_error_t je;
    json_t *m = json_loadb(msg, len, JSON_REJECT_DUPLICATES, &je);
    if (!m || !json_is_object(m)) {
      if (err) snprintf(err, errlen, "malformed CDP message: %s", m ? "not an object" : je.text);
      json_decref(m);
      return -EPROTO;
    }
    json_t *jid = json_object_get(m, "id");
    if (!json_is_integer(jid) || json_integer_value(jid) != id) {
      json_decref(m); /* any event, or a reply to an abandoned request */
      continue;
    }
    json_t *e = json_object_get(m, "error");
    if (e) {
      const char *em = json_string_value(json_object_get(e, "message"));
      if (err) snprintf(err, errlen, "%s", em ? em : "CDP error");
      json_decref(m);
      return -EREMOTEIO;
    }
    json_t *r = json_object_get(m, "result");
    if (!json_is_object(r)) {
      if (err) snprintf(err, errlen, "CDP reply without a result object");
      json_decref(m);
      return -EPROTO;
    }
    if (result) *result = json_incref(r);
    json_decref(m);
    return 0;
  }
}

int nodejs_cdp_call(struct nodejs_cdp *c, const char *method, json_t *params, json_t **result,
                    char *err, size_t errlen, uint64_t deadline_ns) {
  int id = nodejs_cdp_send(c, method, params, deadline_ns);
  if (id < 0) {
    if (err) snprintf(err, errlen, "sending %s: %s", method, strerror(-id));
    if (result) *result = NULL;
    return id;
  }
  return nodejs_cdp_wait(c, id, result, err, errlen, deadline_ns);
}

int nodejs_cdp_evaluate(struct nodejs_cdp *c, const char *expr, json_t **value, char *err,
                        size_t errlen, uint64_t deadline_ns) {
  *value = NULL;
  json_t *p = json_pack("{s:s, s:b, s:b, s:b}", "expression", expr, "returnByValue", 1,
                        "includeCommandLineAPI", 1, "silent", 1);
  if (!p) return -ENOMEM;
  json_t *r = NULL;
  int rc = nodejs_cdp_call(c, "Runtime.evaluate", p, &r, err, errlen, deadline_ns);
  json_decref(p);
  if (rc < 0) return rc;
  json_t *ex = json_object_get(r, "exceptionDetails");
  if (ex) {
    const char *t = json_string_value(json_object_get(ex, "text"));
    json_t *exo = json_object_get(ex, "exception");
    const char *d = json_string_value(json_object_get(exo, "description"));
    if (err) snprintf(err, errlen, "%s%s%.160s", t ? t : "exception", d ? ": " : "", d ? d : "");
    json_decref(r);
    return -EREMOTEIO;
  }
  json_t *res = json_object_get(r, "result");
  json_t *v = json_object_get(res, "value");
  *value = v ? json_incref(v) : json_null();
  json_decref(r);
  return 0;
}
