/* tests/unit/test_event_queue.c -- the timer heap's ordering contract. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <gsl/gsl_rng.h>

#include "sim/event_queue.h"

/* A timer embedded in an owner, as models do it. */
typedef struct owner_s {
  int         id;
  sim_timer_t timer;
} owner_t;

static as_status_t never_fires(sim_timer_t *self, uint64_t now_ns,
                               as_err_t *err) {
  (void)self;
  (void)now_ns;
  (void)err;
  return AS_OK;
}

static sim_event_queue_t *new_queue(void) {
  sim_event_queue_t *q = NULL;
  as_err_t           err;
  assert_int_equal(sim_event_queue_create(&q, &err), AS_OK);
  assert_non_null(q);
  return q;
}

static int pop_id(sim_event_queue_t *q) {
  sim_timer_t *t = sim_event_queue_pop(q);
  assert_non_null(t);
  assert_int_equal(t->heap_idx, SIM_TIMER_IDLE);
  return SIM_CONTAINER_OF(t, owner_t, timer)->id;
}

static void equal_times_fire_in_scheduling_order(void **state) {
  (void)state;
  sim_event_queue_t *q = new_queue();
  owner_t            o[6];
  /* Ids 0..5 at due times 20,10,20,10,20,10: 10s first, each group in
   * push order. */
  for (int i = 0; i < 6; i++) {
    o[i].id = i;
    sim_timer_init(&o[i].timer, never_fires);
    assert_int_equal(
        sim_event_queue_push(q, &o[i].timer, i % 2 ? 10u : 20u, NULL), AS_OK);
  }
  assert_int_equal(sim_event_queue_size(q), 6);
  assert_ptr_equal(sim_event_queue_peek(q), &o[1].timer);
  static const int expected[6] = {1, 3, 5, 0, 2, 4};
  for (int i = 0; i < 6; i++) {
    assert_int_equal(pop_id(q), expected[i]);
  }
  assert_null(sim_event_queue_pop(q));
  assert_null(sim_event_queue_peek(q));
  sim_event_queue_destroy(q);
}

static void cancel_removes_only_that_timer(void **state) {
  (void)state;
  sim_event_queue_t *q = new_queue();
  owner_t            o[5];
  for (int i = 0; i < 5; i++) {
    o[i].id = i;
    sim_timer_init(&o[i].timer, never_fires);
    assert_int_equal(
        sim_event_queue_push(q, &o[i].timer, 100u * (uint64_t)(i + 1), NULL),
        AS_OK);
  }
  sim_event_queue_cancel(q, &o[2].timer);
  assert_int_equal(o[2].timer.heap_idx, SIM_TIMER_IDLE);
  assert_int_equal(sim_event_queue_size(q), 4);
  /* Cancelling an idle timer is a no-op. */
  sim_event_queue_cancel(q, &o[2].timer);
  assert_int_equal(sim_event_queue_size(q), 4);
  assert_int_equal(pop_id(q), 0);
  assert_int_equal(pop_id(q), 1);
  assert_int_equal(pop_id(q), 3);
  assert_int_equal(pop_id(q), 4);
  assert_null(sim_event_queue_pop(q));
  sim_event_queue_destroy(q);
}

static void repush_moves_a_timer(void **state) {
  (void)state;
  sim_event_queue_t *q = new_queue();
  owner_t            o[4];
  for (int i = 0; i < 4; i++) {
    o[i].id = i;
    sim_timer_init(&o[i].timer, never_fires);
    assert_int_equal(
        sim_event_queue_push(q, &o[i].timer, 10u * (uint64_t)(i + 1), NULL),
        AS_OK);
  }
  /* Move the earliest to the back, and the latest to the front. */
  assert_int_equal(sim_event_queue_push(q, &o[0].timer, 1000, NULL), AS_OK);
  assert_int_equal(sim_event_queue_push(q, &o[3].timer, 5, NULL), AS_OK);
  assert_int_equal(sim_event_queue_size(q), 4);
  /* A re-armed timer ties after timers scheduled earlier at the same time. */
  assert_int_equal(sim_event_queue_push(q, &o[1].timer, 30, NULL), AS_OK);
  assert_int_equal(o[0].timer.due_ns, 1000);
  assert_int_equal(pop_id(q), 3);
  assert_int_equal(pop_id(q), 2);
  assert_int_equal(pop_id(q), 1);
  assert_int_equal(pop_id(q), 0);
  assert_int_equal(sim_event_queue_size(q), 0);
  sim_event_queue_destroy(q);
}

typedef struct ref_s {
  uint64_t due_ns;
  uint64_t seq;
  int      id;
} ref_t;

static int ref_cmp(const void *a, const void *b) {
  const ref_t *x = a, *y = b;
  if (x->due_ns != y->due_ns) {
    return x->due_ns < y->due_ns ? -1 : 1;
  }
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void random_workload_matches_sorted_reference(void **state) {
  (void)state;
  enum { N = 10000 };
  sim_event_queue_t *q = new_queue();
  owner_t           *o = calloc(N, sizeof *o);
  ref_t             *ref = calloc(N, sizeof *ref);
  assert_non_null(o);
  assert_non_null(ref);
  gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
  assert_non_null(rng);
  gsl_rng_set(rng, 42);

  for (int i = 0; i < N; i++) {
    o[i].id = i;
    sim_timer_init(&o[i].timer, never_fires);
    /* Few distinct due times, so ties are common. */
    uint64_t due = gsl_rng_uniform_int(rng, 500);
    assert_int_equal(sim_event_queue_push(q, &o[i].timer, due, NULL), AS_OK);
  }
  /* Cancel a third, chosen at random (possibly repeating: a second cancel
   * of the same timer must be a no-op). */
  int cancelled = 0;
  for (int j = 0; j < N / 3; j++) {
    int i = (int)gsl_rng_uniform_int(rng, N);
    if (o[i].timer.heap_idx != SIM_TIMER_IDLE) {
      cancelled++;
    }
    sim_event_queue_cancel(q, &o[i].timer);
  }
  assert_true(cancelled > N / 4);
  size_t nref = 0;
  for (int i = 0; i < N; i++) {
    if (o[i].timer.heap_idx != SIM_TIMER_IDLE) {
      ref[nref++] = (ref_t){o[i].timer.due_ns, o[i].timer.seq, i};
    }
  }
  assert_int_equal(nref, (size_t)(N - cancelled));
  assert_int_equal(sim_event_queue_size(q), nref);
  qsort(ref, nref, sizeof *ref, ref_cmp);
  for (size_t j = 0; j < nref; j++) {
    assert_int_equal(pop_id(q), ref[j].id);
  }
  assert_null(sim_event_queue_pop(q));

  gsl_rng_free(rng);
  free(ref);
  free(o);
  sim_event_queue_destroy(q);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(equal_times_fire_in_scheduling_order),
      cmocka_unit_test(cancel_removes_only_that_timer),
      cmocka_unit_test(repush_moves_a_timer),
      cmocka_unit_test(random_workload_matches_sorted_reference),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
