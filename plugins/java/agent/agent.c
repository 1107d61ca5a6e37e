/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libpolyprof-jvmti entry points: Agent_OnAttach / Agent_OnLoad, JVMTI
 * callbacks and the dump file.
 *
 * The java plugin drives the agent with HotSpot's attach `load` command. The
 * library is loaded once per JVM (dlopen hands back the loaded copy, and
 * Agent_OnAttach runs again), so each call is one command:
 *
 *   start,interval=<ns>[,depth=N][,maxmem=MB][,timeout=S][,alloc=B][,file=P][,exit=P]
 *                                                          arm / re-arm
 *   (exit=P: when the JVM ends while armed, its last stacks are dumped to P,
 *    a fresh file, for the plugin to read once the process is gone)
 *   (alloc=B: also sample allocations about every B bytes per thread, JDK 11+)
 *   (wall: every Java thread on wall-clock timers, running or not; default:
 *    each thread on its CPU-time timer)
 *   (offcpu: wall-clock timers too; a thread found blocked in a system call
 *    is an O line, microseconds, instead of an S line unless wall)
 *   dump,file=<path>                                      write and clear the stacks
 *   (timeout=S: disarm by itself if no dump/start comes for S seconds)
 *   stop[,file=<path>]                                    dump if asked, then go dormant
 *
 * Dormant means: no timers, the handler stays installed but returns at once,
 * the caches stay (bounded) so a later session re-arms without re-scanning.
 * The dump is written synchronously inside Agent_OnAttach, so the attach
 * reply ("return code: 0") tells the plugin the file is complete.
 *
 * Dump file (one record per line, fields separated by tabs; frames by 0x1f,
 * leaf first, each prefixed by its type letter j/i/0/1/n/e):
 *   # polyprof-jvmti 1
 *   I key=value ...
 *   S <count> <tid> <thread name> <frames>
 *   O <microseconds> <tid> <thread name> <frames>      (offcpu)
 *   A <bytes> <samples> <allocated class> <frames>
 *   E <error text>
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"

#define JA_EXPORT __attribute__((visibility("default")))

static pthread_mutex_t agent_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static jvmtiEnv *jvmti;
static JavaVM *jvm;
static int initialized, init_failed, armed_now;
static char init_error[256];
static char vm_name[128], vm_version[128];
static int jdk_major;
static jfieldID eetop_field;
static int vmstructs_levels;

struct opts {
  int start, stop, dump;
  uint64_t interval_ns;
  int depth;
  long maxmem_mb;
  long timeout_s; /* watchdog; 0: none */
  long alloc;     /* allocation sampling interval, bytes; 0: off */
  int wall;       /* wall-clock timers */
  int offcpu;     /* blocked threads' stacks as off-CPU time (wall-clock timers) */
  char file[512];
  char exit_file[512];
};

/* where the stacks go when the JVM ends while armed ("" none) */
static char exit_path[512];

static void parse_opts(const char *s, struct opts *o) {
  memset(o, 0, sizeof(*o));
  o->interval_ns = 10000000;
  o->depth = 128;
  o->maxmem_mb = 24;
  if (!s) return;
  char buf[1100];
  snprintf(buf, sizeof(buf), "%s", s);
  char *save = NULL;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (strcmp(t, "start") == 0)
      o->start = 1;
    else if (strcmp(t, "stop") == 0)
      o->stop = 1;
    else if (strcmp(t, "dump") == 0)
      o->dump = 1;
    else if (strcmp(t, "wall") == 0)
      o->wall = 1;
    else if (strcmp(t, "offcpu") == 0)
      o->offcpu = 1;
    else if (strncmp(t, "interval=", 9) == 0)
      o->interval_ns = strtoull(t + 9, NULL, 10);
    else if (strncmp(t, "depth=", 6) == 0)
      o->depth = atoi(t + 6);
    else if (strncmp(t, "maxmem=", 7) == 0)
      o->maxmem_mb = atol(t + 7);
    else if (strncmp(t, "timeout=", 8) == 0)
      o->timeout_s = atol(t + 8);
    else if (strncmp(t, "alloc=", 6) == 0)
      o->alloc = atol(t + 6);
    else if (strncmp(t, "file=", 5) == 0)
      snprintf(o->file, sizeof(o->file), "%s", t + 5);
    else if (strncmp(t, "exit=", 5) == 0)
      snprintf(o->exit_file, sizeof(o->exit_file), "%s", t + 5);
  }
  if (o->interval_ns < 1000000) o->interval_ns = 1000000; /* at most 1 kHz per thread */
  if (o->depth < 1) o->depth = 1;
  if (o->depth > JA_MAX_DEPTH) o->depth = JA_MAX_DEPTH;
  if (o->maxmem_mb < 8) o->maxmem_mb = 8;
  if (o->maxmem_mb > 1024) o->maxmem_mb = 1024;
}

/* ---- JVMTI callbacks ---- */

static void *thread_ptr(JNIEnv *jni, jthread t) {
  if (!eetop_field || !t) return NULL;
  jlong v = (*jni)->GetLongField(jni, t, eetop_field);
  return (void *)(intptr_t)v;
}

static void JNICALL on_class_load(jvmtiEnv *j, JNIEnv *jni, jthread t, jclass k) {
  /* empty on purpose: AsyncGetCallTrace refuses to work unless some agent
   * has ClassLoad events enabled */
}

static void JNICALL on_class_prepare(jvmtiEnv *j, JNIEnv *jni, jthread t, jclass k) {
  pthread_mutex_lock(&agent_lock);
  if (initialized) ja_names_prepare_class(j, jni, k, 1);
  pthread_mutex_unlock(&agent_lock);
}

static int do_dump(JNIEnv *jni, FILE *f);
static FILE *open_out(const char *path);

/* The JVM is ending (main returned, System.exit): a short-lived JVM (javac,
 * a build step) would take every stack since the last dump with it. */
static void JNICALL on_vm_death(jvmtiEnv *j, JNIEnv *jni) {
  pthread_mutex_lock(&agent_lock);
  if (initialized && armed_now && ja_sampler_armed() && exit_path[0]) {
    armed_now = 0;
    ja_sampler_set_armed(0);
    ja_timers_stop_all();
    FILE *f = open_out(exit_path);
    if (f) {
      do_dump(jni, f);
      fclose(f);
    }
    exit_path[0] = '\0';
  }
  pthread_mutex_unlock(&agent_lock);
}

static void JNICALL on_thread_start(jvmtiEnv *j, JNIEnv *jni, jthread t) {
  pthread_mutex_lock(&agent_lock);
  if (initialized) {
    ja_thread_add(thread_ptr(jni, t));
    if (armed_now) ja_timer_add((pid_t)syscall(SYS_gettid));
  }
  pthread_mutex_unlock(&agent_lock);
}

static void JNICALL on_thread_end(jvmtiEnv *j, JNIEnv *jni, jthread t) {
  pthread_mutex_lock(&agent_lock);
  if (initialized) {
    ja_timer_remove((pid_t)syscall(SYS_gettid));
    ja_thread_remove(thread_ptr(jni, t));
  }
  pthread_mutex_unlock(&agent_lock);
}

static void JNICALL on_compiled_load(jvmtiEnv *j, jmethodID m, jint size, const void *addr,
                                     jint map_len, const jvmtiAddrLocationMap *map,
                                     const void *info) {
  pthread_mutex_lock(&agent_lock);
  if (initialized) ja_codecache_add(m, addr, size, ja_codecache_level_of(addr));
  pthread_mutex_unlock(&agent_lock);
}

static void JNICALL on_compiled_unload(jvmtiEnv *j, jmethodID m, const void *addr) {
  pthread_mutex_lock(&agent_lock);
  if (initialized) ja_codecache_remove(m, addr);
  pthread_mutex_unlock(&agent_lock);
}

static void JNICALL on_dynamic_code(jvmtiEnv *j, const char *name, const void *addr, jint len) {
  if (name && strcmp(name, "Interpreter") == 0) ja_codecache_set_interpreter(addr, len);
}

/* ---- init ---- */

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(init_error, sizeof(init_error), fmt, ap);
  va_end(ap);
  init_failed = 1;
  return -1;
}

static void prop(const char *key, char *out, size_t cap) {
  char *v = NULL;
  out[0] = '\0';
  if ((*jvmti)->GetSystemProperty(jvmti, key, &v) == JVMTI_ERROR_NONE && v) {
    snprintf(out, cap, "%s", v);
    (*jvmti)->Deallocate(jvmti, (unsigned char *)v);
  }
}

/* HotSpot keeps the current Thread* in a pthread key. Find that key by
 * looking for the attach thread's own JavaThread* (java.lang.Thread.eetop),
 * and the offset of the JNIEnv inside JavaThread, so the handler can get the
 * interrupted thread's JNIEnv without any call into the JVM. */
static int find_thread_key(JNIEnv *jni, pthread_key_t *key, ptrdiff_t *env_off) {
  jthread self = NULL;
  if ((*jvmti)->GetCurrentThread(jvmti, &self) != JVMTI_ERROR_NONE || !self) return -1;
  void *me = thread_ptr(jni, self);
  (*jni)->DeleteLocalRef(jni, self);
  if (!me) return -1;
  for (pthread_key_t k = 0; k < 1024; k++) {
    if (pthread_getspecific(k) == me) {
      *key = k;
      *env_off = (char *)jni - (char *)me;
      /* JNIEnv is a field of JavaThread: anything else is not the layout we know */
      return *env_off > 0 && *env_off < 65536 ? 0 : -1;
    }
  }
  return -1;
}

static int do_init(JNIEnv *jni, const struct opts *o) {
  prop("java.vm.name", vm_name, sizeof(vm_name));
  prop("java.vm.version", vm_version, sizeof(vm_version));
  char spec[32];
  prop("java.vm.specification.version", spec, sizeof(spec));
  jdk_major = strncmp(spec, "1.", 2) == 0 ? atoi(spec + 2) : atoi(spec);
  if (!strstr(vm_name, "HotSpot") && !strstr(vm_name, "OpenJDK") && !strstr(vm_name, "GraalVM"))
    return fail("unsupported JVM '%s' (HotSpot only)", vm_name);
  if (jdk_major < 8) return fail("unsupported Java version %s (8 or newer needed)", spec);

  void *asgct = dlsym(RTLD_DEFAULT, "AsyncGetCallTrace");
  if (!asgct) {
    void *h = dlopen("libjvm.so", RTLD_LAZY | RTLD_NOLOAD);
    if (h) asgct = dlsym(h, "AsyncGetCallTrace");
  }
  if (!asgct) return fail("%s", "AsyncGetCallTrace not found in libjvm");

  jclass thread_cls = (*jni)->FindClass(jni, "java/lang/Thread");
  if (thread_cls) eetop_field = (*jni)->GetFieldID(jni, thread_cls, "eetop", "J");
  (*jni)->ExceptionClear(jni);
  if (!eetop_field) return fail("%s", "java.lang.Thread.eetop not found");
  pthread_key_t key;
  ptrdiff_t env_off;
  if (find_thread_key(jni, &key, &env_off) != 0)
    return fail("%s", "cannot locate HotSpot's thread key (unknown JVM layout)");

  jvmtiCapabilities caps;
  memset(&caps, 0, sizeof(caps));
  caps.can_generate_compiled_method_load_events = 1;
  if ((*jvmti)->AddCapabilities(jvmti, &caps) != JVMTI_ERROR_NONE)
    return fail("%s", "JVMTI capability can_generate_compiled_method_load_events refused");

  size_t total = (size_t)o->maxmem_mb << 20;
  size_t names_bytes = total / 4, nmethods = 32768;
  size_t sampler_bytes = total - names_bytes - nmethods * 32;
  struct ja_sampler_config sc = {.depth = o->depth, .table_entries = 16384};
  size_t per_half = sampler_bytes / 2;
  sc.frame_capacity = (per_half - sc.table_entries * 48) / 9;
  if (ja_sampler_init(&sc, asgct, key, env_off) != 0 || ja_timers_init(8192) != 0 ||
      ja_codecache_init(nmethods) != 0 || ja_names_init(names_bytes, jdk_major <= 17) != 0)
    return fail("%s", "out of memory");
  vmstructs_levels = ja_codecache_vmstructs_init();
  ja_names_set_loaders(jni);

  char err[128];
  if (ja_sampler_install_handler(err, sizeof(err)) != 0) return fail("%s", err);

  jvmtiEventCallbacks cb;
  memset(&cb, 0, sizeof(cb));
  cb.ClassLoad = on_class_load;
  cb.ClassPrepare = on_class_prepare;
  cb.ThreadStart = on_thread_start;
  cb.ThreadEnd = on_thread_end;
  cb.CompiledMethodLoad = on_compiled_load;
  cb.CompiledMethodUnload = on_compiled_unload;
  cb.DynamicCodeGenerated = on_dynamic_code;
  cb.VMDeath = on_vm_death;
  if (jdk_major >= 11) cb.SampledObjectAlloc = ja_alloc_on_sample;
  (*jvmti)->SetEventCallbacks(jvmti, &cb, sizeof(cb));
  initialized = 1; /* callbacks may run from here on (they take agent_lock) */
  static const jvmtiEvent events[] = {JVMTI_EVENT_CLASS_LOAD,
                                      JVMTI_EVENT_CLASS_PREPARE,
                                      JVMTI_EVENT_THREAD_START,
                                      JVMTI_EVENT_THREAD_END,
                                      JVMTI_EVENT_COMPILED_METHOD_LOAD,
                                      JVMTI_EVENT_COMPILED_METHOD_UNLOAD,
                                      JVMTI_EVENT_DYNAMIC_CODE_GENERATED,
                                      JVMTI_EVENT_VM_DEATH};
  for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++)
    (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, events[i], NULL);

  /* classes and threads that exist already */
  jint n = 0;
  jclass *classes = NULL;
  if ((*jvmti)->GetLoadedClasses(jvmti, &n, &classes) == JVMTI_ERROR_NONE) {
    for (jint i = 0; i < n; i++) {
      ja_names_prepare_class(jvmti, jni, classes[i], 1);
      (*jni)->DeleteLocalRef(jni, classes[i]);
    }
    (*jvmti)->Deallocate(jvmti, (unsigned char *)classes);
  }
  jthread *threads = NULL;
  if ((*jvmti)->GetAllThreads(jvmti, &n, &threads) == JVMTI_ERROR_NONE) {
    for (jint i = 0; i < n; i++) {
      ja_thread_add(thread_ptr(jni, threads[i]));
      (*jni)->DeleteLocalRef(jni, threads[i]);
    }
    (*jvmti)->Deallocate(jvmti, (unsigned char *)threads);
  }
  (*jvmti)->GenerateEvents(jvmti, JVMTI_EVENT_DYNAMIC_CODE_GENERATED);
  (*jvmti)->GenerateEvents(jvmti, JVMTI_EVENT_COMPILED_METHOD_LOAD);
  return 0;
}

/* ---- dump ---- */

static void noop_trace(const struct ja_trace_view *v, void *arg) {}

struct tname {
  void *thread;
  char name[64];
};

struct dump_ctx {
  FILE *f;
  struct tname *names;
  jint nnames;
  uint64_t stacks;
};

static void clean_copy(char *dst, size_t cap, const char *s) {
  size_t i = 0;
  for (; s && s[i] && i + 1 < cap; i++) {
    unsigned char c = (unsigned char)s[i];
    dst[i] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
  }
  dst[i] = '\0';
}

static const char *error_frame(intptr_t code) {
  switch (code) {
    case 0:
      return "[no_Java_frame]";
    case -1:
      return "[no_class_load]";
    case -2:
      return "[GC_active]";
    case -3:
      return "[unknown_not_Java]";
    case -4:
      return "[not_walkable_not_Java]";
    case -5:
      return "[unknown_Java]";
    case -6:
      return "[not_walkable_Java]";
    case -7:
      return "[unknown_state]";
    case -8:
      return "[thread_exit]";
    case -9:
      return "[deoptimization]";
    case -10:
      return "[safepoint]";
    default:
      return "[unknown_error]";
  }
}

static void write_trace(const struct ja_trace_view *v, void *arg) {
  struct dump_ctx *c = arg;
  char tname[64] = "";
  if (v->thread) {
    for (jint i = 0; i < c->nnames; i++)
      if (c->names[i].thread == v->thread) {
        snprintf(tname, sizeof(tname), "%s", c->names[i].name);
        break;
      }
  }
  if (!tname[0]) {
    char path[64], comm[32] = "";
    snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)v->tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t r = read(fd, comm, sizeof(comm) - 1);
      comm[r > 0 ? r : 0] = '\0';
      close(fd);
    }
    clean_copy(tname, sizeof(tname), comm);
    size_t l = strlen(tname);
    while (l && tname[l - 1] == ' ')
      tname[--l] = '\0';
    if (!l) snprintf(tname, sizeof(tname), "[tid=%d]", (int)v->tid);
  }
  fprintf(c->f, "%c\t%llu\t%d\t%s\t", v->offcpu ? 'O' : 'S', (unsigned long long)v->count,
          (int)v->tid, tname);
  for (uint32_t i = 0; i < v->nframes; i++) {
    char t;
    const char *name;
    if (v->types[i] == JA_T_ERROR) {
      t = 'e';
      name = error_frame((intptr_t)v->methods[i]);
    } else {
      jmethodID m = (jmethodID)v->methods[i];
      name = ja_names_get(jvmti, m);
      switch (v->types[i]) {
        case JA_T_JIT:
          t = 'j';
          break;
        case JA_T_INLINED:
          t = 'i';
          break;
        case JA_T_INTERP:
          t = '0';
          break;
        case JA_T_C1:
          t = '1';
          break;
        case JA_T_NATIVE:
          t = 'n';
          break;
        default: {
          int lvl = ja_codecache_method_level(m);
          t = lvl < 0 ? '0' : lvl >= 1 && lvl <= 3 ? '1' : 'j';
        }
      }
    }
    fprintf(c->f, "%s%c%s", i ? "\x1f" : "", t, name);
  }
  fputc('\n', c->f);
  c->stacks++;
}

static FILE *open_out(const char *path) {
  if (!path[0]) return NULL;
  /* a fresh file only: never follow or reuse what someone left at that path */
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, "w");
  if (!f) close(fd);
  return f;
}

static void write_info(FILE *f) {
  size_t ne, nb;
  uint64_t unres;
  ja_names_stats(&ne, &nb, &unres);
  fprintf(f, "# polyprof-jvmti 1\n");
  fprintf(f,
          "I\tjdk=%d\tarmed=%d\ttimers=%zu\tnames=%zu\tname_bytes=%zu\tunresolved=%llu\t"
          "vmstructs_levels=%d\n",
          jdk_major, armed_now, ja_timers_count(), ne, nb, (unsigned long long)unres,
          vmstructs_levels);
}

static int do_dump(JNIEnv *jni, FILE *f) {
  struct dump_ctx c = {.f = f};
  jthread *threads = NULL;
  jint n = 0;
  if ((*jvmti)->GetAllThreads(jvmti, &n, &threads) == JVMTI_ERROR_NONE) {
    c.names = calloc((size_t)n + 1, sizeof(*c.names));
    for (jint i = 0; i < n; i++) {
      jvmtiThreadInfo ti;
      memset(&ti, 0, sizeof(ti));
      if (c.names && (*jvmti)->GetThreadInfo(jvmti, threads[i], &ti) == JVMTI_ERROR_NONE) {
        c.names[c.nnames].thread = thread_ptr(jni, threads[i]);
        clean_copy(c.names[c.nnames].name, sizeof(c.names[0].name), ti.name);
        c.nnames++;
        /* a thread started before ThreadStart was enabled and missed by
         * the attach-time scan is registered now */
        ja_thread_add(c.names[c.nnames - 1].thread);
      }
      if (ti.name) (*jvmti)->Deallocate(jvmti, (unsigned char *)ti.name);
      if (ti.thread_group) (*jni)->DeleteLocalRef(jni, ti.thread_group);
      if (ti.context_class_loader) (*jni)->DeleteLocalRef(jni, ti.context_class_loader);
      (*jni)->DeleteLocalRef(jni, threads[i]);
    }
    (*jvmti)->Deallocate(jvmti, (unsigned char *)threads);
  }
  ja_codecache_index_methods();
  struct ja_sampler_stats st = {0};
  if (f) write_info(f);
  ja_sampler_drain(f ? write_trace : noop_trace, &c, &st);
  ja_alloc_dump(jvmti, f);
  if (f)
    fprintf(f, "I\tsamples=%llu\tdropped=%llu\tno_java_thread=%llu\tstacks=%llu\n",
            (unsigned long long)st.samples, (unsigned long long)st.dropped,
            (unsigned long long)st.no_thread, (unsigned long long)c.stacks);
  free(c.names);
  return 0;
}

static jint command(JavaVM *vm, char *options) {
  struct opts o;
  parse_opts(options, &o);
  JNIEnv *jni = NULL;
  if ((*vm)->GetEnv(vm, (void **)&jni, JNI_VERSION_1_6) != JNI_OK) return 200;
  pthread_mutex_lock(&agent_lock);
  jint rc = 0;
  FILE *f = open_out(o.file);
  if (!initialized && !init_failed) {
    jvm = vm;
    if ((*vm)->GetEnv(vm, (void **)&jvmti, JVMTI_VERSION_1_2) != JNI_OK)
      fail("%s", "JVMTI 1.2 not available");
    else
      do_init(jni, &o);
  }
  if (!initialized) {
    if (f) fprintf(f, "# polyprof-jvmti 1\nE\t%s\n", init_error);
    rc = 200;
    goto out;
  }
  if (o.dump || o.stop) {
    if (o.dump || f) {
      do_dump(jni, f);
    } else {
      struct ja_sampler_stats st = {0};
      ja_sampler_drain(noop_trace, NULL, &st);
    }
  }
  if (o.stop) {
    exit_path[0] = '\0';
    armed_now = 0;
    ja_sampler_set_armed(0);
    ja_timers_stop_all();
    ja_alloc_stop(jvmti);
  }
  if (o.timeout_s > 0 && (o.start || o.dump))
    ja_sampler_set_deadline(ja_now_ns() + (uint64_t)o.timeout_s * 1000000000ull);
  if (o.start) {
    if (!o.timeout_s) ja_sampler_set_deadline(0);
    /* fresh timers for every thread: the watchdog may have deleted some */
    ja_timers_stop_all();
    ja_timers_set_interval(o.interval_ns, o.wall || o.offcpu);
    ja_sampler_set_wall(o.wall);
    ja_sampler_set_offcpu(o.offcpu, o.interval_ns);
    armed_now = 1;
    ja_sampler_set_armed(1);
    snprintf(exit_path, sizeof(exit_path), "%s", o.exit_file);
    ja_timers_rescan();
    if (f) write_info(f);
    char aerr[160];
    if (o.alloc <= 0)
      ja_alloc_stop(jvmti);
    else if (ja_alloc_start(jvmti, jdk_major, o.alloc, aerr, sizeof(aerr)) != 0 && f)
      fprintf(f, "W\t%s\n", aerr);
  } else if (armed_now) {
    ja_timers_rescan(); /* threads JVMTI did not announce (GC, compiler) */
  }
out:
  if (f) fclose(f);
  pthread_mutex_unlock(&agent_lock);
  return rc;
}

JA_EXPORT JNIEXPORT jint JNICALL Agent_OnAttach(JavaVM *vm, char *options, void *reserved) {
  return command(vm, options);
}

JA_EXPORT JNIEXPORT jint JNICALL Agent_OnLoad(JavaVM *vm, char *options, void *reserved) {
  /* -agentpath: at startup the VM is not live yet (no JNI calls, no
   * threads): only attach is supported */
  return 0;
}

JA_EXPORT JNIEXPORT void JNICALL Agent_OnUnload(JavaVM *vm) {
  ja_sampler_set_armed(0);
  ja_timers_stop_all();
}
