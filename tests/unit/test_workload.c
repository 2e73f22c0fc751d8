/* tests/unit/test_workload.c -- the workload registry, the argument parser
 * and the survivors generator (traces/workload.c, traces/wl_survivors.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "traces/wl_survivors.h"
#include "traces/workload.h"

/* ---- Helpers ------------------------------------------------------------ */

static as_status_t open_args(const char *line, trace_source_t **src,
                             as_err_t *err) {
  char  buf[512];
  char *argv[32];
  int   argc = 0;
  snprintf(buf, sizeof buf, "%s", line);
  for (char *tok = strtok(buf, " "); tok && argc < 32; tok = strtok(NULL, " "))
    argv[argc++] = tok;
  return workload_open_argv(workload_find("survivors"), argc, argv, src, err);
}

/* Counts of what a small run emits. */
typedef struct tally_s {
  uint64_t events, obj_mallocs, obj_frees, mem_mallocs, mem_reallocs, mem_frees,
      marks;
  char           mark_labels[8][16];
  uint64_t       mark_t[8];
  uint64_t       list_sizes[64]; /* sizes of id 0's first 64 (re)allocations */
  size_t         nlist;
  uint64_t       first_free_id, last_free_id;
  uint64_t       max_id;
  bool           times_ok;
  unsigned char *freed; /* per build object */
} tally_t;

static void run_all(const char *line, tally_t *t, uint64_t nobjects) {
  trace_source_t *src;
  as_err_t        err = {0};
  memset(t, 0, sizeof *t);
  t->times_ok = true;
  t->freed = calloc(nobjects + 1, 1);
  assert_int_equal(open_args(line, &src, &err), AS_OK);
  trace_event_t ev;
  uint64_t      prev_t = 0;
  as_status_t   rc;
  while ((rc = trace_source_next(src, &ev, &err)) == AS_OK) {
    if (ev.t_ns < prev_t)
      t->times_ok = false;
    prev_t = ev.t_ns;
    t->events++;
    if (ev.op != TRACE_MARK && ev.op != TRACE_IDLE && ev.id > t->max_id)
      t->max_id = ev.id;
    switch (ev.op) {
    case TRACE_MARK:
      snprintf(t->mark_labels[t->marks], 16, "%s", ev.label);
      t->mark_t[t->marks++] = ev.t_ns;
      break;
    case TRACE_MALLOC:
      if (ev.domain == TRACE_DOMAIN_OBJ)
        t->obj_mallocs++;
      else {
        t->mem_mallocs++;
        if (ev.id == 0 && t->nlist < 64)
          t->list_sizes[t->nlist++] = ev.size;
      }
      break;
    case TRACE_REALLOC:
      t->mem_reallocs++;
      if (ev.id == 0 && t->nlist < 64)
        t->list_sizes[t->nlist++] = ev.size;
      break;
    case TRACE_FREE:
      if (ev.domain == TRACE_DOMAIN_OBJ) {
        if (t->obj_frees == 0)
          t->first_free_id = ev.id;
        t->last_free_id = ev.id;
        t->obj_frees++;
        if (ev.id >= 2 && ev.id - 2 < nobjects)
          t->freed[ev.id - 2] = 1;
      } else
        t->mem_frees++;
      break;
    default:
      break;
    }
  }
  assert_int_equal(rc, AS_DONE);
  trace_source_close(src);
}

/* ---- Registry and parser ------------------------------------------------ */

static void
registry_finds_survivors_and_nothing_else_by_a_wrong_name(void **state) {
  (void)state;
  assert_non_null(workload_find("survivors"));
  assert_ptr_equal(workload_find("survivors"), &workload_survivors);
  assert_null(workload_find("survivor"));
  assert_null(workload_find(NULL));
  size_t                       n;
  const workload_def_t *const *all = workload_registry(&n);
  bool                         found = false;
  for (size_t i = 0; i < n; i++)
    found |= all[i] == &workload_survivors;
  assert_true(found);
}

static void
unknown_option_is_a_usage_error_listing_the_known_ones(void **state) {
  (void)state;
  trace_source_t *src = (trace_source_t *)1;
  as_err_t        err = {0};
  assert_int_equal(open_args("--sizes 64", &src, &err), AS_EUSAGE);
  assert_null(src);
  assert_non_null(strstr(err.msg, "unknown option '--sizes'"));
  assert_non_null(strstr(err.msg, "--size, --total, --pattern"));
}

static void option_given_twice_or_without_value_is_a_usage_error(void **state) {
  (void)state;
  trace_source_t *src;
  as_err_t        err = {0};
  assert_int_equal(open_args("--size 64 --size=128", &src, &err), AS_EUSAGE);
  assert_string_equal(err.msg, "survivors: --size given twice");
  assert_int_equal(open_args("--total 1 --seed", &src, &err), AS_EUSAGE);
  assert_non_null(strstr(err.msg, "--seed needs a value"));
  assert_int_equal(open_args("64", &src, &err), AS_EUSAGE);
  assert_non_null(strstr(err.msg, "got '64'"));
}

static void bad_values_name_the_option_and_what_was_expected(void **state) {
  (void)state;
  trace_source_t *src;
  as_err_t        err = {0};
  assert_int_equal(open_args("--size 34", &src, &err), AS_EUSAGE);
  assert_string_equal(err.msg, "survivors: --size expects an integer in "
                               "35..1073741824, got '34'");
  assert_int_equal(open_args("--fraction 1.5", &src, &err), AS_EUSAGE);
  assert_string_equal(err.msg, "survivors: --fraction expects a number in "
                               "[0..1], got '1.5'");
  assert_int_equal(open_args("--fraction 0.1x", &src, &err), AS_EUSAGE);
  assert_int_equal(open_args("--pattern every", &src, &err), AS_EUSAGE);
  assert_string_equal(err.msg, "survivors: --pattern expects random, stride "
                               "or oldest, got 'every'");
  assert_int_equal(open_args("--every 0", &src, &err), AS_EUSAGE);
  assert_int_equal(open_args("--total 0", &src, &err), AS_EUSAGE);
  assert_int_equal(open_args("--reuse-size 20", &src, &err), AS_EUSAGE);
  assert_int_equal(open_args("--size 600 --total 0.0001", &src, &err),
                   AS_EUSAGE);
  assert_non_null(strstr(err.msg, "holds no object"));
}

static void source_name_and_meta_spell_every_option(void **state) {
  (void)state;
  trace_source_t *src;
  as_err_t        err = {0};
  assert_int_equal(open_args("--total=1 --seed 9", &src, &err), AS_OK);
  assert_string_equal(src->name,
                      "survivors --size 64 --total 1 --pattern random "
                      "--fraction 1e-4 --every 1000 --seed 9 --reuse-size 0 "
                      "--reuse-total 256 --settle-ms 0");
  assert_string_equal(trace_meta_get(&src->meta, "workload"), src->name);
  assert_string_equal(trace_meta_get(&src->meta, "objects"), "16384");
  trace_source_close(src);
}

/* ---- The survivor rule -------------------------------------------------- */

static void
splitmix64_matches_the_published_sequence_for_seed_1234567(void **state) {
  (void)state;
  /* Rosetta Code "Pseudo-random numbers/Splitmix64", seed 1234567. */
  assert_true(survivors_splitmix64_at(1234567, 0) ==
              UINT64_C(6457827717110365317));
  assert_true(survivors_splitmix64_at(1234567, 1) ==
              UINT64_C(3203168211198807973));
  assert_true(survivors_splitmix64_at(1234567, 2) ==
              UINT64_C(9817491932198370423));
  assert_true(survivors_splitmix64_at(1234567, 3) ==
              UINT64_C(4593380528125082431));
  assert_true(survivors_splitmix64_at(1234567, 4) ==
              UINT64_C(16408922859458223821));
}

static void random_rule_keeps_about_p_and_depends_on_the_seed(void **state) {
  (void)state;
  survivors_rule_t r = {
      .pattern = SURVIVORS_RANDOM, .fraction = 0.01, .seed = 7};
  uint64_t kept = 0, same = 0;
  for (uint64_t i = 0; i < 1000000; i++) {
    bool a = survivors_is_kept(&r, i);
    kept += a;
    r.seed = 8;
    same += a && survivors_is_kept(&r, i);
    r.seed = 7;
  }
  /* Exact for this seed, as a separate Python implementation of the rule
   * counts it (binomial mean 10000, sd 99.5). */
  assert_int_equal(kept, 9912);
  assert_true(same < 200);
  r.fraction = 0;
  assert_false(survivors_is_kept(&r, 0));
  r.fraction = 1;
  assert_true(survivors_is_kept(&r, 12345));
}

/* ---- The generated events ----------------------------------------------- */

static void stride_run_builds_keeps_every_nth_and_frees_the_rest(void **state) {
  (void)state;
  tally_t t;
  /* 1 MiB of 64 B objects: 16384; every 1000th survives: 17 of them. */
  run_all("--total 1 --pattern stride --every 1000", &t, 16384);
  assert_true(t.times_ok);
  assert_int_equal(t.marks, 3);
  assert_string_equal(t.mark_labels[0], "start");
  assert_string_equal(t.mark_labels[1], "peak");
  assert_string_equal(t.mark_labels[2], "after");
  assert_true(t.mark_t[0] < t.mark_t[1] && t.mark_t[1] < t.mark_t[2]);
  assert_int_equal(t.obj_mallocs, 16384);
  assert_int_equal(t.obj_frees, 16384 - 17);
  for (uint64_t i = 0; i < 16384; i++)
    assert_int_equal(t.freed[i], i % 1000 != 0);
  /* list_dealloc frees backwards: object 16383 first, object 1 last. */
  assert_int_equal(t.first_free_id, 2 + 16383);
  assert_int_equal(t.last_free_id, 2 + 1);
  /* Both lists' ob_item are freed once (keep list: never). */
  assert_int_equal(t.mem_frees, 1);
  assert_int_equal(t.max_id, 2 + 16383);
  free(t.freed);
}

static void list_grows_by_cpython_list_resize_rule(void **state) {
  (void)state;
  tally_t t;
  run_all("--total 1 --pattern stride --every 1", &t, 16384);
  /* listobject.c:66 documents 0, 4, 8, 16, 24, 32, 40, 52, 64, 76, ... */
  static const uint64_t slots[] = {4, 8, 16, 24, 32, 40, 52, 64, 76, 92, 108};
  for (size_t k = 0; k < sizeof slots / sizeof slots[0]; k++)
    assert_int_equal(t.list_sizes[k], slots[k] * 8);
  /* every 1: nothing freed but the list, and the keep list grows too. */
  assert_int_equal(t.obj_frees, 0);
  assert_int_equal(t.mem_mallocs, 2);
  free(t.freed);
}

static void oldest_keeps_the_first_floor_p_n_objects(void **state) {
  (void)state;
  tally_t t;
  run_all("--total 1 --pattern oldest --fraction 0.01", &t, 16384);
  /* floor(0.01 * 16384) = 163 */
  assert_int_equal(t.obj_frees, 16384 - 163);
  assert_int_equal(t.freed[162], 0);
  assert_int_equal(t.freed[163], 1);
  free(t.freed);
}

static void random_run_frees_exactly_the_non_survivors(void **state) {
  (void)state;
  tally_t t;
  run_all("--total 1 --fraction 0.01 --seed 7", &t, 16384);
  survivors_rule_t r = {
      .pattern = SURVIVORS_RANDOM, .fraction = 0.01, .seed = 7};
  uint64_t kept = 0;
  for (uint64_t i = 0; i < 16384; i++) {
    kept += survivors_is_kept(&r, i);
    assert_int_equal(t.freed[i], !survivors_is_kept(&r, i));
  }
  assert_int_equal(t.obj_frees, 16384 - kept);
  free(t.freed);
}

static void reuse_phase_recycles_the_lowest_free_ids(void **state) {
  (void)state;
  trace_source_t *src;
  as_err_t        err = {0};
  assert_int_equal(open_args("--total 1 --pattern stride --every 2 "
                             "--reuse-size 128 --reuse-total 1",
                             &src, &err),
                   AS_OK);
  trace_event_t ev;
  bool          after = false;
  uint64_t      reuse_ids[4], n = 0, reuse_objs = 0, labels = 0;
  while (trace_source_next(src, &ev, &err) == AS_OK) {
    if (ev.op == TRACE_MARK) {
      labels++;
      after = strcmp(ev.label, "after") == 0 ? true : after;
      if (strcmp(ev.label, "after_reuse") == 0)
        assert_int_equal(labels, 4);
      continue;
    }
    if (after && ev.op == TRACE_MALLOC && ev.domain == TRACE_DOMAIN_OBJ) {
      assert_int_equal(ev.size, 128);
      if (n < 4)
        reuse_ids[n++] = ev.id;
      reuse_objs++;
    }
  }
  trace_source_close(src);
  /* Odd objects were freed: ids 3, 5, 7, ... are the lowest free. */
  assert_int_equal(reuse_ids[0], 3);
  assert_int_equal(reuse_ids[1], 5);
  assert_int_equal(reuse_ids[2], 7);
  assert_int_equal(reuse_ids[3], 9);
  assert_int_equal(reuse_objs, 8192);
  assert_int_equal(labels, 4);
}

static void settle_phase_idles_in_50ms_steps_before_after(void **state) {
  (void)state;
  trace_source_t *src;
  as_err_t        err = {0};
  assert_int_equal(open_args("--total 0.01 --settle-ms 120", &src, &err),
                   AS_OK);
  trace_event_t ev;
  uint64_t      idle_ns = 0, idles = 0, after_t = 0;
  while (trace_source_next(src, &ev, &err) == AS_OK) {
    if (ev.op == TRACE_IDLE)
      idle_ns += ev.size, idles++;
    if (ev.op == TRACE_MARK && strcmp(ev.label, "after") == 0)
      after_t = ev.t_ns;
  }
  trace_source_close(src);
  assert_int_equal(idles, 3);
  assert_int_equal(idle_ns, 120000000);
  assert_true(after_t > 120000000);
}

/* build=ft: no realloc; each growth mallocs 8 + 8 * slots under the list's
 * other id and then frees the old array (3.14.7 listobject.c:146-169). */
static void ft_list_grows_by_new_array_then_free_of_the_old(void **state) {
  (void)state;
  trace_source_t *src;
  as_err_t        err = {0};
  assert_int_equal(open_args("--build ft --total 0.01 --pattern stride "
                             "--every 1000000",
                             &src, &err),
                   AS_OK);
  trace_event_t ev;
  uint64_t      mallocs[8], frees[8], sizes[8], nm = 0, nf = 0;
  uint64_t      reallocs = 0, warm_t = UINT64_MAX, start_t = 0;
  bool          building = false;
  while (trace_source_next(src, &ev, &err) == AS_OK) {
    if (ev.op == TRACE_MARK && strcmp(ev.label, "start") == 0)
      building = true, start_t = ev.t_ns;
    if (ev.op == TRACE_MARK && strcmp(ev.label, "peak") == 0)
      building = false;
    if (ev.op == TRACE_MALLOC && ev.id == 4)
      warm_t = ev.t_ns;
    reallocs += ev.op == TRACE_REALLOC;
    if (!building || ev.domain != TRACE_DOMAIN_MEM)
      continue;
    if (ev.op == TRACE_MALLOC && nm < 8)
      sizes[nm] = ev.size, mallocs[nm++] = ev.id;
    if (ev.op == TRACE_FREE && nf < 8)
      frees[nf++] = ev.id;
  }
  trace_source_close(src);
  assert_int_equal(reallocs, 0);
  /* The interpreter's light object exists before `start`. */
  assert_true(warm_t < start_t);
  /* Slots 4, 8, 16, 24, 32: arrays of 8 + 8 * slots, ids 2, 0, 2, 0, ... */
  assert_int_equal(sizes[0], 8 + 4 * 8);
  assert_int_equal(sizes[1], 8 + 8 * 8);
  assert_int_equal(sizes[2], 8 + 16 * 8);
  assert_int_equal(mallocs[0], 2);
  assert_int_equal(mallocs[1], 0);
  assert_int_equal(mallocs[2], 2);
  assert_int_equal(frees[0], 2); /* the first array, after the second */
  assert_int_equal(frees[1], 0);
  assert_true(nf == nm - 1 || nf == 8);
}

static void ft_objects_start_at_id_5_and_are_freed_backwards(void **state) {
  (void)state;
  tally_t t;
  run_all("--build ft --total 0.01 --pattern stride --every 1000000", &t,
          1 << 20);
  /* 163 objects of 64 B in 0.01 MiB; object 0 survives (stride). */
  assert_int_equal(t.obj_mallocs, 163 + 1); /* + the light object */
  assert_int_equal(t.obj_frees, 162);
  assert_int_equal(t.first_free_id, 5 + 162);
  assert_int_equal(t.last_free_id, 5 + 1);
  assert_true(t.times_ok);
  free(t.freed);
}

static void alloc_after_allocates_once_and_marks_200ms_later(void **state) {
  (void)state;
  trace_source_t *src;
  as_err_t        err = {0};
  assert_int_equal(open_args("--total 0.01 --alloc-after 262144 "
                             "--reuse-size 64 --reuse-total 0.001",
                             &src, &err),
                   AS_OK);
  assert_non_null(strstr(src->name, "--settle-ms 0 --alloc-after 262144"));
  assert_null(strstr(src->name, "--build"));
  trace_event_t ev;
  uint64_t      after_t = 0, big_t = 0, mark_t = 0, big_id = 0, freed_t = 0;
  char          labels[5][16];
  int           nl = 0;
  while (trace_source_next(src, &ev, &err) == AS_OK) {
    if (ev.op == TRACE_MARK) {
      snprintf(labels[nl++ % 5], 16, "%s", ev.label);
      if (strcmp(ev.label, "after") == 0)
        after_t = ev.t_ns;
      if (strcmp(ev.label, "after_alloc") == 0)
        mark_t = ev.t_ns;
    }
    if (ev.op == TRACE_MALLOC && ev.size == 262144)
      big_t = ev.t_ns, big_id = ev.id;
    if (ev.op == TRACE_FREE && big_id != 0 && ev.id == big_id)
      freed_t = ev.t_ns;
  }
  trace_source_close(src);
  assert_int_equal(nl, 5);
  assert_string_equal(labels[2], "after");
  assert_string_equal(labels[3], "after_alloc");
  assert_string_equal(labels[4], "after_reuse");
  assert_true(after_t < big_t);
  assert_true(mark_t >= big_t + 200000000);
  assert_true(freed_t >= mark_t);
  assert_int_equal(open_args("--build nogil", &src, &err), AS_EUSAGE);
  assert_string_equal(err.msg,
                      "survivors: --build expects default or ft, got 'nogil'");
}

/* build=ft: the study's gc.collect() after the free, and --kind tuple's
 * heap switch around the build, as option events. */
static void ft_options_switch_heap_and_report_the_gc(void **state) {
  (void)state;
  trace_source_t *src;
  as_err_t        err = {0};
  assert_int_equal(open_args("--build ft --kind tuple --size 56 --total 0.01 "
                             "--fraction 0",
                             &src, &err),
                   AS_OK);
  trace_event_t ev;
  char          seq[8][24];
  int           n = 0;
  uint64_t      gc_at = 0, last_free = 0;
  while (trace_source_next(src, &ev, &err) == AS_OK) {
    if (ev.op == TRACE_OPTION && n < 8)
      snprintf(seq[n++], 24, "%s=%d", ev.label, (int)ev.size);
    if (ev.op == TRACE_MARK && n < 8)
      snprintf(seq[n++], 24, "%s", ev.label);
    if (ev.op == TRACE_OPTION && strcmp(ev.label, "gc_collect") == 0)
      gc_at = ev.t_ns;
    if (ev.op == TRACE_FREE)
      last_free = ev.t_ns;
  }
  trace_source_close(src);
  assert_int_equal(n, 6);
  assert_string_equal(seq[0], "start");
  assert_string_equal(seq[1], "object_heap=2");
  assert_string_equal(seq[2], "object_heap=1");
  assert_string_equal(seq[3], "peak");
  assert_string_equal(seq[4], "gc_collect=1");
  assert_string_equal(seq[5], "after");
  assert_true(gc_at >= last_free);
  assert_int_equal(open_args("--kind tuple", &src, &err), AS_EUSAGE);
  assert_string_equal(err.msg, "survivors: --kind tuple needs --build ft "
                               "(the heap of GC objects is the free-threaded "
                               "build's)");
}

/* --alloc-ns / --free-ns set the pace (a measured run's own). */
static void alloc_ns_and_free_ns_set_the_clock(void **state) {
  (void)state;
  tally_t t;
  run_all("--total 0.1 --pattern stride --every 1000000 --alloc-ns 1000 "
          "--free-ns 100",
          &t, 1 << 20);
  /* 1,638 objects made at 1 us, list growth included: peak >= 1.638 ms. */
  assert_string_equal(t.mark_labels[1], "peak");
  assert_true(t.mark_t[1] >= 1638 * 1000);
  assert_true(t.mark_t[1] < 1638 * 1000 + 60 * 1000 + 1000);
  /* 1,637 frees at 100 ns between peak and after. */
  assert_true(t.mark_t[2] - t.mark_t[1] >= 1637 * 100);
  assert_true(t.mark_t[2] - t.mark_t[1] < 1637 * 100 + 20 * 1000);
  free(t.freed);
}

static void open_line_finds_the_workload_and_its_options(void **state) {
  (void)state;
  trace_source_t *src = NULL;
  as_err_t        err = {0};
  assert_int_equal(
      workload_open_line("survivors\t--size 512  --total 1", &src, &err),
      AS_OK);
  assert_non_null(strstr(src->name, "--size 512 --total 1"));
  trace_source_close(src);
  assert_int_equal(workload_open_line("survivor --size 64", &src, &err),
                   AS_EUSAGE);
  assert_string_equal(err.msg, "'survivor' is not a known workload");
  assert_null(src);
  assert_int_equal(workload_open_line("survivors --sise 64", &src, &err),
                   AS_EUSAGE);
  assert_non_null(strstr(err.msg, "unknown option '--sise'"));
}

/* Whether two events say the same (label by content). */
static void assert_same_event(const trace_event_t *a, const trace_event_t *b) {
  assert_true(a->t_ns == b->t_ns && a->id == b->id && a->size == b->size);
  assert_true(a->align == b->align && a->offset == b->offset);
  assert_true(a->thread == b->thread && a->op == b->op &&
              a->domain == b->domain && a->flags == b->flags);
  assert_true(a->site == b->site && a->frames == b->frames);
  assert_true((a->label == NULL) == (b->label == NULL));
  if (a->label != NULL)
    assert_string_equal(a->label, b->label);
}

/* The generator hands out its events in batches of many (the engine's
 * fast path), the same events that next() gives one at a time, for every
 * phase: build, selection, free, settle, reuse, and the ft build's. */
static void batches_hand_out_the_events_next_does(void **state) {
  (void)state;
  static const char *const lines[] = {
      "--size 64 --total 2 --fraction 1e-2",
      "--size 100 --total 2 --pattern stride --every 7 --reuse-size 80 "
      "--reuse-total 1",
      "--total 2 --pattern oldest --fraction 0.3 --settle-ms 200",
      "--total 2 --build ft --kind tuple --reuse-kind tuple --reuse-size 64 "
      "--reuse-total 1 --alloc-after 300000",
      "--total 2 --fraction 1",
  };
  for (size_t l = 0; l < sizeof lines / sizeof lines[0]; l++) {
    trace_source_t *one, *many;
    as_err_t        err = {0};
    assert_int_equal(open_args(lines[l], &one, &err), AS_OK);
    assert_int_equal(open_args(lines[l], &many, &err), AS_OK);
    assert_non_null(many->methods->batch);
    trace_event_t ev, spare, *evs;
    size_t        n, largest = 0;
    uint64_t      events = 0;
    as_status_t   rc;
    while ((rc = trace_source_batch(many, &spare, &evs, &n, &err)) == AS_OK) {
      largest = n > largest ? n : largest;
      for (size_t i = 0; i < n; i++, events++) {
        assert_int_equal(trace_source_next(one, &ev, &err), AS_OK);
        assert_same_event(&ev, &evs[i]);
      }
    }
    assert_int_equal(rc, AS_DONE);
    assert_int_equal(trace_source_next(one, &ev, &err), AS_DONE);
    assert_true(events > 10000 && largest > 1);
    trace_source_close(one);
    trace_source_close(many);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          registry_finds_survivors_and_nothing_else_by_a_wrong_name),
      cmocka_unit_test(unknown_option_is_a_usage_error_listing_the_known_ones),
      cmocka_unit_test(option_given_twice_or_without_value_is_a_usage_error),
      cmocka_unit_test(bad_values_name_the_option_and_what_was_expected),
      cmocka_unit_test(source_name_and_meta_spell_every_option),
      cmocka_unit_test(
          splitmix64_matches_the_published_sequence_for_seed_1234567),
      cmocka_unit_test(random_rule_keeps_about_p_and_depends_on_the_seed),
      cmocka_unit_test(stride_run_builds_keeps_every_nth_and_frees_the_rest),
      cmocka_unit_test(list_grows_by_cpython_list_resize_rule),
      cmocka_unit_test(oldest_keeps_the_first_floor_p_n_objects),
      cmocka_unit_test(random_run_frees_exactly_the_non_survivors),
      cmocka_unit_test(reuse_phase_recycles_the_lowest_free_ids),
      cmocka_unit_test(settle_phase_idles_in_50ms_steps_before_after),
      cmocka_unit_test(ft_list_grows_by_new_array_then_free_of_the_old),
      cmocka_unit_test(ft_objects_start_at_id_5_and_are_freed_backwards),
      cmocka_unit_test(alloc_after_allocates_once_and_marks_200ms_later),
      cmocka_unit_test(ft_options_switch_heap_and_report_the_gc),
      cmocka_unit_test(alloc_ns_and_free_ns_set_the_clock),
      cmocka_unit_test(open_line_finds_the_workload_and_its_options),
      cmocka_unit_test(batches_hand_out_the_events_next_does),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
