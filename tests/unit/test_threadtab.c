/* tests/unit/test_threadtab.c -- the models' tables by trace thread
 * (sim/threadtab.c): new entries are copies of the blank, the table grows
 * to the dense ids a trace uses, and a sparse id is refused against the
 * memory bound before anything is allocated, the message naming the id,
 * the table it would need and the limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sim/threadtab.h"

typedef struct rec_s {
  int32_t  arena;
  uint32_t count;
} rec_t;

static void new_entries_are_copies_of_the_blank(void **state) {
  (void)state;
  static const rec_t blank = {.arena = -1};
  rec_t             *v = NULL;
  size_t             cap = 0;
  assert_int_equal(
      sim_threadtab_reach((void **)&v, &cap, 5, sizeof *v, &blank, 0, NULL),
      AS_OK);
  assert_true(cap > 5);
  v[5].count = 7;
  assert_int_equal(
      sim_threadtab_reach((void **)&v, &cap, 63, sizeof *v, &blank, 0, NULL),
      AS_OK);
  assert_true(cap >= 64);
  assert_int_equal(v[5].count, 7); /* kept across growth */
  for (size_t i = 6; i < cap; i++)
    assert_int_equal(v[i].arena, -1);
  free(v);
}

static void without_a_blank_new_entries_are_zero(void **state) {
  (void)state;
  uint64_t *v = NULL;
  size_t    cap = 0;
  assert_int_equal(
      sim_threadtab_reach((void **)&v, &cap, 40, sizeof *v, NULL, 0, NULL),
      AS_OK);
  for (size_t i = 0; i < cap; i++)
    assert_int_equal(v[i], 0);
  free(v);
}

/* 2^24 - 1 threads of 512-byte records would be 8 GiB: refused at once
 * under a 64 MiB bound, the table untouched. */
static void a_sparse_id_is_refused_against_the_bound(void **state) {
  (void)state;
  char     rec[512];
  void    *v = NULL;
  size_t   cap = 0;
  as_err_t err = {0};
  memset(rec, 0, sizeof rec);
  assert_int_equal(sim_threadtab_reach(&v, &cap, 3, sizeof rec, rec,
                                       UINT64_C(64) << 20, &err),
                   AS_OK);
  void  *before = v;
  size_t before_cap = cap;
  assert_int_equal(sim_threadtab_reach(&v, &cap, (UINT32_C(1) << 24) - 1,
                                       sizeof rec, rec, UINT64_C(64) << 20,
                                       &err),
                   AS_ENOMEM);
  assert_ptr_equal(v, before);
  assert_int_equal(cap, before_cap);
  assert_non_null(strstr(err.msg, "thread id 16777215 needs a table of "
                                  "16777216 threads (8192 MiB)"));
  assert_non_null(strstr(err.msg, "limit of 64 MiB (--max-memory)"));
  free(v);
}

/* The doubling stops at the bound: an id whose table fits is served even
 * when the doubled table would not. */
static void growth_is_cut_at_the_bound(void **state) {
  (void)state;
  uint8_t *v = NULL;
  size_t   cap = 0;
  uint64_t max = UINT64_C(1) << 20;
  assert_int_equal(sim_threadtab_reach((void **)&v, &cap, (1u << 19) + 1,
                                       sizeof *v, NULL, max, NULL),
                   AS_OK);
  assert_int_equal(cap, max);
  assert_int_equal(sim_threadtab_reach((void **)&v, &cap, 1u << 20, sizeof *v,
                                       NULL, max, NULL),
                   AS_ENOMEM);
  free(v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(new_entries_are_copies_of_the_blank),
      cmocka_unit_test(without_a_blank_new_entries_are_zero),
      cmocka_unit_test(a_sparse_id_is_refused_against_the_bound),
      cmocka_unit_test(growth_is_cut_at_the_bound),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
