/* tests/unit/test_wl_spike.c -- the `spike` workload (traces/wl_spike.c) and
 * the lab workloads (traces/wl_labs.c): exact request sizes, exact event
 * counts, event order, id discipline and option errors.
 *
 * Expected numbers are derived by hand in the comments next to them, from
 * the CPython 3.11 rules cited in traces/wl_spike.c, so a change in the
 * generator's rules shows up as a failure here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../traces/wl_labs.h"
#include "../../traces/wl_spike.h"
#include "../../traces/workload.h"

/* ---- Helpers ------------------------------------------------------------ */

#define MAX_IDS 1000000

/* What one pass over a source saw. */
typedef struct tally_s {
  uint64_t events, mallocs[TRACE_DOMAIN_COUNT], reallocs, frees, trims;
  uint64_t thread_starts, thread_exits, live, peak_live, max_id;
  uint64_t str_bytes;           /* obj-domain mallocs of more than 512 bytes */
  char     marks[256];          /* labels joined by ',' */
  int64_t  trim_after_mark;     /* index in marks of the mark before a trim */
  uint64_t thread_of_str[4096]; /* thread of the n-th str malloc */
  uint64_t nstr;
  uint64_t last_t_ns;
  bool     time_ok, ids_ok;
  bool     mem_freed;          /* the data list's ob_item was freed */
  uint64_t first_gc_free_size; /* size of the first free after that */
} tally_t;

static unsigned char live_map[MAX_IDS];
static uint64_t      size_of[MAX_IDS]; /* size of the live object by id */

/* Opens workload name with argv and consumes it, checking as it goes that
 * times never decrease, that mallocs name dead ids and frees live ones. */
static void run_tally(const char *name, int argc, char **argv, tally_t *t) {
  const workload_def_t *def = NULL;
  if (strcmp(name, "spike") == 0)
    def = &workload_spike;
  else if (strcmp(name, "lab-brk") == 0)
    def = &workload_lab_brk;
  else if (strcmp(name, "lab-mmap-threshold") == 0)
    def = &workload_lab_mmap_threshold;
  else
    def = &workload_lab_arenas;
  trace_source_t *src = NULL;
  as_err_t        err = {0};
  assert_int_equal(workload_open_argv(def, argc, argv, &src, &err), AS_OK);
  memset(t, 0, sizeof *t);
  memset(live_map, 0, sizeof live_map);
  t->time_ok = t->ids_ok = true;
  t->trim_after_mark = -1;
  int           nmarks = 0;
  trace_event_t ev;
  as_status_t   rc;
  while ((rc = trace_source_next(src, &ev, &err)) == AS_OK) {
    t->events++;
    if (ev.t_ns < t->last_t_ns)
      t->time_ok = false;
    t->last_t_ns = ev.t_ns;
    switch ((trace_op_t)ev.op) {
    case TRACE_MALLOC:
      if (ev.id >= MAX_IDS || live_map[ev.id]) {
        t->ids_ok = false;
        break;
      }
      live_map[ev.id] = 1;
      size_of[ev.id] = ev.size;
      t->mallocs[ev.domain]++;
      if (++t->live > t->peak_live)
        t->peak_live = t->live;
      if (ev.id > t->max_id)
        t->max_id = ev.id;
      if (ev.domain == TRACE_DOMAIN_OBJ && ev.size > 512) {
        t->str_bytes += ev.size;
        if (t->nstr < 4096)
          t->thread_of_str[t->nstr] = ev.thread;
        t->nstr++;
      }
      break;
    case TRACE_REALLOC:
      if (ev.id >= MAX_IDS || !live_map[ev.id])
        t->ids_ok = false;
      t->reallocs++;
      break;
    case TRACE_FREE:
      if (ev.id >= MAX_IDS || !live_map[ev.id]) {
        t->ids_ok = false;
        break;
      }
      live_map[ev.id] = 0;
      t->live--;
      t->frees++;
      if (t->mem_freed && t->first_gc_free_size == 0)
        t->first_gc_free_size = size_of[ev.id];
      if (ev.domain == TRACE_DOMAIN_MEM)
        t->mem_freed = true;
      break;
    case TRACE_TRIM:
      t->trims++;
      t->trim_after_mark = nmarks - 1;
      break;
    case TRACE_THREAD_START:
      t->thread_starts++;
      break;
    case TRACE_THREAD_EXIT:
      t->thread_exits++;
      break;
    case TRACE_MARK:
      if (nmarks++ > 0)
        strcat(t->marks, ",");
      strcat(t->marks, ev.label);
      break;
    default:
      break;
    }
  }
  assert_int_equal(rc, AS_DONE);
  trace_source_close(src);
}

/* ---- Size rules --------------------------------------------------------- */

static void str_request_is_ascii_header_plus_length_plus_nul(void **state) {
  (void)state;
  /* sizeof(PyASCIIObject) 48 + 600 + 1: sys.getsizeof("x" * 600) == 649. */
  assert_int_equal(spike_str_request(SPIKE_PY311, 600), 649);
  assert_int_equal(spike_str_request(SPIKE_PY311, 4000), 4049);
  /* 3.14: sys.getsizeof("") == 41, so "x" * 600 asks for 641. */
  assert_int_equal(spike_str_request(SPIKE_PY314, 600), 641);
}

static void str_lengths_match_the_python_script(void **state) {
  (void)state;
  /* scripts/measure/spike.py with seed 1: [1141, 950, 1222, 974, 1089] for
   * tuples 0..4 and 3194 for tuple 159999 (computed with that script). */
  static const uint64_t want[5] = {1141, 950, 1222, 974, 1089};
  for (uint64_t i = 0; i < 5; i++)
    assert_int_equal(spike_str_len(1, i, 600, 4000), want[i]);
  assert_int_equal(spike_str_len(1, 159999, 600, 4000), 3194);
}

static void list_growth_follows_cpython_pattern(void **state) {
  (void)state;
  /* listobject.c:67: "The growth pattern is: 0, 4, 8, 16, 24, 32, 40, 52,
   * 64, 76, ..." */
  static const uint64_t want[] = {4, 8, 16, 24, 32, 40, 52, 64, 76};
  uint64_t              cap = 0, len = 0;
  size_t                k = 0;
  while (k < sizeof want / sizeof want[0]) {
    uint64_t c = spike_list_capacity(cap, len, len + 1);
    if (c != cap)
      assert_int_equal(c, want[k++]);
    cap = c;
    len++;
  }
  /* No realloc while the list fits and stays at least half full. */
  assert_int_equal(spike_list_capacity(76, 70, 71), 76);
}

/* ---- The spike trace ---------------------------------------------------- */

static void spike_emits_exact_counts_for_a_thousand_tuples(void **state) {
  (void)state;
  char   *argv[] = {"--count", "1000"};
  tally_t t;
  run_tally("spike", 2, argv, &t);
  assert_true(t.time_ok);
  assert_true(t.ids_ok);
  /* obj: data list 1 + 1000 str + 1000 float + 1000 tuple + survivors list
   * 1 = 3002.  mem: data ob_item's first growth (a malloc) + survivors
   * ob_item = 2; the other 27 of 28 growths (4 ... 1100 items) are reallocs. */
  assert_int_equal(t.mallocs[TRACE_DOMAIN_OBJ], 3002);
  assert_int_equal(t.mallocs[TRACE_DOMAIN_MEM], 2);
  assert_int_equal(t.mallocs[TRACE_DOMAIN_RAW], 0);
  assert_int_equal(t.reallocs, 27);
  /* 980 victims: floats 100 to the free list + 880 freed, 980 strs, 980
   * tuples to the free list, data ob_item 1; gc.collect frees 980 tuples,
   * 100 floats and the data list object: 880 + 980 + 1 + 1081 = 2942. */
  assert_int_equal(t.frees, 2942);
  /* 20 survivors x (str, float, tuple) + the survivors list and ob_item. */
  assert_int_equal(t.live, 62);
  assert_string_equal(t.marks, "start,peak,after_free,after_trim");
  assert_int_equal(t.trims, 1);
  assert_int_equal(t.trim_after_mark, 2); /* after after_free */
  assert_int_equal(t.thread_starts, 0);
}

static void spike_strings_total_the_python_scripts_bytes(void **state) {
  (void)state;
  char   *argv[] = {"--count", "160000"};
  tally_t t;
  run_tally("spike", 2, argv, &t);
  /* sum over i < 160000 of 49 + len_i, computed by spike.py's rule. */
  assert_int_equal(t.nstr, 160000);
  assert_int_equal(t.str_bytes, 375064420);
  /* 70 list growths to 160388 items: 1 malloc + 69 reallocs. */
  assert_int_equal(t.reallocs, 69);
  assert_true(t.ids_ok);
  /* Ids are recycled, never above the peak number of live objects. */
  assert_true(t.max_id < t.peak_live);
}

static void spike_python_314_strings_are_eight_bytes_smaller(void **state) {
  (void)state;
  char   *argv[] = {"--count", "160000", "--python", "3.14"};
  tally_t t;
  run_tally("spike", 4, argv, &t);
  /* 375,064,420 - 8 x 160,000. */
  assert_int_equal(t.str_bytes, 373784420);
}

static void
gc_clears_tuples_first_in_311_and_floats_first_in_314(void **state) {
  (void)state;
  char   *v311[] = {"--count", "1000"};
  char   *v314[] = {"--count", "1000", "--python", "3.14"};
  tally_t t;
  run_tally("spike", 2, v311, &t);
  assert_int_equal(t.first_gc_free_size, SPIKE_TUPLE2_SIZE);
  run_tally("spike", 4, v314, &t);
  assert_int_equal(t.first_gc_free_size, SPIKE_FLOAT_SIZE);
  assert_int_equal(t.frees, 2942); /* the same frees, in another order */
}

static void spike_rejects_an_unknown_python(void **state) {
  (void)state;
  char           *argv[] = {"--python", "3.12"};
  trace_source_t *src = NULL;
  as_err_t        err = {0};
  assert_int_equal(workload_open_argv(&workload_spike, 2, argv, &src, &err),
                   AS_EUSAGE);
  assert_non_null(strstr(err.msg, "--python must be 3.11 or 3.14"));
}

static void spike_threads_build_their_own_index_ranges(void **state) {
  (void)state;
  char   *argv[] = {"--count", "1000", "--threads", "4", "--slice", "100"};
  tally_t t;
  run_tally("spike", 6, argv, &t);
  assert_true(t.ids_ok);
  assert_int_equal(t.thread_starts, 4);
  assert_int_equal(t.thread_exits, 4);
  /* [None] * 1000 is one ob_item malloc; no list growth at all. */
  assert_int_equal(t.mallocs[TRACE_DOMAIN_MEM], 2);
  assert_int_equal(t.reallocs, 0);
  /* Round-robin slices of 100: the first 100 strings are thread 1's, the
   * next 100 thread 2's (its range starts at tuple 250), and so on. */
  assert_int_equal(t.thread_of_str[0], 1);
  assert_int_equal(t.thread_of_str[99], 1);
  assert_int_equal(t.thread_of_str[100], 2);
  assert_int_equal(t.thread_of_str[300], 4);
  assert_int_equal(t.thread_of_str[400], 1);
  assert_int_equal(t.frees, 2942); /* as single-threaded */
}

static void spike_threaded_and_single_draw_the_same_bytes(void **state) {
  (void)state;
  char   *one[] = {"--count", "5000"};
  char   *many[] = {"--count", "5000", "--threads", "16"};
  tally_t a, b;
  run_tally("spike", 2, one, &a);
  run_tally("spike", 4, many, &b);
  assert_int_equal(a.str_bytes, b.str_bytes);
  assert_int_equal(a.nstr, b.nstr);
}

static void spike_rejects_min_above_max_naming_both(void **state) {
  (void)state;
  char           *argv[] = {"--min", "5000"};
  trace_source_t *src = NULL;
  as_err_t        err = {0};
  assert_int_equal(workload_open_argv(&workload_spike, 2, argv, &src, &err),
                   AS_EUSAGE);
  assert_null(src);
  assert_non_null(strstr(err.msg, "--min (5000) exceeds --max (4000)"));
}

static void spike_rejects_zero_threads(void **state) {
  (void)state;
  char           *argv[] = {"--threads", "0"};
  trace_source_t *src = NULL;
  as_err_t        err = {0};
  assert_int_equal(workload_open_argv(&workload_spike, 2, argv, &src, &err),
                   AS_EUSAGE);
  assert_non_null(strstr(err.msg, "--threads"));
}

/* ---- Labs --------------------------------------------------------------- */

/* The whole event sequence of a source, one token per event. */
static void sequence(const workload_def_t *def, int argc, char **argv,
                     char *out, size_t len) {
  trace_source_t *src = NULL;
  as_err_t        err = {0};
  assert_int_equal(workload_open_argv(def, argc, argv, &src, &err), AS_OK);
  trace_event_t ev;
  size_t        n = 0;
  out[0] = '\0';
  while (trace_source_next(src, &ev, &err) == AS_OK) {
    const char *op = trace_op_name((trace_op_t)ev.op);
    if (ev.op == TRACE_MARK)
      n += (size_t)snprintf(out + n, len - n, "%s ", ev.label);
    else if (ev.op == TRACE_MALLOC)
      n += (size_t)snprintf(out + n, len - n, "m%u:%llu:%llu ", ev.thread,
                            (unsigned long long)ev.id,
                            (unsigned long long)ev.size);
    else if (ev.op == TRACE_FREE)
      n += (size_t)snprintf(out + n, len - n, "f%u:%llu ", ev.thread,
                            (unsigned long long)ev.id);
    else
      n += (size_t)snprintf(out + n, len - n, "%s%u ", op, ev.thread);
    assert_true(n < len);
  }
  trace_source_close(src);
}

static void lab_brk_frees_all_but_the_last_before_trimming(void **state) {
  (void)state;
  char *argv[] = {"--count", "3"};
  char  seq[1024];
  sequence(&workload_lab_brk, 2, argv, seq, sizeof seq);
  assert_string_equal(seq, "start m0:0:1024 m0:1:1024 m0:2:1024 allocated "
                           "f0:0 f0:1 freed_but_last trim0 trimmed_but_last "
                           "f0:2 freed_last trim0 trimmed_all ");
}

static void lab_mmap_threshold_repeats_after_the_first_buffer(void **state) {
  (void)state;
  char *argv[] = {"--size", "4194304", "--repeat", "3"};
  char  seq[1024];
  sequence(&workload_lab_mmap_threshold, 4, argv, seq, sizeof seq);
  assert_string_equal(seq, "start m0:0:4194304 first_alloc f0:0 first_free "
                           "m0:0:4194304 second_alloc f0:0 second_free "
                           "m0:0:4194304 f0:0 m0:0:4194304 f0:0 "
                           "repeat_done ");
}

static void lab_arenas_starts_every_thread_before_any_malloc(void **state) {
  (void)state;
  char *argv[] = {"--threads", "2", "--iterations", "2", "--size", "1024"};
  char  seq[1024];
  sequence(&workload_lab_arenas, 6, argv, seq, sizeof seq);
  assert_string_equal(seq, "start thread_start1 thread_start2 "
                           "m1:1:1024 f1:1 m2:2:1024 f2:2 "
                           "m1:1:1024 f1:1 m2:2:1024 f2:2 running "
                           "thread_exit1 thread_exit2 joined ");
}

static void lab_arenas_control_starts_threads_without_mallocs(void **state) {
  (void)state;
  char *argv[] = {"--threads", "2", "--iterations", "0"};
  char  seq[1024];
  sequence(&workload_lab_arenas, 4, argv, seq, sizeof seq);
  assert_string_equal(seq, "start thread_start1 thread_start2 running "
                           "thread_exit1 thread_exit2 joined ");
}

static void lab_arenas_rejects_more_than_1024_threads(void **state) {
  (void)state;
  char           *argv[] = {"--threads", "1025"};
  trace_source_t *src = NULL;
  as_err_t        err = {0};
  assert_int_equal(
      workload_open_argv(&workload_lab_arenas, 2, argv, &src, &err), AS_EUSAGE);
  assert_non_null(strstr(err.msg, "lab-arenas: --threads"));
}

static void workloads_are_registered_under_their_names(void **state) {
  (void)state;
  assert_ptr_equal(workload_find("spike"), &workload_spike);
  assert_ptr_equal(workload_find("lab-brk"), &workload_lab_brk);
  assert_ptr_equal(workload_find("lab-mmap-threshold"),
                   &workload_lab_mmap_threshold);
  assert_ptr_equal(workload_find("lab-arenas"), &workload_lab_arenas);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(str_request_is_ascii_header_plus_length_plus_nul),
      cmocka_unit_test(str_lengths_match_the_python_script),
      cmocka_unit_test(list_growth_follows_cpython_pattern),
      cmocka_unit_test(spike_emits_exact_counts_for_a_thousand_tuples),
      cmocka_unit_test(spike_strings_total_the_python_scripts_bytes),
      cmocka_unit_test(spike_python_314_strings_are_eight_bytes_smaller),
      cmocka_unit_test(gc_clears_tuples_first_in_311_and_floats_first_in_314),
      cmocka_unit_test(spike_rejects_an_unknown_python),
      cmocka_unit_test(spike_threads_build_their_own_index_ranges),
      cmocka_unit_test(spike_threaded_and_single_draw_the_same_bytes),
      cmocka_unit_test(spike_rejects_min_above_max_naming_both),
      cmocka_unit_test(spike_rejects_zero_threads),
      cmocka_unit_test(lab_brk_frees_all_but_the_last_before_trimming),
      cmocka_unit_test(lab_mmap_threshold_repeats_after_the_first_buffer),
      cmocka_unit_test(lab_arenas_starts_every_thread_before_any_malloc),
      cmocka_unit_test(lab_arenas_control_starts_threads_without_mallocs),
      cmocka_unit_test(lab_arenas_rejects_more_than_1024_threads),
      cmocka_unit_test(workloads_are_registered_under_their_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
