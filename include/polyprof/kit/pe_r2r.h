/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Names of precompiled .NET code (ReadyToRun) from the image file alone.
 *
 * A .NET assembly compiled ahead of time (most of the framework, MSBuild,
 * Roslyn, apps published with PublishReadyToRun) is a PE file whose code
 * the runtime maps from the file; the runtime's perf map lists only code
 * its JIT compiled, so without this a sample in that code reads as the
 * assembly's path. The image itself says which method each piece of code
 * belongs to: its READYTORUN header lists the code blocks
 * (RUNTIME_FUNCTIONS), which MethodDef row each non-generic method's code
 * is (METHODDEF_ENTRYPOINTS) and which method each generic instantiation's
 * code is (INSTANCE_METHOD_ENTRYPOINTS), and its ECMA-335 metadata names
 * the MethodDef rows. pp_r2r_load reads all of that once into a table
 * sorted by code address; a lookup is a binary search.
 *
 * Names are "Namespace.Type.Method", nested types joined with '+', generic
 * types with the arity suffix the metadata carries ("Dictionary`2"); the
 * instantiation of generic code is not part of the name (every
 * instantiation of Dictionary`2.TryInsert reads the same). Code of methods
 * named only in another module's metadata (cross-module inlining) has no
 * name here. Components of a composite image (their code lives in another
 * file) and composite images are refused.
 *
 * The file is hostile: every offset, count and index is checked, sizes are
 * capped, a malformed image is refused with a reason, never a crash.
 */
#ifndef POLYPROF_KIT_PE_R2R_H
#define POLYPROF_KIT_PE_R2R_H

#include <stddef.h>
#include <stdint.h>

struct pp_r2r;

/* 0 if the file open at fd is a PE image with a CLI (.NET) header, else
 * -ENOEXEC (or -EIO). Reads only the headers. */
int pp_r2r_probe(int fd);

/* Builds the table of the ReadyToRun image open at fd (the fd stays the
 * caller's and is not kept). max_bytes caps what is read from the file to
 * build it (metadata and R2R sections; 0: 256 MiB). Returns 0, -ENOEXEC
 * (not a PE .NET image, or malformed: why says what), -ENOTSUP (a .NET
 * image without precompiled code, a composite image or one of its
 * components: why says which), -EFBIG (over max_bytes), -ENOMEM, -EIO. */
int pp_r2r_load(int fd, size_t max_bytes, struct pp_r2r **out, char *why, size_t why_cap);
void pp_r2r_free(struct pp_r2r *t);

/* The RVA (image-relative address) of a file offset, through the section
 * table: the runtime maps each section from the file, so a sampled pc is a
 * file offset through its mapping. -ERANGE if no section holds it. */
int pp_r2r_offset_to_rva(const struct pp_r2r *t, uint64_t offset, uint32_t *rva);

/* Name of the method whose code holds rva, or NULL. *start (optional) gets
 * the RVA of the method's entry (its funclets and cold part answer with
 * the entry of the method they belong to). The name stays valid until
 * pp_r2r_free. */
const char *pp_r2r_lookup(const struct pp_r2r *t, uint32_t rva, uint32_t *start);

/* Code blocks with a name, all code blocks, and the table's heap size. */
size_t pp_r2r_count(const struct pp_r2r *t);
size_t pp_r2r_blocks(const struct pp_r2r *t);
size_t pp_r2r_bytes(const struct pp_r2r *t);
/* Generic instantiations whose entry could not be read (a signature this
 * reader does not decode, or a malformed table): their code reads as the
 * method before it, so a non-zero count says names may be off. */
size_t pp_r2r_skipped(const struct pp_r2r *t);

#endif
