/* tests/unit/test_explain.c -- explain attributes every resident byte to a
 * mechanism, so the items add up to RSS, and names the right mechanism for
 * memory glibc and pymalloc are known to keep. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "analysis/explain.h"
#include "tests/helpers/array_source.h"

static uint64_t bytes_of(const explain_result_t *r, const char *mech) {
  for (size_t i = 0; i < r->nitems; i++)
    if (strcmp(r->items[i].mechanism, mech) == 0)
      return r->items[i].bytes;
  return 0;
}

static const explain_item_t *item(const explain_result_t *r, const char *mech) {
  for (size_t i = 0; i < r->nitems; i++)
    if (strcmp(r->items[i].mechanism, mech) == 0)
      return &r->items[i];
  return NULL;
}

static void assert_adds_up(const explain_result_t *r) {
  uint64_t sum = 0;
  for (size_t i = 0; i < r->nitems; i++)
    sum += r->items[i].bytes;
  assert_int_equal(sum, r->rss_bytes);
}

static void explain_at(const trace_event_t *evs, size_t n, const char *model,
                       const char *at, explain_result_t *r) {
  array_replay_t f = {.evs = evs, .n = n};
  explain_opts_t o = {.at = at, .model = model};
  sim_kernel_config_default(&o.kernel);
  explain_result_t out[2];
  size_t           got;
  char             desc[512];
  as_err_t         err = {0};
  assert_int_equal(explain_trace(&o, array_replay_open, &f, out, &got, desc,
                                 sizeof desc, &err),
                   AS_OK);
  assert_int_equal(got, 1);
  *r = out[0];
}

/* A 64 KiB buffer freed below a live 1 KiB survivor: its pages stay as a
 * free chunk inside the heap until malloc_trim returns them. */
static void a_freed_buffer_below_a_survivor_is_a_binned_chunk(void **state) {
  (void)state;
  const trace_event_t evs[] = {EV_MALLOC(0, 1, 65536),
                               EV_MALLOC(1, 2, 1000),
                               EV_FREE(2, 1),
                               EV_MARK(3, "after_free"),
                               {.t_ns = 4, .op = TRACE_TRIM, .size = 0},
                               EV_MARK(5, "after_trim")};
  explain_result_t    r;
  explain_at(evs, 6, "glibc", "after_free", &r);
  assert_adds_up(&r);
  /* 64 KiB + the chunk header, on the resident pages: at least 64 KiB. */
  assert_true(bytes_of(&r, "glibc.binned") >= 65536);
  const explain_item_t *b = item(&r, "glibc.binned");
  assert_non_null(b);
  assert_int_equal(b->objects, 1); /* the survivor pins the heap */
  assert_true(b->releasable);
  assert_true(strstr(b->sentence, "malloc_trim(0)") != NULL);
  assert_int_equal(bytes_of(&r, "glibc.in_use.live"), 1000);

  explain_result_t t;
  explain_at(evs, 6, "glibc", "after_trim", &t);
  assert_adds_up(&t);
  /* The trim returned the whole pages inside the free chunk. */
  assert_true(bytes_of(&t, "glibc.binned") < 8192);
}

/* n 64-byte objects of the obj domain, then frees of ids first, first +
 * step, ... below n, then the mark "after": into evs, returning the count. */
static size_t build_and_free(trace_event_t *evs, uint64_t n, uint64_t first,
                             uint64_t step) {
  size_t k = 0;
  for (uint64_t i = 0; i < n; i++)
    evs[k++] = (trace_event_t){.t_ns = i,
                               .op = TRACE_MALLOC,
                               .id = i,
                               .size = 64,
                               .domain = TRACE_DOMAIN_OBJ};
  for (uint64_t i = first; i < n; i += step)
    evs[k++] = (trace_event_t){
        .t_ns = n + i, .op = TRACE_FREE, .id = i, .domain = TRACE_DOMAIN_OBJ};
  evs[k++] = (trace_event_t)EV_MARK(3 * n, "after");
  return k;
}

/* 10,000 64-byte objects, all freed but one: the survivor pins its arena's
 * empty pools. */
static void one_survivor_pins_a_pymalloc_arena(void **state) {
  (void)state;
  enum { N = 10000 };
  static trace_event_t evs[2 * N + 1];
  size_t               n = build_and_free(evs, N, 1, 1);
  explain_result_t     r;
  explain_at(evs, n, "cpython", "after", &r);
  assert_adds_up(&r);
  const explain_item_t *p = item(&r, "pymalloc.pinned_arena");
  assert_non_null(p);
  assert_int_equal(p->objects, 1);
  assert_int_equal(p->units, 1);
  /* 10,000 x 64 B filled 40 pools; all but the survivor's are empty and
   * resident. */
  assert_true(p->bytes >= 38 * 16384);
  assert_false(p->releasable);
  assert_int_equal(bytes_of(&r, "pymalloc.used_pool.live"), 64);
}

/* 10,000 64-byte objects, every other one freed: each used pool holds as
 * many free blocks as live ones, which are free memory (pymalloc.free_blocks),
 * not the live objects' overhead, which is only the pools' headers and
 * tails (48 + 16 bytes of each 16 KiB pool of 64-byte blocks). */
static void free_blocks_in_used_pools_are_free_not_overhead(void **state) {
  (void)state;
  enum { N = 10000 };
  static trace_event_t evs[N + N / 2 + 1];
  size_t               n = build_and_free(evs, N, 0, 2);
  explain_result_t     r;
  explain_at(evs, n, "cpython", "after", &r);
  assert_adds_up(&r);
  assert_int_equal(bytes_of(&r, "pymalloc.used_pool.live"), N / 2 * 64);
  /* 255 blocks per pool: 39 full pools and one with 55 blocks, whose
   * never-used blocks count where they lie on its written first page
   * (4096 - 48 - 55 * 64 = 528 bytes) */
  assert_int_equal(bytes_of(&r, "pymalloc.free_blocks"), N / 2 * 64 + 528);
  /* the full pools' 48-byte headers and 16-byte tails, the last one's
   * header (its tail lies on a page never written) */
  assert_int_equal(bytes_of(&r, "pymalloc.used_pool.overhead"),
                   39 * (48 + 16) + 48);
}

/* A running thread's stack holds the program's memory but no object: it
 * is told as the stacks it is, not as "the allocator's overhead on those
 * objects". */
static void a_running_threads_stack_is_not_objects_overhead(void **state) {
  (void)state;
  const trace_event_t evs[] = {
      {.t_ns = 0, .op = TRACE_THREAD_START, .thread = 1},
      {.t_ns = 1, .op = TRACE_MALLOC, .id = 1, .size = 100, .thread = 1},
      EV_MARK(2, "running")};
  explain_result_t r;
  explain_at(evs, 3, "glibc", "running", &r);
  assert_adds_up(&r);
  const explain_item_t *st = item(&r, "glibc.thread_stack");
  assert_non_null(st);
  assert_non_null(strstr(st->sentence, "stacks of running threads"));
  assert_int_equal(bytes_of(&r, "glibc.thread_stack.overhead"), 0);
}

/* Without --at: the end, and the mark where RSS exceeds live bytes most
 * (a replay rewrites the marks it found, so the label must be kept). */
static void the_widest_gap_mark_is_explained_without_at(void **state) {
  (void)state;
  const trace_event_t evs[] = {EV_MARK(0, "start"),  EV_MALLOC(1, 1, 65536),
                               EV_MALLOC(2, 2, 100), EV_MARK(3, "peak"),
                               EV_FREE(4, 1),        EV_MARK(5, "after"),
                               EV_FREE(6, 2),        EV_MALLOC(7, 3, 8)};
  array_replay_t      f = {.evs = evs, .n = 8};
  explain_opts_t      o = {.model = "glibc"};
  explain_result_t    out[2];
  size_t              n;
  char                desc[512];
  sim_kernel_config_default(&o.kernel);
  assert_int_equal(explain_trace(&o, array_replay_open, &f, out, &n, desc,
                                 sizeof desc, NULL),
                   AS_OK);
  assert_int_equal(n, 2);
  assert_string_equal(out[0].label, "end");
  assert_string_equal(out[1].label, "after");
  assert_adds_up(&out[1]);
}

/* A capture writes each mark's measured RSS as an rss event at the mark's
 * time: explain gives it beside the simulated RSS (it gave the simulated
 * alone, 106.57 MiB where a captured service measured 114.43 MiB); an rss
 * event at another time is not the mark's. */
static void the_rss_a_run_measured_at_the_mark_is_given(void **state) {
  (void)state;
  const trace_event_t evs[] = {
      EV_MALLOC(1, 1, 65536),
      EV_MARK(3, "peak"),
      {.t_ns = 3, .op = TRACE_RSS, .size = 5 << 20},
      EV_FREE(4, 1),
      EV_MARK(5, "after"),
      {.t_ns = 6, .op = TRACE_RSS, .size = 4 << 20},
  };
  explain_result_t r;
  explain_at(evs, 6, "glibc", "peak", &r);
  assert_true(r.has_measured);
  assert_int_equal(r.measured_rss_bytes, 5 << 20);
  explain_at(evs, 6, "glibc", "after", &r);
  assert_false(r.has_measured);
}

static void an_unknown_mark_lists_the_marks(void **state) {
  (void)state;
  const trace_event_t evs[] = {EV_MALLOC(0, 1, 100), EV_MARK(1, "peak"),
                               EV_FREE(2, 1), EV_MARK(3, "after")};
  array_replay_t      f = {.evs = evs, .n = 4};
  explain_opts_t      o = {.at = "aftr", .model = "glibc"};
  explain_result_t    out[2];
  size_t              n;
  char                desc[512];
  as_err_t            err = {0};
  sim_kernel_config_default(&o.kernel);
  assert_int_equal(explain_trace(&o, array_replay_open, &f, out, &n, desc,
                                 sizeof desc, &err),
                   AS_EINVAL);
  assert_string_equal(err.msg, "--at aftr: the trace has no such mark "
                               "(marks: peak, after)");
}

/* Live objects are told by the phase (the mark before them) they were
 * allocated in; a realloc keeps its object's phase; freed ones drop out. */
static void objects_are_told_by_the_phase_they_were_allocated_in(void **state) {
  (void)state;
  const trace_event_t evs[] = {
      EV_MALLOC(0, 1, 100), EV_MARK(1, "build"),    EV_MALLOC(2, 2, 100),
      EV_MALLOC(3, 3, 100), EV_MALLOC(4, 4, 100),   EV_MALLOC(5, 5, 100),
      EV_MARK(6, "serve"),  EV_MALLOC(7, 6, 100),   EV_MALLOC(8, 7, 100),
      EV_FREE(9, 5),        EV_REALLOC(10, 2, 200), EV_MARK(11, "done")};
  explain_result_t r;
  explain_at(evs, sizeof evs / sizeof evs[0], "glibc", "done", &r);
  const explain_item_t *live = NULL;
  for (size_t i = 0; i < r.nitems; i++)
    if (r.items[i].live)
      live = &r.items[i];
  assert_non_null(live);
  assert_int_equal(live->objects, 6);
  assert_string_equal(live->allocated_in,
                      "after mark build (3), after mark serve (2), "
                      "before any mark (1)");
  assert_non_null(strstr(live->sentence, "allocated after mark build (3)"));
}

/* A live object in the main heap and one in a second thread's arena: two
 * heaps, one of them the brk heap; the sentence calls them heaps (it said
 * "2 brk heaps", after the first unit's kind). */
static void units_of_two_kinds_are_named_by_what_they_share(void **state) {
  (void)state;
  const trace_event_t evs[] = {
      EV_MALLOC(0, 1, 1000),
      {.t_ns = 1, .op = TRACE_THREAD_START, .thread = 1},
      {.t_ns = 2, .op = TRACE_MALLOC, .thread = 1, .id = 2, .size = 1000},
      EV_MARK(3, "both")};
  explain_result_t r;
  explain_at(evs, 4, "glibc", "both", &r);
  assert_adds_up(&r);
  const explain_item_t *live = item(&r, "glibc.in_use.live");
  assert_non_null(live);
  assert_int_equal(live->units, 2);
  assert_non_null(strstr(live->sentence, "(2 heaps)"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_freed_buffer_below_a_survivor_is_a_binned_chunk),
      cmocka_unit_test(one_survivor_pins_a_pymalloc_arena),
      cmocka_unit_test(free_blocks_in_used_pools_are_free_not_overhead),
      cmocka_unit_test(a_running_threads_stack_is_not_objects_overhead),
      cmocka_unit_test(the_widest_gap_mark_is_explained_without_at),
      cmocka_unit_test(the_rss_a_run_measured_at_the_mark_is_given),
      cmocka_unit_test(an_unknown_mark_lists_the_marks),
      cmocka_unit_test(objects_are_told_by_the_phase_they_were_allocated_in),
      cmocka_unit_test(units_of_two_kinds_are_named_by_what_they_share),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
