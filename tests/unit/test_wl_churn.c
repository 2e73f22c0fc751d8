/* tests/unit/test_wl_churn.c -- the churn workload (traces/wl_churn.c): its
 * phases, the working set it keeps, its size mixes, its determinism and
 * its option errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "traces/workload.h"

typedef struct tally_s {
  uint64_t events, mallocs, frees, reallocs, marks, max_live, live;
  uint64_t min_size, max_size, sum;
  uint64_t mmap_sized; /* requests of at least 64 KiB */
  uint64_t last_t;
  bool     times_ok, ids_ok;
  char     labels[3][16];
} tally_t;

static void run(const char *line, tally_t *t) {
  trace_source_t *src = NULL;
  as_err_t        err = {0};
  memset(t, 0, sizeof *t);
  t->min_size = UINT64_MAX;
  t->times_ok = t->ids_ok = true;
  assert_int_equal(workload_open_line(line, &src, &err), AS_OK);
  unsigned char *live = calloc(1 << 20, 1);
  trace_event_t  ev;
  as_status_t    rc;
  while ((rc = trace_source_next(src, &ev, &err)) == AS_OK) {
    t->events++;
    t->times_ok &= ev.t_ns >= t->last_t;
    t->last_t = ev.t_ns;
    if (ev.op == TRACE_MARK) {
      if (t->marks < 3)
        strncpy(t->labels[t->marks], ev.label, 15);
      t->marks++;
      continue;
    }
    assert_int_equal(ev.domain, TRACE_DOMAIN_RAW);
    assert_true(ev.id < (1 << 20));
    if (ev.op == TRACE_FREE) {
      t->ids_ok &= live[ev.id] == 1;
      live[ev.id] = 0, t->live--, t->frees++;
      continue;
    }
    if (ev.op == TRACE_MALLOC) {
      t->ids_ok &= live[ev.id] == 0;
      live[ev.id] = 1, t->live++, t->mallocs++;
    } else {
      assert_int_equal(ev.op, TRACE_REALLOC);
      t->ids_ok &= live[ev.id] == 1;
      t->reallocs++;
    }
    if (t->live > t->max_live)
      t->max_live = t->live;
    t->min_size = ev.size < t->min_size ? ev.size : t->min_size;
    t->max_size = ev.size > t->max_size ? ev.size : t->max_size;
    t->mmap_sized += ev.size >= 65536;
    t->sum += ev.size;
  }
  assert_int_equal(rc, AS_DONE);
  trace_source_close(src);
  free(live);
}

static void fills_then_keeps_exactly_live_objects(void **state) {
  (void)state;
  tally_t t;
  run("churn --live 1000 --steps 3200", &t);
  /* 3200 steps: every 16th (200) a realloc, the others a free + malloc. */
  assert_int_equal(t.reallocs, 200);
  assert_int_equal(t.frees, 3000);
  assert_int_equal(t.mallocs, 1000 + 3000);
  assert_int_equal(t.events, 3 + 1000 + 200 + 2 * 3000);
  assert_int_equal(t.live, 1000);
  assert_int_equal(t.max_live, 1000);
  assert_true(t.ids_ok);
  assert_true(t.times_ok);
  assert_int_equal(t.marks, 3);
  assert_string_equal(t.labels[0], "start");
  assert_string_equal(t.labels[1], "filled");
  assert_string_equal(t.labels[2], "end");
}

static void mixed_sizes_reach_mmap_sizes_and_small_stay_below_4k(void **s) {
  (void)s;
  tally_t t;
  run("churn --live 5000 --steps 20000", &t);
  uint64_t reqs = t.mallocs + t.reallocs;
  assert_true(t.min_size >= 16);
  assert_true(t.max_size <= 65536 + 458752);
  /* 1 % of requests are 64-512 KiB: 3.5 sigma bounds around 1 %. */
  assert_in_range(t.mmap_sized, reqs / 100 - 3 * 30, reqs / 100 + 3 * 30);
  run("churn --live 5000 --steps 20000 --sizes small", &t);
  assert_true(t.min_size >= 16);
  assert_true(t.max_size <= 4096);
  /* mean of 60 % U[16,256] and 40 % U[256,4096]: 0.6*136 + 0.4*2176 = 952 */
  double mean = (double)t.sum / (double)(t.mallocs + t.reallocs);
  assert_true(mean > 900 && mean < 1000);
}

static void same_seed_same_trace_other_seed_differs(void **state) {
  (void)state;
  tally_t a, b, c;
  run("churn --live 300 --steps 1000 --seed 7", &a);
  run("churn --live 300 --steps 1000 --seed 7", &b);
  run("churn --live 300 --steps 1000 --seed 8", &c);
  assert_int_equal(a.sum, b.sum);
  assert_int_equal(a.last_t, b.last_t);
  assert_true(a.sum != c.sum);
}

static void no_reallocs_with_realloc_every_0(void **state) {
  (void)state;
  tally_t t;
  run("churn --live 10 --steps 100 --realloc-every 0", &t);
  assert_int_equal(t.reallocs, 0);
  assert_int_equal(t.frees, 100);
}

static void bad_options_name_the_option(void **state) {
  (void)state;
  trace_source_t *src = NULL;
  as_err_t        err = {0};
  assert_int_equal(workload_open_line("churn --live 0", &src, &err), AS_EUSAGE);
  assert_non_null(strstr(err.msg, "--live"));
  assert_int_equal(workload_open_line("churn --sizes huge", &src, &err),
                   AS_EUSAGE);
  assert_non_null(strstr(err.msg, "--sizes expects mixed or small"));
  assert_int_equal(workload_open_line("churn --steps x", &src, &err),
                   AS_EUSAGE);
  assert_non_null(strstr(err.msg, "--steps"));
  assert_null(src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fills_then_keeps_exactly_live_objects),
      cmocka_unit_test(mixed_sizes_reach_mmap_sizes_and_small_stay_below_4k),
      cmocka_unit_test(same_seed_same_trace_other_seed_differs),
      cmocka_unit_test(no_reallocs_with_realloc_every_0),
      cmocka_unit_test(bad_options_name_the_option),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
