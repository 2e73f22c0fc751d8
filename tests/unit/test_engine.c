/* tests/unit/test_engine.c -- the engine's ordering, validation, sampling
 * and clock rules, with a spy model that records what reaches it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/engine.h"
#include "tests/helpers/array_source.h"
#include "tests/helpers/spy_model.h"

typedef struct fixture_s fixture_t;
struct fixture_s {
  sim_session_t session;
  spy_t         spy;
};

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  assert_int_equal(spy_session_open(&f->session, &f->spy, NULL), AS_OK);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  spy_session_close(&f->session);
  free(f);
  return 0;
}

static as_status_t run(fixture_t *f, const trace_event_t *evs, size_t n,
                       const sim_engine_config_t *cfg, sim_run_result_t *res,
                       as_err_t *err) {
  array_source_t src;
  array_source_init(&src, evs, n);
  return sim_engine_run(cfg, &f->session, &src.base, res, err);
}

/* ---- Ordering ----------------------------------------------------------- */

static void timer_due_at_t_fires_before_the_event_stamped_t(void **state) {
  fixture_t          *f = *state;
  trace_event_t       evs[] = {EV_MALLOC(10, 1, 8), EV_MALLOC(20, 2, 8),
                               EV_FREE(30, 1)};
  sim_run_result_t    res;
  sim_engine_config_t cfg = {0};
  assert_int_equal(
      sim_event_queue_push(f->session.timers, &f->spy.timer, 20, NULL), AS_OK);
  assert_int_equal(run(f, evs, 3, &cfg, &res, NULL), AS_OK);
  assert_string_equal(f->spy.log, "a1@10 T0@20 a2@20 f1@30");
  assert_int_equal(res.events, 3);
  assert_int_equal(res.timers_fired, 1);
}

static void timers_after_the_last_event_do_not_fire(void **state) {
  fixture_t          *f = *state;
  trace_event_t       evs[] = {EV_MALLOC(10, 1, 8)};
  sim_run_result_t    res;
  sim_engine_config_t cfg = {0};
  sim_event_queue_push(f->session.timers, &f->spy.timer, 11, NULL);
  assert_int_equal(run(f, evs, 1, &cfg, &res, NULL), AS_OK);
  assert_string_equal(f->spy.log, "a1@10");
}

static void idle_advances_the_clock_through_due_timers(void **state) {
  fixture_t          *f = *state;
  trace_event_t       evs[] = {EV_IDLE(0, 100), EV_MALLOC(100, 1, 8)};
  sim_run_result_t    res;
  sim_engine_config_t cfg = {0};
  f->spy.rearm_every = 40;
  f->spy.rearms_left = 10;
  sim_event_queue_push(f->session.timers, &f->spy.timer, 30, NULL);
  assert_int_equal(run(f, evs, 2, &cfg, &res, NULL), AS_OK);
  assert_string_equal(f->spy.log, "T0@30 T0@70 a1@100");
}

static void event_inside_an_idle_stretch_is_refused(void **state) {
  fixture_t          *f = *state;
  trace_event_t       evs[] = {EV_IDLE(0, 100), EV_MALLOC(50, 1, 8)};
  sim_run_result_t    res;
  sim_engine_config_t cfg = {0};
  as_err_t            err = {0};
  assert_int_equal(run(f, evs, 2, &cfg, &res, &err), AS_EFORMAT);
  assert_string_equal(err.msg, "array: event 1: time 50 ns is before the "
                               "clock (100 ns)");
}

static void zero_delay_timer_chain_is_an_error_not_a_hang(void **state) {
  fixture_t          *f = *state;
  trace_event_t       evs[] = {EV_MALLOC(10, 1, 8)};
  sim_run_result_t    res;
  sim_engine_config_t cfg = {0};
  as_err_t            err = {0};
  f->spy.rearm_every = 0;
  f->spy.rearms_left = SIM_ENGINE_MAX_SAME_INSTANT + 5;
  sim_event_queue_push(f->session.timers, &f->spy.timer, 5, NULL);
  assert_int_equal(run(f, evs, 1, &cfg, &res, &err), AS_EINVAL);
  assert_non_null(strstr(err.msg, "timers fired at t=5 ns"));
}

static void settle_fires_timers_after_the_last_event(void **state) {
  fixture_t          *f = *state;
  trace_event_t       evs[] = {EV_MALLOC(10, 1, 8)};
  sim_run_result_t    res;
  sim_engine_config_t cfg = {.settle_ns = 100, .sample_every_ns = 50};
  f->spy.rearm_every = 40;
  f->spy.rearms_left = 10;
  sim_event_queue_push(f->session.timers, &f->spy.timer, 11, NULL);
  assert_int_equal(run(f, evs, 1, &cfg, &res, NULL), AS_OK);
  assert_string_equal(f->spy.log, "a1@10 T0@11 T0@51 T0@91");
  assert_int_equal(res.final_t_ns, 110);
}

/* ---- Purge, option and touch events ------------------------------------- */

static void purge_and_option_events_reach_the_model(void **state) {
  fixture_t    *f = *state;
  trace_event_t evs[] = {
      {.t_ns = 5, .op = TRACE_PURGE, .size = TRACE_PURGE_DECAY},
      {.t_ns = 6, .op = TRACE_OPTION, .label = "decay_ms", .size = 1000}};
  sim_run_result_t    res;
  sim_engine_config_t cfg = {0};
  assert_int_equal(run(f, evs, 2, &cfg, &res, NULL), AS_OK);
  assert_string_equal(f->spy.log, "P1@5 O1000@6");
  trace_event_t bad[] = {
      {.t_ns = 7, .op = TRACE_OPTION, .label = "arena_max", .size = 2}};
  as_err_t err = {0};
  assert_int_equal(run(f, bad, 1, &cfg, &res, &err), AS_EINVAL);
  assert_string_equal(err.msg,
                      "array: event 0: spy: no run-time option arena_max");
}

/* placed.OWNER is the kernel's, not a knob: the model never sees it, and
 * the owner's next mapping goes to the address (a capture's pymalloc
 * arena).  An unknown owner or an unaligned address is refused. */
static void placements_reach_the_kernel_not_the_model(void **state) {
  fixture_t    *f = *state;
  sim_addr_t    at = UINT64_C(0x7ffff0004000);
  trace_event_t evs[] = {
      {.t_ns = 5, .op = TRACE_OPTION, .label = "placed.pymalloc", .size = at}};
  sim_run_result_t    res;
  sim_engine_config_t cfg = {0};
  assert_int_equal(run(f, evs, 1, &cfg, &res, NULL), AS_OK);
  assert_string_equal(f->spy.log, "");
  sim_addr_t got = 0;
  as_err_t   err = {0};
  assert_int_equal(sim_kernel_mmap(f->session.kernel, 1 << 20, 0, SIM_PROT_RW,
                                   SIM_OWNER_PYMALLOC, &got, &err),
                   AS_OK);
  assert_int_equal(got, at);
  trace_event_t bad[] = {
      {.t_ns = 6, .op = TRACE_OPTION, .label = "placed.heap", .size = at},
      {.t_ns = 6, .op = TRACE_OPTION, .label = "placed.pymalloc", .size = 7}};
  for (int i = 0; i < 2; i++) {
    assert_int_equal(run(f, &bad[i], 1, &cfg, &res, &err), AS_EFORMAT);
    assert_non_null(strstr(err.msg, "expected placed.OWNER"));
  }
}

static void
events_a_model_has_no_notion_of_are_counted_or_strict(void **state) {
  fixture_t      *f = *state;
  model_methods_t plain = spy_methods;
  plain.purge = NULL;
  f->spy.base.methods = &plain;
  trace_event_t       evs[] = {{.t_ns = 5, .op = TRACE_PURGE, .size = 0}};
  sim_run_result_t    res;
  sim_engine_config_t cfg = {0};
  assert_int_equal(run(f, evs, 1, &cfg, &res, NULL), AS_OK);
  assert_int_equal(res.ignored_events, 1);
  cfg.strict = true;
  as_err_t err = {0};
  assert_int_equal(run(f, evs, 1, &cfg, &res, &err), AS_EINVAL);
  assert_non_null(strstr(err.msg, "model spy has no notion of purge"));
}

/* A composition whose libc child has no purge behaves as that libc alone:
 * cpython with glibc counts a purge (an error under strict), as glibc does.
 * It used to stop the run ("cpython: no purge (libc model glibc)"); found
 * by tests/fuzz/fuzz_models.c, for the default build and then for the
 * free-threaded one. */
static void a_composition_without_purge_counts_it_like_its_libc(void **state) {
  (void)state;
  static const char *const models[] = {"glibc", "cpython",
                                       "cpython:build=ft,version=3.13.2"};
  for (int i = 0; i < 3; i++) {
    sim_session_t s;
    assert_int_equal(sim_session_open(models[i], NULL, NULL, &s, NULL), AS_OK);
    trace_event_t       evs[] = {{.t_ns = 5,
                                  .op = TRACE_PURGE,
                                  .size = TRACE_PURGE_ALL,
                                  .id = TRACE_ALL_ARENAS}};
    array_source_t      src;
    sim_run_result_t    res;
    sim_engine_config_t cfg = {0};
    array_source_init(&src, evs, 1);
    assert_int_equal(sim_engine_run(&cfg, &s, &src.base, &res, NULL), AS_OK);
    assert_int_equal(res.ignored_events, 1);
    cfg.strict = true;
    as_err_t err = {0};
    array_source_init(&src, evs, 1);
    assert_int_equal(sim_engine_run(&cfg, &s, &src.base, &res, &err),
                     AS_EINVAL);
    assert_non_null(strstr(err.msg, "has no notion of purge events"));
    sim_session_close(&s);
  }
}

/* A thread ends only after it started, and starts only when it is not
 * running; thread 0 (main) neither starts nor ends.  A thread_exit of a
 * thread never started used to be accepted (issue 14). */
static void threads_start_before_they_exit(void **state) {
  (void)state;
  static const struct {
    trace_event_t ev[3];
    size_t        n;
    const char   *msg; /* NULL: the trace is fine */
  } cases[] = {
      {{{.t_ns = 1, .op = TRACE_THREAD_EXIT, .thread = 3}},
       1,
       "array: event 0 (t=1 ns): thread_exit of thread 3, "
       "which is not running"},
      {{{.t_ns = 1, .op = TRACE_THREAD_START, .thread = 3},
        {.t_ns = 2, .op = TRACE_THREAD_START, .thread = 3}},
       2,
       "event 1 (t=2 ns): thread_start of thread 3, which "
       "is already running"},
      {{{.t_ns = 1, .op = TRACE_THREAD_EXIT, .thread = 0}},
       1,
       "thread_exit of thread 0"},
      {{{.t_ns = 1, .op = TRACE_THREAD_START, .thread = 3},
        {.t_ns = 2, .op = TRACE_THREAD_EXIT, .thread = 3},
        {.t_ns = 3, .op = TRACE_THREAD_START, .thread = 3}},
       3,
       NULL},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    sim_session_t s;
    assert_int_equal(sim_session_open("glibc", NULL, NULL, &s, NULL), AS_OK);
    array_source_t      src;
    sim_run_result_t    res;
    sim_engine_config_t cfg = {0};
    as_err_t            err = {0};
    array_source_init(&src, cases[c].ev, cases[c].n);
    as_status_t rc = sim_engine_run(&cfg, &s, &src.base, &res, &err);
    if (cases[c].msg == NULL) {
      assert_int_equal(rc, AS_OK);
      assert_int_equal(res.max_threads, 2); /* thread 3 beside main, twice */
    } else {
      assert_int_equal(rc, AS_EFORMAT);
      if (strstr(err.msg, cases[c].msg) == NULL)
        fail_msg("case %zu: '%s' lacks '%s'", c, err.msg, cases[c].msg);
    }
    sim_session_close(&s);
  }
}

/* The most threads running at once, the main one included: 1 without
 * thread events, 3 with two overlapping, still 3 after one exited and
 * another started. */
static void max_threads_counts_the_overlap(void **state) {
  fixture_t    *f = *state;
  trace_event_t none[] = {{.t_ns = 1, .op = TRACE_MARK, .label = "x"}};
  trace_event_t evs[] = {{.t_ns = 1, .op = TRACE_THREAD_START, .thread = 1},
                         {.t_ns = 2, .op = TRACE_THREAD_START, .thread = 2},
                         {.t_ns = 3, .op = TRACE_THREAD_EXIT, .thread = 1},
                         {.t_ns = 4, .op = TRACE_THREAD_START, .thread = 3}};
  sim_engine_config_t cfg = {0};
  sim_run_result_t    res;
  assert_int_equal(run(f, none, 1, &cfg, &res, NULL), AS_OK);
  assert_int_equal(res.max_threads, 1);
  assert_int_equal(run(f, evs, 4, &cfg, &res, NULL), AS_OK);
  assert_int_equal(res.max_threads, 3);
}

static void touch_makes_the_named_pages_of_an_object_resident(void **state) {
  fixture_t          *f = *state;
  trace_event_t       evs[] = {EV_MALLOC(0, 3, 1 << 20),
                               {.t_ns = 1,
                                .op = TRACE_TOUCH,
                                .id = 3,
                                .offset = 4096 + 10,
                                .size = 8192}};
  sim_run_result_t    res;
  sim_engine_config_t cfg = {0};
  array_source_t      src;
  array_source_init(&src, evs, 2);
  trace_meta_set(&src.base.meta, "touch_threshold", "4096", NULL);
  assert_int_equal(sim_engine_run(&cfg, &f->session, &src.base, &res, NULL),
                   AS_OK);
  assert_int_equal(f->spy.last_flags, TRACE_FLAG_UNWRITTEN);
  assert_int_equal(res.unwritten_allocs, 1);
  /* bytes 4106..12297 of the object: OS pages 1, 2 and 3 */
  sim_addr_t base = f->spy.region + 3 * SPY_SLOT;
  assert_false(sim_kernel_is_resident(f->session.kernel, base));
  for (uint64_t p = 1; p <= 3; p++)
    assert_true(sim_kernel_is_resident(f->session.kernel, base + p * 4096));
  assert_false(sim_kernel_is_resident(f->session.kernel, base + 4 * 4096));
  assert_int_equal(res.final_rss_bytes, 3 * 4096);
}

static void a_touch_outside_its_object_is_refused(void **state) {
  fixture_t    *f = *state;
  trace_event_t evs[] = {
      EV_MALLOC(0, 3, 100),
      {.t_ns = 1, .op = TRACE_TOUCH, .id = 3, .offset = 64, .size = 64},
      {.t_ns = 2, .op = TRACE_TOUCH, .id = 4, .offset = 0, .size = 1}};
  sim_run_result_t    res;
  sim_engine_config_t cfg = {0};
  as_err_t            err = {0};
  assert_int_equal(run(f, evs, 2, &cfg, &res, &err), AS_EFORMAT);
  assert_string_equal(err.msg, "array: event 1 (t=1 ns): touch of bytes "
                               "64..128 of object 3, which has 100 bytes");
  trace_event_t dead[] = {EV_MALLOC(0, 5, 100), evs[2]};
  assert_int_equal(run(f, dead, 2, &cfg, &res, &err), AS_EFORMAT);
  assert_string_equal(err.msg, "array: event 1 (t=2 ns): touch of object 4 "
                               "that is not live");
}

static void a_touch_threshold_below_a_page_is_refused(void **state) {
  fixture_t          *f = *state;
  trace_event_t       evs[] = {EV_MALLOC(0, 1, 8)};
  sim_run_result_t    res;
  sim_engine_config_t cfg = {0};
  array_source_t      src;
  as_err_t            err = {0};
  array_source_init(&src, evs, 1);
  trace_meta_set(&src.base.meta, "touch_threshold", "512", NULL);
  assert_int_equal(sim_engine_run(&cfg, &f->session, &src.base, &res, &err),
                   AS_EFORMAT);
  assert_non_null(strstr(err.msg, "touch_threshold"));
}

/* ---- Validation --------------------------------------------------------- */

static void free_of_a_dead_object_is_an_error_naming_the_event(void **state) {
  fixture_t       *f = *state;
  trace_event_t    evs[] = {EV_MALLOC(1, 1, 8), EV_FREE(2, 1), EV_FREE(3, 1)};
  sim_run_result_t res;
  sim_engine_config_t cfg = {0};
  as_err_t            err = {0};
  assert_int_equal(run(f, evs, 3, &cfg, &res, &err), AS_EFORMAT);
  assert_string_equal(err.msg,
                      "array: event 2 (t=3 ns): free of object 1 that is not "
                      "live (use --lenient to count and skip such events)");
}

static void lenient_counts_and_skips_bad_events(void **state) {
  fixture_t          *f = *state;
  trace_event_t       evs[] = {EV_FREE(1, 7), EV_REALLOC(2, 8, 16),
                               EV_MALLOC(3, 1, 8), EV_MALLOC(4, 1, 8), EV_FREE(5, 1)};
  sim_run_result_t    res;
  sim_engine_config_t cfg = {.lenient = true};
  assert_int_equal(run(f, evs, 5, &cfg, &res, NULL), AS_OK);
  assert_string_equal(f->spy.log, "a1@3 f1@5");
  assert_int_equal(res.skipped_bad_free, 1);
  assert_int_equal(res.skipped_bad_realloc, 1);
  assert_int_equal(res.skipped_double_alloc, 1);
  assert_int_equal(res.final_live_bytes, 0);
}

static void huge_object_ids_are_refused(void **state) {
  fixture_t          *f = *state;
  trace_event_t       evs[] = {EV_MALLOC(1, UINT64_C(1) << 40, 8)};
  sim_run_result_t    res;
  sim_engine_config_t cfg = {0};
  as_err_t            err = {0};
  assert_int_equal(run(f, evs, 1, &cfg, &res, &err), AS_EFORMAT);
  assert_non_null(strstr(err.msg, "too large"));
}

static void an_id_beyond_the_table_is_not_live(void **state) {
  fixture_t          *f = *state;
  trace_event_t       evs[] = {EV_MALLOC(1, 3, 8), EV_FREE(2, 1u << 20),
                               EV_REALLOC(3, 5000, 8), EV_FREE(4, 3)};
  sim_run_result_t    res;
  sim_engine_config_t cfg = {.lenient = true};
  assert_int_equal(run(f, evs, 4, &cfg, &res, NULL), AS_OK);
  assert_string_equal(f->spy.log, "a3@1 f3@4");
  assert_int_equal(res.skipped_bad_free, 1);
  assert_int_equal(res.skipped_bad_realloc, 1);
}

/* ---- Sizes -------------------------------------------------------------- */

/* Sizes up to 65533 bytes live in the table, larger ones beside it; either
 * way a free or realloc hands the model the exact size. */
static void sizes_small_and_big_reach_the_model_exactly(void **state) {
  fixture_t     *f = *state;
  const uint64_t big = (UINT64_C(1) << 40) + 3;
  trace_event_t  evs[] = {
       EV_MALLOC(1, 1, 0),
       EV_MALLOC(2, 2, 65533),
       EV_MALLOC(3, 3, 65534),
       EV_MALLOC(4, 4, big),
       EV_REALLOC(5, 1, 70000),   /* small -> big */
       EV_REALLOC(6, 3, 10),      /* big -> small */
       EV_REALLOC(7, 4, big + 1), /* big -> big */
       EV_REALLOC(8, 2, 65534),   /* small -> big */
       EV_FREE(9, 1),
       EV_FREE(10, 2),
       EV_FREE(11, 3),
       EV_FREE(12, 4),
       EV_MALLOC(13, 4, 7),
       EV_FREE(14, 4),
  };
  /* the prev_size of events 5-12 and 14 */
  const uint64_t want[] = {0, 65534, big, 65533, 70000, 65534, 10, big + 1, 7};
  f->spy.want_prev = want;
  f->spy.nwant = 9;
  sim_run_result_t    res;
  sim_engine_config_t cfg = {0};
  assert_int_equal(run(f, evs, 14, &cfg, &res, NULL), AS_OK);
  assert_int_equal(f->spy.seen, 9);
  assert_int_equal(f->spy.mismatches, 0);
  assert_int_equal(res.final_live_bytes, 0);
  /* after event 5: ids 1..4 hold 70000, 65533, 65534 and big bytes */
  assert_int_equal(res.peak_live_bytes, 70000 + 65533 + 65534 + big);
}

/* Replays evs (ne events, which free every object they allocate) and
 * checks that the frees and reallocs hand the model the nw sizes in want;
 * frees both arrays. */
static void replay_checking_prev_sizes(fixture_t *f, trace_event_t *evs,
                                       size_t ne, uint64_t *want, size_t nw) {
  f->spy.want_prev = want;
  f->spy.nwant = nw;
  sim_run_result_t    res;
  sim_engine_config_t cfg = {0};
  assert_int_equal(run(f, evs, ne, &cfg, &res, NULL), AS_OK);
  assert_int_equal(f->spy.seen, nw);
  assert_int_equal(f->spy.mismatches, 0);
  assert_int_equal(res.final_live_bytes, 0);
  free(evs);
  free(want);
}

/* Room for n objects' malloc, realloc and free, and their checked
 * sizes. */
static void alloc_arrays(size_t n, trace_event_t **evs, uint64_t **want) {
  *evs = calloc(3 * n, sizeof **evs);
  *want = calloc(2 * n, sizeof **want);
  assert_non_null(*evs);
  assert_non_null(*want);
}

/* Appends to evs (ne events so far) a free of each of the n objects
 * (object i is id stride * i, of size size[i]; FREED: already freed), in
 * a permuted order, every realloc_every-th reallocated first to
 * resize(its size, k); the sizes the frees and reallocs must hand the
 * model go to want[*nw ...].  Returns the events' count. */
#define FREED UINT64_MAX
static size_t free_in_permutation(trace_event_t *evs, size_t ne, uint64_t *want,
                                  size_t *nw, uint64_t *size, uint64_t n,
                                  uint64_t stride, uint64_t realloc_every,
                                  uint64_t (*resize)(uint64_t, uint64_t)) {
  for (uint64_t k = 0; k < n; k++) {
    uint64_t i = (k * 1237) % n; /* a permutation: 1237 is prime to n */
    if (size[i] == FREED)
      continue;
    if (k % realloc_every == 0) {
      want[(*nw)++] = size[i];
      size[i] = resize(size[i], k);
      evs[ne] = (trace_event_t)EV_REALLOC(ne, stride * i, size[i]);
      ne++;
    }
    want[(*nw)++] = size[i];
    evs[ne] = (trace_event_t)EV_FREE(ne, stride * i);
    ne++;
  }
  return ne;
}

static uint64_t big_or_small(uint64_t size, uint64_t k) {
  return size % 2 ? 66000 + k : k; /* big <-> small */
}

static uint64_t one_of_700(uint64_t size, uint64_t k) {
  (void)size;
  return 1 + (k * 11) % 700;
}

/* Many big objects, freed and reallocated out of order: the side table's
 * probing, growth and deletion keep every size. */
static void many_big_objects_keep_their_sizes(void **state) {
  fixture_t *f = *state;
  enum { N = 3000 };
  trace_event_t *evs;
  uint64_t      *want, size[N];
  size_t         ne = 0, nw = 0;
  alloc_arrays(N, &evs, &want);
  for (uint64_t i = 0; i < N; i++) {
    /* every third object small, the rest big; ids spread over 0..3N */
    size[i] = i % 3 == 0 ? i : 100000 + 4096 * i;
    evs[ne] = (trace_event_t)EV_MALLOC(ne, 3 * i, size[i]);
    ne++;
  }
  ne = free_in_permutation(evs, ne, want, &nw, size, N, 3, 2, big_or_small);
  replay_checking_prev_sizes(f, evs, ne, want, nw);
}

/* More distinct sizes than the narrow table's dictionary holds, arriving
 * while objects of earlier sizes are live: the table's rewrite to 2 bytes
 * per id, last id first, keeps every size, before and after it. */
static void sizes_survive_the_live_tables_widening(void **state) {
  fixture_t *f = *state;
  enum { N = 4000, SIZES = 600 };
  trace_event_t *evs;
  uint64_t      *want, size[N];
  size_t         ne = 0, nw = 0;
  alloc_arrays(N, &evs, &want);
  for (uint64_t i = 0; i < N; i++) {
    /* sizes 1..SIZES in turn, one in 50 big; every fourth object of the
     * first half freed before the dictionary fills */
    size[i] = i % 50 == 7 ? 70000 + i : 1 + (i * 7) % SIZES;
    evs[ne] = (trace_event_t)EV_MALLOC(ne, 2 * i, size[i]);
    ne++;
    if (i < N / 2 && i % 4 == 0) {
      want[nw++] = size[i];
      evs[ne] = (trace_event_t)EV_FREE(ne, 2 * i);
      ne++;
      size[i] = FREED;
    }
  }
  ne = free_in_permutation(evs, ne, want, &nw, size, N, 2, 3, one_of_700);
  replay_checking_prev_sizes(f, evs, ne, want, nw);
}

/* A double allocation or a free of a dead id is caught in the narrow table
 * and in the wide one alike. */
static void liveness_holds_in_both_widths(void **state) {
  fixture_t    *f = *state;
  trace_event_t evs[300];
  size_t        ne = 0;
  evs[ne++] = (trace_event_t)EV_MALLOC(0, 1, 64);
  evs[ne++] = (trace_event_t)EV_MALLOC(1, 1, 64); /* narrow: refused */
  evs[ne++] = (trace_event_t)EV_FREE(2, 1);
  sim_run_result_t    res;
  sim_engine_config_t cfg = {.lenient = true};
  assert_int_equal(run(f, evs, ne, &cfg, &res, NULL), AS_OK);
  assert_int_equal(res.skipped_double_alloc, 1);
  for (ne = 0; ne < 280; ne++) /* 280 sizes: the table widens */
    evs[ne] = (trace_event_t)EV_MALLOC(ne, 2 + ne, 1 + ne);
  evs[ne] = (trace_event_t)EV_MALLOC(ne, 2, 5); /* wide: refused */
  ne++;
  evs[ne] = (trace_event_t)EV_FREE(ne, 1); /* never live */
  ne++;
  evs[ne] = (trace_event_t)EV_FREE(ne, 281); /* size 280 */
  ne++;
  evs[ne] = (trace_event_t)EV_FREE(ne, 281); /* dead now */
  ne++;
  assert_int_equal(run(f, evs, ne, &cfg, &res, NULL), AS_OK);
  assert_int_equal(res.skipped_double_alloc, 1);
  assert_int_equal(res.skipped_bad_free, 2);
  assert_int_equal(res.final_live_bytes, 280 * 281 / 2 - 280);
}

/* ---- Samples ------------------------------------------------------------ */

typedef struct sample_rec_s sample_rec_t;
struct sample_rec_s {
  int          n;
  sim_sample_t s[16];
  char         labels[16][32];
};

static as_status_t record(void *user, const sim_sample_t *s, as_err_t *err) {
  sample_rec_t *r = user;
  (void)err;
  if (r->n < 16) {
    r->s[r->n] = *s;
    snprintf(r->labels[r->n], 32, "%s", s->label ? s->label : "");
    r->n++;
  }
  return AS_OK;
}

static void marks_periodic_and_final_samples_carry_live_bytes(void **state) {
  fixture_t          *f = *state;
  trace_event_t       evs[] = {EV_MALLOC(5, 1, 100), EV_MARK(12, "one"),
                               EV_REALLOC(15, 1, 300), EV_MALLOC(25, 2, 50)};
  sample_rec_t        rec = {0};
  sim_run_result_t    res;
  sim_engine_config_t cfg = {
      .sample_every_ns = 10, .on_sample = record, .user = &rec};
  assert_int_equal(run(f, evs, 4, &cfg, &res, NULL), AS_OK);
  assert_int_equal(rec.n, 4);
  assert_int_equal(rec.s[0].kind, SIM_SAMPLE_PERIODIC);
  assert_int_equal(rec.s[0].t_ns, 10);
  assert_int_equal(rec.s[0].live_bytes, 100);
  assert_int_equal(rec.s[1].kind, SIM_SAMPLE_MARK);
  assert_string_equal(rec.labels[1], "one");
  assert_int_equal(rec.s[1].t_ns, 12);
  assert_int_equal(rec.s[2].kind, SIM_SAMPLE_PERIODIC);
  assert_int_equal(rec.s[2].t_ns, 20);
  assert_int_equal(rec.s[2].live_bytes, 300);
  assert_int_equal(rec.s[3].kind, SIM_SAMPLE_FINAL);
  assert_int_equal(rec.s[3].t_ns, 25);
  assert_int_equal(rec.s[3].live_bytes, 350);
  assert_int_equal(res.peak_live_bytes, 350);
}

static void measured_rss_events_pass_through(void **state) {
  fixture_t          *f = *state;
  trace_event_t       evs[] = {{.t_ns = 3, .op = TRACE_RSS, .size = 12345},
                               {.t_ns = 4, .op = TRACE_TRIM, .size = 64}};
  sample_rec_t        rec = {0};
  sim_run_result_t    res;
  sim_engine_config_t cfg = {.on_sample = record, .user = &rec};
  assert_int_equal(run(f, evs, 2, &cfg, &res, NULL), AS_OK);
  assert_int_equal(rec.s[0].kind, SIM_SAMPLE_MEASURED);
  assert_int_equal(rec.s[0].measured_rss_bytes, 12345);
  assert_string_equal(f->spy.log, "trim64@4");
}

/* ---- The ideal model through a session ---------------------------------- */

static void ideal_rss_is_live_bytes_rounded_up_to_pages(void **state) {
  (void)state;
  sim_session_t       s;
  sim_kernel_config_t k;
  sim_kernel_config_default(&k);
  k.page_size = 16384;
  assert_int_equal(sim_session_open("ideal", NULL, &k, &s, NULL), AS_OK);
  trace_event_t       evs[] = {EV_MALLOC(1, 1, 10000), EV_MALLOC(2, 2, 10000),
                               EV_MARK(3, "two"), EV_FREE(4, 1),
                               EV_REALLOC(5, 2, 40000)};
  sample_rec_t        rec = {0};
  sim_run_result_t    res;
  sim_engine_config_t cfg = {.on_sample = record, .user = &rec};
  array_source_t      src;
  array_source_init(&src, evs, 5);
  assert_int_equal(sim_engine_run(&cfg, &s, &src.base, &res, NULL), AS_OK);
  assert_int_equal(rec.s[0].rss_bytes, 2 * 16384);
  assert_int_equal(rec.s[0].owner_bytes[SIM_OWNER_IDEAL], 2 * 16384);
  assert_int_equal(res.final_rss_bytes, 3 * 16384);
  assert_int_equal(res.peak_rss_bytes, 3 * 16384);
  assert_string_equal(s.model_desc, "ideal");
  sim_session_close(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(settle_fires_timers_after_the_last_event,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(purge_and_option_events_reach_the_model,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(placements_reach_the_kernel_not_the_model,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          events_a_model_has_no_notion_of_are_counted_or_strict, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          touch_makes_the_named_pages_of_an_object_resident, setup, teardown),
      cmocka_unit_test_setup_teardown(a_touch_outside_its_object_is_refused,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(a_touch_threshold_below_a_page_is_refused,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          timer_due_at_t_fires_before_the_event_stamped_t, setup, teardown),
      cmocka_unit_test_setup_teardown(timers_after_the_last_event_do_not_fire,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          idle_advances_the_clock_through_due_timers, setup, teardown),
      cmocka_unit_test_setup_teardown(event_inside_an_idle_stretch_is_refused,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          zero_delay_timer_chain_is_an_error_not_a_hang, setup, teardown),
      cmocka_unit_test_setup_teardown(
          free_of_a_dead_object_is_an_error_naming_the_event, setup, teardown),
      cmocka_unit_test_setup_teardown(lenient_counts_and_skips_bad_events,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(huge_object_ids_are_refused, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(an_id_beyond_the_table_is_not_live, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(
          sizes_small_and_big_reach_the_model_exactly, setup, teardown),
      cmocka_unit_test_setup_teardown(sizes_survive_the_live_tables_widening,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(liveness_holds_in_both_widths, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(many_big_objects_keep_their_sizes, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(
          marks_periodic_and_final_samples_carry_live_bytes, setup, teardown),
      cmocka_unit_test_setup_teardown(measured_rss_events_pass_through, setup,
                                      teardown),
      cmocka_unit_test(ideal_rss_is_live_bytes_rounded_up_to_pages),
      cmocka_unit_test(a_composition_without_purge_counts_it_like_its_libc),
      cmocka_unit_test(threads_start_before_they_exit),
      cmocka_unit_test_setup_teardown(max_threads_counts_the_overlap, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
