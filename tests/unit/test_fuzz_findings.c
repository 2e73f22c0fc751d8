/* tests/unit/test_fuzz_findings.c -- valid traces models once refused,
 * found by tests/fuzz/fuzz_models; each test failed before its fix.
 *
 * 1. mimalloc aligns an area it resets or decommits inward to the OS page
 *    (_mi_os_page_size(), sysconf(_SC_PAGESIZE)), not to 4 KiB.  The model
 *    once rounded to 4 KiB, so on a 64 KiB-page kernel a huge block freed
 *    by another thread (2.x _mi_segment_huge_page_reset) was madvised at an
 *    address that is no page boundary and the replay failed.  The replays
 *    must run on every page size, and the freed block's pages, all but the
 *    first and the partial last, must leave RSS.
 * 2. mi_option_set(mi_option_page_reset, 64) turns the option on (any value
 *    but 0 does); the model refused it as "expects true or false".
 * 3. A `purge decay` event (jemalloc's arena.<i>.decay, mimalloc's
 *    mi_collect(false)) has no gperftools counterpart; the tcmalloc model
 *    failed the run instead of leaving it to the engine, which counts such
 *    events (an error only under --strict), as for a model without purge.
 * 4. gperftools' SetNumericProperty takes a size_t and SetMemoryReleaseRate
 *    a double, so a program may pass -1 (SIZE_MAX: for heap_limit_mb an
 *    int64 flag that reads negative, no limit; for release_rate, releasing
 *    off).  The tcmalloc model refused a negative value and failed the run.
 * 5. jemalloc 5.2.1 a0mallocs each thread's decay tickers, 8 bytes per
 *    arena.  With more than 1791 arenas on 4 KiB pages the array is a
 *    large allocation, which the model took as a small bin's index: a read
 *    past the bins (ASan).  Not a trace the model once refused, but a
 *    configuration it now refuses by name; up to the limit it runs.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "engine/engine.h"
#include "tests/helpers/array_source.h"

#define HUGE_BYTES UINT64_C(24000000) /* above 2.x's 32 MiB / 2 huge limit */

static const uint64_t    page_sizes[] = {4096, 16384, 65536};
static const char *const versions_2x[] = {"2.0.9", "2.1.2", "2.1.7"};

typedef struct marks_s marks_t;
struct marks_s {
  uint64_t allocated, freed; /* RSS at the marks of those names */
};

static as_status_t keep_marks(void *user, const sim_sample_t *smp,
                              as_err_t *err) {
  (void)err;
  marks_t *mk = user;
  if (smp->kind != SIM_SAMPLE_MARK)
    return AS_OK;
  if (strcmp(smp->label, "allocated") == 0)
    mk->allocated = smp->rss_bytes;
  else if (strcmp(smp->label, "freed") == 0)
    mk->freed = smp->rss_bytes;
  return AS_OK;
}

/* Replays events on spec with page-byte pages (under memory pressure, so
 * MADV_FREE'd pages leave RSS); fails the test on an error, naming spec
 * and page size. */
static marks_t replay(const char *spec, uint64_t page,
                      const trace_event_t *events, size_t n) {
  sim_kernel_config_t kcfg;
  sim_kernel_config_default(&kcfg);
  kcfg.page_size = page;
  kcfg.memory_pressure = true;
  sim_session_t s;
  as_err_t      err = {0};
  if (sim_session_open(spec, NULL, &kcfg, &s, &err) != AS_OK)
    fail_msg("%s: %s", spec, err.msg);
  marks_t             mk = {0, 0};
  sim_engine_config_t cfg = {.on_sample = keep_marks, .user = &mk};
  array_source_t      src;
  array_source_init(&src, events, n);
  sim_run_result_t res;
  as_status_t      rc = sim_engine_run(&cfg, &s, &src.base, &res, &err);
  sim_session_close(&s);
  if (rc != AS_OK)
    fail_msg("%s on %" PRIu64 "-byte pages: %s", spec, page, err.msg);
  return mk;
}

/* A huge block allocated by thread 0 and freed by thread 1: the free
 * resets the block but its first word (segment.c _mi_segment_huge_page_
 * reset), so its RSS falls by the block less at most two OS pages. */
static void huge_block_freed_by_another_thread(void **state) {
  (void)state;
  const trace_event_t events[] = {
      {.t_ns = 0, .op = TRACE_THREAD_START, .thread = 1},
      {.t_ns = 10, .op = TRACE_MALLOC, .id = 0, .size = HUGE_BYTES},
      EV_MARK(20, "allocated"),
      {.t_ns = 30, .op = TRACE_FREE, .id = 0, .thread = 1},
      EV_MARK(40, "freed"),
  };
  for (size_t v = 0; v < sizeof versions_2x / sizeof *versions_2x; v++)
    for (size_t p = 0; p < sizeof page_sizes / sizeof *page_sizes; p++) {
      char spec[64];
      snprintf(spec, sizeof spec, "mimalloc:version=%s", versions_2x[v]);
      marks_t mk =
          replay(spec, page_sizes[p], events, sizeof events / sizeof *events);
      assert_true(mk.allocated >= HUGE_BYTES);
      if (mk.allocated - mk.freed < HUGE_BYTES - 2 * page_sizes[p])
        fail_msg("%s, %" PRIu64 "-byte pages: RSS fell by %" PRIu64
                 " bytes, expected at least %" PRIu64,
                 spec, page_sizes[p], mk.allocated - mk.freed,
                 HUGE_BYTES - 2 * page_sizes[p]);
    }
}

/* 200 blocks of 3,000 bytes, then an option event (if name), then every
 * block freed: a few 2.0.9 small pages filled and emptied. */
static size_t fill_and_empty(trace_event_t *events, const char *name,
                             int64_t value) {
  size_t n = 0;
  for (uint64_t i = 0; i < 200; i++)
    events[n++] = (trace_event_t)EV_MALLOC(10 * i, i, 3000);
  events[n++] = (trace_event_t)EV_MARK(2000, "allocated");
  if (name != NULL)
    events[n++] = (trace_event_t){.t_ns = 2005,
                                  .op = TRACE_OPTION,
                                  .label = name,
                                  .size = (uint64_t)value};
  for (uint64_t i = 0; i < 200; i++)
    events[n++] = (trace_event_t)EV_FREE(2010 + 10 * i, i);
  events[n++] = (trace_event_t)EV_MARK(4010, "freed");
  return n;
}

/* 2.0.9's page_reset: a freed page's area is MADV_FREE'd from its first
 * OS page boundary on every page size; under pressure the freed pages
 * leave RSS, which falls by most of the 600,000 bytes. */
static void page_reset_on_every_page_size(void **state) {
  (void)state;
  trace_event_t events[403];
  size_t        n = fill_and_empty(events, NULL, 0);
  for (size_t p = 0; p < sizeof page_sizes / sizeof *page_sizes; p++) {
    marks_t mk =
        replay("mimalloc:version=2.0.9,page_reset=1", page_sizes[p], events, n);
    assert_true(mk.allocated >= 200 * 3000);
    assert_true(mk.allocated - mk.freed >= 200 * 3000 - 8 * page_sizes[p]);
  }
}

/* An option event of 64 for page_reset gives what page_reset=1 in the spec
 * gives (49,152 bytes left at 'freed' on 4 KiB pages), not what the
 * default gives (638,976: the emptied pages stay). */
static void a_yes_no_option_is_on_for_any_value_but_zero(void **state) {
  (void)state;
  trace_event_t plain[403], set64[403], set0[403];
  size_t        n = fill_and_empty(plain, NULL, 0);
  size_t        n64 = fill_and_empty(set64, "page_reset", 64);
  size_t        n0 = fill_and_empty(set0, "page_reset", 0);
  marks_t on = replay("mimalloc:version=2.0.9,page_reset=1", 4096, plain, n);
  marks_t off = replay("mimalloc:version=2.0.9", 4096, plain, n);
  marks_t by64 = replay("mimalloc:version=2.0.9", 4096, set64, n64);
  marks_t by0 = replay("mimalloc:version=2.0.9,page_reset=1", 4096, set0, n0);
  assert_int_equal(on.freed, 49152);
  assert_int_equal(off.freed, 638976);
  assert_int_equal(by64.freed, on.freed);
  assert_int_equal(by0.freed, off.freed);
}

/* Replays events on spec (4 KiB pages) with strict as given; returns the
 * status and fills *res. */
static as_status_t replay_status(const char *spec, bool strict,
                                 const trace_event_t *events, size_t n,
                                 sim_run_result_t *res, as_err_t *err) {
  sim_session_t s;
  if (sim_session_open(spec, NULL, NULL, &s, err) != AS_OK)
    fail_msg("%s: %s", spec, err->msg);
  sim_engine_config_t cfg = {.strict = strict};
  array_source_t      src;
  array_source_init(&src, events, n);
  as_status_t rc = sim_engine_run(&cfg, &s, &src.base, res, err);
  sim_session_close(&s);
  return rc;
}

static void tcmalloc_counts_a_decay_purge(void **state) {
  (void)state;
  const trace_event_t events[] = {
      EV_MALLOC(0, 0, 100),
      {.t_ns = 10,
       .op = TRACE_PURGE,
       .size = TRACE_PURGE_DECAY,
       .id = TRACE_ALL_ARENAS},
      EV_FREE(20, 0),
      EV_MARK(30, "end"),
  };
  size_t           n = sizeof events / sizeof *events;
  sim_run_result_t res;
  as_err_t         err = {0};
  if (replay_status("tcmalloc", false, events, n, &res, &err) != AS_OK)
    fail_msg("tcmalloc: %s", err.msg);
  assert_int_equal(res.ignored_events, 1);
  assert_int_equal(res.events, n);
  assert_int_equal(replay_status("tcmalloc", true, events, n, &res, &err),
                   AS_EINVAL);
  assert_non_null(strstr(err.msg, "no notion of purge"));
}

static void tcmalloc_takes_minus_one_as_gperftools_does(void **state) {
  (void)state;
  const trace_event_t events[] = {
      {.t_ns = 0,
       .op = TRACE_OPTION,
       .label = "heap_limit_mb",
       .size = (uint64_t)-1},
      {.t_ns = 1,
       .op = TRACE_OPTION,
       .label = "release_rate",
       .size = (uint64_t)-1},
      {.t_ns = 2,
       .op = TRACE_OPTION,
       .label = "max_total_thread_cache_bytes",
       .size = (uint64_t)-1},
      EV_MALLOC(10, 0, 64 << 20),
      EV_FREE(20, 0),
      EV_MARK(30, "end"),
  };
  size_t           n = sizeof events / sizeof *events;
  sim_run_result_t res;
  as_err_t         err = {0};
  if (replay_status("tcmalloc", true, events, n, &res, &err) != AS_OK)
    fail_msg("tcmalloc: %s", err.msg);
  assert_int_equal(res.events, n);
  /* No limit and no release: the 64 MiB span stays mapped and counted. */
  assert_true(res.peak_rss_bytes >= UINT64_C(64) << 20);
}

/* fuzz_models found mimalloc taking thread_stack_pages (glibc's threads,
 * not a mimalloc option) at run time, then failing the replay on -1: no
 * mimalloc call sets it, so an option event naming it is refused as one
 * that cannot change at run time. */
static void mimalloc_refuses_stack_options_at_run_time(void **state) {
  (void)state;
  const char *const names[] = {"thread_stack_pages", "stack_size"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    const trace_event_t events[] = {
        {.t_ns = 0, .op = TRACE_OPTION, .label = names[i], .size = 1},
        EV_MARK(10, "end"),
    };
    sim_run_result_t res;
    as_err_t         err = {0};
    assert_int_equal(replay_status("mimalloc", true, events, 2, &res, &err),
                     AS_EINVAL);
    assert_non_null(strstr(err.msg, "cannot change at run time"));
  }
}

static void
jemalloc_521_tickers_past_the_small_classes_are_refused(void **state) {
  (void)state;
  const trace_event_t events[] = {
      {.t_ns = 0, .op = TRACE_THREAD_START, .thread = 1},
      {.t_ns = 10, .op = TRACE_MALLOC, .id = 0, .size = 100, .thread = 1},
      EV_FREE(20, 0),
      EV_MARK(30, "end"),
  };
  size_t           n = sizeof events / sizeof *events;
  sim_run_result_t res;
  as_err_t         err = {0};
  /* 1792 arenas: 14,336 bytes of tickers, the largest small class */
  assert_int_equal(replay_status("jemalloc:version=5.2.1,narenas=1791", false,
                                 events, n, &res, &err),
                   AS_OK);
  /* 64 KiB pages: small classes up to 224 KiB hold the most arenas */
  assert_int_equal(replay_status("jemalloc:version=5.2.1,narenas=4094,"
                                 "lg_page=16",
                                 false, events, n, &res, &err),
                   AS_OK);
  sim_session_t s;
  assert_int_equal(sim_session_open("jemalloc:version=5.2.1,narenas=1792", NULL,
                                    NULL, &s, &err),
                   AS_EUSAGE);
  assert_non_null(strstr(err.msg, "at most 1792 arenas"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(huge_block_freed_by_another_thread),
      cmocka_unit_test(page_reset_on_every_page_size),
      cmocka_unit_test(a_yes_no_option_is_on_for_any_value_but_zero),
      cmocka_unit_test(tcmalloc_counts_a_decay_purge),
      cmocka_unit_test(tcmalloc_takes_minus_one_as_gperftools_does),
      cmocka_unit_test(mimalloc_refuses_stack_options_at_run_time),
      cmocka_unit_test(jemalloc_521_tickers_past_the_small_classes_are_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
