/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Frame text as gProfiler writes it (table: docs/gprofiler-compat.md).
 * The per-runtime layout ("name (file:line)", "name - file:line"...) and the
 * suffix are derived from the frame kind here, in one place, so plugins only
 * report facts and every writer agrees.
 */
#include <stdio.h>
#include <string.h>

#include "output/col.h"

static const char *const kind_suffix[PP_FRAME_KIND_COUNT] = {
    [PP_FRAME_NATIVE] = "",
    [PP_FRAME_KERNEL] = "_[k]",
    [PP_FRAME_PYTHON] = "_[p]",
    [PP_FRAME_PYTHON_NATIVE] = "_[pn]",
    [PP_FRAME_PYTHON_ERROR] = "_[pe]",
    [PP_FRAME_JAVA_JIT] = "_[j]",
    [PP_FRAME_JAVA_INLINED] = "_[i]",
    [PP_FRAME_JAVA_INTERPRETED] = "_[0]",
    [PP_FRAME_JAVA_C1] = "_[1]",
    [PP_FRAME_RUBY] = "_[rb]",
    [PP_FRAME_PHP] = "_[php]",
    [PP_FRAME_DOTNET] = "_[net]",
    [PP_FRAME_JS] = "",
    [PP_FRAME_PSEUDO] = "",
    [PP_FRAME_ERROR] = "",
    /* async-profiler's tier letters, which mean the same for V8's tiers */
    [PP_FRAME_JS_INTERPRETED] = "_[0]",
    [PP_FRAME_JS_BASELINE] = "_[1]",
    [PP_FRAME_JS_OPTIMIZED] = "_[j]",
    [PP_FRAME_JS_INLINED] = "_[i]",
    [PP_FRAME_JS_BUILTIN] = "",
};

static const char *const kind_name[PP_FRAME_KIND_COUNT] = {
    [PP_FRAME_NATIVE] = "native",
    [PP_FRAME_KERNEL] = "kernel",
    [PP_FRAME_PYTHON] = "python",
    [PP_FRAME_PYTHON_NATIVE] = "python-native",
    [PP_FRAME_PYTHON_ERROR] = "python-error",
    [PP_FRAME_JAVA_JIT] = "java-jit",
    [PP_FRAME_JAVA_INLINED] = "java-inlined",
    [PP_FRAME_JAVA_INTERPRETED] = "java-interpreted",
    [PP_FRAME_JAVA_C1] = "java-c1",
    [PP_FRAME_RUBY] = "ruby",
    [PP_FRAME_PHP] = "php",
    [PP_FRAME_DOTNET] = "dotnet",
    [PP_FRAME_JS] = "js",
    [PP_FRAME_PSEUDO] = "pseudo",
    [PP_FRAME_ERROR] = "error",
    [PP_FRAME_JS_INTERPRETED] = "js-interpreted",
    [PP_FRAME_JS_BASELINE] = "js-baseline",
    [PP_FRAME_JS_OPTIMIZED] = "js-optimized",
    [PP_FRAME_JS_INLINED] = "js-inlined",
    [PP_FRAME_JS_BUILTIN] = "js-builtin",
};

const char *pp_frame_kind_suffix(unsigned kind) {
  return kind < PP_FRAME_KIND_COUNT ? kind_suffix[kind] : "";
}

bool pp_frame_kind_is_js(unsigned kind) {
  return kind == PP_FRAME_JS || (kind >= PP_FRAME_JS_INTERPRETED && kind <= PP_FRAME_JS_BUILTIN);
}

const char *pp_frame_kind_name(unsigned kind) {
  return kind < PP_FRAME_KIND_COUNT ? kind_name[kind] : "native";
}

/* Appends text, replacing the .col separators: ';' separates frames (Java
 * signatures use '|' for it, as async-profiler's gProfiler fork does) and a
 * line break would end the stack. */
static size_t put(char *buf, size_t cap, size_t at, const char *s, size_t n) {
  for (size_t i = 0; i < n && at + 1 < cap; i++) {
    char c = s[i];
    if (c == ';')
      c = '|';
    else if (c == '\n' || c == '\r')
      c = ' ';
    buf[at++] = c;
  }
  return at;
}

static size_t put_str(char *buf, size_t cap, size_t at, const char *s) {
  return put(buf, cap, at, s, strlen(s));
}

size_t pp_frame_format(const struct pp_profile *p, uint32_t frame_id, char *buf, size_t cap,
                       bool with_suffix) {
  if (cap == 0) return 0;
  const struct pp_frame_rec *f = pp_profile_frame(p, frame_id);
  if (!f) {
    snprintf(buf, cap, "[unknown]");
    return strlen(buf);
  }
  const char *name = pp_profile_str(p, f->name);
  size_t at = put(buf, cap, 0, name, pp_profile_str_len(p, f->name));
  const char *file = f->file == PP_NO_STR ? NULL : pp_profile_str(p, f->file);
  char line[16] = "";
  if (f->line) snprintf(line, sizeof(line), ":%u", f->line);

  if (file) {
    switch (f->kind) {
      case PP_FRAME_PYTHON:
      case PP_FRAME_JS:
      case PP_FRAME_JS_INTERPRETED:
      case PP_FRAME_JS_BASELINE:
      case PP_FRAME_JS_OPTIMIZED:
      case PP_FRAME_JS_INLINED:
      case PP_FRAME_JS_BUILTIN:
        at = put_str(buf, cap, at, " (");
        at = put_str(buf, cap, at, file);
        at = put_str(buf, cap, at, line);
        at = put_str(buf, cap, at, ")");
        break;
      case PP_FRAME_RUBY:
        at = put_str(buf, cap, at, " - ");
        at = put_str(buf, cap, at, file);
        at = put_str(buf, cap, at, f->line ? line : ":0");
        break;
      case PP_FRAME_PHP:
        at = put_str(buf, cap, at, " ");
        at = put_str(buf, cap, at, file);
        at = put_str(buf, cap, at, line);
        break;
      default:
        /* native frames carry their object file for pprof; .col shows the
         * symbol only, like perf script output */
        break;
    }
  }
  if (with_suffix && f->kind < PP_FRAME_KIND_COUNT)
    at = put_str(buf, cap, at, kind_suffix[f->kind]);
  buf[at] = '\0';
  return at;
}
