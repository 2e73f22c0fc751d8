/* tests/unit/test_mimalloc_os_pages.c -- mimalloc's resets and decommits on
 * 16 and 64 KiB OS pages.
 *
 * mimalloc aligns an area it resets or decommits inward to the OS page
 * (_mi_os_page_size(), sysconf(_SC_PAGESIZE)), not to 4 KiB.  The model
 * once rounded to 4 KiB, so on a 64 KiB-page kernel a huge block freed by
 * another thread (2.x _mi_segment_huge_page_reset) was madvised at an
 * address that is no page boundary and the replay of a valid trace failed
 * (found by tests/fuzz/fuzz_models).  Here the same replays must run on
 * every page size, and the freed block's pages, all but the first and the
 * partial last, must leave RSS.
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

static const uint64_t page_sizes[] = {4096, 16384, 65536};
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

/* Replays events on spec with page-byte pages; fails the test on an
 * error, naming spec and page size. */
static marks_t replay(const char *spec, uint64_t page,
                      const trace_event_t *events, size_t n) {
  sim_kernel_config_t kcfg;
  sim_kernel_config_default(&kcfg);
  kcfg.page_size = page;
  sim_session_t s;
  as_err_t      err = {0};
  if (sim_session_open(spec, NULL, &kcfg, &s, &err) != AS_OK)
    fail_msg("%s: %s", spec, err.msg);
  marks_t             mk  = {0, 0};
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
      marks_t mk = replay(spec, page_sizes[p], events,
                          sizeof events / sizeof *events);
      assert_true(mk.allocated >= HUGE_BYTES);
      if (mk.allocated - mk.freed < HUGE_BYTES - 2 * page_sizes[p])
        fail_msg("%s, %" PRIu64 "-byte pages: RSS fell by %" PRIu64
                 " bytes, expected at least %" PRIu64,
                 spec, page_sizes[p], mk.allocated - mk.freed,
                 HUGE_BYTES - 2 * page_sizes[p]);
    }
}

/* 2.0.9's page_reset: a freed page's area is MADV_FREE'd from its first
 * OS page boundary; 200 blocks of 3,000 bytes fill and empty pages. */
static void page_reset_on_every_page_size(void **state) {
  (void)state;
  trace_event_t events[402];
  size_t        n = 0;
  for (uint64_t i = 0; i < 200; i++)
    events[n++] = (trace_event_t)EV_MALLOC(10 * i, i, 3000);
  events[n++] = (trace_event_t)EV_MARK(2000, "allocated");
  for (uint64_t i = 0; i < 200; i++)
    events[n++] = (trace_event_t)EV_FREE(2010 + 10 * i, i);
  for (size_t p = 0; p < sizeof page_sizes / sizeof *page_sizes; p++) {
    marks_t mk = replay("mimalloc:version=2.0.9,page_reset=1", page_sizes[p],
                        events, n);
    assert_true(mk.allocated >= 200 * 3000);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(huge_block_freed_by_another_thread),
      cmocka_unit_test(page_reset_on_every_page_size),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
