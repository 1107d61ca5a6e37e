/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-process application metadata computed by the core, keyed as the .col
 * header's application_metadata entries are (docs/gprofiler-compat.md):
 * runtime-specific keys first, then exe, execfn, arch. Nothing is executed
 * in or for the target: versions, which gProfiler got by running
 * `python -V` & co., are left to the runtime plugins, which report them
 * through the sink (set_app_metadata) and are merged over these.
 */
#ifndef PP_APP_METADATA_H
#define PP_APP_METADATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "appid.h"

/* The metadata object for a live process, or NULL when gProfiler would have
 * none for it (no runtime profiler covers it: unknown runtime, PHP) or the
 * process is gone. `exe` is the readlink of /proc/PID/exe (NULL to read it
 * here). With force_base, unknown runtimes still get exe/execfn/arch (used
 * when a plugin supplied metadata for the pid). */
json_t *pp_app_metadata_collect(uint32_t pid, enum pp_runtime rt, const char *exe, bool force_base);

/* A new object: `core`'s keys, overridden / extended by the keys of the JSON
 * object text `plugin_json` (NULL or unparsable: ignored); the plugin wins on
 * conflicts. Either may be NULL; NULL if both are empty. */
json_t *pp_app_metadata_merge(const json_t *core, const char *plugin_json);

/* ELF facts read from an open file: all fields filled as far as found. */
struct pp_elf_facts {
  int elf_class;      /* 1 = 32-bit, 2 = 64-bit */
  unsigned machine;   /* e_machine */
  bool dynamic;       /* has PT_INTERP */
  char interp[256];   /* PT_INTERP path, "" if none */
  char build_id[129]; /* hex of NT_GNU_BUILD_ID, "" if none */
};
/* 0, -ENOEXEC (not ELF / malformed), or -errno. */
int pp_elf_facts_fd(int fd, struct pp_elf_facts *out);
/* uname-style name of an e_machine: "x86_64", "aarch64", ...; NULL if unknown. */
const char *pp_elf_machine_name(unsigned machine);

/* AT_EXECFN of a process: the path passed to execve, read from the
 * process's memory (process_vm_readv) at the address in /proc/PID/auxv.
 * elf_class: 1 or 2 (the target's word size). 0 or -errno. */
int pp_proc_execfn(uint32_t pid, int elf_class, char *buf, size_t len);

#endif /* PP_APP_METADATA_H */
