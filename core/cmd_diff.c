/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `polyprof diff BASE.col NEW.col -o diff.html`: a differential flame graph
 * (page: core/output/assets/diff.html). Stacks of both files are matched by
 * their text ("comm;frame;...;frame" with the .col suffixes); each file is
 * normalised by its own total samples, so a longer or busier NEW session
 * does not read as a regression.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cmd_tools.h"
#include "output/col.h"
#include "profile.h"
#include "support/safe_file.h"

extern const unsigned char pp_asset_diff_html[];
extern const size_t pp_asset_diff_html_len;

#define PLACEHOLDER "__PP_DIFF_DATA__"

struct diffset {
  json_t *frame_idx; /* frame text -> index */
  json_t *frames;    /* [text] */
  json_t *stack_idx; /* "i,j,k" -> index into stacks */
  json_t *stacks;    /* [[frames], base, new] */
};

static int add_profile(struct diffset *d, const struct pp_profile *p, int which, uint64_t *total) {
  char text[2048];
  size_t nst = pp_profile_stack_count(p);
  char *key = NULL;
  size_t keycap = 0;
  for (size_t i = 0; i < nst; i++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, i);
    if (!s->count) continue;
    *total += s->count;
    const struct pp_pid_rec *pr = pp_profile_pid(p, s->pid);
    uint32_t comm = s->comm != PP_NO_STR ? s->comm : pr ? pr->comm : PP_NO_STR;
    const uint32_t *fr = pp_profile_stack_frames(p, s);
    json_t *arr = json_array();
    size_t kl = 0;
    for (int64_t k = -1; k < (int64_t)s->nframes; k++) {
      size_t n;
      if (k < 0) {
        snprintf(text, sizeof(text), "%s", pp_profile_str(p, comm));
        n = strlen(text);
      } else {
        n = pp_frame_format(p, fr[k], text, sizeof(text), true);
      }
      json_t *ix = json_object_getn(d->frame_idx, text, n);
      if (!ix) {
        ix = json_integer((json_int_t)json_array_size(d->frames));
        json_array_append_new(d->frames, json_stringn(text, n));
        json_object_setn_new(d->frame_idx, text, n, ix);
      }
      json_array_append(arr, ix);
      if (kl + 24 > keycap) {
        keycap = keycap ? keycap * 2 : 4096;
        char *nk = realloc(key, keycap);
        if (!nk) {
          free(key);
          json_decref(arr);
          return -ENOMEM;
        }
        key = nk;
      }
      kl += (size_t)snprintf(key + kl, keycap - kl, "%lld,", (long long)json_integer_value(ix));
    }
    json_t *si = json_object_getn(d->stack_idx, key, kl);
    json_t *row;
    if (si) {
      row = json_array_get(d->stacks, (size_t)json_integer_value(si));
      json_decref(arr);
    } else {
      row = json_pack("[o,i,i]", arr, 0, 0);
      json_object_setn_new(d->stack_idx, key, kl,
                           json_integer((json_int_t)json_array_size(d->stacks)));
      json_array_append_new(d->stacks, row);
    }
    json_t *c = json_array_get(row, (size_t)(1 + which));
    json_integer_set(c, json_integer_value(c) + (json_int_t)s->count);
  }
  free(key);
  return 0;
}

struct diff_page {
  const char *page, *placeholder, *js;
};

/* The page with its placeholder replaced by the data. */
static int write_page(FILE *f, void *ctx) {
  const struct diff_page *d = ctx;
  if (!d->placeholder) return -EINVAL;
  fwrite(d->page, 1, (size_t)(d->placeholder - d->page), f);
  fputs(d->js, f);
  const char *rest = d->placeholder + strlen(PLACEHOLDER);
  fwrite(rest, 1, pp_asset_diff_html_len - (size_t)(rest - d->page), f);
  return 0;
}

int pp_cmd_diff(struct pp_config *cfg, const char *const *operands, size_t n) {
  if (n != 2) {
    fprintf(stderr, "polyprof: usage: polyprof diff BASE.col NEW.col [-o diff.html]\n");
    return 2;
  }
  const char *out = cfg->output_dir ? cfg->output_dir : "diff.html";
  struct pp_profile *base = pp_cmd_load_col(operands[0], NULL);
  struct pp_profile *cur = base ? pp_cmd_load_col(operands[1], NULL) : NULL;
  if (!cur) {
    pp_profile_free(base);
    return 1;
  }
  struct diffset d = {json_object(), json_array(), json_object(), json_array()};
  uint64_t bt = 0, nt = 0;
  int rc = add_profile(&d, base, 0, &bt);
  if (rc == 0) rc = add_profile(&d, cur, 1, &nt);
  json_t *data = json_pack("{s:s,s:s,s:I,s:I,s:O,s:O}", "base_name", operands[0], "new_name",
                           operands[1], "base_total", (json_int_t)bt, "new_total", (json_int_t)nt,
                           "frames", d.frames, "stacks", d.stacks);
  /* JSON_ESCAPE_SLASH: "</script>" inside a frame name cannot end the data
   * block */
  char *js = data ? json_dumps(data, JSON_COMPACT | JSON_ESCAPE_SLASH) : NULL;
  json_decref(data);
  json_decref(d.frame_idx);
  json_decref(d.frames);
  json_decref(d.stack_idx);
  json_decref(d.stacks);
  pp_profile_free(base);
  pp_profile_free(cur);
  if (rc < 0 || !js) {
    free(js);
    fprintf(stderr, "polyprof: diff: out of memory\n");
    return 1;
  }
  const char *page = (const char *)pp_asset_diff_html;
  const char *ph = memmem(page, pp_asset_diff_html_len, PLACEHOLDER, strlen(PLACEHOLDER));
  struct diff_page dp = {page, ph, js};
  rc = pp_safe_write_file(out, 0644, write_page, &dp);
  free(js);
  if (rc < 0) {
    fprintf(stderr, "polyprof: diff: %s: %s\n", out, strerror(-rc));
    return 1;
  }
  printf("wrote %s (base %llu samples, new %llu samples)\n", out, (unsigned long long)bt,
         (unsigned long long)nt);
  return 0;
}
