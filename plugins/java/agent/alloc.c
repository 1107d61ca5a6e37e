/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Allocation sampling (JDK 11+): HotSpot's heap sampler calls
 * SampledObjectAlloc about once per `interval` bytes allocated by a thread
 * (SetHeapSamplingInterval), on the allocating thread, outside any signal
 * handler, so the callback may use JVMTI and a mutex. Each sample stands
 * for the bytes allocated since the thread's previous one, which is about
 * the interval whatever the object's own size: weighting a sample by the
 * interval (not by the object's size) is what makes the totals estimate
 * bytes allocated, as the JDK's own allocation profilers do.
 *
 * Samples are aggregated by (stack, allocated class) in a bounded hash table;
 * what does not fit is counted as dropped. The dump writes one line per
 * entry:  A <bytes> <samples> <class> <frames leaf first>.
 */
#include <stdlib.h>
#include <string.h>

#include "agent.h"

#define ALLOC_DEPTH 64
#define ALLOC_CLASS 128
#define ALLOC_MAX 4096
#define ALLOC_SLOTS 8192 /* open addressing over entries, index + 1 */

struct alloc_entry {
  uint64_t hash;
  uint64_t bytes, samples;
  uint32_t nframes;
  jmethodID frames[ALLOC_DEPTH];
  char cls[ALLOC_CLASS];
};

static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct alloc_entry *entries;
static uint16_t *slots;
static size_t nentries;
static uint64_t interval_bytes, dropped, total_samples;
static int caps_added, enabled;

/* "Ljava/lang/String;" -> "java.lang.String", "[B" -> "byte[]" */
static void class_name(const char *sig, char *out, size_t cap) {
  int dims = 0;
  while (sig[0] == '[')
    dims++, sig++;
  const char *base = NULL;
  size_t blen = 0;
  switch (sig[0]) {
    case 'B':
      base = "byte";
      break;
    case 'C':
      base = "char";
      break;
    case 'D':
      base = "double";
      break;
    case 'F':
      base = "float";
      break;
    case 'I':
      base = "int";
      break;
    case 'J':
      base = "long";
      break;
    case 'S':
      base = "short";
      break;
    case 'Z':
      base = "boolean";
      break;
    case 'L':
      base = sig + 1;
      blen = strcspn(base, ";");
      break;
    default:
      base = "?";
  }
  if (!blen) blen = strlen(base);
  size_t o = 0;
  for (size_t i = 0; i < blen && o + 1 < cap; i++) {
    unsigned char c = (unsigned char)base[i];
    out[o++] = c == '/' ? '.' : c < 0x20 || c == 0x7f ? ' ' : (char)c;
  }
  for (int d = 0; d < dims && o + 2 < cap; d++)
    out[o++] = '[', out[o++] = ']';
  out[o] = '\0';
}

static uint64_t hash_of(const jmethodID *f, uint32_t n, const char *cls) {
  uint64_t h = 1469598103934665603ull;
  for (uint32_t i = 0; i < n; i++)
    h = (h ^ (uint64_t)(uintptr_t)f[i]) * 1099511628211ull;
  for (const char *c = cls; *c; c++)
    h = (h ^ (unsigned char)*c) * 1099511628211ull;
  return h;
}

void JNICALL ja_alloc_on_sample(jvmtiEnv *j, JNIEnv *jni, jthread thread, jobject object,
                                jclass klass, jlong size) {
  if (!enabled) return;
  jvmtiFrameInfo fi[ALLOC_DEPTH];
  jint count = 0;
  if ((*j)->GetStackTrace(j, thread, 0, ALLOC_DEPTH, fi, &count) != JVMTI_ERROR_NONE) count = 0;
  char *sig = NULL;
  char cls[ALLOC_CLASS] = "?";
  if ((*j)->GetClassSignature(j, klass, &sig, NULL) == JVMTI_ERROR_NONE && sig) {
    class_name(sig, cls, sizeof(cls));
    (*j)->Deallocate(j, (unsigned char *)sig);
  }
  jmethodID frames[ALLOC_DEPTH];
  uint32_t n = count > 0 ? (uint32_t)count : 0;
  for (uint32_t i = 0; i < n; i++)
    frames[i] = fi[i].method;
  uint64_t h = hash_of(frames, n, cls);
  pthread_mutex_lock(&alloc_lock);
  total_samples++;
  struct alloc_entry *e = NULL;
  size_t slot = h & (ALLOC_SLOTS - 1);
  for (; slots && slots[slot]; slot = (slot + 1) & (ALLOC_SLOTS - 1)) {
    struct alloc_entry *x = &entries[slots[slot] - 1];
    if (x->hash == h && x->nframes == n && !strcmp(x->cls, cls) &&
        !memcmp(x->frames, frames, n * sizeof(*frames))) {
      e = x;
      break;
    }
  }
  if (!e && slots && nentries < ALLOC_MAX) {
    slots[slot] = (uint16_t)(nentries + 1);
    e = &entries[nentries++];
    memset(e, 0, sizeof(*e));
    e->hash = h;
    e->nframes = n;
    memcpy(e->frames, frames, n * sizeof(*frames));
    snprintf(e->cls, sizeof(e->cls), "%s", cls);
  }
  if (e) {
    e->bytes += interval_bytes;
    e->samples++;
  } else {
    dropped++;
  }
  pthread_mutex_unlock(&alloc_lock);
}

int ja_alloc_start(jvmtiEnv *j, int jdk_major, long interval, char *err, size_t errlen) {
  if (jdk_major < 11) {
    snprintf(err, errlen, "allocation sampling needs Java 11 or newer (this JVM: %d)", jdk_major);
    return -1;
  }
  if (!slots && !(slots = calloc(ALLOC_SLOTS, sizeof(*slots)))) {
    snprintf(err, errlen, "out of memory for the allocation table");
    return -1;
  }
  if (!entries && !(entries = calloc(ALLOC_MAX, sizeof(*entries)))) {
    snprintf(err, errlen, "out of memory for the allocation table");
    return -1;
  }
  if (!caps_added) {
    jvmtiCapabilities caps;
    memset(&caps, 0, sizeof(caps));
    caps.can_generate_sampled_object_alloc_events = 1;
    if ((*j)->AddCapabilities(j, &caps) != JVMTI_ERROR_NONE) {
      snprintf(err, errlen, "JVMTI capability can_generate_sampled_object_alloc_events refused");
      return -1;
    }
    caps_added = 1;
  }
  interval_bytes = interval > 0 ? (uint64_t)interval : 524288;
  if ((*j)->SetHeapSamplingInterval(j, (jint)interval_bytes) != JVMTI_ERROR_NONE) {
    snprintf(err, errlen, "SetHeapSamplingInterval(%llu) refused",
             (unsigned long long)interval_bytes);
    return -1;
  }
  enabled = 1;
  (*j)->SetEventNotificationMode(j, JVMTI_ENABLE, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
  return 0;
}

void ja_alloc_stop(jvmtiEnv *j) {
  if (!enabled) return;
  enabled = 0;
  (*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
}

void ja_alloc_dump(jvmtiEnv *j, FILE *f) {
  pthread_mutex_lock(&alloc_lock);
  for (size_t i = 0; f && i < nentries; i++) {
    const struct alloc_entry *e = &entries[i];
    fprintf(f, "A\t%llu\t%llu\t%s\t", (unsigned long long)e->bytes, (unsigned long long)e->samples,
            e->cls);
    for (uint32_t k = 0; k < e->nframes; k++) {
      int lvl = ja_codecache_method_level(e->frames[k]);
      char t = lvl < 0 ? '0' : lvl >= 1 && lvl <= 3 ? '1' : 'j';
      fprintf(f, "%s%c%s", k ? "\x1f" : "", t, ja_names_get(j, e->frames[k]));
    }
    fputc('\n', f);
  }
  if (f && (enabled || total_samples))
    fprintf(f, "I\talloc_samples=%llu\talloc_dropped=%llu\talloc_interval=%llu\n",
            (unsigned long long)total_samples, (unsigned long long)dropped,
            (unsigned long long)interval_bytes);
  nentries = 0;
  if (slots) memset(slots, 0, ALLOC_SLOTS * sizeof(*slots));
  total_samples = dropped = 0;
  pthread_mutex_unlock(&alloc_lock);
}
