/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Application metadata of a JVM from its own attach replies: `properties`
 * (java.* system properties) gives the equivalent of `java -version`, and
 * `jcmd VM.flags` the flags that differ from their defaults (gProfiler
 * reports a filtered VM.flags list as jvm_flags).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "java.h"

/* Properties text: "key=value" lines, '\' escapes ("\:" "\=" "\\" "\n"). */
void java_property(const char *props, const char *key, char *out, size_t len) {
  out[0] = '\0';
  if (!props || !len) return;
  size_t kl = strlen(key);
  for (const char *p = props; p && *p;) {
    const char *nl = strchr(p, '\n');
    if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
      const char *v = p + kl + 1, *e = nl ? nl : v + strlen(v);
      size_t o = 0;
      for (; v < e && o + 1 < len; v++) {
        char c = *v;
        if (c == '\r') continue;
        if (c == '\\' && v + 1 < e) {
          c = *++v;
          if (c == 'n')
            c = '\n';
          else if (c == 't')
            c = '\t';
        }
        out[o++] = c;
      }
      out[o] = '\0';
      return;
    }
    p = nl ? nl + 1 : NULL;
  }
}

int java_major_version(const char *props) {
  char v[64];
  java_property(props, "java.specification.version", v, sizeof(v));
  if (!v[0]) java_property(props, "java.vm.specification.version", v, sizeof(v));
  if (!v[0]) return 0;
  return strncmp(v, "1.", 2) == 0 ? atoi(v + 2) : atoi(v);
}

char *java_metadata_json(const char *props, const char *flags) {
  json_t *o = json_object();
  if (!o) return NULL;
  if (props) {
    /* the three lines `java -version` prints, rebuilt from the properties */
    char ver[128], date[64], rtname[128], rtver[128], vmname[128], vmver[128], vminfo[128];
    java_property(props, "java.version", ver, sizeof(ver));
    java_property(props, "java.version.date", date, sizeof(date));
    java_property(props, "java.runtime.name", rtname, sizeof(rtname));
    java_property(props, "java.runtime.version", rtver, sizeof(rtver));
    java_property(props, "java.vm.name", vmname, sizeof(vmname));
    java_property(props, "java.vm.version", vmver, sizeof(vmver));
    java_property(props, "java.vm.info", vminfo, sizeof(vminfo));
    char text[1280]; /* room for every part at full length */
    snprintf(text, sizeof(text), "%s version \"%s\"%s%s\n%s (build %s)\n%s (build %s, %s)",
             strstr(rtname, "OpenJDK") ? "openjdk" : "java", ver, date[0] ? " " : "", date, rtname,
             rtver, vmname, vmver, vminfo);
    json_object_set_new(o, "java_version", json_string(text));
  }
  if (flags) {
    json_t *arr = json_array();
    /* "-XX:Name=value" / "-XX:+Name" / "-XX:-Name" tokens */
    const char *p = flags;
    while (p && *p) {
      while (*p == ' ' || *p == '\n' || *p == '\r')
        p++;
      size_t l = strcspn(p, " \n\r");
      if (l > 4 && l < 512 && strncmp(p, "-XX:", 4) == 0) {
        char tok[512];
        memcpy(tok, p + 4, l - 4);
        tok[l - 4] = '\0';
        json_t *f = json_object();
        if (tok[0] == '+' || tok[0] == '-') {
          json_object_set_new(f, "name", json_string(tok + 1));
          json_object_set_new(f, "value", json_string(tok[0] == '+' ? "true" : "false"));
        } else {
          char *eq = strchr(tok, '=');
          if (eq) *eq = '\0';
          json_object_set_new(f, "name", json_string(tok));
          json_object_set_new(f, "value", json_string(eq ? eq + 1 : ""));
        }
        if (json_object_get(f, "name") && json_object_get(f, "value")) json_array_append(arr, f);
        json_decref(f);
      }
      p += l;
    }
    json_object_set_new(o, "jvm_flags", arr);
  }
  char *s = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return s;
}
