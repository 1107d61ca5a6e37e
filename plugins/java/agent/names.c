/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jmethodID -> "pkg/Class.method(sig)ret", cached with a hard memory cap.
 *
 * Resolving a jmethodID whose class was unloaded can crash JDK 8-17 inside
 * GetClassSignature (JDK-8268364, fixed in 18). On those JDKs the names of
 * every method of a class that can be unloaded (hidden classes, classes of
 * loaders other than boot/platform/app) are resolved when the class is
 * prepared, while it is certainly alive, and a dump only reads the cache for
 * them. Names of classes that live forever are resolved lazily. When the
 * cache is full, a method that would need eager resolution is recorded as
 * unresolvable and printed as "[unknown]"; when even the index is full, the
 * agent stops resolving lazily on those JDKs (everything new is "[unknown]")
 * rather than risk the target.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

#define NO_NAME UINT32_MAX

struct entry {
  jmethodID m;  /* NULL: free */
  uint32_t off; /* into arena, NO_NAME: known but unresolvable */
};

static struct entry *index_tab;
static size_t index_cap, index_used;
static char *arena;
static size_t arena_cap, arena_used;
static int risky_jdk; /* JDK <= 17: never resolve unloadable classes lazily */
static int degraded;  /* index full on a risky JDK */
static uint64_t unresolved;
static jobject loader_app, loader_platform;

int ja_names_init(size_t max_bytes, int old_jdk) {
  risky_jdk = old_jdk;
  index_cap = 1024;
  while (index_cap * sizeof(struct entry) * 4 < max_bytes)
    index_cap *= 2;
  index_tab = calloc(index_cap, sizeof(struct entry));
  arena_cap = max_bytes - index_cap * sizeof(struct entry);
  arena = malloc(arena_cap);
  if (!index_tab || !arena) return -ENOMEM;
  return 0;
}

void ja_names_set_loaders(JNIEnv *jni) {
  jclass cl = (*jni)->FindClass(jni, "java/lang/ClassLoader");
  if (!cl) {
    (*jni)->ExceptionClear(jni);
    return;
  }
  jmethodID sys =
      (*jni)->GetStaticMethodID(jni, cl, "getSystemClassLoader", "()Ljava/lang/ClassLoader;");
  if (sys) {
    jobject o = (*jni)->CallStaticObjectMethod(jni, cl, sys);
    if (o) loader_app = (*jni)->NewGlobalRef(jni, o);
  }
  (*jni)->ExceptionClear(jni);
  jmethodID plat =
      (*jni)->GetStaticMethodID(jni, cl, "getPlatformClassLoader", "()Ljava/lang/ClassLoader;");
  if (plat) { /* JDK 9+ */
    jobject o = (*jni)->CallStaticObjectMethod(jni, cl, plat);
    if (o) loader_platform = (*jni)->NewGlobalRef(jni, o);
  }
  (*jni)->ExceptionClear(jni);
}

static size_t slot_of(jmethodID m) {
  return (size_t)(((uintptr_t)m >> 3) * 0x9E3779B97F4A7C15ull >> 24) & (index_cap - 1);
}

static struct entry *find(jmethodID m, int create) {
  size_t h = slot_of(m);
  for (size_t i = 0; i < index_cap; i++) {
    struct entry *e = &index_tab[(h + i) & (index_cap - 1)];
    if (e->m == m) return e;
    if (!e->m) {
      if (!create || index_used + 1 > index_cap / 4 * 3) return NULL;
      e->m = m;
      e->off = NO_NAME;
      index_used++;
      return e;
    }
  }
  return NULL;
}

static void put(jmethodID m, const char *name) {
  struct entry *e = find(m, 1);
  if (!e) {
    if (risky_jdk) degraded = 1;
    return;
  }
  size_t len = strlen(name) + 1;
  if (arena_used + len > arena_cap) return; /* stays NO_NAME */
  memcpy(arena + arena_used, name, len);
  e->off = (uint32_t)arena_used;
  arena_used += len;
}

/* "Lpkg/Class;" -> "pkg/Class"; control characters and our separator are
 * replaced: the text is the target's and goes into a line-based file. */
static void append_clean(char *dst, size_t cap, size_t *len, const char *s, size_t n) {
  for (size_t i = 0; i < n && *len + 1 < cap; i++) {
    unsigned char c = (unsigned char)s[i];
    dst[(*len)++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
  }
  dst[*len] = '\0';
}

static int resolve(jvmtiEnv *jvmti, jmethodID m, char *out, size_t cap) {
  char *name = NULL, *sig = NULL, *csig = NULL;
  jclass cls = NULL;
  jvmtiError err = (*jvmti)->GetMethodName(jvmti, m, &name, &sig, NULL);
  if (err == JVMTI_ERROR_NONE) err = (*jvmti)->GetMethodDeclaringClass(jvmti, m, &cls);
  if (err == JVMTI_ERROR_NONE) err = (*jvmti)->GetClassSignature(jvmti, cls, &csig, NULL);
  if (err == JVMTI_ERROR_NONE) {
    size_t len = 0;
    const char *c = csig;
    size_t clen = strlen(c);
    if (clen >= 2 && c[0] == 'L' && c[clen - 1] == ';') {
      c++;
      clen -= 2;
    }
    append_clean(out, cap, &len, c, clen);
    append_clean(out, cap, &len, ".", 1);
    append_clean(out, cap, &len, name, strlen(name));
    append_clean(out, cap, &len, sig, strlen(sig));
  } else if (err == JVMTI_ERROR_INVALID_METHODID) {
    snprintf(out, cap, "[stale_jmethodID]");
  } else {
    snprintf(out, cap, "[jvmtiError %d]", (int)err);
  }
  if (name) (*jvmti)->Deallocate(jvmti, (unsigned char *)name);
  if (sig) (*jvmti)->Deallocate(jvmti, (unsigned char *)sig);
  if (csig) (*jvmti)->Deallocate(jvmti, (unsigned char *)csig);
  return err == JVMTI_ERROR_NONE ? 0 : -1;
}

void ja_names_prepare_class(jvmtiEnv *jvmti, JNIEnv *jni, jclass klass, int eager_allowed) {
  jint n = 0;
  jmethodID *ids = NULL;
  /* this call is also what materialises the jmethodIDs AsyncGetCallTrace
   * can only look up, never create */
  if ((*jvmti)->GetClassMethods(jvmti, klass, &n, &ids) != JVMTI_ERROR_NONE) return;
  int eager = 0;
  if (risky_jdk && eager_allowed) {
    char *csig = NULL;
    jobject loader = NULL;
    if ((*jvmti)->GetClassSignature(jvmti, klass, &csig, NULL) == JVMTI_ERROR_NONE && csig) {
      if (strchr(csig, '.')) eager = 1; /* hidden class: "Lpkg/Foo$$Lambda$1.0x...;" */
      (*jvmti)->Deallocate(jvmti, (unsigned char *)csig);
    }
    if (!eager && (*jvmti)->GetClassLoader(jvmti, klass, &loader) == JVMTI_ERROR_NONE && loader) {
      int forever = (loader_app && (*jni)->IsSameObject(jni, loader, loader_app)) ||
                    (loader_platform && (*jni)->IsSameObject(jni, loader, loader_platform));
      eager = !forever;
      (*jni)->DeleteLocalRef(jni, loader);
    }
  }
  if (eager) {
    char buf[1024];
    for (jint i = 0; i < n; i++) {
      if (find(ids[i], 0)) continue;
      if (resolve(jvmti, ids[i], buf, sizeof(buf)) == 0) put(ids[i], buf);
    }
  }
  (*jvmti)->Deallocate(jvmti, (unsigned char *)ids);
}

const char *ja_names_get(jvmtiEnv *jvmti, jmethodID m) {
  static char buf[1024];
  if (!m) return "[unknown]";
  struct entry *e = find(m, 0);
  if (e) {
    if (e->off != NO_NAME) return arena + e->off;
    unresolved++;
    return "[unknown]";
  }
  if (risky_jdk && degraded) {
    unresolved++;
    return "[unknown]";
  }
  /* not cached: a class that is never unloaded (or a JDK where resolving a
   * stale id is safe) */
  if (resolve(jvmti, m, buf, sizeof(buf)) == 0) put(m, buf);
  return buf;
}

void ja_names_stats(size_t *entries, size_t *bytes, uint64_t *unres) {
  *entries = index_used;
  *bytes = arena_used + index_cap * sizeof(struct entry);
  *unres = unresolved;
}
