/* tests/unit/test_touch_span.c -- a capture's touches are pages of the
 * object's span (traces/touch_span.h): a replay that starts the object
 * elsewhere in its page faults the pages the captured process faulted,
 * not one more per range.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/engine.h"
#include "tests/helpers/scratch.h"
#include "traces/touch_span.h"
#include "traces/trace_io.h"

#define PAGE 4096u

/* An object 100 bytes into its page, 3 pages long: its span is pages 0-3
 * and the recorder reports page 0 as [0, 3996), page 1 as [3996, 8092),
 * pages 2-3 as [8092, 12288). */
static void ranges_name_the_captured_pages(void **state) {
  (void)state;
  uint64_t first, end;
  assert_true(touch_span_pages(3 * PAGE, 0, PAGE - 100, PAGE, &first, &end));
  assert_int_equal(first, 0);
  assert_int_equal(end, 1);
  assert_true(touch_span_pages(3 * PAGE, PAGE - 100, PAGE, PAGE, &first, &end));
  assert_int_equal(first, 1);
  assert_int_equal(end, 2);
  assert_true(touch_span_pages(3 * PAGE, 2 * PAGE - 100, PAGE + 100, PAGE,
                               &first, &end));
  assert_int_equal(first, 2);
  assert_int_equal(end, 4);
  /* The whole object says nothing of the grid; nor does nothing. */
  assert_false(touch_span_pages(3 * PAGE, 0, 3 * PAGE, PAGE, &first, &end));
  assert_false(touch_span_pages(3 * PAGE, 5, 0, PAGE, &first, &end));
}

/* Only a capture's traces (touch_threshold and page_size) have touches in
 * pages, and a page_size that is not a power of two is refused. */
static void only_a_capture_measures_touches_in_pages(void **state) {
  (void)state;
  uint64_t page;
  assert_true(touch_span_page("4096", "4096", &page));
  assert_int_equal(page, 4096);
  assert_true(touch_span_page("4096", "16384", &page));
  assert_int_equal(page, 16384);
  assert_true(touch_span_page(NULL, "4096", &page));
  assert_int_equal(page, 0);
  assert_true(touch_span_page("4096", NULL, &page));
  assert_int_equal(page, 0);
  static const char *const bad[] = {"4000", "1",     "x",
                                    "",     "4096x", "10737418240"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_false(touch_span_page("4096", bad[i], &page));
}

/* Page 1 of the captured span is page 1 of a span that starts on a page
 * boundary (one page, not the two its bytes would straddle), and the
 * bytes stay inside the object where its span is shorter. */
static void pages_map_into_the_replays_span(void **state) {
  (void)state;
  uint64_t lo, hi, at = 0x10000;
  touch_span_bytes(at, 3 * PAGE, PAGE, 1, 2, &lo, &hi);
  assert_int_equal(lo, at + PAGE);
  assert_int_equal(hi, at + 2 * PAGE);
  touch_span_bytes(at, 3 * PAGE, PAGE, 2, 4, &lo, &hi);
  assert_int_equal(lo, at + 2 * PAGE);
  assert_int_equal(hi, at + 3 * PAGE); /* page 3 lies past the object */
  touch_span_bytes(at + 64, 3 * PAGE, PAGE, 0, 1, &lo, &hi);
  assert_int_equal(lo, at + 64);
  assert_int_equal(hi, at + PAGE);
  touch_span_bytes(at, PAGE, PAGE, 3, 4, &lo, &hi);
  assert_int_equal(hi, lo); /* none of the object */
}

static char g_dir[64];

static int setup(void **state) {
  (void)state;
  scratch_make(g_dir, sizeof g_dir, "span");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  scratch_remove(g_dir);
  return 0;
}

#define OBJECTS 16

/* Final RSS of the jemalloc model replaying OBJECTS allocations of 64 KiB
 * that a process captured 100 bytes into their pages; with touches, page
 * 1 of each (the range [3996, 8092)). */
static uint64_t replay_jemalloc(bool touches) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s.trace", g_dir, touches ? "t" : "u");
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("allocsim-trace 1\n#@ touch_threshold=4096\n#@ page_size=4096\n", f);
  for (unsigned i = 0; i < OBJECTS; i++) {
    fprintf(f, "%u 0 malloc %u 65536\n", 2 * i, i);
    if (touches)
      fprintf(f, "%u 0 touch %u %u %u\n", 2 * i + 1, i, PAGE - 100, PAGE);
  }
  fclose(f);
  trace_source_t *src = NULL;
  sim_session_t   s;
  as_err_t        err = {0};
  assert_int_equal(trace_open(path, &src, &err), AS_OK);
  assert_int_equal(sim_session_open("jemalloc", NULL, NULL, &s, &err), AS_OK);
  sim_engine_config_t cfg = {0};
  sim_run_result_t    r;
  assert_int_equal(sim_engine_run(&cfg, &s, src, &r, &err), AS_OK);
  sim_session_close(&s);
  trace_source_close(src);
  return r.final_rss_bytes;
}

/* jemalloc's model puts each large object at a random cache line of its
 * first page (cache-oblivious), not 100 bytes in: replayed as bytes, most
 * of the 16 ranges would straddle two pages (up to 32 pages); as pages of
 * the span, exactly 16. */
static void each_range_faults_the_pages_it_names(void **state) {
  (void)state;
  uint64_t grown = replay_jemalloc(true) - replay_jemalloc(false);
  assert_int_equal(grown, (uint64_t)OBJECTS * PAGE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ranges_name_the_captured_pages),
      cmocka_unit_test(pages_map_into_the_replays_span),
      cmocka_unit_test(only_a_capture_measures_touches_in_pages),
      cmocka_unit_test_setup_teardown(each_range_faults_the_pages_it_names,
                                      setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
