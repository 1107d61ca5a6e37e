/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The YAML reader: the file becomes a small tree with line numbers, checked
 * for shape (one document, no aliases, bounded size and depth, unique keys),
 * then applied: core sections through pp_config_set, plugin sections stored
 * raw for pp_config_bind_plugin.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "config.h"
#include "config_alloc.h"

#define MAX_FILE_BYTES (1024 * 1024)
#define MAX_DEPTH 16 /* the schema needs 3; anything deeper is a mistake */

/* The file as a small tree, so keys can be checked with their positions
 * before anything is applied (libyaml's document API would expand aliases). */
struct ynode {
  yaml_node_type_t kind;
  int line, col;       /* 1-based */
  char *text;          /* scalars */
  bool null;           /* plain empty, "~" or "null" */
  struct ynode **kids; /* sequence items; mapping: key, value, key, value... */
  size_t n, cap;
};

static void ynode_free(struct ynode *y) {
  if (!y) return;
  for (size_t i = 0; i < y->n; i++)
    ynode_free(y->kids[i]);
  free(y->kids);
  free(y->text);
  free(y);
}

static void ynode_add(struct ynode *parent, struct ynode *kid) {
  if (parent->n == parent->cap) {
    parent->cap = parent->cap ? parent->cap * 2 : 8;
    parent->kids = realloc(parent->kids, parent->cap * sizeof(*parent->kids));
    if (!parent->kids) abort();
  }
  parent->kids[parent->n++] = kid;
}

static const char *describe(const struct ynode *y, char *buf, size_t len) {
  if (y->kind == YAML_MAPPING_NODE) return "a mapping";
  if (y->kind == YAML_SEQUENCE_NODE) return "a list";
  if (y->null) return "nothing";
  snprintf(buf, len, "'%.40s%s'", y->text, strlen(y->text) > 40 ? "..." : "");
  return buf;
}

static void syntax_error(const yaml_parser_t *p, const char *path, char err[PP_MAX_ERR]) {
  if (p->error == YAML_MEMORY_ERROR) {
    snprintf(err, PP_MAX_ERR, "%s: out of memory while parsing", path);
  } else if (p->error == YAML_READER_ERROR) {
    snprintf(err, PP_MAX_ERR, "%s: byte %zu: %s", path, p->problem_offset,
             p->problem ? p->problem : "unreadable text");
  } else if (p->context) {
    snprintf(err, PP_MAX_ERR, "%s:%zu:%zu: YAML syntax error: %s (%s on line %zu)", path,
             p->problem_mark.line + 1, p->problem_mark.column + 1, p->problem ? p->problem : "?",
             p->context, p->context_mark.line + 1);
  } else {
    snprintf(err, PP_MAX_ERR, "%s:%zu:%zu: YAML syntax error: %s", path, p->problem_mark.line + 1,
             p->problem_mark.column + 1, p->problem ? p->problem : "?");
  }
}

static int cmp_keys(const void *a, const void *b) {
  const struct ynode *x = *(const struct ynode *const *)a, *y = *(const struct ynode *const *)b;
  int c = strcmp(x->text, y->text);
  return c ? c : x->line - y->line;
}

/* Keys must be non-empty scalars and unique. Sorting keeps a file with
 * thousands of keys from taking quadratic time. */
static int check_mapping(const struct ynode *m, const char *parent, const char *path,
                         char err[PP_MAX_ERR]) {
  size_t nkeys = m->n / 2;
  for (size_t i = 0; i < nkeys; i++) {
    const struct ynode *k = m->kids[2 * i];
    if (k->kind != YAML_SCALAR_NODE || k->null || !*k->text) {
      snprintf(err, PP_MAX_ERR, "%s:%d: keys must be plain names", path, k->line);
      return -1;
    }
  }
  if (nkeys < 2) return 0;
  const struct ynode **sorted = xcalloc(nkeys, sizeof(*sorted));
  for (size_t i = 0; i < nkeys; i++)
    sorted[i] = m->kids[2 * i];
  qsort(sorted, nkeys, sizeof(*sorted), cmp_keys);
  const struct ynode *dup = NULL, *first = NULL;
  for (size_t i = 1, start = 0; i < nkeys; i++) {
    if (strcmp(sorted[i]->text, sorted[start]->text) != 0) {
      start = i;
      continue;
    }
    if (!dup || sorted[i]->line < dup->line) { /* report the earliest repeat */
      dup = sorted[i];
      first = sorted[start];
    }
  }
  free(sorted);
  if (!dup) return 0;
  snprintf(err, PP_MAX_ERR, "%s:%d: %s%s%s: duplicate key (first set on line %d)", path, dup->line,
           parent ? parent : "", parent ? "." : "", dup->text, first->line);
  return -1;
}

static struct ynode *parse_tree(yaml_parser_t *p, const char *path, char err[PP_MAX_ERR], int *rc) {
  struct ynode *root = NULL, *stack[MAX_DEPTH];
  int depth = 0, docs = 0;
  *rc = -1;
  for (;;) {
    yaml_event_t ev;
    if (!yaml_parser_parse(p, &ev)) {
      syntax_error(p, path, err);
      break;
    }
    int line = (int)ev.start_mark.line + 1, col = (int)ev.start_mark.column + 1;
    struct ynode *y = NULL;
    bool bad = false, done = false;
    switch (ev.type) {
      case YAML_STREAM_END_EVENT:
        done = true;
        break;
      case YAML_DOCUMENT_START_EVENT:
        if (++docs > 1) {
          snprintf(err, PP_MAX_ERR, "%s:%d: only one YAML document is allowed", path, line);
          bad = true;
        }
        break;
      case YAML_ALIAS_EVENT:
        snprintf(err, PP_MAX_ERR, "%s:%d:%d: aliases (*%s) are not supported", path, line, col,
                 (const char *)ev.data.alias.anchor);
        bad = true;
        break;
      case YAML_SCALAR_EVENT: {
        const char *v = (const char *)ev.data.scalar.value;
        size_t len = ev.data.scalar.length;
        if (memchr(v, '\0', len)) {
          snprintf(err, PP_MAX_ERR, "%s:%d:%d: value contains a NUL character", path, line, col);
          bad = true;
          break;
        }
        y = xcalloc(1, sizeof(*y));
        y->kind = YAML_SCALAR_NODE;
        y->text = xstrdup(v);
        y->null = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
                  (len == 0 || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") ||
                   !strcmp(v, "NULL"));
        break;
      }
      case YAML_SEQUENCE_START_EVENT:
      case YAML_MAPPING_START_EVENT:
        if (depth == MAX_DEPTH) {
          snprintf(err, PP_MAX_ERR, "%s:%d:%d: nested more than %d levels deep", path, line, col,
                   MAX_DEPTH);
          bad = true;
          break;
        }
        y = xcalloc(1, sizeof(*y));
        y->kind = ev.type == YAML_MAPPING_START_EVENT ? YAML_MAPPING_NODE : YAML_SEQUENCE_NODE;
        break;
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT:
        depth--;
        if (stack[depth]->kind == YAML_MAPPING_NODE) {
          /* a section's keys are named "section.key" in messages */
          const struct ynode *up = depth ? stack[depth - 1] : NULL;
          const char *parent =
              up && up->kind == YAML_MAPPING_NODE && up->n >= 2 ? up->kids[up->n - 2]->text : NULL;
          bad = check_mapping(stack[depth], parent, path, err) < 0;
        }
        break;
      default:
        break;
    }
    yaml_event_delete(&ev);
    if (y) {
      y->line = line;
      y->col = col;
      if (depth)
        ynode_add(stack[depth - 1], y);
      else
        root = y; /* one document at most, so one root */
      if (y->kind != YAML_SCALAR_NODE) stack[depth++] = y;
    }
    if (bad) break;
    if (done) {
      *rc = 0;
      break;
    }
  }
  return root;
}

static bool is_core_section(const char *name) {
  for (size_t i = 0; pp_config_sections[i]; i++)
    if (strcmp(pp_config_sections[i], name) == 0) return true;
  return false;
}

/* The items of a YAML list value, or -1 if one of them is not a plain value. */
static int seq_items(const struct ynode *seq, char ***items, size_t *n) {
  *items = xcalloc(seq->n + 1, sizeof(**items));
  *n = seq->n;
  for (size_t i = 0; i < seq->n; i++) {
    if (seq->kids[i]->kind != YAML_SCALAR_NODE || seq->kids[i]->null) {
      strv_free(*items);
      *items = NULL;
      return -1;
    }
    (*items)[i] = xstrdup(seq->kids[i]->text);
  }
  return 0;
}

static void fail_at(char err[PP_MAX_ERR], const char *path, int line, const char *key,
                    const char *msg) {
  snprintf(err, PP_MAX_ERR, "%s:%d: %s: %s", path, line, key, msg);
}

static int apply_core_section(struct pp_config *c, const char *path, const struct ynode *name,
                              const struct ynode *body, char err[PP_MAX_ERR]) {
  char buf[64];
  if (body->kind == YAML_SCALAR_NODE && body->null) return 0;
  if (body->kind != YAML_MAPPING_NODE) {
    snprintf(err, PP_MAX_ERR, "%s:%d: %s: expected a mapping of settings, got %s", path, name->line,
             name->text, describe(body, buf, sizeof(buf)));
    return -1;
  }
  for (size_t i = 0; i + 1 < body->n; i += 2) {
    const struct ynode *k = body->kids[i], *val = body->kids[i + 1];
    char dotted[128], msg[96];
    snprintf(dotted, sizeof(dotted), "%s.%.100s", name->text, k->text);
    struct pp_config_value v = {.key = dotted, .origin = path, .line = k->line};
    const char *type = pp_config_key_type(dotted); /* NULL: pp_config_set reports it */
    if (type && val->kind == YAML_MAPPING_NODE) {
      snprintf(msg, sizeof(msg), "expected %s, got a mapping", type);
      fail_at(err, path, k->line, dotted, msg);
      return -1;
    }
    if (val->kind == YAML_SEQUENCE_NODE) {
      if (seq_items(val, &v.items, &v.item_count) < 0) {
        fail_at(err, path, k->line, dotted, "list items must be plain values");
        return -1;
      }
    } else if (val->kind == YAML_SCALAR_NODE && !val->null) {
      v.scalar = val->text;
    }
    int rc = pp_config_set(c, &v, err);
    strv_free(v.items);
    if (rc < 0) return -1;
  }
  return 0;
}

static struct pp_plugin_section *plugin_section(struct pp_config *c, const char *name) {
  for (size_t i = 0; i < c->section_count; i++)
    if (strcmp(c->sections[i].name, name) == 0) return &c->sections[i];
  c->sections = realloc(c->sections, (c->section_count + 1) * sizeof(*c->sections));
  if (!c->sections) abort();
  struct pp_plugin_section *s = &c->sections[c->section_count++];
  memset(s, 0, sizeof(*s));
  s->name = xstrdup(name);
  return s;
}

static bool valid_plugin_name(const char *s) {
  if (!*s) return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_')) return false;
  return true;
}

/* Stored as text with positions; only the plugin's descriptor can say
 * which keys and types are right (pp_config_bind_plugin). */
static int apply_plugin_section(struct pp_config *c, const char *path, const struct ynode *name,
                                const struct ynode *body, char err[PP_MAX_ERR]) {
  char buf[64];
  if (!valid_plugin_name(name->text)) {
    size_t n = 0;
    while (pp_config_sections[n])
      n++;
    const char *s = pp_config_suggest(name->text, pp_config_sections, n);
    if (s)
      snprintf(err, PP_MAX_ERR, "%s:%d: %s: unknown section (did you mean '%s'?)", path, name->line,
               name->text, s);
    else
      snprintf(err, PP_MAX_ERR,
               "%s:%d: %s: unknown section (expected profiling, output, enrichment, agent, "
               "logging, plugins, upload or a plugin name of [a-z0-9_])",
               path, name->line, name->text);
    return -1;
  }
  if (body->kind != YAML_MAPPING_NODE && !(body->kind == YAML_SCALAR_NODE && body->null)) {
    snprintf(err, PP_MAX_ERR, "%s:%d: %s: expected a mapping of plugin settings, got %s", path,
             name->line, name->text, describe(body, buf, sizeof(buf)));
    return -1;
  }
  struct pp_plugin_section *s = plugin_section(c, name->text);
  s->line = name->line;
  s->origin = path;
  if (body->kind != YAML_MAPPING_NODE) return 0;
  for (size_t i = 0; i + 1 < body->n; i += 2) {
    const struct ynode *k = body->kids[i], *val = body->kids[i + 1];
    struct pp_config_value v = {.origin = path, .line = k->line};
    if (val->kind == YAML_SCALAR_NODE && val->null) continue; /* "key:" keeps the default */
    if (val->kind == YAML_MAPPING_NODE ||
        (val->kind == YAML_SEQUENCE_NODE && seq_items(val, &v.items, &v.item_count) < 0)) {
      snprintf(err, PP_MAX_ERR, "%s:%d: %s.%s: expected a value or a list of values, got %s", path,
               k->line, name->text, k->text,
               val->kind == YAML_MAPPING_NODE ? "a mapping" : "a nested list");
      return -1;
    }
    if (val->kind == YAML_SCALAR_NODE) v.scalar = xstrdup(val->text);
    v.key = xstrdup(k->text);
    s->values = realloc(s->values, (s->count + 1) * sizeof(*s->values));
    if (!s->values) abort();
    s->values[s->count++] = v;
  }
  return 0;
}

static int apply_tree(struct pp_config *c, const char *path, const struct ynode *root,
                      char err[PP_MAX_ERR]) {
  char buf[64];
  if (!root || (root->kind == YAML_SCALAR_NODE && root->null)) return 0; /* empty file */
  if (root->kind != YAML_MAPPING_NODE) {
    snprintf(err, PP_MAX_ERR, "%s:%d: expected sections such as 'profiling:', got %s", path,
             root->line, describe(root, buf, sizeof(buf)));
    return -1;
  }
  for (size_t i = 0; i + 1 < root->n; i += 2) {
    const struct ynode *name = root->kids[i], *body = root->kids[i + 1];
    int rc = is_core_section(name->text) ? apply_core_section(c, path, name, body, err)
                                         : apply_plugin_section(c, path, name, body, err);
    if (rc < 0) return -1;
  }
  return 0;
}

/* Whole file into memory, bounded: 1 for "absent and that is fine". */
static int read_file(const char *path, bool required, char **out, size_t *len,
                     char err[PP_MAX_ERR]) {
  FILE *f = fopen(path, "re");
  if (!f) {
    if (errno == ENOENT && !required) return 1;
    snprintf(err, PP_MAX_ERR, "%s: cannot open the config file: %s", path, strerror(errno));
    return -1;
  }
  char *buf = xcalloc(MAX_FILE_BYTES + 1, 1);
  size_t n = fread(buf, 1, MAX_FILE_BYTES + 1, f);
  int rerr = ferror(f) ? errno : 0;
  fclose(f);
  if (rerr) {
    snprintf(err, PP_MAX_ERR, "%s: cannot read the config file: %s", path, strerror(rerr));
    free(buf);
    return -1;
  }
  if (n > MAX_FILE_BYTES) {
    snprintf(err, PP_MAX_ERR, "%s: larger than %d KiB, which no config file needs", path,
             MAX_FILE_BYTES / 1024);
    free(buf);
    return -1;
  }
  *out = buf;
  *len = n;
  return 0;
}

int pp_config_load(struct pp_config *c, const char *path, bool required, char err[PP_MAX_ERR]) {
  char *buf;
  size_t len;
  err[0] = '\0';
  int rc = read_file(path, required, &buf, &len, err);
  if (rc) return rc > 0 ? 0 : -1;

  /* value origins point at this copy, which lives as long as c */
  c->files = realloc(c->files, (c->file_count + 1) * sizeof(*c->files));
  if (!c->files) abort();
  char *origin = c->files[c->file_count++] = xstrdup(path);
  free(c->config_path);
  c->config_path = xstrdup(path);

  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) abort();
  yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
  struct ynode *root = parse_tree(&parser, origin, err, &rc);
  yaml_parser_delete(&parser);
  if (rc == 0) rc = apply_tree(c, origin, root, err);
  ynode_free(root);
  free(buf);
  return rc;
}
