/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runtime-plugin kit: what every in-tree plugin is built from, and
 * what polyprof-dev installs for third-party plugins (headers here, the
 * static library libpolyprof-kit.a, `pkg-config --cflags --libs
 * polyprof-plugin`). docs/plugin-sdk.md is its guide.
 *
 * The plugin ABI itself is polyprof/plugin.h alone; the kit is ordinary
 * code linked into the plugin, so using it changes nothing of the ABI.
 */
#ifndef POLYPROF_KIT_H
#define POLYPROF_KIT_H

#include "polyprof/plugin.h"

#include "polyprof/kit/cap_step.h"        /* capabilities raised for one step only */
#include "polyprof/kit/debug_frame.h"     /* .debug_frame / .eh_frame tables for the unwinder */
#include "polyprof/kit/demangle.h"        /* C++ and Rust symbol names */
#include "polyprof/kit/elf_lookup.h"      /* symbols and sections of a mapped file */
#include "polyprof/kit/elf_symbols.h"     /* address -> symbol tables, build-ids, debug files */
#include "polyprof/kit/hash.h"            /* an integer hash for tables keyed by addresses */
#include "polyprof/kit/heap.h"            /* handing freed heap back after a snapshot */
#include "polyprof/kit/jitdump.h"         /* JIT symbol logs (jit-PID.dump) */
#include "polyprof/kit/json.h"            /* JSON strings for application metadata */
#include "polyprof/kit/kallsyms.h"        /* kernel symbols */
#include "polyprof/kit/log.h"             /* PP_LOG and friends, the clock */
#include "polyprof/kit/maps.h"            /* /proc/PID/maps */
#include "polyprof/kit/options.h"         /* option values, defaults from the options table */
#include "polyprof/kit/pe_r2r.h"          /* names of precompiled .NET code (ReadyToRun images) */
#include "polyprof/kit/perfmap.h"         /* perf maps (perf-PID.map) */
#include "polyprof/kit/proc.h"            /* small bounded /proc readers */
#include "polyprof/kit/proc_tree.h"       /* the processes below one process */
#include "polyprof/kit/remote.h"          /* reading another process's memory, its modules */
#include "polyprof/kit/stack_table.h"     /* (pid, tid, comm, frames) -> count, emitted at once */
#include "polyprof/kit/target_files.h"    /* the one safe way into a target's files */
#include "polyprof/kit/target_table.h"    /* the target lifecycle: attach, retry, exec, exit */
#include "polyprof/kit/thread_cpu.h"      /* is this thread on a CPU */
#include "polyprof/kit/thread_snapshot.h" /* one thread held an instant: registers, stack top */
/* polyprof/kit/unwind.h (DWARF unwinding of perf stack copies) needs
 * libpolyprof-kit-unwind.a and libunwind: included on demand. */

#endif
