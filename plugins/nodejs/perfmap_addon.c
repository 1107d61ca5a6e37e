/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nodejs-perfmap.node: a tiny Node addon, loaded into a running Node
 * process by the nodejs plugin's attach-maps mode, that writes
 * /tmp/perf-<pid>.map so perf can name JIT-compiled JavaScript frames.
 *
 * Why native code: V8 creates its perf-map logger only when an isolate is
 * set up, so v8.setFlagsFromString('--perf-basic-prof') at runtime does
 * nothing for the main isolate of Node 20. V8's public API can enumerate
 * existing code and report new code to a callback
 * (Isolate::SetJitCodeEventHandler with kJitCodeEventEnumExisting).
 *
 * Why C and no headers: the module interface is N-API (a stable C ABI whose
 * few prototypes are declared below), so the addon loads in any Node
 * version; the two V8 entry points are looked up by their mangled names in
 * the running process at start(), and start() fails cleanly if they are
 * absent. The JitCodeEvent layout below is the one of V8 9 to 13 (Node 16
 * to 24); the plugin only loads the addon into those versions.
 *
 * The handler runs on the JS thread for every code creation and writes its
 * line at once (one write(2) of an append-only descriptor, as V8's own
 * --perf-basic-prof does): no buffer waits for a JS timer, so a process
 * whose main thread never returns to its event loop has its map complete.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- N-API (js_native_api.h), stable C ABI ---- */
typedef struct napi_env__ *napi_env;
typedef struct napi_value__ *napi_value;
typedef struct napi_callback_info__ *napi_callback_info;
typedef int napi_status;
typedef napi_value (*napi_callback)(napi_env env, napi_callback_info info);
extern napi_status napi_create_function(napi_env env, const char *utf8name, size_t length,
                                        napi_callback cb, void *data, napi_value *result);
extern napi_status napi_set_named_property(napi_env env, napi_value object, const char *utf8name,
                                           napi_value value);
extern napi_status napi_create_string_utf8(napi_env env, const char *str, size_t length,
                                           napi_value *result);

/* ---- V8 JitCodeEvent (v8-callbacks.h, V8 9..12) ---- */
enum { JIT_CODE_ADDED = 0 };
enum { JIT_BYTE_CODE = 0 };
struct jit_code_event {
  int type;
  int code_type;
  void *code_start;
  size_t code_len;
  void *script; /* Local<UnboundScript> */
  void *user_data;
  void *wasm_source_info;
  union {
    struct {
      const char *str;
      size_t len;
    } name;
    void *new_code_start;
  } u;
  void *isolate;
};
typedef void (*jit_handler)(const struct jit_code_event *);
typedef void *(*get_current_fn)(void);
typedef void (*set_handler_fn)(void *isolate, int options, jit_handler);
#define V8_GET_CURRENT "_ZN2v87Isolate10GetCurrentEv"
#define V8_SET_JIT_HANDLER \
  "_ZN2v87Isolate22SetJitCodeEventHandlerENS_19JitCodeEventOptionsEPFvPKNS_12JitCodeEventEE"
#define ENUM_EXISTING 1

static int map_fd = -1;
static void *isolate;
static set_handler_fn set_handler;

static void on_code(const struct jit_code_event *ev) {
  if (map_fd < 0 || ev->type != JIT_CODE_ADDED || ev->code_type == JIT_BYTE_CODE) return;
  size_t len = ev->u.name.len;
  if (len > 1024) len = 1024;
  /* perf splits on whitespace only at the first two fields; a newline in
   * a name would start a bogus entry, so cut there */
  const char *s = ev->u.name.str;
  size_t cut = 0;
  while (s && cut < len && s[cut] != '\n' && s[cut] != '\r')
    cut++;
  char line[1100];
  int n = snprintf(line, sizeof(line), "%lx %zx %.*s\n", (unsigned long)ev->code_start,
                   ev->code_len, (int)cut, s ? s : "");
  if (n > 0) {
    ssize_t w = write(map_fd, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
    (void)w; /* a full disk loses names, never the process */
  }
}

static napi_value result_str(napi_env env, const char *s) {
  napi_value v;
  napi_create_string_utf8(env, s, (size_t)-1, &v);
  return v;
}

static napi_value js_start(napi_env env, napi_callback_info info) {
  (void)info;
  if (map_fd >= 0) return result_str(env, "already started");
  get_current_fn get_current = (get_current_fn)dlsym(RTLD_DEFAULT, V8_GET_CURRENT);
  set_handler = (set_handler_fn)dlsym(RTLD_DEFAULT, V8_SET_JIT_HANDLER);
  if (!get_current || !set_handler) return result_str(env, "V8 entry points not found");
  isolate = get_current();
  if (!isolate) return result_str(env, "no current isolate");
  char path[64];
  snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
  /* Only a regular file of this process's user is written: a FIFO, a
   * device or someone else's file planted there is not even opened (and
   * O_NONBLOCK: one swapped in meanwhile fails instead of blocking). */
  struct stat st;
  if (lstat(path, &st) == 0 && (!S_ISREG(st.st_mode) || st.st_uid != geteuid()))
    return result_str(env, "/tmp/perf-<pid>.map is not a regular file of ours");
  /* append: a map written by --perf-basic-prof or an earlier run stays valid */
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd < 0) return result_str(env, "cannot open /tmp/perf-<pid>.map");
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return result_str(env, "/tmp/perf-<pid>.map is not a regular file");
  }
  fcntl(fd, F_SETFL, O_APPEND);
  map_fd = fd;
  set_handler(isolate, ENUM_EXISTING, on_code); /* existing code is written now */
  return result_str(env, "ok");
}

static napi_value js_stop(napi_env env, napi_callback_info info) {
  (void)info;
  if (map_fd < 0) return result_str(env, "not started");
  set_handler(isolate, 0, NULL); /* NULL handler: no more events */
  close(map_fd);
  map_fd = -1;
  return result_str(env, "ok");
}

__attribute__((visibility("default"))) napi_value napi_register_module_v1(napi_env env,
                                                                          napi_value exports) {
  static const struct {
    const char *name;
    napi_callback fn;
  } fns[] = {{"start", js_start}, {"stop", js_stop}};
  for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
    napi_value f;
    if (napi_create_function(env, fns[i].name, (size_t)-1, fns[i].fn, NULL, &f) == 0)
      napi_set_named_property(env, exports, fns[i].name, f);
  }
  return exports;
}
