/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libpolyprof-jvmti: the JVMTI agent the java plugin loads into HotSpot JVMs.
 *
 * Internal interfaces between the agent's files. Everything here runs inside
 * the target JVM, so every structure is bounded and preallocated: the signal
 * handler (sampler.c) never allocates, locks or calls into the JVM except
 * AsyncGetCallTrace.
 *
 *   agent.c      Agent_OnAttach, option parsing, JVMTI callbacks, dump file
 *   sampler.c    SIGPROF handler, Java thread registry, lock-free trace store
 *   timers.c     one CPU-time timer per thread (timer_create, SIGEV_THREAD_ID)
 *   codecache.c  nmethod ranges + compilation levels, interpreter range
 *   names.c      jmethodID -> "pkg/Class.method(sig)ret" cache
 *   alloc.c      allocation sampling (SampledObjectAlloc), by stack and class
 */
#ifndef POLYPROF_JVMTI_AGENT_H
#define POLYPROF_JVMTI_AGENT_H

#include <jvmti.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define JA_MAX_DEPTH 256

/* Frame types, as stored per frame in the trace store. */
enum {
  JA_T_UNKNOWN = 0, /* decided at dump time from the method's compile state */
  JA_T_JIT = 1,     /* _[j] */
  JA_T_INLINED = 2, /* _[i] */
  JA_T_INTERP = 3,  /* _[0] */
  JA_T_C1 = 4,      /* _[1] */
  JA_T_NATIVE = 5,  /* Java native method (bci -3) */
  JA_T_ERROR = 6,   /* pseudo frame: the "method" is an ASGCT error code */
};

/* ---- sampler.c ---- */
struct ja_sampler_config {
  int depth;             /* frames kept, <= JA_MAX_DEPTH */
  size_t table_entries;  /* distinct stacks per half (power of two) */
  size_t frame_capacity; /* frames per half */
};
int ja_sampler_init(const struct ja_sampler_config *cfg, void *asgct, pthread_key_t key,
                    ptrdiff_t env_offset);
int ja_sampler_install_handler(char *err, size_t errlen);
void ja_sampler_set_armed(int armed);
/* 0 once disarmed by a command, or past the watchdog's deadline (no collector left) */
int ja_sampler_armed(void);
/* Wall mode: the intervals each sample stands for (1 unless there are more
 * threads than the signal budget). */
void ja_sampler_set_weight(uint32_t weight);
/* Wall mode: a thread not known to be a Java thread stops its timer
 * instead of storing an error sample. */
void ja_sampler_set_wall(int wall);
/* --mode offcpu: a thread the signal finds blocked in a system call makes
 * an off-CPU sample (its count: microseconds, interval_ns per sample). */
void ja_sampler_set_offcpu(int on, uint64_t interval_ns);
/* Watchdog: the handler disarms itself (and deletes its thread's timer) when
 * no dump came by deadline (CLOCK_MONOTONIC ns; 0: none), so a profiler that
 * died leaves no sampling behind. */
void ja_sampler_set_deadline(uint64_t deadline_ns);
uint64_t ja_now_ns(void);
void ja_thread_add(void *java_thread);
void ja_thread_remove(void *java_thread);

/* One stored stack as handed to the dump. */
struct ja_trace_view {
  uint64_t count; /* samples, or microseconds off the CPU (offcpu) */
  int offcpu;
  pid_t tid;
  void *thread; /* JavaThread*, NULL for threads outside the registry */
  uint32_t nframes;
  const uintptr_t *methods; /* jmethodID, or the error code for JA_T_ERROR */
  const uint8_t *types;
};
struct ja_sampler_stats {
  uint64_t samples, dropped, no_thread;
};
/* Swaps the store halves, waits for the handlers still writing the old half,
 * then calls fn for every stack in it and clears it. Not reentrant (the
 * caller holds the agent lock). */
void ja_sampler_drain(void (*fn)(const struct ja_trace_view *, void *), void *arg,
                      struct ja_sampler_stats *stats);

/* ---- timers.c ---- */
/* Wall mode: signals a second over all threads of the JVM, at most. */
#define JA_WALL_MAX_RATE 1000
int ja_timers_init(size_t max_threads);
/* wall_clock: timers on CLOCK_MONOTONIC (every thread, running or not)
 * instead of each thread's CPU clock. */
void ja_timers_set_interval(uint64_t interval_ns, int wall_clock);
/* Async-signal-safe: the calling thread is no Java thread; wall mode stops
 * sampling it (its timer deleted, the rescans skip it). */
void ja_timer_not_java(pid_t tid);
int ja_timer_add(pid_t tid);
void ja_timer_remove(pid_t tid);
void ja_timers_rescan(void); /* adds timers for new tasks, deletes dead ones */
void ja_timers_stop_all(void);
void ja_timer_delete_self(pid_t tid); /* async-signal-safe */
size_t ja_timers_count(void);

/* ---- codecache.c ---- */
int ja_codecache_init(size_t max_nmethods);
void ja_codecache_add(jmethodID m, const void *addr, jint size, int level);
void ja_codecache_remove(jmethodID m, const void *addr);
void ja_codecache_set_interpreter(const void *addr, jint size);
/* Async-signal-safe: the nmethod containing pc (root method + level), or
 * returns 0; 2 if pc is in the interpreter. */
int ja_codecache_lookup(uintptr_t pc, jmethodID *root, int *level);
/* Dump time: index the live nmethods by method (call once per dump), then
 * ask for the compile state of a method: -1 none live, else its best level
 * (0 unknown, 1-3 C1, 4 C2). */
void ja_codecache_index_methods(void);
int ja_codecache_method_level(jmethodID m);
/* The compilation level of the nmethod whose code begins at code_addr, read
 * through the JVM's own VMStructs table; 0 if unknown. */
int ja_codecache_level_of(const void *code_addr);
int ja_codecache_vmstructs_init(void); /* 1: levels available */

/* ---- alloc.c ---- */
/* JVMTI SampledObjectAlloc callback (JDK 11+). */
void JNICALL ja_alloc_on_sample(jvmtiEnv *j, JNIEnv *jni, jthread thread, jobject object,
                                jclass klass, jlong size);
/* Samples about every `interval` bytes a thread allocates; -1 with err. */
int ja_alloc_start(jvmtiEnv *j, int jdk_major, long interval, char *err, size_t errlen);
void ja_alloc_stop(jvmtiEnv *j);
/* Writes the A lines (and an I line) and clears the table. */
void ja_alloc_dump(jvmtiEnv *j, FILE *f);

/* ---- names.c ---- */
int ja_names_init(size_t max_bytes, int eager_only);
/* Resolves and caches the names of every method of klass (ClassPrepare). */
void ja_names_prepare_class(jvmtiEnv *jvmti, JNIEnv *jni, jclass klass, int eager);
/* Name of m, from the cache or resolved now; never NULL. */
const char *ja_names_get(jvmtiEnv *jvmti, jmethodID m);
void ja_names_set_loaders(JNIEnv *jni);
void ja_names_stats(size_t *entries, size_t *bytes, uint64_t *unresolved);

#endif
