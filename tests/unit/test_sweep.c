/* tests/unit/test_sweep.c -- grid expansion, point runs, worker threads and
 * storage of sweeps (analysis/sweep.c), on small survivors runs.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/helpers/sql_helpers.h"
#include <sqlite3.h>

#include "analysis/merge.h"
#include "analysis/sweep.h"
#include "analysis/sweep_rows.h"

static void base_config(sweep_config_t *c) {
  memset(c, 0, sizeof *c);
  c->workload = workload_find("survivors");
  c->model = "cpython:version=3.11";
  c->seeds = 1;
  c->jobs = 1;
  c->layouts = 1; /* the single-layout values these tests assert */
  sim_kernel_config_default(&c->kernel);
  c->fixed_name[0] = "total";
  c->fixed_value[0] = "1";
  c->nfixed = 1;
}

static void add_axis(sweep_config_t *c, const char *spec) {
  as_err_t err = {0};
  assert_int_equal(
      sweep_axis_parse(c->workload, spec, &c->axes[c->naxes], &err), AS_OK);
  c->naxes++;
}

static void free_axes(sweep_config_t *c) {
  for (size_t a = 0; a < c->naxes; a++)
    sweep_axis_free(&c->axes[a]);
}

static void axes_parse_values_and_reject_unknown_names(void **state) {
  (void)state;
  const workload_def_t *wl = workload_find("survivors");
  sweep_axis_t          a;
  as_err_t              err = {0};
  assert_int_equal(sweep_axis_parse(wl, "reuse_size=0,128", &a, &err), AS_OK);
  assert_string_equal(a.name, "reuse-size");
  assert_int_equal(a.count, 2);
  assert_string_equal(a.values[1], "128");
  sweep_axis_free(&a);
  assert_int_equal(sweep_axis_parse(wl, "page_size=4096,65536", &a, &err),
                   AS_OK);
  sweep_axis_free(&a);
  assert_int_equal(sweep_axis_parse(wl, "mmap_offset=0,4096,12288", &a, &err),
                   AS_OK);
  assert_string_equal(a.name, "mmap_offset");
  sweep_axis_free(&a);
  assert_int_equal(sweep_axis_parse(wl, "mmap_offset=100", &a, &err),
                   AS_EUSAGE);
  assert_non_null(strstr(err.msg, "multiple of 4096"));
  assert_int_equal(sweep_axis_parse(wl, "fractio=1", &a, &err), AS_EUSAGE);
  assert_non_null(strstr(err.msg, "no parameter 'fractio'"));
  assert_int_equal(sweep_axis_parse(wl, "page_size=8192", &a, &err), AS_EUSAGE);
  assert_int_equal(sweep_axis_parse(wl, "seed=1,2", &a, &err), AS_EUSAGE);
  assert_int_equal(sweep_axis_parse(wl, "size=64,,512", &a, &err), AS_EUSAGE);
  assert_int_equal(sweep_axis_parse(wl, "size", &a, &err), AS_EUSAGE);
}

static void grid_times_seeds_only_for_random_points(void **state) {
  (void)state;
  sweep_config_t c;
  base_config(&c);
  c.seeds = 3;
  add_axis(&c, "pattern=random,stride");
  add_axis(&c, "size=64,512");
  sweep_point_t *pts;
  size_t         n;
  as_err_t       err = {0};
  assert_int_equal(sweep_expand(&c, &pts, &n, NULL, &err), AS_OK);
  /* random: 2 sizes x 3 seeds; stride: 2 sizes, unseeded. */
  assert_int_equal(n, 8);
  assert_string_equal(pts[0].values[0], "random");
  assert_string_equal(pts[0].values[1], "64");
  assert_int_equal(pts[0].seed, 1);
  assert_int_equal(pts[2].seed, 3);
  assert_string_equal(pts[3].values[1], "512");
  assert_string_equal(pts[6].values[0], "stride");
  assert_int_equal(pts[6].seed, 0);
  assert_int_equal(pts[6].point, 2);
  assert_string_equal(pts[1].args,
                      "--size 64 --total 1 --pattern random --seed 2");
  free(pts);
  free_axes(&c);
}

static void bad_point_values_fail_before_anything_runs(void **state) {
  (void)state;
  sweep_config_t c;
  base_config(&c);
  add_axis(&c, "size=64,20");
  sweep_point_t *pts;
  size_t         n;
  as_err_t       err = {0};
  assert_int_equal(sweep_expand(&c, &pts, &n, NULL, &err), AS_EUSAGE);
  assert_non_null(strstr(err.msg, "--size"));
  free_axes(&c);
}

static void a_point_reports_marks_kept_formula_and_pinned_arenas(void **state) {
  (void)state;
  sweep_config_t c;
  base_config(&c);
  add_axis(&c, "fraction=0,1");
  sweep_point_t *pts;
  size_t         n;
  as_err_t       err = {0};
  assert_int_equal(sweep_expand(&c, &pts, &n, NULL, &err), AS_OK);
  assert_int_equal(n, 2);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(sweep_run_point(&c, &pts[i], &err), AS_OK);
  uint64_t start, peak, after;
  assert_true(sweep_point_mark(&pts[0], "start", &start));
  assert_true(sweep_point_mark(&pts[0], "peak", &peak));
  assert_true(sweep_point_mark(&pts[0], "after", &after));
  assert_true(pts[0].have_kept);
  assert_int_equal(pts[0].kept_bytes, (int64_t)after - (int64_t)start);
  /* Nothing survives: no arena holds a used pool; everything survives:
   * all 2 arenas that 16384 objects of 64 B need (k = 16065). */
  assert_int_equal(pts[0].arenas_pinned, 0);
  assert_int_equal(pts[1].arenas_pinned, 2);
  assert_true(pts[0].have_formula && pts[0].formula_kept_bytes == 0);
  /* 16384 / 16065 arenas of 63 pools of 16 KiB, every one pinned */
  assert_true(fabs(pts[1].formula_kept_bytes - 16384.0 / 16065 * 63 * 16384) <
              1e-6 * 1048576);
  assert_true(pts[1].kept_bytes > pts[0].kept_bytes);
  assert_int_equal(pts[0].nsamples, 4); /* three marks and the final */
  free(pts);
  free_axes(&c);
}

/* Runs the n points of c and stores them as one sweep in a new store at
 * path (a mkstemp template, filled in), left open in *s. */
static void run_and_store(const sweep_config_t *c, sweep_point_t *pts, size_t n,
                          char *path, store_t **s, int64_t *sweep_id) {
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  unlink(path); /* store_open creates it */
  as_err_t err = {0};
  assert_int_equal(store_open(path, s, &err), AS_OK);
  sweep_store_info_t info = {.spec_key = "k", .total_points = n};
  assert_int_equal(sweep_store_begin(*s, c, &info, sweep_id, &err), AS_OK);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(sweep_run_point(c, &pts[i], &err), AS_OK);
    assert_int_equal(sweep_store_point(*s, *sweep_id, c, &pts[i], &err), AS_OK);
  }
}

/* By default a point is the mean over the 4 layouts of 4 KiB pages: the
 * same as averaging the 4 mmap_offset points of a single-layout sweep. */
static void a_point_is_the_mean_over_layouts(void **state) {
  (void)state;
  sweep_config_t one, all;
  base_config(&one);
  add_axis(&one, "mmap_offset=0,4096,8192,12288");
  base_config(&all);
  all.layouts = 0;
  const char *fixed = "fraction=0.001";
  add_axis(&one, fixed);
  add_axis(&all, fixed);
  sweep_point_t *p1, *p4;
  size_t         n1, n4;
  as_err_t       err = {0};
  assert_int_equal(sweep_expand(&one, &p1, &n1, NULL, &err), AS_OK);
  assert_int_equal(sweep_expand(&all, &p4, &n4, NULL, &err), AS_OK);
  assert_int_equal(n1, 4);
  assert_int_equal(n4, 1);
  int64_t sum = 0, lo = INT64_MAX, hi = INT64_MIN;
  for (size_t i = 0; i < n1; i++) {
    assert_int_equal(sweep_run_point(&one, &p1[i], &err), AS_OK);
    assert_int_equal(p1[i].layouts, 1);
    sum += p1[i].kept_bytes;
    lo = p1[i].kept_bytes < lo ? p1[i].kept_bytes : lo;
    hi = p1[i].kept_bytes > hi ? p1[i].kept_bytes : hi;
  }
  assert_int_equal(sweep_run_point(&all, &p4[0], &err), AS_OK);
  assert_int_equal(p4[0].layouts, 4);
  assert_true(llabs(p4[0].kept_bytes - sum / 4) <= 4096); /* rounding */
  assert_int_equal(p4[0].kept_min_bytes, lo);
  assert_int_equal(p4[0].kept_max_bytes, hi);
  free(p1);
  free(p4);
  free_axes(&one);
  free_axes(&all);
}

typedef struct seen_s {
  size_t   calls;
  size_t   last_ndone;
  uint64_t kept_sum;
} seen_t;

static as_status_t count_done(void *user, sweep_point_t *p, size_t ndone,
                              size_t total, as_err_t *err) {
  (void)err;
  seen_t *s = user;
  assert_int_equal(total, 6);
  assert_int_equal(p->status, AS_OK);
  s->calls++;
  s->last_ndone = ndone;
  s->kept_sum += (uint64_t)p->kept_bytes;
  return AS_OK;
}

static void
mmap_offset_moves_the_layout_and_keeps_results_in_the_point(void **state) {
  (void)state;
  sweep_config_t c;
  base_config(&c);
  c.fixed_value[0] = "4";
  add_axis(&c, "mmap_offset=0,8192");
  sweep_point_t *pts;
  size_t         n;
  as_err_t       err = {0};
  assert_int_equal(sweep_expand(&c, &pts, &n, NULL, &err), AS_OK);
  assert_int_equal(n, 2);
  assert_int_equal(pts[1].mmap_offset, 8192);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(sweep_run_point(&c, &pts[i], &err), AS_OK);
  /* The default top is not 16 KiB aligned; lowering it by 8 KiB changes
   * which arenas are 16 KiB aligned (64 pools), so the counts differ. */
  assert_true(pts[0].unaligned_peak != pts[1].unaligned_peak);
  char json[1024];
  sweep_point_json(&c, &pts[1], json, sizeof json);
  assert_non_null(strstr(json, "\"mmap_offset\":8192"));
  free(pts);
  free_axes(&c);
}

static void threads_give_the_same_results_as_one_at_a_time(void **state) {
  (void)state;
  sweep_config_t c;
  base_config(&c);
  c.seeds = 3;
  add_axis(&c, "fraction=1e-4,1e-3");
  sweep_point_t *a, *b;
  size_t         n;
  as_err_t       err = {0};
  assert_int_equal(sweep_expand(&c, &a, &n, NULL, &err), AS_OK);
  assert_int_equal(sweep_expand(&c, &b, &n, NULL, &err), AS_OK);
  seen_t s1 = {0}, s2 = {0};
  c.jobs = 1;
  assert_int_equal(sweep_run(&c, a, n, count_done, &s1, &err), AS_OK);
  c.jobs = 3;
  assert_int_equal(sweep_run(&c, b, n, count_done, &s2, &err), AS_OK);
  assert_int_equal(s1.calls, 6);
  assert_int_equal(s2.calls, 6);
  assert_int_equal(s2.last_ndone, 6);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(a[i].kept_bytes, b[i].kept_bytes);
    assert_int_equal(a[i].arenas_pinned, b[i].arenas_pinned);
  }
  assert_int_equal(s1.kept_sum, s2.kept_sum);
  free(a);
  free(b);
  free_axes(&c);
}

static void stored_sweep_has_one_row_and_a_run_per_point(void **state) {
  (void)state;
  char           path[] = "/tmp/allocsim-test-sweep-XXXXXX";
  sweep_config_t c;
  base_config(&c);
  c.command = "allocsim sweep survivors --vary size=64,512";
  add_axis(&c, "size=64,512");
  sweep_point_t *pts;
  size_t         n;
  as_err_t       err = {0};
  store_t       *s;
  int64_t        sweep_id;
  assert_int_equal(sweep_expand(&c, &pts, &n, NULL, &err), AS_OK);
  run_and_store(&c, pts, n, path, &s, &sweep_id);
  sqlite3_stmt *st;
  assert_int_equal(
      sqlite3_prepare_v2(store_db(s),
                         "SELECT count(*), count(run_id), "
                         "sum(simulated_kept_bytes), "
                         "json_extract(min(params_json), '$.size') "
                         "FROM sweep_points WHERE sweep_id = ?1",
                         -1, &st, NULL),
      SQLITE_OK);
  sqlite3_bind_int64(st, 1, sweep_id);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int64(st, 0), 2);
  assert_int_equal(sqlite3_column_int64(st, 1), 2);
  assert_int_equal(sqlite3_column_int64(st, 2),
                   pts[0].kept_bytes + pts[1].kept_bytes);
  sqlite3_finalize(st);
  assert_int_equal(
      sqlite3_prepare_v2(store_db(s),
                         "SELECT json_extract(params, '$.vary.size[1]') "
                         "FROM sweeps WHERE id = ?1",
                         -1, &st, NULL),
      SQLITE_OK);
  sqlite3_bind_int64(st, 1, sweep_id);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int64(st, 0), 512);
  sqlite3_finalize(st);
  store_close(s);
  free(pts);
  free_axes(&c);
  unlink(path);
  char aux[sizeof path + 8];
  snprintf(aux, sizeof aux, "%s-wal", path);
  unlink(aux);
  snprintf(aux, sizeof aux, "%s-shm", path);
  unlink(aux);
}

/* A temporary store path (store_open creates the file). */
static void temp_store_path(char *path, size_t len, const char *tag) {
  snprintf(path, len, "/tmp/allocsim-test-%s-%d.db", tag, (int)getpid());
  unlink(path);
}

static void remove_store(const char *path) {
  char aux[256];
  unlink(path);
  snprintf(aux, sizeof aux, "%s-wal", path);
  unlink(aux);
  snprintf(aux, sizeof aux, "%s-shm", path);
  unlink(aux);
}

static void model_option_axes_do_not_multiply_other_models(void **state) {
  (void)state;
  sweep_config_t c;
  base_config(&c);
  add_axis(&c, "model=cpython,ideal");
  add_axis(&c, "cpython.version=3.11,3.14");
  sweep_point_t *pts;
  size_t         n;
  char           key_a[65], key_b[65];
  as_err_t       err = {0};
  assert_int_equal(sweep_expand(&c, &pts, &n, key_a, &err), AS_OK);
  /* cpython: 2 versions; ideal: one point, whatever the version axis. */
  assert_int_equal(n, 3);
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      assert_string_not_equal(pts[i].key, pts[j].key);
  assert_non_null(strstr(pts[1].model, "version=3.14"));
  assert_string_equal(pts[2].model, "ideal");
  free(pts);
  /* The same sweep expands to the same keys; another grid to another. */
  assert_int_equal(sweep_expand(&c, &pts, &n, key_b, &err), AS_OK);
  assert_string_equal(key_a, key_b);
  free(pts);
  sweep_axis_free(&c.axes[1]);
  c.naxes = 1;
  add_axis(&c, "cpython.version=3.11");
  assert_int_equal(sweep_expand(&c, &pts, &n, key_b, &err), AS_OK);
  assert_int_equal(n, 2);
  assert_string_not_equal(key_a, key_b);
  free(pts);
  free_axes(&c);
}

static void
an_option_axis_of_a_model_no_point_simulates_is_refused(void **state) {
  (void)state;
  sweep_config_t c;
  base_config(&c);
  c.model = "glibc";
  add_axis(&c, "jemalloc.narenas=1,2");
  sweep_point_t *pts;
  size_t         n;
  as_err_t       err = {0};
  assert_int_equal(sweep_expand(&c, &pts, &n, NULL, &err), AS_EUSAGE);
  assert_non_null(strstr(err.msg, "jemalloc.narenas"));
  assert_non_null(strstr(err.msg, "simulate glibc"));
  /* A model axis that simulates jemalloc at some points makes it apply. */
  add_axis(&c, "model=glibc,jemalloc");
  assert_int_equal(sweep_expand(&c, &pts, &n, NULL, &err), AS_OK);
  assert_int_equal(n, 3);
  free(pts);
  free_axes(&c);
}

static void a_libc_no_point_forwards_to_is_refused(void **state) {
  (void)state;
  sweep_config_t c;
  base_config(&c);
  c.model = "glibc";
  c.libc = "nosuch";
  add_axis(&c, "fraction=1e-4,1e-3");
  sweep_point_t *pts;
  size_t         n;
  as_err_t       err = {0};
  assert_int_equal(sweep_expand(&c, &pts, &n, NULL, &err), AS_EUSAGE);
  assert_non_null(strstr(err.msg, "--libc"));
  assert_non_null(strstr(err.msg, "simulate glibc"));
  /* With a point that forwards to it, the libc is checked as a model. */
  add_axis(&c, "model=glibc,cpython");
  assert_int_equal(sweep_expand(&c, &pts, &n, NULL, &err), AS_EUSAGE);
  assert_non_null(strstr(err.msg, "nosuch"));
  c.libc = "jemalloc";
  assert_int_equal(sweep_expand(&c, &pts, &n, NULL, &err), AS_OK);
  assert_int_equal(n, 4);
  free(pts);
  free_axes(&c);
}

static void shards_partition_the_points(void **state) {
  (void)state;
  sweep_config_t c;
  base_config(&c);
  c.seeds = 2;
  add_axis(&c, "fraction=1e-4,1e-3,1e-2");
  add_axis(&c, "size=64,512");
  sweep_point_t *all, *part;
  size_t         n, m;
  as_err_t       err = {0};
  assert_int_equal(sweep_expand(&c, &all, &n, NULL, &err), AS_OK);
  assert_int_equal(n, 12);
  unsigned seen[12] = {0};
  for (unsigned shard = 0; shard < 5; shard++) {
    assert_int_equal(sweep_expand(&c, &part, &m, NULL, &err), AS_OK);
    size_t k = sweep_shard(part, m, shard, 5);
    assert_true(k == 2 || k == 3);
    for (size_t i = 0; i < k; i++)
      for (size_t j = 0; j < n; j++)
        if (strcmp(part[i].key, all[j].key) == 0)
          seen[j]++;
    free(part);
  }
  for (size_t j = 0; j < n; j++)
    assert_int_equal(seen[j], 1);
  free(all);
  free_axes(&c);
}

/* Runs the points of c (shard index/count, or all when count is 0) into the
 * store at path as one sweep; resume skips what the store completed. */
static size_t run_sweep_into(const sweep_config_t *c, const char *path,
                             unsigned index, unsigned count, bool resume,
                             size_t stop_after) {
  sweep_point_t *pts;
  size_t         n;
  char           spec_key[65];
  as_err_t       err = {0};
  store_t       *s;
  int64_t        id;
  char           shard[32];
  assert_int_equal(sweep_expand(c, &pts, &n, spec_key, &err), AS_OK);
  size_t total = n;
  if (count > 0) {
    n = sweep_shard(pts, n, index, count);
    snprintf(shard, sizeof shard, "%u/%u", index, count);
  }
  assert_int_equal(store_open(path, &s, &err), AS_OK);
  if (resume)
    assert_int_equal(sweep_skip_done(s, spec_key, pts, &n, &err), AS_OK);
  sweep_store_info_t info = {.spec_key = spec_key,
                             .total_points = total,
                             .shard = count > 0 ? shard : NULL,
                             .resume = resume};
  assert_int_equal(sweep_store_begin(s, c, &info, &id, &err), AS_OK);
  size_t ran = 0;
  for (size_t i = 0; i < n && ran < stop_after; i++, ran++) {
    assert_int_equal(sweep_run_point(c, &pts[i], &err), AS_OK);
    assert_int_equal(sweep_store_point(s, id, c, &pts[i], &err), AS_OK);
  }
  assert_int_equal(
      sweep_store_finish(s, id, ran == n ? "complete" : "interrupted", &err),
      AS_OK);
  store_close(s);
  free(pts);
  return ran;
}

static const char POINTS_DIGEST[] =
    "SELECT group_concat(key || ':' || simulated_kept_bytes, ',') FROM "
    "(SELECT key, simulated_kept_bytes FROM sweep_points ORDER BY key)";

static char *points_digest(const char *path) {
  sqlite3      *db;
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(db, POINTS_DIGEST, -1, &st, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  char *d = strdup((const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return d;
}

static void resume_runs_only_what_an_interrupted_sweep_left(void **state) {
  (void)state;
  char path[128];
  temp_store_path(path, sizeof path, "resume");
  sweep_config_t c;
  base_config(&c);
  add_axis(&c, "fraction=1e-4,1e-3,1e-2,1e-1");
  assert_int_equal(run_sweep_into(&c, path, 0, 0, false, 3), 3);
  assert_int_equal(count_rows(path, "sweeps "
                                    "WHERE state = 'interrupted'"),
                   1);
  assert_int_equal(run_sweep_into(&c, path, 0, 0, true, SIZE_MAX), 1);
  assert_int_equal(count_rows(path, "sweep_points"), 4);
  assert_int_equal(count_rows(path, "sweeps"), 1);
  assert_int_equal(count_rows(path, "sweeps "
                                    "WHERE state = 'complete'"),
                   1);
  /* Resuming a complete sweep runs nothing. */
  assert_int_equal(run_sweep_into(&c, path, 0, 0, true, SIZE_MAX), 0);
  free_axes(&c);
  remove_store(path);
}

static void merged_shards_equal_the_unsharded_sweep(void **state) {
  (void)state;
  char whole[128], a[128], b[128], out[128];
  temp_store_path(whole, sizeof whole, "whole");
  temp_store_path(a, sizeof a, "shard0");
  temp_store_path(b, sizeof b, "shard1");
  temp_store_path(out, sizeof out, "merged");
  sweep_config_t c;
  base_config(&c);
  add_axis(&c, "fraction=1e-3,1e-2,1e-1");
  run_sweep_into(&c, whole, 0, 0, false, SIZE_MAX);
  run_sweep_into(&c, a, 0, 2, false, SIZE_MAX);
  run_sweep_into(&c, b, 1, 2, false, SIZE_MAX);
  store_t            *s;
  store_merge_stats_t st;
  as_err_t            err = {0};
  assert_int_equal(store_open(out, &s, &err), AS_OK);
  assert_int_equal(store_merge(s, a, &st, &err), AS_OK);
  assert_int_equal(st.points, 2);
  /* An input another process is writing is merged from its last commit:
   * merge reads it and locks only the output (it failed after the busy
   * wait, "database is locked", naming the output). */
  sqlite3 *writer = NULL;
  assert_int_equal(sqlite3_open(b, &writer), SQLITE_OK);
  assert_int_equal(sqlite3_exec(writer, "BEGIN IMMEDIATE; DELETE FROM runs",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  assert_int_equal(store_merge(s, b, &st, &err), AS_OK);
  assert_int_equal(st.points, 1);
  sqlite3_exec(writer, "ROLLBACK", NULL, NULL, NULL);
  sqlite3_close(writer);
  assert_int_equal(store_merge(s, b, &st, &err), AS_OK); /* idempotent */
  assert_int_equal(st.runs + st.sweeps + st.points, 0);
  store_close(s);
  char *dw = points_digest(whole), *dm = points_digest(out);
  assert_string_equal(dw, dm);
  free(dw);
  free(dm);

  /* A point of the same key with other results: refused, nothing written. */
  raw_exec(whole, "UPDATE sweep_points SET simulated_kept_bytes = "
                  "simulated_kept_bytes + 4096 WHERE point = 1");
  int64_t runs_before = count_rows(out, "runs");
  assert_int_equal(store_open(out, &s, &err), AS_OK);
  assert_int_equal(store_merge(s, whole, &st, &err), AS_EINVAL);
  assert_non_null(strstr(err.msg, "other results"));
  store_close(s);
  assert_int_equal(count_rows(out, "runs"), runs_before);

  /* Another schema version: refused. */
  raw_exec(a, "UPDATE schema_version SET version = 1");
  assert_int_equal(store_open(out, &s, &err), AS_OK);
  assert_int_equal(store_merge(s, a, &st, &err), AS_EINVAL);
  assert_non_null(strstr(err.msg, "schema"));
  store_close(s);
  free_axes(&c);
  remove_store(whole);
  remove_store(a);
  remove_store(b);
  remove_store(out);
}

static void trace_sweeps_take_the_model_their_provenance_implies(void **state) {
  (void)state;
  sweep_config_t c;
  memset(&c, 0, sizeof c);
  sim_kernel_config_default(&c.kernel);
  c.seeds = 1;
  c.jobs = 1;
  c.traces[0] = ALLOCSIM_SOURCE_DIR "/data/captures/c-churn.astrace";
  c.traces[1] = ALLOCSIM_SOURCE_DIR "/data/captures/python-survivors.astrace";
  c.ntraces = 2;
  add_axis(&c, "page_size=4096");
  sweep_point_t *pts;
  size_t         n;
  as_err_t       err = {0};
  assert_int_equal(sweep_expand(&c, &pts, &n, NULL, &err), AS_OK);
  assert_int_equal(n, 2);
  /* A C program's capture: glibc; a Python one: cpython over glibc. */
  assert_true(strncmp(pts[0].model, "glibc", 5) == 0);
  assert_true(strncmp(pts[1].model, "cpython", 7) == 0);
  assert_int_equal(sweep_run_point(&c, &pts[0], &err), AS_OK);
  assert_true(pts[0].peak_rss_bytes > 0);
  free(pts);
  /* A measured-run file has nothing to replay. */
  c.traces[0] = ALLOCSIM_SOURCE_DIR "/data/measured/spike-default-r1.trace";
  c.ntraces = 1;
  assert_int_equal(sweep_expand(&c, &pts, &n, NULL, &err), AS_EINVAL);
  assert_non_null(strstr(err.msg, "no allocation to replay"));
  free_axes(&c);
}

/* The read(2) calls this process has made (/proc/self/io syscr), or -1
 * where the kernel does not count them. */
static long long read_calls(void) {
  FILE     *f = fopen("/proc/self/io", "r");
  char      line[128];
  long long n = -1;
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "syscr: %lld", &n) == 1)
      break;
  if (f != NULL)
    fclose(f);
  return n;
}

/* A trace's header is read once for all its points, not once per point:
 * 40 points cost the reads of one (opening the trace, its digest). */
static void a_traces_header_is_read_once_for_all_its_points(void **state) {
  (void)state;
  if (read_calls() < 0)
    skip();
  sweep_config_t c;
  memset(&c, 0, sizeof c);
  sim_kernel_config_default(&c.kernel);
  c.seeds = 1;
  c.jobs = 1;
  c.traces[0] = ALLOCSIM_SOURCE_DIR "/data/captures/python-survivors.astrace";
  c.ntraces = 1;
  sweep_point_t *pts;
  size_t         n;
  as_err_t       err = {0};
  /* One point first: what any expansion reads once (the model registry's
   * facts, the libraries' first use) is then behind us. */
  add_axis(&c, "mmap_offset=0");
  assert_int_equal(sweep_expand(&c, &pts, &n, NULL, &err), AS_OK);
  free(pts);
  long long before = read_calls();
  assert_int_equal(sweep_expand(&c, &pts, &n, NULL, &err), AS_OK);
  long long reads_one = read_calls() - before;
  free(pts);
  free_axes(&c);
  char   spec[512] = "mmap_offset=0";
  size_t used = strlen(spec);
  for (int k = 1; k < 40; k++)
    used += (size_t)snprintf(spec + used, sizeof spec - used, ",%d", k * 4096);
  c.naxes = 0;
  add_axis(&c, spec);
  before = read_calls();
  assert_int_equal(sweep_expand(&c, &pts, &n, NULL, &err), AS_OK);
  long long reads = read_calls() - before;
  assert_int_equal(n, 40);
  free(pts);
  free_axes(&c);
  assert_true(reads_one > 0);
  assert_int_equal(reads, reads_one);
}

/* Copies file from to to; false if either cannot be opened. */
static bool copy_file(const char *from, const char *to) {
  FILE  *in = fopen(from, "rb"), *out = fopen(to, "wb");
  char   buf[4096];
  size_t got;
  while (in != NULL && out != NULL && (got = fread(buf, 1, sizeof buf, in)))
    fwrite(buf, 1, got, out);
  bool ok = in != NULL && out != NULL;
  if (in != NULL)
    fclose(in);
  return (out == NULL || fclose(out) == 0) && ok;
}

/* Two files with the same content are two traces of the sweep: each keeps
 * its points (the trace column names each point's file), the first with
 * the key a sweep of it alone gives, the copy with keys of its own. */
static void a_copy_of_a_trace_keeps_its_own_points(void **state) {
  (void)state;
  char copy[64];
  snprintf(copy, sizeof copy, "/tmp/allocsim-test-copy-%d.trace",
           (int)getpid());
  assert_true(copy_file(ALLOCSIM_SOURCE_DIR "/data/example.trace", copy));
  sweep_config_t c;
  memset(&c, 0, sizeof c);
  sim_kernel_config_default(&c.kernel);
  c.jobs = 1;
  c.model = "glibc";
  c.traces[0] = ALLOCSIM_SOURCE_DIR "/data/example.trace";
  c.ntraces = 1;
  add_axis(&c, "glibc.arena_max=1,2");
  sweep_point_t *alone, *pts;
  size_t         nalone, n;
  as_err_t       err = {0};
  assert_int_equal(sweep_expand(&c, &alone, &nalone, NULL, &err), AS_OK);
  c.traces[1] = copy;
  c.ntraces = 2;
  assert_int_equal(sweep_expand(&c, &pts, &n, NULL, &err), AS_OK);
  assert_int_equal(nalone, 2);
  assert_int_equal(n, 4);
  for (size_t i = 0; i < 2; i++) {
    assert_string_equal(pts[i].trace, c.traces[0]);
    assert_string_equal(pts[i].key, alone[i].key);
    assert_string_equal(pts[2 + i].trace, copy);
    assert_string_not_equal(pts[2 + i].key, pts[i].key);
  }
  /* stored, `db points` says which file each row replayed */
  char     path[] = "/tmp/allocsim-test-sweep-XXXXXX";
  store_t *s;
  int64_t  sweep_id;
  run_and_store(&c, pts, n, path, &s, &sweep_id);
  sqlite3_stmt *st;
  assert_int_equal(sweep_rows_prepare(s, sweep_id, &st, &err), AS_OK);
  assert_string_equal(sqlite3_column_name(st, 1), "trace");
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 1), pts[i].trace);
  }
  sqlite3_finalize(st);
  store_close(s);
  unlink(path);
  free(alone);
  free(pts);
  free_axes(&c);
  unlink(copy);
}

/* `db points` of a sweep that varies model and page_size: every column has
 * a name of its own (the varied value under the axis's name, the model's
 * full spec and the page in bytes under other names), so a JSON row keeps
 * both and a CSV header names no two columns alike. */
static void
varied_model_and_page_size_do_not_share_a_column_name(void **state) {
  (void)state;
  sweep_config_t c;
  memset(&c, 0, sizeof c);
  sim_kernel_config_default(&c.kernel);
  c.jobs = 1;
  c.traces[0] = ALLOCSIM_SOURCE_DIR "/data/example.trace";
  c.ntraces = 1;
  add_axis(&c, "model=glibc,ideal");
  add_axis(&c, "page_size=4K");
  sweep_point_t *pts;
  size_t         n;
  as_err_t       err = {0};
  assert_int_equal(sweep_expand(&c, &pts, &n, NULL, &err), AS_OK);
  char     path[] = "/tmp/allocsim-test-sweep-XXXXXX";
  store_t *s;
  int64_t  sweep_id;
  run_and_store(&c, pts, n, path, &s, &sweep_id);
  sqlite3_stmt *st;
  assert_int_equal(sweep_rows_prepare(s, sweep_id, &st, &err), AS_OK);
  int cols = sqlite3_column_count(st);
  for (int a = 0; a < cols; a++)
    for (int b = a + 1; b < cols; b++)
      if (strcmp(sqlite3_column_name(st, a), sqlite3_column_name(st, b)) == 0)
        fail_msg("columns %d and %d are both '%s'", a, b,
                 sqlite3_column_name(st, a));
  sqlite3_finalize(st);
  store_close(s);
  unlink(path);
  free(pts);
  free_axes(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(axes_parse_values_and_reject_unknown_names),
      cmocka_unit_test(grid_times_seeds_only_for_random_points),
      cmocka_unit_test(bad_point_values_fail_before_anything_runs),
      cmocka_unit_test(a_point_reports_marks_kept_formula_and_pinned_arenas),
      cmocka_unit_test(a_point_is_the_mean_over_layouts),
      cmocka_unit_test(
          mmap_offset_moves_the_layout_and_keeps_results_in_the_point),
      cmocka_unit_test(threads_give_the_same_results_as_one_at_a_time),
      cmocka_unit_test(stored_sweep_has_one_row_and_a_run_per_point),
      cmocka_unit_test(model_option_axes_do_not_multiply_other_models),
      cmocka_unit_test(an_option_axis_of_a_model_no_point_simulates_is_refused),
      cmocka_unit_test(a_libc_no_point_forwards_to_is_refused),
      cmocka_unit_test(shards_partition_the_points),
      cmocka_unit_test(resume_runs_only_what_an_interrupted_sweep_left),
      cmocka_unit_test(merged_shards_equal_the_unsharded_sweep),
      cmocka_unit_test(trace_sweeps_take_the_model_their_provenance_implies),
      cmocka_unit_test(a_copy_of_a_trace_keeps_its_own_points),
      cmocka_unit_test(varied_model_and_page_size_do_not_share_a_column_name),
      cmocka_unit_test(a_traces_header_is_read_once_for_all_its_points),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
