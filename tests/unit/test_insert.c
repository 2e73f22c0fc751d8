/* tests/unit/test_insert.c -- events inserted from the command line
 * (traces/insert.c): periodic inserts that fall inside an idle run at their
 * times, the idle split around them, and the stream's clock never goes
 * back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "traces/insert.h"
#include "traces/trace_io.h"

/* The events of text trace `text` with spec inserted, into out[] (at most
 * cap); returns how many. */
static size_t inserted(const char *text, const char *spec, trace_event_t *out,
                       size_t cap) {
  FILE *f = fmemopen((void *)text, strlen(text), "r");
  assert_non_null(f);
  trace_source_t *src, *wrapped;
  trace_insert_t  ins;
  assert_int_equal(trace_insert_parse(spec, &ins, NULL), AS_OK);
  assert_int_equal(trace_text_open_stream(f, "t.trace", NULL, 0, &src, NULL),
                   AS_OK);
  assert_int_equal(trace_insert_wrap(src, &ins, 1, &wrapped, NULL), AS_OK);
  size_t n = 0;
  while (n < cap && trace_source_next(wrapped, &out[n], NULL) == AS_OK)
    n++;
  trace_source_close(wrapped);
  return n;
}

/* A trim every 10 ns from the first event (t=0) over an idle from 10 to
 * 110 ns: trims at 10, 20, ..., 110 -- nine inside the idle, which runs as
 * ten idles of 10 ns between them. */
static void periodic_inserts_run_inside_an_idle(void **state) {
  (void)state;
  const char   *text = "allocsim-trace 1\n0 0 malloc 1 100\n10 0 idle 100\n"
                       "110 0 free 1\n";
  trace_event_t ev[64];
  size_t        n = inserted(text, "trim@every:10ns", ev, 64);
  assert_int_equal(n, 2 + 11 + 10); /* malloc, free, trims, idles */
  uint64_t trims = 0, idle_ns = 0, clock = 0;
  for (size_t i = 0; i < n; i++) {
    assert_true(ev[i].t_ns >= clock); /* never before the clock */
    clock = ev[i].t_ns;
    if (ev[i].op == TRACE_TRIM) {
      trims++;
      assert_int_equal(ev[i].t_ns, 10 * trims);
    } else if (ev[i].op == TRACE_IDLE) {
      assert_int_equal(ev[i].t_ns, 10 + idle_ns);
      assert_int_equal(ev[i].size, 10);
      idle_ns += ev[i].size;
      clock = ev[i].t_ns + ev[i].size;
    }
  }
  assert_int_equal(trims, 11);
  assert_int_equal(idle_ns, 100);
  assert_int_equal(ev[n - 1].op, TRACE_FREE);
}

/* A period that falls only at the idle's end leaves the idle whole. */
static void an_insert_at_the_idle_end_does_not_split_it(void **state) {
  (void)state;
  const char   *text = "allocsim-trace 1\n0 0 mark a\n0 0 idle 50\n"
                       "50 0 mark b\n";
  trace_event_t ev[16];
  size_t        n = inserted(text, "trim@every:50ns", ev, 16);
  assert_int_equal(n, 4);
  assert_int_equal(ev[1].op, TRACE_IDLE);
  assert_int_equal(ev[1].size, 50);
  assert_int_equal(ev[2].op, TRACE_TRIM);
  assert_int_equal(ev[2].t_ns, 50);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(periodic_inserts_run_inside_an_idle),
      cmocka_unit_test(an_insert_at_the_idle_end_does_not_split_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
