/* tests/unit/test_compare_layouts.c -- `compare --layouts`: one replay per
 * address layout, the mean and range over layouts per mark, and the shared
 * layout rule sim_kernel_config_offset_layout.
 *
 * The comparison tests record a measured-run file written here (a text
 * trace with marks and rss events) with the analysis/record.h API and
 * compare it with the standalone pymalloc model, whose arena alignment the
 * layout decides.  The trace is built so the hand-worked numbers differ by
 * whole arenas (see layouts_bracket_the_arena_alignment_exactly).
 */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "analysis/compare.h"
#include "analysis/record.h"
#include "analysis/store.h"
#include "sim/kernel.h"

#define PAGE UINT64_C(4096)
#define MIB  UINT64_C(1048576)

/* pymalloc 3.11 geometry (models/pymalloc.h): 16 KiB pools, 1 MiB arenas;
 * 512-byte blocks, (16384 - 48) / 512 = 31 per pool.  An arena at a 16 KiB
 * aligned address has 64 pools, otherwise 63. */
#define BLOCKS_PER_POOL 31u
#define OBJECTS         (128u * BLOCKS_PER_POOL) /* two aligned arenas */
#define MODEL           "pymalloc:version=3.11"

/* Measured values written into the file; arbitrary but fixed. */
#define MEASURED_START (1 * MIB)
#define MEASURED_PEAK  (3 * MIB)
#define MEASURED_AFTER (2 * MIB)

static char g_dir[256];

static int setup_dir(void **state) {
  (void)state;
  snprintf(g_dir, sizeof g_dir, "/tmp/allocsim-test-layouts-XXXXXX");
  return mkdtemp(g_dir) == NULL ? -1 : 0;
}

static int teardown_dir(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* The measured-run file: mark start; OBJECTS mallocs of 512 bytes; mark
 * peak; free every object but the last; mark after.  Each mark is followed
 * by its measured rss at the same time. */
static void write_run_file(const char *path) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "allocsim-trace 1\n#@ kind=measured\n#@ page_size=4096\n");
  uint64_t t = 0;
  fprintf(f, "%" PRIu64 " 0 mark start\n%" PRIu64 " 0 rss %" PRIu64 "\n", t, t,
          MEASURED_START);
  for (unsigned i = 0; i < OBJECTS; i++)
    fprintf(f, "%" PRIu64 " 0 malloc %u 512 obj\n", ++t, i);
  t++;
  fprintf(f, "%" PRIu64 " 0 mark peak\n%" PRIu64 " 0 rss %" PRIu64 "\n", t, t,
          MEASURED_PEAK);
  for (unsigned i = 0; i + 1 < OBJECTS; i++)
    fprintf(f, "%" PRIu64 " 0 free %u obj\n", ++t, i);
  t++;
  fprintf(f, "%" PRIu64 " 0 mark after\n%" PRIu64 " 0 rss %" PRIu64 "\n", t, t,
          MEASURED_AFTER);
  assert_int_equal(fclose(f), 0);
}

/* Opens a fresh store named name in g_dir with the run file recorded. */
static int64_t record_run(const char *name, store_t **s) {
  char path[300], db[300];
  snprintf(path, sizeof path, "%s/%s.trace", g_dir, name);
  snprintf(db, sizeof db, "%s/%s.db", g_dir, name);
  write_run_file(path);
  as_err_t      err = {0};
  record_info_t info;
  assert_int_equal(store_open(db, s, &err), AS_OK);
  if (record_trace_file(*s, path, "test", NULL, 0, &info, &err) != AS_OK)
    fail_msg("record: %s", err.msg);
  assert_int_equal(info.marks, 3);
  return info.run_id;
}

static int64_t count_rows(store_t *s, const char *sql) {
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  int64_t n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return n;
}

typedef struct meta_find_s meta_find_t;
struct meta_find_s {
  const char *key;
  char        value[64];
};

static as_status_t meta_find(void *user, const char *key, const char *value,
                             as_err_t *err) {
  (void)err;
  meta_find_t *m = user;
  if (strcmp(key, m->key) == 0)
    snprintf(m->value, sizeof m->value, "%s", value);
  return AS_OK;
}

/* ---- The layout rule ---------------------------------------------------- */

static void offset_layout_lowers_mmap_top_from_the_default(void **state) {
  (void)state;
  sim_kernel_config_t def, cfg;
  as_err_t            err = {0};
  sim_kernel_config_default(&def);

  /* Offset 0 changes nothing, not even a zero (default) mmap_top. */
  cfg = def;
  cfg.mmap_top = 0;
  assert_int_equal(sim_kernel_config_offset_layout(&cfg, 0, &err), AS_OK);
  assert_int_equal(cfg.mmap_top, 0);

  /* A zero mmap_top means the default, which is then lowered. */
  assert_int_equal(sim_kernel_config_offset_layout(&cfg, 8192, &err), AS_OK);
  assert_int_equal(cfg.mmap_top, def.mmap_top - 8192);

  /* An explicit top is lowered as given. */
  cfg.mmap_top = UINT64_C(0x700000000000);
  assert_int_equal(sim_kernel_config_offset_layout(&cfg, 4096, &err), AS_OK);
  assert_int_equal(cfg.mmap_top, UINT64_C(0x700000000000) - 4096);

  /* The default is one page above a 16 KiB boundary, so the four offsets
   * give the four layouts modulo a pymalloc pool, offset 4096 the aligned
   * one (the measured default has every arena unaligned). */
  assert_int_equal(def.mmap_top % 16384, 4096);
}

static void offset_layout_refuses_what_it_cannot_apply(void **state) {
  (void)state;
  sim_kernel_config_t cfg;
  as_err_t            err = {0};
  sim_kernel_config_default(&cfg);
  uint64_t top = cfg.mmap_top;
  assert_int_equal(sim_kernel_config_offset_layout(&cfg, 100, &err), AS_EINVAL);
  assert_non_null(strstr(err.msg, "multiple of 4096"));
  assert_int_equal(cfg.mmap_top, top);
  cfg.mmap_top = 4 * MIB;
  assert_int_equal(sim_kernel_config_offset_layout(&cfg, 4 * MIB, &err),
                   AS_EINVAL);
  assert_int_equal(cfg.mmap_top, 4 * MIB);
}

/* ---- Comparing over layouts ---------------------------------------------- */

/* The trace, worked by hand (the simulated kernel maps top-down, so every
 * arena has the layout's alignment; sim(start) = 0, so the offset is the
 * measured 1 MiB in every layout):
 *   - aligned (mmap_top lowered by 4096): arenas A and B of 64 pools each
 *     hold all 3968 objects; the survivor (the last object) keeps B, and A,
 *     empty, is the one empty arena pymalloc keeps (3.11 obmalloc.c
 *     insert_to_freepool: only an empty arena with a successor in
 *     usable_arenas is freed).  Nothing is released: 512 pool pages.
 *   - unaligned (the other three): A and B have 63 pools, C holds the last
 *     62 objects in 2 pools.  Emptied, A stays (last in usable_arenas) but
 *     B is freed; C keeps its 2 touched pools: 252 + 8 = 260 pages.
 * At the peak every layout has 128 pools touched: 512 pages.  Every layout
 * adds the same 3 pages of pymalloc metadata (the arenas vector and the
 * radix-tree nodes). */
#define META_PAGES  3
#define SIM_PEAK    ((512 + META_PAGES) * PAGE)
#define SIM_ALIGNED ((512 + META_PAGES) * PAGE)
#define SIM_UNALIGN ((260 + META_PAGES) * PAGE)

static void layouts_bracket_the_arena_alignment_exactly(void **state) {
  (void)state;
  store_t         *s = NULL;
  int64_t          run = record_run("four", &s);
  as_err_t         err = {0};
  compare_opts_t   o = {.model = MODEL, .layouts = 4, .store = true};
  compare_result_t r;
  if (compare_run(s, run, &o, &r, &err) != AS_OK)
    fail_msg("compare: %s", err.msg);

  assert_int_equal(r.nlayouts, 4);
  for (unsigned k = 0; k < 4; k++) {
    assert_int_equal(r.layouts[k].mmap_offset_bytes, k * PAGE);
    assert_int_equal(r.layouts[k].offset_bytes, MEASURED_START);
  }
  assert_int_equal(r.offset_bytes, MEASURED_START);
  assert_int_equal(r.nmarks, 3);

  /* start: the anchor, exact in every layout. */
  const compare_mark_t *m = &r.marks[0];
  assert_string_equal(m->label, "start");
  assert_int_equal(m->layouts, 4);
  assert_int_equal(m->predicted_min_rss_bytes, MEASURED_START);
  assert_int_equal(m->predicted_max_rss_bytes, MEASURED_START);
  assert_int_equal(m->error_bytes, 0);

  /* peak: the same in every layout. */
  m = &r.marks[1];
  assert_string_equal(m->label, "peak");
  assert_int_equal(m->predicted_rss_bytes, MEASURED_START + SIM_PEAK);
  assert_int_equal(m->predicted_min_rss_bytes, MEASURED_START + SIM_PEAK);
  assert_int_equal(m->predicted_max_rss_bytes, MEASURED_START + SIM_PEAK);
  assert_int_equal(m->simulated_rss_bytes, SIM_PEAK);

  /* after: one aligned layout in four keeps an arena more. */
  m = &r.marks[2];
  assert_string_equal(m->label, "after");
  assert_int_equal(m->predicted_by_layout[0], MEASURED_START + SIM_UNALIGN);
  assert_int_equal(m->predicted_by_layout[1], MEASURED_START + SIM_ALIGNED);
  assert_int_equal(m->predicted_by_layout[2], MEASURED_START + SIM_UNALIGN);
  assert_int_equal(m->predicted_by_layout[3], MEASURED_START + SIM_UNALIGN);
  assert_int_equal(m->predicted_min_rss_bytes, MEASURED_START + SIM_UNALIGN);
  assert_int_equal(m->predicted_max_rss_bytes, MEASURED_START + SIM_ALIGNED);
  assert_int_equal(m->predicted_max_rss_bytes - m->predicted_min_rss_bytes,
                   252 * PAGE); /* one 63-pool arena */
  int64_t mean = MEASURED_START + (3 * SIM_UNALIGN + SIM_ALIGNED) / 4;
  assert_int_equal(m->predicted_rss_bytes, mean);
  assert_int_equal(m->error_bytes, mean - (int64_t)MEASURED_AFTER);
  assert_true(m->predicted_min_rss_bytes <= m->predicted_rss_bytes &&
              m->predicted_rss_bytes <= m->predicted_max_rss_bytes);
  assert_true(m->predicted_min_rss_bytes > (int64_t)MEASURED_AFTER); /* out */

  /* The series uses the mean: |errors| 0, peak's, after's. */
  double e_peak = (double)(MEASURED_START + SIM_PEAK - MEASURED_PEAK);
  double e_after = (double)(mean - (int64_t)MEASURED_AFTER);
  assert_int_equal(r.series.points, 3);
  assert_true(fabs(r.series.mean_abs_error_bytes - (e_peak + e_after) / 3.0) <
              1e-6);
  assert_true(fabs(r.series.max_abs_error_bytes - fmax(e_peak, e_after)) <
              1e-6);
  /* Each layout's own series: the aligned one is off by a whole arena. */
  assert_true(fabs(r.layouts[1].series.max_abs_error_bytes -
                   (double)(MEASURED_START + SIM_ALIGNED - MEASURED_AFTER)) <
              1e-6);

  /* One simulated run and one comparisons row per layout. */
  assert_int_equal(
      count_rows(s, "SELECT count(*) FROM runs WHERE kind = 'simulated'"), 4);
  assert_int_equal(count_rows(s, "SELECT count(*) FROM comparisons"), 4);
  assert_int_equal(r.simulated_run_id, r.layouts[0].simulated_run_id);
  assert_int_equal(r.comparison_id, r.layouts[0].comparison_id);
  for (unsigned k = 0; k < 4; k++) {
    const compare_layout_t *l = &r.layouts[k];
    assert_true(l->simulated_run_id > run && l->comparison_id > 0);
    meta_find_t mf = {.key = "mmap_offset"};
    assert_int_equal(
        store_list_meta(s, l->simulated_run_id, meta_find, &mf, &err), AS_OK);
    char want[32];
    snprintf(want, sizeof want, "%" PRIu64, l->mmap_offset_bytes);
    assert_string_equal(mf.value, want);
    char sql[160];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM comparisons WHERE id = %" PRId64
             " AND simulated_run_id = %" PRId64
             " AND params LIKE '%%\"mmap_offset\": %" PRIu64 ",%%'",
             l->comparison_id, l->simulated_run_id, l->mmap_offset_bytes);
    assert_int_equal(count_rows(s, sql), 1);
  }
  compare_result_free(&r);
  store_close(s);
}

/* By default (layouts 0) every layout that differs is replayed, 4 with
 * 4 KiB pages; --layouts 1 is the default layout's replay alone, which is
 * layout 0 of the default. */
static void one_layout_is_the_default_replay_alone(void **state) {
  (void)state;
  store_t         *s = NULL;
  int64_t          run = record_run("one", &s);
  as_err_t         err = {0};
  compare_opts_t   o0 = {.model = MODEL, .store = false}; /* layouts 0 */
  compare_opts_t   o1 = {.model = MODEL, .layouts = 1, .store = true};
  compare_result_t a, b;
  if (compare_run(s, run, &o0, &a, &err) != AS_OK)
    fail_msg("compare: %s", err.msg);
  if (compare_run(s, run, &o1, &b, &err) != AS_OK)
    fail_msg("compare: %s", err.msg);
  assert_int_equal(a.nlayouts, 4);
  assert_int_equal(b.nlayouts, 1);
  assert_int_equal(a.nmarks, b.nmarks);
  for (size_t i = 0; i < a.nmarks; i++) {
    assert_int_equal(a.marks[i].predicted_by_layout[0],
                     b.marks[i].predicted_rss_bytes);
    assert_int_equal(b.marks[i].predicted_min_rss_bytes,
                     b.marks[i].predicted_rss_bytes);
    assert_int_equal(b.marks[i].predicted_max_rss_bytes,
                     b.marks[i].predicted_rss_bytes);
  }
  /* The default layout is unaligned: after is the 260-page case. */
  assert_int_equal(b.marks[2].predicted_rss_bytes,
                   MEASURED_START + SIM_UNALIGN);
  assert_int_equal(b.marks[2].simulated_rss_bytes, SIM_UNALIGN);
  assert_true(a.layouts[0].series.mean_abs_error_bytes ==
              b.series.mean_abs_error_bytes);
  /* One run, no layout provenance (as before layouts existed). */
  assert_int_equal(
      count_rows(s, "SELECT count(*) FROM runs WHERE kind = 'simulated'"), 1);
  meta_find_t mf = {.key = "mmap_offset"};
  assert_int_equal(store_list_meta(s, b.simulated_run_id, meta_find, &mf, &err),
                   AS_OK);
  assert_string_equal(mf.value, "");
  assert_int_equal(count_rows(s, "SELECT count(*) FROM comparisons WHERE "
                                 "params LIKE '%mmap_offset%'"),
                   0);
  compare_result_free(&a);
  compare_result_free(&b);
  store_close(s);
}

static void more_layouts_than_pages_in_a_pool_are_refused(void **state) {
  (void)state;
  store_t         *s = NULL;
  int64_t          run = record_run("many", &s);
  as_err_t         err = {0};
  compare_result_t r;
  /* With 16 KiB OS pages every layout is the same modulo the pool. */
  compare_opts_t o = {.model = MODEL, .page_size = 16384, .layouts = 2};
  assert_int_equal(compare_run(s, run, &o, &r, &err), AS_EINVAL);
  assert_non_null(strstr(err.msg, "only 1 differ"));
  compare_result_free(&r);
  /* With 4 KiB pages, 5 would repeat layout 0. */
  o.page_size = 0;
  o.layouts = 5;
  assert_int_equal(compare_run(s, run, &o, &r, &err), AS_EINVAL);
  assert_non_null(strstr(err.msg, "only 4 differ"));
  compare_result_free(&r);
  assert_int_equal(count_rows(s, "SELECT count(*) FROM runs"), 1);
  store_close(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(offset_layout_lowers_mmap_top_from_the_default),
      cmocka_unit_test(offset_layout_refuses_what_it_cannot_apply),
      cmocka_unit_test(layouts_bracket_the_arena_alignment_exactly),
      cmocka_unit_test(one_layout_is_the_default_replay_alone),
      cmocka_unit_test(more_layouts_than_pages_in_a_pool_are_refused),
  };
  return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
