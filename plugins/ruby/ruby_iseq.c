/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Ruby frames out of iseqs: label, path and the line of a pc.
 *
 * What an iseq says once -- its label, its path, where its line table is --
 * is kept per (pid, iseq) in a bounded table, so a pc first seen in a known
 * iseq costs the two line-table reads only. The pcs a sample's frame cache
 * missed are resolved together, one batched read per step for all of them
 * (iseq -> body, body, index of the line entry, line), so a sample that
 * meets 20 new pcs costs about four system calls, not eighty. This matters
 * for the first samples of every new process, where everything is new.
 *
 * An iseq address can be reused (GC, compaction) for another iseq: a kept
 * table is used only for pcs that point into its instructions, else the
 * body is read again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "polyprof/kit/remote.h"
#include "ruby.h"

#define ISEQ_BODY 16
#define BODY_PATHOBJ 64
#define BODY_LABEL 80
#define BODY_READ 256 /* covers every field we use in every layout */
#define SUCC_READ_MAX 80
#define ROUND 64 /* misses per batched read: process_vm_readv's iovecs here */
#define T_MASK 0x1fu
#define T_STRING 0x05u
#define T_ARRAY 0x07u
#define QNIL 0x08ull

static size_t pow2_at_least(size_t n) {
  size_t c = 16;
  while (c < n)
    c *= 2;
  return c;
}

/* ---- the (pid, iseq) table: open addressing, cleared when 3/4 full ---- */

int ruby_iseqs_init(struct ruby_iseqs *c, size_t cap) {
  memset(c, 0, sizeof(*c));
  c->cap = pow2_at_least(cap);
  c->v = malloc(c->cap * sizeof(*c->v));
  if (!c->v) return -ENOMEM;
  ruby_iseqs_clear(c);
  return 0;
}

void ruby_iseqs_free(struct ruby_iseqs *c) {
  free(c->v);
  memset(c, 0, sizeof(*c));
}

void ruby_iseqs_clear(struct ruby_iseqs *c) {
  for (size_t i = 0; i < c->cap; i++)
    c->v[i].name = RUBY_NO_ID;
  c->used = 0;
}

void ruby_iseqs_forget_pid(struct ruby_iseqs *c, uint32_t pid) {
  for (size_t i = 0; i < c->cap; i++)
    if (c->v[i].name != RUBY_NO_ID && c->v[i].pid == pid) {
      ruby_iseqs_clear(c); /* linear probing has no cheap delete (rare) */
      return;
    }
}

static size_t iseq_pos(const struct ruby_iseqs *c, uint32_t pid, uint64_t iseq) {
  uint64_t x = iseq ^ ((uint64_t)pid << 47);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x & (c->cap - 1);
}

static struct ruby_iseq_ent *iseq_slot(struct ruby_iseqs *c, uint32_t pid, uint64_t iseq) {
  size_t mask = c->cap - 1;
  for (size_t pos = iseq_pos(c, pid, iseq), probes = 0; probes < c->cap;
       pos = (pos + 1) & mask, probes++) {
    struct ruby_iseq_ent *e = &c->v[pos];
    if (e->name == RUBY_NO_ID || (e->pid == pid && e->iseq == iseq)) return e;
  }
  return NULL;
}

static struct ruby_iseq_ent *iseq_find(struct ruby_iseqs *c, uint32_t pid, uint64_t iseq) {
  struct ruby_iseq_ent *e = iseq_slot(c, pid, iseq);
  return e && e->name != RUBY_NO_ID ? e : NULL;
}

static void iseq_put(struct ruby_iseqs *c, uint32_t pid, uint64_t iseq, uint32_t name,
                     const struct ruby_lines *ln) {
  if (c->used + 1 > c->cap / 4 * 3) ruby_iseqs_clear(c);
  struct ruby_iseq_ent *e = iseq_slot(c, pid, iseq);
  if (!e) return;
  if (e->name == RUBY_NO_ID) c->used++;
  *e = (struct ruby_iseq_ent){.iseq = iseq, .pid = pid, .name = name, .lines = *ln};
}

/* ---- batched reads ---- */

/* Reads every piece in one system call; if that fails (one torn or
 * unmapped pointer fails the whole call), each piece alone, so a bad one
 * costs only itself. ok[i] says which arrived. -ESRCH: the process is gone. */
static int read_pieces(const struct ruby_target *t, const struct pp_remote_iov *iov, uint32_t n,
                       bool *ok) {
  if (n == 0) return 0;
  int rc = pp_remote_readv((pid_t)t->pid, iov, n);
  for (uint32_t i = 0; i < n; i++)
    ok[i] = rc == 0;
  if (rc == 0) return 0;
  if (rc == -ESRCH) return rc;
  for (uint32_t i = 0; i < n; i++) {
    rc = pp_remote_read((pid_t)t->pid, iov[i].addr, iov[i].buf, iov[i].len);
    if (rc == -ESRCH) return rc;
    ok[i] = rc == 0;
  }
  return 0;
}

/* ---- names: once per iseq body ---- */

/* Path of an iseq: pathobj is the path String, or [path, realpath]; the
 * absolute realpath is what rbspy prints when there is one. */
static int read_path(const struct ruby_target *t, uint64_t pathobj, char *buf, size_t cap) {
  uint64_t flags;
  int rc = pp_remote_read((pid_t)t->pid, pathobj, &flags, sizeof(flags));
  if (rc < 0) return rc;
  if ((flags & T_MASK) == T_STRING) return ruby_read_string(t, pathobj, buf, cap);
  if ((flags & T_MASK) != T_ARRAY) return -EINVAL;
  uint64_t real = QNIL, rel = QNIL;
  if (ruby_array_at(t, pathobj, 1, &real) == 0 && real != QNIL && ruby_heap_ptr(real)) {
    rc = ruby_read_string(t, real, buf, cap);
    if (rc > 0) return rc;
  }
  rc = ruby_array_at(t, pathobj, 0, &rel);
  if (rc < 0) return rc;
  return ruby_read_string(t, rel, buf, cap);
}

/* Paths read while learning one batch of iseqs. Every iseq of a file
 * shares one path object, so the first sample of a process, which meets
 * all its iseqs at once, reads each file's path once instead of its two
 * or three objects again for every method of the file. Only within one
 * batch, read at one moment: across samples GC compaction may move a path
 * and give its old address to another file's path. */
struct path_memo {
  uint64_t obj[ROUND];
  uint32_t id[ROUND];
  uint32_t n;
};

/* String id of an iseq's path into *f (RUBY_NO_ID: the path is empty);
 * -errno if unreadable. */
static int path_id(struct ruby_state *st, struct ruby_target *t, struct path_memo *memo,
                   uint64_t pathobj, uint32_t *f) {
  for (uint32_t i = 0; i < memo->n; i++)
    if (memo->obj[i] == pathobj) {
      *f = memo->id[i];
      return 0;
    }
  char path[RUBY_STR_MAX];
  int len = read_path(t, pathobj, path, sizeof(path));
  if (len < 0) return len;
  *f = RUBY_NO_ID; /* no path: a frame without a file */
  if (len > 0) {
    *f = ruby_strings_intern(&st->strings, path, (size_t)len);
    if (*f == RUBY_NO_ID) return -ENOSPC;
  }
  if (memo->n < ROUND) {
    memo->obj[memo->n] = pathobj;
    memo->id[memo->n++] = *f;
  }
  return 0;
}

/* Frame id (line 0) carrying the label and path of an iseq body. Label
 * and path belong to the body: keyed by the body and the label object's
 * addresses (tagged odd: never a pc), both from the body just read, so a
 * body freed and its address reused does not inherit the old name. */
static uint32_t body_name(struct ruby_state *st, struct ruby_target *t, struct path_memo *memo,
                          uint64_t body, const unsigned char *b) {
  uint64_t label_obj = ruby_rd64(b + BODY_LABEL);
  uint32_t id = ruby_cache_get(&st->iseq_cache, t->pid, body, label_obj | 1);
  if (id != RUBY_NO_ID) return id;
  char label[RUBY_STR_MAX];
  if (ruby_read_string(t, label_obj, label, sizeof(label)) <= 0) return RUBY_NO_ID;
  uint32_t n = ruby_strings_intern(&st->strings, label, strlen(label)), f;
  if (n == RUBY_NO_ID || path_id(st, t, memo, ruby_rd64(b + BODY_PATHOBJ), &f) < 0)
    return RUBY_NO_ID;
  struct ruby_frame fr = {.name = n, .file = f, .line = 0, .kind = PP_FRAME_RUBY};
  id = ruby_frames_add(&st->frames, &fr);
  if (id != RUBY_NO_ID) ruby_cache_put(&st->iseq_cache, t->pid, body, label_obj | 1, id);
  return id;
}

/* Reads the bodies of the iseqs in `need` (two batched reads) and keeps
 * what they say. Those that cannot be read stay unknown. */
static int learn_iseqs(struct ruby_state *st, struct ruby_target *t, const uint64_t *need,
                       uint32_t n) {
  struct pp_remote_iov iov[ROUND];
  bool ok[ROUND];
  uint64_t body[ROUND];
  unsigned char b[ROUND][BODY_READ];
  for (uint32_t i = 0; i < n; i++)
    iov[i] = (struct pp_remote_iov){.addr = need[i] + ISEQ_BODY, .buf = &body[i], .len = 8};
  int rc = read_pieces(t, iov, n, ok);
  if (rc < 0) return rc;
  uint32_t m = 0, which[ROUND];
  for (uint32_t i = 0; i < n; i++) {
    if (!ok[i] || !ruby_heap_ptr(body[i])) continue;
    iov[m] = (struct pp_remote_iov){.addr = body[i], .buf = b[m], .len = BODY_READ};
    which[m++] = i;
  }
  rc = read_pieces(t, iov, m, ok);
  if (rc < 0) return rc;
  struct path_memo memo;
  memo.n = 0;
  for (uint32_t k = 0; k < m; k++) {
    if (!ok[k]) continue;
    struct ruby_lines ln;
    ruby_lines_parse(t, b[k], BODY_READ, &ln); /* no table: lines fall back to the first */
    uint32_t name = body_name(st, t, &memo, body[which[k]], b[k]);
    if (name != RUBY_NO_ID) iseq_put(&st->iseqs, t->pid, need[which[k]], name, &ln);
  }
  return 0;
}

/* ---- lines: once per (iseq, pc) ---- */

struct pc_job {
  uint64_t iseq, pc;
  const struct ruby_iseq_ent *ent;
  uint64_t pos;
  uint32_t line;
  uint32_t id;
};

/* Line tables this small (insn-info entries, bytes) are read whole in the
 * same batched read as the entry indexes, so a pc first seen in a small
 * method -- most of them -- costs one read, not two. */
#define ENTRIES_WHOLE_MAX 256

/* Lines of the jobs' pcs: the entry indexes in one batched read (with the
 * whole entry table of small iseqs), the line numbers of the others in
 * another. */
static int find_lines(struct ruby_target *t, struct pc_job *job, uint32_t n) {
  struct pp_remote_iov iov[2 * ROUND];
  bool ok[2 * ROUND];
  unsigned char succ[ROUND][SUCC_READ_MAX];
  unsigned char ents[ROUND][ENTRIES_WHOLE_MAX];
  uint32_t len[ROUND], elen[ROUND], m = 0, which[2 * ROUND];
  bool is_ents[2 * ROUND];
  int32_t line[ROUND];
  const uint64_t esize = (uint64_t)t->L->ii_entry_size;
  for (uint32_t i = 0; i < n; i++) {
    const struct ruby_lines *ln = &job[i].ent->lines;
    job[i].line = 0;
    len[i] = elen[i] = 0;
    int64_t pos = ruby_lines_pos(ln, job[i].pc);
    if (pos < 0) continue;
    job[i].pos = (uint64_t)pos;
    if (t->L->line_kind == RUBY_LINES_POSITIONS) {
      job[i].line = ruby_lines_lookup(t, ln, job[i].pc); /* 2.5: scanned, unbatched */
      continue;
    }
    uint64_t addr;
    ruby_lines_succ_read(ln, job[i].pos, &addr, &len[i]);
    if (len[i]) {
      iov[m] = (struct pp_remote_iov){.addr = addr, .buf = succ[i], .len = len[i]};
      is_ents[m] = false;
      which[m++] = i;
    }
    /* nentries is bounded by ruby_lines_parse, so the product cannot wrap */
    if (esize && (uint64_t)ln->nentries * esize <= ENTRIES_WHOLE_MAX) {
      elen[i] = (uint32_t)((uint64_t)ln->nentries * esize);
      iov[m] = (struct pp_remote_iov){.addr = ln->entries, .buf = ents[i], .len = elen[i]};
      is_ents[m] = true;
      which[m++] = i;
    }
  }
  int rc = read_pieces(t, iov, m, ok);
  if (rc < 0) return rc;
  bool got[ROUND], got_ents[ROUND];
  for (uint32_t i = 0; i < n; i++) {
    got[i] = len[i] == 0;
    got_ents[i] = false;
  }
  for (uint32_t k = 0; k < m; k++) {
    if (is_ents[k])
      got_ents[which[k]] = ok[k];
    else
      got[which[k]] = ok[k];
  }
  m = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (!got[i] || job[i].line || t->L->line_kind == RUBY_LINES_POSITIONS) continue;
    const struct ruby_lines *ln = &job[i].ent->lines;
    if (!ln->nentries || ruby_lines_pos(ln, job[i].pc) < 0) continue;
    uint64_t at =
        ruby_lines_entry_line(t, ln, ruby_lines_succ_index(ln, job[i].pos, succ[i], len[i]));
    if (!at) continue;
    uint64_t off = at - ln->entries; /* at lies in the table: entry_line bounds the index */
    if (got_ents[i] && off + sizeof(int32_t) <= elen[i]) {
      int32_t v;
      memcpy(&v, ents[i] + off, sizeof(v));
      if (v > 0) job[i].line = (uint32_t)v;
      continue;
    }
    iov[m] = (struct pp_remote_iov){.addr = at, .buf = &line[m], .len = sizeof(line[m])};
    which[m++] = i;
  }
  rc = read_pieces(t, iov, m, ok);
  if (rc < 0) return rc;
  for (uint32_t k = 0; k < m; k++)
    if (ok[k] && line[k] > 0) job[which[k]].line = (uint32_t)line[k];
  return 0;
}

/* ---- one round: up to ROUND misses ---- */

static int resolve_round(struct ruby_state *st, struct ruby_target *t, const struct ruby_miss *m,
                         uint32_t n) {
  /* iseqs not known yet, or whose kept table does not hold the pc */
  uint64_t need[ROUND];
  uint32_t nneed = 0;
  for (uint32_t i = 0; i < n; i++) {
    const struct ruby_iseq_ent *e = iseq_find(&st->iseqs, t->pid, m[i].iseq);
    if (e && ruby_lines_has(&e->lines, m[i].pc)) continue;
    uint32_t k = 0;
    while (k < nneed && need[k] != m[i].iseq)
      k++;
    if (k == nneed) need[nneed++] = m[i].iseq;
  }
  int rc = learn_iseqs(st, t, need, nneed);
  if (rc < 0) return rc;
  /* distinct (iseq, pc) of the round */
  struct pc_job job[ROUND];
  uint32_t njob = 0, of[ROUND];
  for (uint32_t i = 0; i < n; i++) {
    uint32_t k = 0;
    while (k < njob && (job[k].iseq != m[i].iseq || job[k].pc != m[i].pc))
      k++;
    of[i] = k;
    if (k < njob) continue;
    const struct ruby_iseq_ent *e = iseq_find(&st->iseqs, t->pid, m[i].iseq);
    job[njob++] = (struct pc_job){.iseq = m[i].iseq, .pc = m[i].pc, .ent = e, .id = RUBY_NO_ID};
  }
  /* jobs without a known iseq are left out of the line reads */
  struct pc_job known[ROUND];
  uint32_t nknown = 0, back[ROUND];
  for (uint32_t k = 0; k < njob; k++)
    if (job[k].ent) {
      back[nknown] = k;
      known[nknown++] = job[k];
    }
  rc = find_lines(t, known, nknown);
  if (rc < 0) return rc;
  for (uint32_t j = 0; j < nknown; j++) {
    struct pc_job *jb = &job[back[j]];
    const struct ruby_frame *name = &st->frames.v[jb->ent->name];
    /* what Ruby itself reports without a position: the first line */
    uint32_t line = known[j].line ? known[j].line : jb->ent->lines.first_line;
    struct ruby_frame fr = {
        .name = name->name, .file = name->file, .line = line, .kind = PP_FRAME_RUBY};
    jb->id = ruby_frames_add(&st->frames, &fr);
    if (jb->id != RUBY_NO_ID) ruby_cache_put(&st->iseq_cache, t->pid, jb->iseq, jb->pc, jb->id);
  }
  for (uint32_t i = 0; i < n; i++)
    st->ids[m[i].slot] = job[of[i]].id;
  return 0;
}

int ruby_iseq_resolve(struct ruby_state *st, struct ruby_target *t, const struct ruby_miss *m,
                      uint32_t n) {
  for (uint32_t at = 0; at < n;) {
    /* a miss an earlier round resolved (deep recursion: the same pc many
     * times) is a cache hit now */
    uint32_t id = ruby_cache_get(&st->iseq_cache, t->pid, m[at].iseq, m[at].pc);
    if (id != RUBY_NO_ID) {
      st->ids[m[at].slot] = id;
      at++;
      continue;
    }
    uint32_t k = n - at < ROUND ? n - at : ROUND;
    int rc = resolve_round(st, t, m + at, k);
    if (rc < 0) return rc;
    at += k;
  }
  return 0;
}
