/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The in-target helper's JavaScript and its install expression (helper.h).
 *
 * The helper's body is a function in the install expression; the worker
 * thread is started from its source text (Function.prototype.toString),
 * so the code is written once, as plain JavaScript, here.
 *
 * The helper's inspector session is a main-thread session driven from the
 * helper's thread: when it disconnects, the main thread tears the session
 * down on its side and posts a last request back to the helper's thread.
 * Node aborts the process if that thread has ended meanwhile (its request
 * queue is half destroyed), which a helper ending right after disconnect()
 * (its agent gone) often did. So the helper ends only once
 * the main thread has answered a message sent after the disconnect: the
 * main thread runs the inspector's pending requests (a V8 interrupt,
 * serviced on entry into JS) before the message handler's body.
 *
 * The shared state (an Int32Array on a SharedArrayBuffer) lets the main
 * thread and the helper agree without either's event loop:
 *   [0] 1 starting, 2 running, 0 ended (nothing of ours left running)
 *   [1] exit handshake: 1 the main thread waits, 2 the helper is done
 */
#include "helper.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The worker thread's body (see helper.h for what it does and why). */
#define HELPER_BODY                                                                              \
  "() => {\n"                                                                                    \
  "  'use strict';\n"                                                                            \
  "  const { workerData: W, parentPort } = require('worker_threads');\n"                         \
  "  const fs = require('fs'), net = require('net'), inspector = require('inspector');\n"        \
  "  const st = W.state, sock = W.dir + '/" NODEJS_HELPER_SOCKET                                 \
  "';\n"                                                                                         \
  "  const G = 'globalThis[Symbol.for(\"polyprof.nodejs\")]';\n"                                 \
  "  const session = new inspector.Session();\n"                                                 \
  "  let agent = null, done = false, running = false, buf = '', queue = Promise.resolve();\n"    \
  "  const post = (m, p) => new Promise((res, rej) =>\n"                                         \
  "    session.post(m, p || {}, (e, r) => (e ? rej(e) : res(r))));\n"                            \
  "  const onMain = (expression) => post('Runtime.evaluate', { expression });\n"                 \
  "  const why = (e) => String((e && e.message) || e).slice(0, 200);\n"                          \
  "  const send = (o, cb) => {\n"                                                                \
  "    if (agent && !agent.destroyed) agent.write(JSON.stringify(o) + '\\n', cb);\n"             \
  "    else if (cb) cb();\n"                                                                     \
  "  };\n"                                                                                       \
  "  const tidy = () => {\n"                                                                     \
  "    try { fs.unlinkSync(sock); } catch (e) {}\n"                                              \
  "    try { fs.rmdirSync(W.dir); } catch (e) {}\n"                                              \
  "  };\n"                                                                                       \
  "  const dropMap = () => {\n"                                                                  \
  "    const f = '/tmp/perf-' + process.pid + '.map';\n"                                         \
  "    try {\n"                                                                                  \
  "      const s = fs.lstatSync(f);\n"                                                           \
  "      if (s.isFile() && s.uid === process.geteuid()) fs.unlinkSync(f);\n"                     \
  "    } catch (e) {}\n"                                                                         \
  "  };\n"                                                                                       \
  "  let caughtUp = null;\n"                                                                     \
  "  const mainCaughtUp = () => new Promise((res) => {\n"                                        \
  "    const t = setTimeout(res, 5000);\n"                                                       \
  "    caughtUp = () => { clearTimeout(t); res(); };\n"                                          \
  "    parentPort.postMessage('detached');\n"                                                    \
  "  });\n"                                                                                      \
  "  const undo = async () => {\n"                                                               \
  "    if (running) {\n"                                                                         \
  "      running = false;\n"                                                                     \
  "      try { await post('Profiler.disable'); } catch (e) {}\n"                                 \
  "    }\n"                                                                                      \
  "    if (W.mode === 'maps') {\n"                                                               \
  "      try { await onMain(G + '.mapsStop()'); } catch (e) {}\n"                                \
  "      dropMap();\n"                                                                           \
  "    }\n"                                                                                      \
  "    try { await onMain(G + '.detach()'); } catch (e) {}\n"                                    \
  "    try { session.disconnect(); } catch (e) {}\n"                                             \
  "    await mainCaughtUp();\n"                                                                  \
  "  };\n"                                                                                       \
  "  let server = null, lonely = null;\n"                                                        \
  "  const finish = async (reason) => {\n"                                                       \
  "    if (done) return;\n"                                                                      \
  "    done = true;\n"                                                                           \
  "    clearTimeout(lonely);\n"                                                                  \
  "    server.close();\n"                                                                        \
  "    tidy();\n"                                                                                \
  "    await queue.catch(() => {});\n"                                                           \
  "    await undo();\n"                                                                          \
  "    Atomics.store(st, 0, 0);\n"                                                               \
  "    parentPort.unref();\n"                                                                    \
  "    send({ t: 'bye', why: reason }, () => { if (agent) agent.end(); });\n"                    \
  "  };\n"                                                                                       \
  "  const start = async () => {\n"                                                              \
  "    session.connectToMainThread();\n"                                                         \
  "    if (W.mode === 'cpu') {\n"                                                                \
  "      await post('Profiler.enable');\n"                                                       \
  "      await post('Profiler.setSamplingInterval', { interval: W.interval });\n"                \
  "      await post('Profiler.start');\n"                                                        \
  "      running = true;\n"                                                                      \
  "    }\n"                                                                                      \
  "    Atomics.store(st, 0, 2);\n"                                                               \
  "  };\n"                                                                                       \
  "  const snap = async () => {\n"                                                               \
  "    if (!running) throw new Error('the profiler is not running');\n"                          \
  "    const stop = post('Profiler.stop'), next = post('Profiler.start');\n"                     \
  "    const r = await stop;\n"                                                                  \
  "    await next;\n"                                                                            \
  "    return r.profile;\n"                                                                      \
  "  };\n"                                                                                       \
  "  const command = (line) => {\n"                                                              \
  "    let m;\n"                                                                                 \
  "    try { m = JSON.parse(line); } catch (e) { finish('unreadable request'); return; }\n"      \
  "    if (m.t === 'stop') { finish('stopped by the agent'); return; }\n"                        \
  "    if (m.t !== 'snap' || done) return;\n"                                                    \
  "    queue = queue.then(() => snap().then((profile) => send({ t: 'profile', profile }),\n"     \
  "      (e) => send({ t: 'error', error: why(e) })));\n"                                        \
  "  };\n"                                                                                       \
  "  let settled = false, greeted = false;\n"                                                    \
  "  parentPort.on('message', (m) => {\n"                                                        \
  "    if (m === 'ok') {\n"                                                                      \
  "      if (caughtUp) caughtUp();\n"                                                            \
  "      return;\n"                                                                              \
  "    }\n"                                                                                      \
  "    if (m === 'settled') {\n"                                                                 \
  "      settled = true;\n"                                                                      \
  "      if (greeted) send({ t: 'settled' });\n"                                                 \
  "      return;\n"                                                                              \
  "    }\n"                                                                                      \
  "    if (m !== 'exit' || done) return;\n"                                                      \
  "    done = true;\n"                                                                           \
  "    clearTimeout(lonely);\n"                                                                  \
  "    const release = () => {\n"                                                                \
  "      Atomics.store(st, 0, 0);\n"                                                             \
  "      Atomics.store(st, 1, 2);\n"                                                             \
  "      Atomics.notify(st, 1);\n"                                                               \
  "    };\n"                                                                                     \
  "    (async () => {\n"                                                                         \
  "      let profile = null;\n"                                                                  \
  "      await queue.catch(() => {});\n"                                                         \
  "      if (running) {\n"                                                                       \
  "        try { profile = (await post('Profiler.stop')).profile; } catch (e) {}\n"              \
  "        try { await post('Profiler.disable'); } catch (e) {}\n"                               \
  "        running = false;\n"                                                                   \
  "      }\n"                                                                                    \
  "      try { session.disconnect(); } catch (e) {}\n"                                           \
  "      if (profile) send({ t: 'exit', profile }, release);\n"                                  \
  "      else release();\n"                                                                      \
  "    })();\n"                                                                                  \
  "  });\n"                                                                                      \
  "  server = net.createServer((c) => {\n"                                                       \
  "    if (agent || done) { c.destroy(); return; }\n"                                            \
  "    agent = c;\n"                                                                             \
  "    clearTimeout(lonely);\n"                                                                  \
  "    server.close();\n"                                                                        \
  "    tidy();\n"                                                                                \
  "    c.setEncoding('utf8');\n"                                                                 \
  "    c.on('error', () => {});\n"                                                               \
  "    c.on('close', () => finish('the agent went away'));\n"                                    \
  "    c.on('data', (d) => {\n"                                                                  \
  "      buf += d;\n"                                                                            \
  "      if (buf.length > 65536) { finish('request too long'); return; }\n"                      \
  "      for (let i; (i = buf.indexOf('\\n')) >= 0; ) {\n"                                       \
  "        const line = buf.slice(0, i);\n"                                                      \
  "        buf = buf.slice(i + 1);\n"                                                            \
  "        command(line);\n"                                                                     \
  "      }\n"                                                                                    \
  "    });\n"                                                                                    \
  "    start().then(() => {\n"                                                                   \
  "      send({ t: 'hello', pid: process.pid, node: process.version });\n"                       \
  "      greeted = true;\n"                                                                      \
  "      if (settled) send({ t: 'settled' });\n"                                                 \
  "    },\n"                                                                                     \
  "      (e) => { send({ t: 'error', error: 'starting: ' + why(e) }); finish('no start'); });\n" \
  "  });\n"                                                                                      \
  "  server.on('error', (e) => finish('listening: ' + why(e)));\n"                               \
  "  lonely = setTimeout(() => finish('no agent connected'), W.waitMs);\n"                       \
  "  server.listen(sock);\n"                                                                     \
  "}"

/* The main thread's part: check, make the directory, load the addon (maps
 * mode), start the helper, hook exit, close the inspector we opened.
 *
 * Closing once is not enough. One SIGUSR1 makes Node ask for the inspector
 * twice: through a V8 interrupt (which opened the inspector we are talking
 * to, the main thread being busy in JS) and through an async handle of the
 * event loop, which fires at the loop's next poll phase and opens a fresh
 * inspector if none is open then. The install runs as an interrupt, before
 * that poll phase in a busy process, so the inspector it closes would come
 * back for good at the loop's next turn. Two immediates later a poll phase
 * has run since the install (an immediate queued during a poll callback
 * runs in that same turn's check phase, the second one a turn later): the
 * second check closes what that poll phase reopened, after which nothing is
 * pending. A main thread that never returns to its loop never runs the
 * pending request either.
 * Arguments, in order: ns pid, pid namespace link, directory, addon path
 * (a JS literal: 'path' or null), interval, wait ms, exit wait ms, close. */
#define INSTALL_EXPR                                                                               \
  "(() => {\n"                                                                                     \
  "const req = typeof process.getBuiltinModule === 'function' ? process.getBuiltinModule : "       \
  "require;\n"                                                                                     \
  "const fs = req('fs');\n"                                                                        \
  "if (process.pid !== %u || fs.readlinkSync('/proc/self/ns/pid') !== '%s')\n"                     \
  "  return 'not the process';\n"                                                                  \
  "const K = Symbol.for('polyprof.nodejs');\n"                                                     \
  "const g = globalThis[K];\n"                                                                     \
  "if (g && Atomics.load(g.state, 0) !== 0) return 'busy: another polyprof helper runs here';\n"   \
  "const dir = '%s';\n"                                                                            \
  "try { fs.mkdirSync(dir, { mode: 0o700 }); } catch (e) { return 'its directory: ' + e.code; }\n" \
  "const addon = %s;\n"                                                                            \
  "let maps = null;\n"                                                                             \
  "if (addon) {\n"                                                                                 \
  "  const major = +process.versions.node.split('.')[0];\n"                                        \
  "  if (major < 16 || major > 24) {\n"                                                            \
  "    fs.rmdirSync(dir);\n"                                                                       \
  "    return 'attach-maps supports Node.js 16 to 24, not ' + process.version;\n"                  \
  "  }\n"                                                                                          \
  "  const m = { exports: {} };\n"                                                                 \
  "  let r;\n"                                                                                     \
  "  try { process.dlopen(m, addon); r = m.exports.start(); } catch (e) { r = e.message; }\n"      \
  "  if (r !== 'ok') { fs.rmdirSync(dir); return 'the perf-map addon: ' + r; }\n"                  \
  "  maps = m.exports;\n"                                                                          \
  "}\n"                                                                                            \
  "const state = new Int32Array(new SharedArrayBuffer(8));\n"                                      \
  "Atomics.store(state, 0, 1);\n"                                                                  \
  "const helper = " HELPER_BODY                                                                    \
  ";\n"                                                                                            \
  "let w;\n"                                                                                       \
  "try {\n"                                                                                        \
  "  w = new (req('worker_threads').Worker)('(' + helper.toString() + ')()', {\n"                  \
  "    eval: true, env: {}, execArgv: [], stdout: true, stderr: true,\n"                           \
  "    workerData: { dir, mode: addon ? 'maps' : 'cpu', interval: %u, waitMs: %u, state } });\n"   \
  "} catch (e) {\n"                                                                                \
  "  if (maps) maps.stop();\n"                                                                     \
  "  fs.rmdirSync(dir);\n"                                                                         \
  "  return 'starting the helper: ' + e.message;\n"                                                \
  "}\n" /* a message listener refs the worker's port: added before unref() */                      \
  "w.on('message', (m) => { if (m === 'detached') w.postMessage('ok'); });\n"                      \
  "w.unref();\n"                                                                                   \
  "w.on('error', () => {});\n"                                                                     \
  "w.on('exit', () => Atomics.store(state, 0, 0));\n"                                              \
  "const onExit = () => {\n"                                                                       \
  "  try { fs.unlinkSync(dir + '/" NODEJS_HELPER_SOCKET                                            \
  "'); } catch (e) {}\n"                                                                           \
  "  try { fs.rmdirSync(dir); } catch (e) {}\n"                                                    \
  "  if (Atomics.load(state, 0) !== 2) return;\n"                                                  \
  "  Atomics.store(state, 1, 1);\n"                                                                \
  "  w.postMessage('exit');\n"                                                                     \
  "  Atomics.wait(state, 1, 1, %u);\n"                                                             \
  "};\n"                                                                                           \
  "process.on('exit', onExit);\n"                                                                  \
  "Object.defineProperty(globalThis, K, { configurable: true, value: {\n"                          \
  "  state,\n"                                                                                     \
  "  mapsStop() { const r = maps ? maps.stop() : 'none'; maps = null; return r; },\n"              \
  "  detach() { process.removeListener('exit', onExit); delete globalThis[K]; return 'ok'; },\n"   \
  "} });\n"                                                                                        \
  "const ins = req('inspector');\n"                                                                \
  "const close = %d;\n"                                                                            \
  "if (close) ins.close();\n"                                                                      \
  "const again = () => { if (close && ins.url()) ins.close(); };\n"                                \
  "setImmediate(() => {\n"                                                                         \
  "  again();\n"                                                                                   \
  "  setImmediate(() => { again(); w.postMessage('settled'); });\n"                                \
  "});\n"                                                                                          \
  "return 'ok';\n"                                                                                 \
  "})()"

/* Paths go into single-quoted JS literals: a conservative character set
 * keeps them from ever needing an escape. */
static int plain_path(const char *s) {
  if (!s || s[0] != '/' || strlen(s) > 200 || strstr(s, "..")) return 0;
  for (const char *p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          *p == '/' || *p == '.' || *p == '_' || *p == '-'))
      return 0;
  return 1;
}

static int plain_ns(const char *s) {
  if (!s || strlen(s) > 40) return 0;
  for (const char *p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == ':' || *p == '[' ||
          *p == ']'))
      return 0;
  return 1;
}

int nodejs_helper_install_expr(char *out, size_t cap, const struct nodejs_helper_params *p) {
  if (!plain_path(p->dir) || !plain_ns(p->pid_ns) || (p->addon && !plain_path(p->addon)))
    return -EINVAL;
  char addon[256];
  snprintf(addon, sizeof(addon), p->addon ? "'%s'" : "null", p->addon ? p->addon : "");
  int n = snprintf(out, cap, INSTALL_EXPR, p->ns_pid, p->pid_ns, p->dir, addon, p->interval_us,
                   p->wait_ms, NODEJS_HELPER_EXIT_WAIT_MS, p->close_inspector ? 1 : 0);
  return n < 0 || (size_t)n >= cap ? -ENOSPC : n;
}
