/* tests/unit/test_addr_ids.c -- the address -> recycled id mapper shared by
 * the capture converter and the importers, and the hash map under it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <gsl/gsl_rng.h>

#include "traces/addr_ids.h"

static void new_objects_take_the_lowest_free_id(void **state) {
  (void)state;
  addr_ids_t m;
  memset(&m, 0, sizeof m);
  uint64_t id;
  for (uint64_t a = 1; a <= 5; a++) {
    assert_true(addr_ids_add(&m, a * 16, &id));
    assert_int_equal(id, a - 1);
  }
  assert_true(addr_ids_remove(&m, 4 * 16, &id));
  assert_int_equal(id, 3);
  assert_true(addr_ids_remove(&m, 2 * 16, &id));
  assert_int_equal(id, 1);
  assert_false(addr_ids_remove(&m, 2 * 16, &id)); /* already gone */
  assert_true(addr_ids_add(&m, 999, &id));
  assert_int_equal(id, 1);
  assert_true(addr_ids_add(&m, 1000, &id));
  assert_int_equal(id, 3);
  assert_true(addr_ids_add(&m, 1001, &id));
  assert_int_equal(id, 5);
  assert_int_equal(m.live, 6);
  assert_int_equal(m.peak, 6);
  assert_true(addr_ids_lookup(&m, 999, &id));
  assert_int_equal(id, 1);
  addr_ids_free(&m);
}

/* Many ids released in a seeded random order come back lowest first. */
static void released_ids_come_back_in_ascending_order(void **state) {
  (void)state;
  enum { N = 5000 };
  addr_ids_t m;
  memset(&m, 0, sizeof m);
  uint64_t id;
  for (uint64_t a = 0; a < N; a++)
    assert_true(addr_ids_add(&m, (a + 1) * 16, &id));
  gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
  gsl_rng_set(rng, 42);
  uint64_t order[N];
  for (uint64_t i = 0; i < N; i++)
    order[i] = i;
  for (uint64_t i = N - 1; i > 0; i--) { /* Fisher-Yates */
    uint64_t j = gsl_rng_uniform_int(rng, i + 1), t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  for (uint64_t i = 0; i < N; i += 2) /* every other one, shuffled */
    assert_true(addr_ids_remove(&m, (order[i] + 1) * 16, NULL));
  uint64_t prev = 0;
  for (uint64_t i = 0; i < N; i += 2) {
    assert_true(addr_ids_add(&m, (N + i + 1) * 16, &id));
    if (i > 0)
      assert_true(id > prev);
    prev = id;
  }
  assert_int_equal(m.next, N); /* no fresh id was needed */
  gsl_rng_free(rng);
  addr_ids_free(&m);
}

static void detach_keeps_the_id_until_attached_or_released(void **state) {
  (void)state;
  addr_ids_t m;
  memset(&m, 0, sizeof m);
  uint64_t id, a_id, b_id;
  assert_true(addr_ids_add(&m, 0x100, &a_id));
  assert_true(addr_ids_add(&m, 0x200, &b_id));
  assert_true(addr_ids_detach(&m, 0x100, &id));
  assert_int_equal(id, a_id);
  assert_false(addr_ids_lookup(&m, 0x100, &id));
  /* Held, so a new object does not get it. */
  assert_true(addr_ids_add(&m, 0x300, &id));
  assert_int_equal(id, 2);
  assert_true(addr_ids_attach(&m, 0x400, a_id));
  assert_true(addr_ids_lookup(&m, 0x400, &id));
  assert_int_equal(id, a_id);
  assert_true(addr_ids_detach(&m, 0x400, &id));
  addr_ids_release(&m, id);
  assert_true(addr_ids_add(&m, 0x500, &id));
  assert_int_equal(id, a_id);
  addr_ids_free(&m);
}

static void map_handles_key_zero(void **state) {
  (void)state;
  addr_ids_map_t m;
  memset(&m, 0, sizeof m);
  uint64_t v = 7;
  assert_false(addr_ids_map_get(&m, 0, &v));
  assert_true(addr_ids_map_put(&m, 0, 42));
  assert_true(addr_ids_map_put(&m, 5, 43));
  assert_true(addr_ids_map_get(&m, 0, &v));
  assert_int_equal(v, 42);
  assert_int_equal(addr_ids_map_count(&m), 2);
  assert_true(addr_ids_map_del(&m, 0, &v));
  assert_false(addr_ids_map_get(&m, 0, &v));
  assert_true(addr_ids_map_get(&m, 5, &v));
  assert_int_equal(v, 43);
  addr_ids_map_free(&m);
}

/* Seeded random puts and deletes (keys from a small range, so clusters
 * form and backward-shift deletion is exercised) against a plain array. */
static void map_matches_an_array_reference(void **state) {
  (void)state;
  enum { KEYS = 20000, OPS = 200000 };
  uint64_t *ref = calloc(KEYS, sizeof *ref); /* value + 1, 0 = absent */
  assert_non_null(ref);
  addr_ids_map_t m;
  memset(&m, 0, sizeof m);
  gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
  gsl_rng_set(rng, 42);
  size_t n = 0;
  for (int i = 0; i < OPS; i++) {
    uint64_t k = gsl_rng_uniform_int(rng, KEYS);
    uint64_t key = k * 4096; /* aligned like addresses; includes 0 */
    uint64_t v;
    if (gsl_rng_uniform(rng) < 0.55) {
      assert_true(addr_ids_map_put(&m, key, (uint64_t)i));
      n += ref[k] == 0;
      ref[k] = (uint64_t)i + 1;
    } else {
      bool had = addr_ids_map_del(&m, key, &v);
      assert_int_equal(had, ref[k] != 0);
      if (had) {
        assert_int_equal(v, ref[k] - 1);
        ref[k] = 0;
        n--;
      }
    }
    if (i % 1000 == 0) {
      for (uint64_t j = 0; j < KEYS; j++) {
        bool has = addr_ids_map_get(&m, j * 4096, &v);
        assert_int_equal(has, ref[j] != 0);
        if (has)
          assert_int_equal(v, ref[j] - 1);
      }
    }
  }
  assert_int_equal(addr_ids_map_count(&m), n);
  gsl_rng_free(rng);
  addr_ids_map_free(&m);
  free(ref);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(new_objects_take_the_lowest_free_id),
      cmocka_unit_test(released_ids_come_back_in_ascending_order),
      cmocka_unit_test(detach_keeps_the_id_until_attached_or_released),
      cmocka_unit_test(map_handles_key_zero),
      cmocka_unit_test(map_matches_an_array_reference),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
