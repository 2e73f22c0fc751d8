/* tests/unit/test_advise.c -- advise on small traces: a periodic remedy
 * whose call happened to fall between the mark before and the mark judged
 * says so, with what it saves when none falls there; a trace that carries
 * the RSS measured at the mark (a capture) gives it beside the simulated;
 * a trace that holds the most at its end is judged there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "analysis/advise.h"
#include "tests/helpers/array_source.h"

#define MS 1000000ull

/* glibc advice on evs at mark at (NULL: the mark advise picks); the
 * caller frees it. */
static advise_result_t *advise_at(const trace_event_t *evs, size_t n,
                                  const char *at) {
  array_replay_t f = {.evs = evs, .n = n};
  explain_opts_t o = {.at = at, .model = "glibc"};
  sim_kernel_config_default(&o.kernel);
  advise_result_t *r = calloc(1, sizeof *r);
  assert_non_null(r);
  as_err_t err = {0};
  assert_int_equal(advise_trace(&o, array_replay_open, &f, r, &err), AS_OK);
  return r;
}

/* The remedy "malloc_trim(0) every second" of glibc advice on evs at mark
 * at, into *out. */
static void trim_every_second(const trace_event_t *evs, size_t n,
                              const char *at, advise_remedy_t *out) {
  advise_result_t *r = advise_at(evs, n, at);
  size_t           i = 0;
  while (i < r->n && strcmp(r->remedies[i].name, "malloc_trim(0) every "
                                                 "second") != 0)
    i++;
  assert_true(i < r->n);
  assert_true(r->remedies[i].ok);
  *out = r->remedies[i];
  free(r);
}

/* Two 64 KiB buffers below a survivor, freed at 950 ms between the marks
 * 'full' (900 ms) and 'after' (1100 ms): the call at 1 s returns their
 * pages before 'after'; a timer whose calls fall at 900 ms, 1900 ms, ...
 * returns nothing by then. */
static void
a_call_between_the_marks_is_reported_with_the_other_timing(void **state) {
  (void)state;
  const trace_event_t evs[] = {
      EV_MALLOC(0, 1, 65536),      EV_MALLOC(0, 2, 65536),
      EV_MALLOC(0, 3, 1000),       EV_MARK(900 * MS, "full"),
      EV_FREE(950 * MS, 1),        EV_FREE(950 * MS, 2),
      EV_MARK(1100 * MS, "after"),
  };
  advise_remedy_t x;
  trim_every_second(evs, sizeof evs / sizeof evs[0], "after", &x);
  assert_true(x.saving_at_mark >= 120 * 1024);
  assert_true(x.timing.decides);
  assert_string_equal(x.timing.prev_mark, "full");
  assert_int_equal(x.timing.prev_before_ns, 200 * MS);
  assert_int_equal(x.timing.call_before_ns, 100 * MS);
  assert_true(x.timing.saving_at_mark < 8 * 1024);
}

/* The same frees judged at 980 ms: the call at 1 s comes after the mark,
 * so no timing of the calls changes the saving there. */
static void no_call_between_the_marks_says_nothing(void **state) {
  (void)state;
  const trace_event_t evs[] = {
      EV_MALLOC(0, 1, 65536),     EV_MALLOC(0, 2, 65536), EV_MALLOC(0, 3, 1000),
      EV_MARK(900 * MS, "full"),  EV_FREE(950 * MS, 1),   EV_FREE(950 * MS, 2),
      EV_MARK(980 * MS, "after"), EV_FREE(1100 * MS, 3),
  };
  advise_remedy_t x;
  trim_every_second(evs, sizeof evs / sizeof evs[0], "after", &x);
  assert_false(x.timing.decides);
  assert_true(x.saving_at_mark < 8 * 1024);
}

/* A capture writes each mark's measured RSS as an rss event at the mark's
 * time: advise gives it beside the simulated RSS, whether the mark was
 * asked for or picked; a later sample is not the mark's. */
static void the_rss_measured_at_the_mark_is_given(void **state) {
  (void)state;
  const trace_event_t evs[] = {
      EV_MALLOC(0, 1, 65536),
      EV_MALLOC(0, 2, 1000),
      EV_FREE(1, 1),
      EV_MARK(2, "after"),
      {.t_ns = 2, .op = TRACE_RSS, .size = 9 << 20},
      {.t_ns = 3, .op = TRACE_RSS, .size = 5 << 20},
  };
  size_t n = sizeof evs / sizeof evs[0];
  for (int picked = 0; picked < 2; picked++) {
    advise_result_t *r = advise_at(evs, n, picked ? NULL : "after");
    assert_string_equal(r->mark, "after");
    assert_true(r->has_measured);
    assert_int_equal(r->measured_at_mark, 9 << 20);
    free(r);
  }
  advise_result_t *r = advise_at(evs, n - 2, "after"); /* no rss events */
  assert_false(r->has_measured);
  free(r);
}

/* A trace whose only mark is at its start, where nothing is held yet (a
 * capture's anchor at main): advise judges the remedies at the end, where
 * the freed buffers lie below the survivor, and trims there. */
static void a_trace_that_holds_most_at_its_end_is_judged_there(void **state) {
  (void)state;
  const trace_event_t evs[] = {
      EV_MARK(0, "main"),    EV_MALLOC(1, 1, 65536), EV_MALLOC(1, 2, 65536),
      EV_MALLOC(1, 3, 1000), EV_FREE(2, 1),          EV_FREE(2, 2),
  };
  advise_result_t *r = advise_at(evs, sizeof evs / sizeof evs[0], NULL);
  assert_true(r->at_end);
  assert_int_equal(r->baseline.rss_at_mark, r->baseline.rss_at_end);
  size_t i = 0;
  while (i < r->n && strcmp(r->remedies[i].name, "malloc_trim(0) at end") != 0)
    i++;
  assert_true(i < r->n);
  assert_true(r->remedies[i].ok);
  assert_true(r->remedies[i].saving_at_mark >= 120 * 1024);
  assert_int_equal(r->remedies[i].saving_at_mark, r->remedies[i].saving_at_end);
  assert_int_equal(i, 0); /* ranked first */
  free(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          a_call_between_the_marks_is_reported_with_the_other_timing),
      cmocka_unit_test(no_call_between_the_marks_says_nothing),
      cmocka_unit_test(the_rss_measured_at_the_mark_is_given),
      cmocka_unit_test(a_trace_that_holds_most_at_its_end_is_judged_there),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
