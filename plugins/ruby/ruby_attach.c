/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Attaching to a Ruby process: find the ruby executable and libruby in its
 * maps, opened through the kit's identity-checked access to the target's
 * files (pp_find_module: its root, so containers work, and never a file
 * planted over the path), read `ruby_version`, choose the layout, find the
 * VM and the running-EC slot, and locate the global symbol table for C
 * method names, the way rbspy does.
 *
 * These are the target table's attach and release callbacks. Nothing here
 * stops or signals the target; a process still loading (no libruby yet, VM
 * pointer still NULL) answers -EAGAIN and the table retries it with
 * backoff, a bounded number of times.
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "polyprof/kit/elf_lookup.h"
#include "polyprof/kit/log.h"
#include "polyprof/kit/proc.h"
#include "polyprof/kit/remote.h"
#include "ruby.h"

enum { SYM_VERSION, SYM_VM_PTR, SYM_EC_PTR, SYM_GLOBAL_SYMBOLS, SYM_GLOBAL_SYMBOLS_OLD, SYM_COUNT };
static const char *const sym_names[SYM_COUNT] = {"ruby_version", "ruby_current_vm_ptr",
                                                 "ruby_current_execution_context_ptr",
                                                 "ruby_global_symbols", "global_symbols"};

#define DATA_SCAN_MAX (256u << 10) /* .data of libruby is < 1 KB on Debian */

/* Looks the symbols up in one module; fills only what is still missing, so
 * the executable (looked at first) wins over libruby, as in rbspy. */
static void lookup_in(const struct pp_module *m, uint64_t *addr) {
  uint64_t vals[SYM_COUNT] = {0};
  if (pp_elf_lookup_symbols(m->fd, sym_names, SYM_COUNT, 0, vals, NULL) <= 0) return;
  for (int i = 0; i < SYM_COUNT; i++)
    if (!addr[i] && vals[i]) addr[i] = vals[i] + m->bias;
}

/* rb_symbols_t {u32 last_id; st_table *str_sym; VALUE ids; VALUE
 * dsymbol_fstr_hash} is an initialised global, so it sits in .data. Debian
 * hides its symbol; find it by shape and prove it by resolving the operator
 * IDs '*' and '+' (their serials are their characters). */
static uint64_t scan_global_symbols(struct ruby_target *t, const struct pp_module *m) {
  uint64_t vaddr = 0, size = 0;
  if (pp_elf_find_section(m->fd, ".data", &vaddr, &size) < 0 || size < 32) return 0;
  if (size > DATA_SCAN_MAX) size = DATA_SCAN_MAX;
  unsigned char *buf = malloc(size);
  if (!buf) return 0;
  uint64_t found = 0;
  if (pp_remote_read((pid_t)t->pid, vaddr + m->bias, buf, size) == 0) {
    for (uint64_t off = 0; off + 32 <= size && !found; off += 8) {
      uint64_t w0 = ruby_rd64(buf + off), ids = ruby_rd64(buf + off + 16);
      uint32_t last_id = (uint32_t)w0;
      if ((w0 >> 32) != 0 || last_id <= (uint32_t)t->L->last_op_id || last_id > (1u << 26))
        continue;
      if (!ruby_heap_ptr(ruby_rd64(buf + off + 8)) || !ruby_heap_ptr(ids)) continue;
      t->global_symbols = vaddr + m->bias + off;
      char a[8], b[8];
      if (ruby_id_name(t, '*', a, sizeof(a)) == 1 && a[0] == '*' &&
          ruby_id_name(t, '+', b, sizeof(b)) == 1 && b[0] == '+')
        found = t->global_symbols;
      t->global_symbols = 0;
    }
  }
  free(buf);
  return found;
}

/* 3.x: the running EC is the word before threads.main in the main ractor.
 * Trust the table offset if threads.main is where it says; otherwise look
 * for the main thread pointer near it, as rbspy does. */
static int find_running_ec(struct ruby_target *t) {
  const struct ruby_layout *L = t->L;
  unsigned char vmh[48];
  int rc = pp_remote_read((pid_t)t->pid, t->vm, vmh, sizeof(vmh));
  if (rc < 0) return rc;
  t->main_ractor = ruby_rd64(vmh + L->vm_main_ractor);
  uint64_t main_thread = ruby_rd64(vmh + L->vm_ractor_main_thread);
  if (!ruby_heap_ptr(t->main_ractor) || !ruby_heap_ptr(main_thread)) return -EAGAIN;
  enum { FROM = 256, WORDS = 96 };
  uint64_t w[WORDS];
  rc = pp_remote_read((pid_t)t->pid, t->main_ractor + FROM, w, sizeof(w));
  if (rc < 0) return rc;
  int at = (L->ractor_main - FROM) / 8;
  if (at > 0 && at < WORDS && w[at] == main_thread) {
    t->running_ec_off = L->ractor_running_ec;
    return 0;
  }
  for (int i = 1; i < WORDS; i++) {
    if (w[i] == main_thread) {
      t->running_ec_off = FROM + (i - 1) * 8;
      return 0;
    }
  }
  return -ENOENT;
}

/* Why a module could not be used, when it was found but refused. */
struct refusal {
  char why[160];
};

static int attach_modules(struct ruby_state *st, struct ruby_target *t, const char *exe,
                          const struct pp_module *exe_mod, int have_exe,
                          const struct pp_module *lib_mod, int have_lib,
                          const struct refusal *refused);

/* The module whose basename matches pattern, or a refusal reason when it is
 * mapped but its file could not be opened safely. */
static int find_module(struct ruby_target *t, const char *pattern, struct pp_module *m,
                       struct refusal *refused) {
  char why[sizeof(refused->why)] = "";
  int rc = pp_find_module(t->pid, pattern, m, why, sizeof(why));
  if (rc == 0) return 1;
  if (rc == -ESRCH) return rc;
  if (rc != -ENOENT && !refused->why[0])
    snprintf(refused->why, sizeof(refused->why), "%s", why[0] ? why : strerror(-rc));
  return 0;
}

static int find_vm(struct ruby_state *st, struct ruby_target *t) {
  char exe[PATH_MAX] = "";
  int rc = pp_proc_exe(t->pid, exe, sizeof(exe));
  if (rc < 0) return rc == -ENOENT ? -ESRCH : rc;
  const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
  char pattern[NAME_MAX + 8];
  /* fnmatch metacharacters in a hostile exe name must match literally */
  size_t j = 0;
  for (const char *p = base; *p && j + 3 < sizeof(pattern); p++) {
    if (*p == '*' || *p == '?' || *p == '[' || *p == '\\') pattern[j++] = '\\';
    pattern[j++] = *p;
  }
  pattern[j] = '\0';

  static struct pp_module exe_mod, lib_mod; /* large (PATH_MAX): not on the stack */
  exe_mod.fd = lib_mod.fd = -1;             /* closed below even when not looked up */
  struct refusal refused = {""};
  int have_exe = find_module(t, pattern, &exe_mod, &refused);
  int have_lib = have_exe < 0 ? have_exe : find_module(t, "libruby*.so*", &lib_mod, &refused);
  if (have_exe < 0 || have_lib < 0) {
    rc = -ESRCH;
  } else if (!have_lib && !refused.why[0] && fnmatch("ruby*", base, 0) != 0) {
    /* no libruby and not a ruby executable: a process that exec'd into
     * something else (a ruby* process without Ruby is still reported) */
    rc = PP_ATTACH_IGNORE;
  } else {
    rc = attach_modules(st, t, exe, &exe_mod, have_exe, &lib_mod, have_lib, &refused);
  }
  pp_module_close(&exe_mod);
  pp_module_close(&lib_mod);
  return rc;
}

static void target_free(struct ruby_state *st, struct ruby_target *t) {
  if (!t) return;
  if (t->threads) ruby_threads_close(st, t);
  free(t->threads);
  pp_thread_cpu_free(t->cpu);
  ruby_cache_forget_pid(&st->iseq_cache, t->pid);
  ruby_cache_forget_pid(&st->cfunc_cache, t->pid);
  ruby_iseqs_forget_pid(&st->iseqs, t->pid);
  free(t);
}

int ruby_attach(void *plugin, struct pp_target_entry *e) {
  struct ruby_state *st = plugin;
  struct ruby_target *t = calloc(1, sizeof(*t));
  if (!t) return -ENOMEM;
  t->entry = e;
  t->pid = e->pid;
  t->start_time = e->start_time;
  t->pthread_tid_off = -1;
  t->threads = calloc((size_t)st->max_threads, sizeof(*t->threads));
  t->cpu = pp_thread_cpu_new(e->pid, (uint32_t)st->max_threads);
  if (!t->threads || !t->cpu) {
    target_free(st, t);
    return -ENOMEM;
  }
  if (pp_proc_ns_pid(t->pid, &t->ns_pid) < 0) t->ns_pid = t->pid;
  int rc = find_vm(st, t);
  if (rc == 0) {
    e->data = t;
    ruby_sync_alarms(st, t);
    return 0;
  }
  target_free(st, t);
  if (rc == -ENOTSUP) {
    PP_INFO(st->host, "pid %u: %s", e->pid, e->reason);
    return PP_ATTACH_SKIP;
  }
  if (rc == PP_ATTACH_IGNORE || rc == -ESRCH) return rc;
  if (rc == -EAGAIN && e->attempts < (uint32_t)st->attach_retries) return rc;
  if (rc != -EAGAIN || !e->reason[0])
    snprintf(e->reason, sizeof(e->reason), "cannot attach: %s", strerror(-rc));
  PP_WARNING(st->host, "pid %u: %s", e->pid, e->reason);
  return PP_ATTACH_FAIL;
}

void ruby_target_release(void *plugin, struct pp_target_entry *e) {
  target_free(plugin, e->data);
  e->data = NULL;
}

static int attach_modules(struct ruby_state *st, struct ruby_target *t, const char *exe,
                          const struct pp_module *exe_mod, int have_exe,
                          const struct pp_module *lib_mod, int have_lib,
                          const struct refusal *refused) {
  int rc;
  uint64_t addr[SYM_COUNT] = {0};
  if (have_exe) lookup_in(exe_mod, addr);
  if (have_lib) lookup_in(lib_mod, addr);

  if (!addr[SYM_VERSION] && refused->why[0]) {
    /* a file was mapped but not opened: say why, it may be the one */
    snprintf(t->entry->reason, sizeof(t->entry->reason), "Couldn't get ruby version: %s",
             refused->why);
    return -EAGAIN;
  }
  if (!addr[SYM_VERSION]) {
    snprintf(t->entry->reason, sizeof(t->entry->reason),
             "Couldn't get ruby version: no ruby_version symbol in %.100s%s",
             have_exe ? exe_mod->path : exe, have_lib ? " or libruby" : " (no libruby mapped)");
    return -EAGAIN;
  }
  char version[16] = "";
  rc = (int)pp_remote_read_str((pid_t)t->pid, addr[SYM_VERSION], version, sizeof(version));
  if (rc < 0) {
    snprintf(t->entry->reason, sizeof(t->entry->reason), "Couldn't get ruby version: %s",
             strerror(-rc));
    return rc == -ESRCH ? rc : -EAGAIN;
  }
  for (char *p = version; *p; p++)
    if (!((*p >= '0' && *p <= '9') || *p == '.')) *p = '\0'; /* "3.1.2" only */
  snprintf(t->version, sizeof(t->version), "%s", version);
  t->L = ruby_layout_for(version, NULL);
  if (!t->L) {
    snprintf(t->entry->reason, sizeof(t->entry->reason),
             "Ruby version %s not supported (supported: %s)", version[0] ? version : "?",
             ruby_layout_supported());
    return -ENOTSUP;
  }
  if (!addr[SYM_VM_PTR]) {
    snprintf(t->entry->reason, sizeof(t->entry->reason), "Ruby %s: no ruby_current_vm_ptr symbol",
             version);
    return -ENOTSUP;
  }
  t->vm_ptr_addr = addr[SYM_VM_PTR];
  rc = pp_remote_read((pid_t)t->pid, t->vm_ptr_addr, &t->vm, sizeof(t->vm));
  if (rc < 0 || !ruby_heap_ptr(t->vm)) {
    snprintf(t->entry->reason, sizeof(t->entry->reason), "Ruby %s: VM not initialised yet",
             version);
    return rc == -ESRCH ? rc : -EAGAIN;
  }
  t->ec_ptr_addr = addr[SYM_EC_PTR];
  if (t->L->vm_main_ractor >= 0) {
    rc = find_running_ec(t);
    if (rc < 0) {
      snprintf(t->entry->reason, sizeof(t->entry->reason),
               "Ruby %s: cannot find the running thread (%s)", version, strerror(-rc));
      return rc == -ESRCH ? rc : -EAGAIN;
    }
  }
  ruby_find_pthread_tid(st, t);
  if (t->L->vm_main_ractor < 0 && !t->ec_ptr_addr &&
      (t->L->vm_living_threads < 0 || !ruby_tids_known(st, t))) {
    /* 2.x: without the EC global, only the thread list could lead to the
     * stacks, and it needs the tids */
    snprintf(t->entry->reason, sizeof(t->entry->reason),
             "Ruby %s: no ruby_current_execution_context_ptr symbol", version);
    return -ENOTSUP;
  }

  if (st->cfunc_names) {
    t->global_symbols =
        addr[SYM_GLOBAL_SYMBOLS] ? addr[SYM_GLOBAL_SYMBOLS] : addr[SYM_GLOBAL_SYMBOLS_OLD];
    if (!t->global_symbols && have_lib) t->global_symbols = scan_global_symbols(t, lib_mod);
    if (!t->global_symbols && have_exe) t->global_symbols = scan_global_symbols(t, exe_mod);
  }
  ruby_threads_refresh(st, t);
  char via[48] = "";
  if (t->pthread_tid_off >= 0)
    snprintf(via, sizeof(via), ", tids via struct pthread +%d", t->pthread_tid_off);
  PP_INFO(st->host, "pid %u: Ruby %s (%s), layout %s, C method names %s, %u thread(s)%s%s", t->pid,
          version, have_lib ? lib_mod->path : exe_mod->path, t->L->series,
          t->global_symbols ? "resolved" : "unavailable", t->nthreads, via,
          t->per_thread ? "" : " (sampling the GVL holder only)");
  return 0;
}
