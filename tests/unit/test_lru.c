/* SPDX-License-Identifier: Apache-2.0 */
/* The bounded LRU cache: recency order, eviction, replacement, NULL values,
 * ownership (values freed exactly once), and a randomized comparison with a
 * naive model. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lru.h"
#include "testlib.h"

static int freed;
static void count_free(void *v) {
  freed++;
  free(v);
}

static int *boxed(int v) {
  int *p = malloc(sizeof(*p));
  *p = v;
  return p;
}

static void test_basic(void) {
  freed = 0;
  struct pp_lru *c = pp_lru_new(3, count_free);
  CHECK(c != NULL);
  CHECK_EQ_INT(pp_lru_capacity(c), 3);
  CHECK_EQ_INT(pp_lru_put_str(c, "a", boxed(1)), 0);
  CHECK_EQ_INT(pp_lru_put_str(c, "b", boxed(2)), 0);
  CHECK_EQ_INT(pp_lru_put_str(c, "c", boxed(3)), 0);
  CHECK_EQ_INT(pp_lru_count(c), 3);
  void *v = NULL;
  CHECK(pp_lru_lookup_str(c, "a", &v) && *(int *)v == 1); /* a is now most recent */
  CHECK_EQ_INT(pp_lru_put_str(c, "d", boxed(4)), 0);      /* evicts b */
  CHECK_EQ_INT(freed, 1);
  CHECK(!pp_lru_lookup_str(c, "b", NULL));
  CHECK(pp_lru_lookup_str(c, "a", NULL));
  CHECK(pp_lru_lookup_str(c, "c", NULL));
  CHECK(pp_lru_lookup_str(c, "d", NULL));
  CHECK_EQ_INT(pp_lru_count(c), 3);

  /* replacing frees the old value, keeps the count */
  CHECK_EQ_INT(pp_lru_put_str(c, "c", boxed(33)), 0);
  CHECK_EQ_INT(freed, 2);
  CHECK_EQ_INT(*(int *)pp_lru_get(c, "c", 1), 33);
  CHECK_EQ_INT(pp_lru_count(c), 3);

  /* a stored NULL is a hit (a cached "unknown") */
  CHECK_EQ_INT(pp_lru_put_str(c, "n", NULL), 0); /* evicts the LRU: a */
  CHECK_EQ_INT(freed, 3);
  v = (void *)1;
  CHECK(pp_lru_lookup_str(c, "n", &v));
  CHECK(v == NULL);
  CHECK(!pp_lru_lookup_str(c, "a", NULL));

  CHECK(pp_lru_remove(c, "d", 1));
  CHECK(!pp_lru_remove(c, "d", 1));
  CHECK_EQ_INT(freed, 4);
  CHECK_EQ_INT(pp_lru_count(c), 2);
  pp_lru_clear(c);
  CHECK_EQ_INT(pp_lru_count(c), 0);
  CHECK_EQ_INT(freed, 5); /* c; n was NULL */
  CHECK_EQ_INT(pp_lru_put_str(c, "x", boxed(9)), 0);
  pp_lru_free(c);
  CHECK_EQ_INT(freed, 6);
}

static void test_pid_keys(void) {
  struct pp_lru *c = pp_lru_new(0, NULL); /* capacity 0 means 1 */
  CHECK_EQ_INT(pp_lru_capacity(c), 1);
  struct pp_lru_pid_key k1 = pp_lru_pid_key(42, 1000), k2 = pp_lru_pid_key(42, 2000);
  pp_lru_put(c, &k1, sizeof(k1), (void *)1);
  CHECK(pp_lru_get(c, &k1, sizeof(k1)) == (void *)1);
  CHECK(pp_lru_get(c, &k2, sizeof(k2)) == NULL); /* same pid, other process */
  pp_lru_put(c, &k2, sizeof(k2), (void *)2);
  CHECK(!pp_lru_lookup(c, &k1, sizeof(k1), NULL)); /* evicted, capacity 1 */
  CHECK(pp_lru_get(c, &k2, sizeof(k2)) == (void *)2);
  /* empty key is a valid key */
  pp_lru_put(c, "", 0, (void *)3);
  CHECK(pp_lru_get(c, "", 0) == (void *)3);
  pp_lru_free(c);
}

/* Random operations against a tiny reference model (array ordered by use). */
static void test_random(void) {
  enum { CAP = 17, KEYS = 60, OPS = 20000 };
  struct pp_lru *c = pp_lru_new(CAP, NULL);
  int model[CAP], n = 0; /* model[0] = most recent */
  unsigned seed = 12345;
  int mismatches = 0;
  for (int op = 0; op < OPS; op++) {
    seed = seed * 1103515245u + 12345u;
    int k = (int)((seed >> 16) % KEYS);
    bool put = ((seed >> 8) & 3) != 0;
    int pos = -1;
    for (int i = 0; i < n; i++)
      if (model[i] == k) pos = i;
    if (put) {
      pp_lru_put(c, &k, sizeof(k), (void *)(intptr_t)(k + 1));
      if (pos < 0) {
        if (n == CAP) n--;
        pos = n++;
      }
      memmove(model + 1, model, (size_t)pos * sizeof(int));
      model[0] = k;
    } else {
      void *v = NULL;
      bool hit = pp_lru_lookup(c, &k, sizeof(k), &v);
      if (hit != (pos >= 0) || (hit && v != (void *)(intptr_t)(k + 1))) mismatches++;
      if (pos >= 0) {
        memmove(model + 1, model, (size_t)pos * sizeof(int));
        model[0] = k;
      }
    }
    if ((int)pp_lru_count(c) != n) mismatches++;
  }
  CHECK_EQ_INT(mismatches, 0);
  pp_lru_free(c);
}

static bool drop_odd(const void *key, size_t key_len, void *value, void *ctx) {
  (void)key;
  (void)key_len;
  (*(int *)ctx)++;
  return *(int *)value % 2 != 0;
}

static void test_remove_if(void) {
  freed = 0;
  struct pp_lru *c = pp_lru_new(8, count_free);
  const char *keys[] = {"a", "b", "c", "d", "e", "f"};
  for (int i = 0; i < 6; i++)
    pp_lru_put_str(c, keys[i], boxed(i));
  pp_lru_get(c, "a", 1); /* a most recent: f e d c b a -> a f e d c b */
  int calls = 0;
  CHECK_EQ_INT(pp_lru_remove_if(c, drop_odd, &calls), 3); /* b, d, f */
  CHECK_EQ_INT(calls, 6);
  CHECK_EQ_INT(freed, 3);
  CHECK_EQ_INT(pp_lru_count(c), 3);
  CHECK(pp_lru_lookup_str(c, "b", NULL) == false);
  CHECK(pp_lru_lookup_str(c, "f", NULL) == false);
  /* the survivors keep their order: c is the oldest, then e, then a */
  pp_lru_put_str(c, "x", boxed(10));
  pp_lru_put_str(c, "y", boxed(12));
  pp_lru_put_str(c, "z", boxed(14));
  pp_lru_put_str(c, "w", boxed(16));
  pp_lru_put_str(c, "v", boxed(18));
  pp_lru_put_str(c, "u", boxed(20)); /* 9th entry: evicts c */
  CHECK(pp_lru_lookup_str(c, "c", NULL) == false);
  CHECK(pp_lru_lookup_str(c, "e", NULL) == true);
  CHECK_EQ_INT(pp_lru_remove_if(c, NULL, NULL), 0);
  CHECK_EQ_INT(pp_lru_remove_if(NULL, drop_odd, &calls), 0);
  pp_lru_free(c);
}

int main(void) {
  test_basic();
  test_remove_if();
  test_pid_keys();
  test_random();
  return pp_test_finish("test_lru");
}
