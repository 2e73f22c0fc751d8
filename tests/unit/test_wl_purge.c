/* tests/unit/test_wl_purge.c -- the purge workloads: lab-purge (the burst
 * program of scripts/measure/mimalloc/burst.c) and churn-purge (the churn
 * of scripts/measure/jemalloc/je_churn.c and mimalloc/churn.c).  Expected
 * sizes of the churn's shuffle were computed independently in Python from
 * the programs' Fisher-Yates over splitmix64.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "traces/workload.h"

#define MS UINT64_C(1000000)

typedef struct tally_s {
  uint64_t mallocs, frees, purges[3], marks, ticks[3];
  uint64_t by_size[3]; /* 512, 1024, 2048 */
  uint16_t first_sizes[12];
  char     labels[16][16]; /* non-tick marks in order */
  uint64_t label_t[16];
  size_t   nlabels;
  bool     monotone;
} tally_t;

static as_status_t open_line(const char *line, trace_source_t **src,
                             as_err_t *err) {
  return workload_open_line(line, src, err);
}

static void run(const char *line, tally_t *t) {
  trace_source_t *src;
  as_err_t        err = {0};
  memset(t, 0, sizeof *t);
  t->monotone = true;
  if (open_line(line, &src, &err) != AS_OK)
    fail_msg("%s: %s", line, err.msg);
  trace_event_t ev;
  uint64_t      prev = 0;
  while (trace_source_next(src, &ev, &err) == AS_OK) {
    t->monotone = t->monotone && ev.t_ns >= prev;
    prev = ev.t_ns;
    switch (ev.op) {
    case TRACE_MALLOC:
      if (t->mallocs < 12)
        t->first_sizes[t->mallocs] = (uint16_t)ev.size;
      t->mallocs++;
      t->by_size[ev.size == 512 ? 0 : ev.size == 1024 ? 1 : 2]++;
      break;
    case TRACE_FREE:
      t->frees++;
      break;
    case TRACE_PURGE:
      t->purges[ev.size]++;
      break;
    case TRACE_MARK:
      t->marks++;
      if (strcmp(ev.label, "idle_tick") == 0)
        t->ticks[0]++;
      else if (strcmp(ev.label, "collect_tick") == 0)
        t->ticks[1]++;
      else if (strcmp(ev.label, "force_tick") == 0)
        t->ticks[2]++;
      else if (t->nlabels < 16) {
        snprintf(t->labels[t->nlabels], 16, "%s", ev.label);
        t->label_t[t->nlabels++] = ev.t_ns;
      }
      break;
    default:
      break;
    }
  }
  assert_int_equal(err.code, AS_OK);
  trace_source_close(src);
}

/* The burst program's steps: marks in order, a tick per 100 ms sample
 * (120 in 12 s, 5 in each 500 ms), the collects as purge decay / all. */
static void lab_purge_follows_the_burst_program(void **state) {
  (void)state;
  tally_t t;
  run("lab-purge --alloc-time 1s --free-time 200ms", &t);
  assert_int_equal(t.mallocs, 20000);
  assert_int_equal(t.frees, 20000);
  assert_int_equal(t.ticks[0], 120);
  assert_int_equal(t.ticks[1], 5);
  assert_int_equal(t.ticks[2], 5);
  assert_int_equal(t.purges[TRACE_PURGE_DECAY], 1);
  assert_int_equal(t.purges[TRACE_PURGE_ALL], 1);
  assert_true(t.monotone);
  static const char *const order[] = {
      "start",     "allocated",       "freed", "idle_end",
      "collected", "collected_force", "end"};
  assert_int_equal(t.nlabels, 7);
  for (size_t i = 0; i < 7; i++)
    assert_string_equal(t.labels[i], order[i]);
  /* the measured phase times: allocated at 1 s, freed 200 ms later, the
   * idle 12 s, each collect followed by 500 ms */
  assert_int_equal(t.label_t[1], 1000 * MS);
  assert_int_equal(t.label_t[2], 1200 * MS);
  assert_int_equal(t.label_t[3], 13200 * MS);
  assert_int_equal(t.label_t[5], 13700 * MS);
  assert_int_equal(t.label_t[6], 14200 * MS);
  /* activity: one malloc and free before each idle tick */
  run("lab-purge --activity unrelated --count 100 --idle 1s", &t);
  assert_int_equal(t.mallocs, 100 + 10);
  assert_int_equal(t.frees, 100 + 10);
}

/* The churn's counts, its shuffle, 1 in KEEP_EVERY kept, and the purges. */
static void churn_purge_follows_the_churn_programs(void **state) {
  (void)state;
  tally_t t;
  run("churn-purge --seed 1", &t);
  assert_int_equal(t.mallocs, 300000);
  assert_int_equal(t.by_size[0], 150000);
  assert_int_equal(t.by_size[1], 100000);
  assert_int_equal(t.by_size[2], 50000);
  assert_int_equal(t.frees, 300000 - 15000); /* i % 20 == 0 kept */
  static const uint16_t first[12] = {1024, 512, 1024, 512, 1024, 512,
                                     2048, 512, 1024, 512, 512,  1024};
  assert_memory_equal(t.first_sizes, first, sizeof first);
  assert_int_equal(t.purges[TRACE_PURGE_TCACHE], 1);
  assert_int_equal(t.purges[TRACE_PURGE_ALL], 1);
  static const char *const order[] = {"start",    "allocated",      "freed",
                                      "idle_end", "tcache_flushed", "purged"};
  assert_int_equal(t.nlabels, 6);
  for (size_t i = 0; i < 6; i++)
    assert_string_equal(t.labels[i], order[i]);
  assert_int_equal(t.label_t[3] - t.label_t[2], 10000 * MS);
  assert_true(t.monotone);
  run("churn-purge --seed 1 --keep-every 3 --alloc-time 2s --free-time 1s", &t);
  assert_int_equal(t.frees, 200000);
  assert_int_equal(t.label_t[1], 2000 * MS);
  assert_int_equal(t.label_t[2], 3000 * MS);
  /* je_churn.c's 100 ms samples of the idle: s1 .. s10 in a 1 s idle, the
   * last one at idle_end */
  run("churn-purge --idle 1s --sample-every 100ms", &t);
  assert_int_equal(t.nlabels, 16);
  assert_string_equal(t.labels[3], "s1");
  assert_int_equal(t.label_t[3] - t.label_t[2], 100 * MS);
  assert_string_equal(t.labels[12], "s10");
  assert_string_equal(t.labels[13], "idle_end");
  assert_int_equal(t.label_t[13], t.label_t[12]);
  assert_int_equal(t.label_t[13] - t.label_t[2], 1000 * MS);
  assert_true(t.monotone);
}

static void bad_options_name_the_option(void **state) {
  (void)state;
  static const struct {
    const char *line, *msg;
  } cases[] = {
      {"lab-purge --activity busy",
       "lab-purge: --activity must be none, unrelated or same, got 'busy'"},
      {"lab-purge --every 0s", "lab-purge: --every must be a positive "
                               "duration, got '0s'"},
      {"churn-purge --keep-every 0",
       "churn-purge: --keep-every must be a positive integer, got '0'"},
      {"churn-purge --idle soon",
       "churn-purge: --idle must be a duration (10s, 500ms), got 'soon'"},
      {"churn-purge --sample-every often",
       "churn-purge: --sample-every must be a duration (100ms, 0), got "
       "'often'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    trace_source_t *src = NULL;
    as_err_t        err = {0};
    assert_int_equal(open_line(cases[i].line, &src, &err), AS_EUSAGE);
    assert_string_equal(err.msg, cases[i].msg);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lab_purge_follows_the_burst_program),
      cmocka_unit_test(churn_purge_follows_the_churn_programs),
      cmocka_unit_test(bad_options_name_the_option),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
