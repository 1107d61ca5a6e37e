/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Chrome DevTools Protocol requests over the inspector WebSocket.
 */
#ifndef POLYPROF_NODEJS_CDP_H
#define POLYPROF_NODEJS_CDP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ws.h"

struct nodejs_cdp {
  struct nodejs_ws ws;
  int next_id;
};

/* Sends {"id":N,"method":method,"params":params} (params may be NULL; it is
 * not stolen). Returns the id (> 0) or a negative errno. */
int nodejs_cdp_send(struct nodejs_cdp *c, const char *method, json_t *params, uint64_t deadline_ns);

/* Waits for the reply to id, skipping other replies and events (noting the
 * On success
 * *result is the "result" object (new reference). A CDP error reply is
 * -EREMOTEIO with its message in err. */
int nodejs_cdp_wait(struct nodejs_cdp *c, int id, json_t **result, char *err, size_t errlen,
                    uint64_t deadline_ns);

/* send + wait */
int nodejs_cdp_call(struct nodejs_cdp *c, const char *method, json_t *params, json_t **result,
                    char *err, size_t errlen, uint64_t deadline_ns);

/* Runtime.evaluate with returnByValue and the command-line API (so that
 * `require` exists even for ES-module entry points). *value is the returned
 * value (new reference). A thrown exception is -EREMOTEIO. */
int nodejs_cdp_evaluate(struct nodejs_cdp *c, const char *expr, json_t **value, char *err,
                        size_t errlen, uint64_t deadline_ns);

#endif
