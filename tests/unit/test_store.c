/* tests/unit/test_store.c -- the SQLite store: identification, schema
 * versions, transactional writes, round trips, concurrent writers.
 *
 * Every test works in its own fresh directory under /tmp, so tests can run
 * in any order and leave nothing behind.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/helpers/sql_helpers.h"
#include <sqlite3.h>

#include "analysis/store.h"

/* ---- Fixture ------------------------------------------------------------ */

typedef struct fixture_s {
  char dir[64];   /* mkdtemp directory */
  char path[128]; /* dir/store.db */
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  assert_non_null(f);
  snprintf(f->dir, sizeof f->dir, "/tmp/allocsim-test-store-XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  snprintf(f->path, sizeof f->path, "%s/store.db", f->dir);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t  *f = *state;
  const char *suffixes[] = {"", "-wal", "-shm", "-journal"};
  char        p[160];
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
    snprintf(p, sizeof p, "%s%s", f->path, suffixes[i]);
    unlink(p);
  }
  rmdir(f->dir);
  free(f);
  return 0;
}

/* ---- Helpers ------------------------------------------------------------ */

static store_t *open_ok(const char *path) {
  store_t    *s = NULL;
  as_err_t    err = {0};
  as_status_t rc = store_open(path, &s, &err);
  if (rc != AS_OK)
    fail_msg("store_open(%s): %s", path, err.msg);
  assert_non_null(s);
  return s;
}

static const store_kv_t META[] = {
    {"machine", "test-box"},
    {"kernel", "6.1.0"},
    {"libc", "glibc 2.36"},
};

static store_run_t simulated_run(void) {
  store_run_t r = {
      .kind = "simulated",
      .model = "glibc:arena_max=2",
      .options = "--sample-every 10ms",
      .page_size = 4096,
      .source = "spike.trace",
      .command = "allocsim replay spike.trace",
      .trace_path = "/data/spike.trace",
      .trace_sha256 = "ab12",
      .meta = META,
      .meta_count = 3,
  };
  return r;
}

/* Three samples: a mark, a periodic one and the final one. */
static void three_samples(store_sample_t out[3]) {
  memset(out, 0, 3 * sizeof out[0]);
  out[0].t_ns = 1000;
  out[0].kind = SIM_SAMPLE_MARK;
  strcpy(out[0].label, "peak");
  out[0].rss_bytes = 8192;
  out[0].live_bytes = 5000;
  out[0].owner_bytes[SIM_OWNER_BASELINE] = 4096;
  out[0].owner_bytes[SIM_OWNER_LIBC_HEAP] = 4096;
  out[1].t_ns = 2000;
  out[1].kind = SIM_SAMPLE_PERIODIC;
  out[1].rss_bytes = 12288;
  out[1].live_bytes = 7000;
  out[1].owner_bytes[SIM_OWNER_LIBC_MMAP] = 12288;
  out[2].t_ns = 3000;
  out[2].kind = SIM_SAMPLE_FINAL;
  out[2].rss_bytes = 4096;
  out[2].live_bytes = 0;
  out[2].measured_rss_bytes = 0;
  out[2].owner_bytes[SIM_OWNER_METADATA] = 4096;
}

static void expected_msg(char *buf, size_t len, const char *path,
                         const char *rest) {
  snprintf(buf, len, "%s: %s", path, rest);
}

/* ---- Creating, reopening, identifying ----------------------------------- */

static void
created_store_keeps_runs_samples_and_meta_after_reopen(void **state) {
  fixture_t     *f = *state;
  store_sample_t in[3];
  three_samples(in);
  store_run_t run = simulated_run();
  as_err_t    err = {0};
  int64_t     id = 0;

  store_t *s = open_ok(f->path);
  assert_int_equal(store_write_run(s, &run, in, 3, &id, &err), AS_OK);
  assert_int_equal(id, 1);
  store_close(s);

  s = open_ok(f->path);
  store_run_record_t rec = {0};
  assert_int_equal(store_read_run(s, id, &rec, &err), AS_OK);
  assert_int_equal(rec.id, 1);
  assert_string_equal(rec.kind, "simulated");
  assert_string_equal(rec.model, "glibc:arena_max=2");
  assert_string_equal(rec.options, "--sample-every 10ms");
  assert_int_equal(rec.page_size, 4096);
  assert_string_equal(rec.source, "spike.trace");
  assert_string_equal(rec.command, "allocsim replay spike.trace");
  assert_string_equal(rec.allocsim_version, ALLOCSIM_VERSION);
  assert_string_equal(rec.trace_path, "/data/spike.trace");
  assert_string_equal(rec.trace_sha256, "ab12");
  assert_int_equal(rec.nsamples, 3);
  assert_int_equal(rec.peak_rss_bytes, 12288);
  assert_int_equal(rec.peak_measured_rss_bytes, 0);
  /* ISO-8601 UTC with milliseconds: 2026-11-30T00:17:03.123Z */
  assert_int_equal(strlen(rec.created_at), 24);
  assert_int_equal(rec.created_at[10], 'T');
  assert_int_equal(rec.created_at[19], '.');
  assert_int_equal(rec.created_at[23], 'Z');
  char   year[5];
  time_t now = time(NULL);
  strftime(year, sizeof year, "%Y", gmtime(&now));
  assert_memory_equal(rec.created_at, year, 4);
  store_run_record_free(&rec);
  assert_null(rec.model);

  store_sample_t *out = NULL;
  size_t          n = 0;
  assert_int_equal(store_read_samples(s, id, &out, &n, &err), AS_OK);
  assert_int_equal(n, 3);
  assert_memory_equal(out, in, sizeof in);
  free(out);

  char buf[64];
  assert_int_equal(store_read_meta(s, id, "kernel", buf, sizeof buf, &err),
                   AS_OK);
  assert_string_equal(buf, "6.1.0");
  store_close(s);
}

static void new_store_is_marked_wal_and_the_current_schema(void **state) {
  fixture_t *f = *state;
  store_close(open_ok(f->path));

  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
  sqlite3_stmt *st = NULL;
  assert_int_equal(
      sqlite3_prepare_v2(db, "PRAGMA application_id", -1, &st, NULL),
      SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int64(st, 0), 0x416C6C53);
  sqlite3_finalize(st);
  assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
  sqlite3_finalize(st);
  assert_int_equal(sqlite3_prepare_v2(db, "SELECT version FROM schema_version",
                                      -1, &st, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int64(st, 0), STORE_SCHEMA_VERSION);
  assert_int_equal(sqlite3_step(st), SQLITE_DONE);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

static void empty_existing_file_becomes_a_store(void **state) {
  fixture_t *f = *state;
  FILE      *fp = fopen(f->path, "w");
  assert_non_null(fp);
  fclose(fp);
  store_close(open_ok(f->path));
  assert_int_equal(count_rows(f->path, "schema_version"), 1);
}

static void newer_schema_is_refused_naming_both_versions(void **state) {
  fixture_t *f = *state;
  store_close(open_ok(f->path));
  raw_exec(f->path, "UPDATE schema_version SET version = 4");

  store_t *s = (store_t *)&s; /* must be reset to NULL */
  as_err_t err = {0};
  assert_int_equal(store_open(f->path, &s, &err), AS_ESTORE);
  assert_null(s);
  assert_int_equal(err.code, AS_ESTORE);
  char want[256];
  expected_msg(want, sizeof want, f->path,
               "store schema 4 is newer than this allocsim (3)");
  assert_string_equal(err.msg, want);
}

/* A v1 store (as shipped before schema 2) is upgraded on open: its runs
 * keep their ids and get a uid, and the sweep views exist. */
static void a_version_one_store_is_upgraded_in_place(void **state) {
  fixture_t *f = *state;
  raw_exec(f->path,
           "PRAGMA application_id = 1097624659;"
           "CREATE TABLE schema_version(version INTEGER NOT NULL);"
           "INSERT INTO schema_version VALUES (1);"
           "CREATE TABLE runs(id INTEGER PRIMARY KEY, kind TEXT NOT NULL);"
           "INSERT INTO runs(id, kind) VALUES (7, 'measured');"
           "CREATE TABLE sweeps(id INTEGER PRIMARY KEY, workload TEXT);"
           "CREATE TABLE sweep_points(sweep_id INTEGER, point INTEGER, "
           "seed INTEGER, params_json TEXT, simulated_kept_bytes INTEGER, "
           "formula_kept_bytes REAL);");
  store_close(open_ok(f->path));
  assert_int_equal(count_rows(f->path, "runs WHERE id = 7 AND "
                                       "length(uid) = 32"),
                   1);
  assert_int_equal(count_rows(f->path, "schema_version WHERE version = 3"), 1);
  assert_int_equal(count_rows(f->path, "sweep_seed_stats"), 0);
}

/* Schema 3: the seed statistics square kept bytes as reals.  Schema 2's
 * view failed the whole query with "integer overflow" once a point kept
 * about 2 GiB over 2 seeds; a v2 store's view is replaced on open. */
static void seed_stats_hold_points_of_many_gib(void **state) {
  fixture_t *f = *state;
  store_close(open_ok(f->path));
  raw_exec(f->path,
           "UPDATE schema_version SET version = 2;"
           "DROP VIEW sweep_seed_stats;"
           "CREATE VIEW sweep_seed_stats AS SELECT sweep_id, point, "
           "sum(simulated_kept_bytes * simulated_kept_bytes) AS sd_kept_bytes "
           "FROM sweep_points GROUP BY sweep_id, point;"
           "INSERT INTO sweeps(id, workload, params) "
           "VALUES (1, 'survivors', '{}');"
           "INSERT INTO sweep_points(sweep_id, point, seed, params_json, "
           "model, page_size, simulated_kept_bytes) VALUES "
           "(1, 0, 1, '{}', 'cpython', 4096, 2726297600), "
           "(1, 0, 2, '{}', 'cpython', 4096, 2726301696);");
  store_close(open_ok(f->path));
  assert_int_equal(count_rows(f->path, "schema_version WHERE version = 3"), 1);
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(db,
                                      "SELECT n, mean_kept_bytes, "
                                      "sd_kept_bytes FROM sweep_seed_stats",
                                      -1, &st, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int(st, 0), 2);
  assert_float_equal(sqlite3_column_double(st, 1), 2726299648.0, 0.5);
  /* The sample sd of two values 4096 apart: 4096 / sqrt(2) = 2896.3; the
   * squares' sum loses some of it to double rounding (about 2^-52 of
   * 1.5e19), so 1 % is the tolerance. */
  assert_float_equal(sqlite3_column_double(st, 2), 2896.3, 29.0);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

static void foreign_sqlite_file_is_refused_and_left_unchanged(void **state) {
  fixture_t *f = *state;
  raw_exec(f->path, "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT);"
                    "INSERT INTO notes(body) VALUES ('hello');");

  store_t *s = NULL;
  as_err_t err = {0};
  assert_int_equal(store_open(f->path, &s, &err), AS_ESTORE);
  assert_null(s);
  char want[256];
  expected_msg(want, sizeof want, f->path, "not an allocsim store");
  assert_string_equal(err.msg, want);

  /* Not switched to WAL, no schema added. */
  char wal[160];
  snprintf(wal, sizeof wal, "%s-wal", f->path);
  assert_int_equal(access(wal, F_OK), -1);
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 0), "delete");
  sqlite3_finalize(st);
  sqlite3_close(db);
  assert_int_equal(count_rows(f->path, "sqlite_master"), 1);
}

static void our_application_id_without_schema_version_is_refused(void **state) {
  fixture_t *f = *state;
  raw_exec(f->path, "PRAGMA application_id = 1097624659;"
                    "CREATE TABLE runs(id INTEGER PRIMARY KEY);");
  store_t *s = NULL;
  as_err_t err = {0};
  assert_int_equal(store_open(f->path, &s, &err), AS_ESTORE);
  char want[256];
  expected_msg(want, sizeof want, f->path, "not an allocsim store");
  assert_string_equal(err.msg, want);
}

static void garbage_file_is_refused_as_not_a_database(void **state) {
  fixture_t *f = *state;
  FILE      *fp = fopen(f->path, "w");
  assert_non_null(fp);
  for (int i = 0; i < 200; i++)
    fputs("this is a text file, not SQLite\n", fp);
  fclose(fp);
  struct stat before;
  assert_int_equal(stat(f->path, &before), 0);

  store_t *s = NULL;
  as_err_t err = {0};
  assert_int_equal(store_open(f->path, &s, &err), AS_ESTORE);
  assert_null(s);
  char want[256];
  expected_msg(want, sizeof want, f->path, "file is not a database");
  assert_string_equal(err.msg, want);
  struct stat after;
  assert_int_equal(stat(f->path, &after), 0);
  assert_int_equal(after.st_size, before.st_size);
}

static void path_in_missing_directory_is_refused_naming_it(void **state) {
  fixture_t *f = *state;
  char       path[160];
  snprintf(path, sizeof path, "%s/no/such/dir/store.db", f->dir);
  store_t *s = NULL;
  as_err_t err = {0};
  assert_int_equal(store_open(path, &s, &err), AS_ESTORE);
  assert_null(s);
  char want[256];
  expected_msg(want, sizeof want, path, "unable to open database file");
  assert_string_equal(err.msg, want);
}

/* ---- Transactions: no partial writes ------------------------------------ */

static void out_of_range_sample_kind_leaves_no_partial_run(void **state) {
  fixture_t     *f = *state;
  store_sample_t in[3];
  three_samples(in);
  in[2].kind = (sim_sample_kind_t)7; /* after two good samples */
  store_run_t run = simulated_run();
  as_err_t    err = {0};
  int64_t     id = 99;

  store_t *s = open_ok(f->path);
  assert_int_equal(store_write_run(s, &run, in, 3, &id, &err), AS_ESTORE);
  assert_int_equal(id, 0);
  char want[256];
  expected_msg(want, sizeof want, f->path,
               "sample 2: kind 7 is not a sample kind (0..3)");
  assert_string_equal(err.msg, want);
  /* The connection is usable again: no transaction left open. */
  assert_int_not_equal(sqlite3_get_autocommit(store_db(s)), 0);
  store_close(s);

  assert_int_equal(count_rows(f->path, "runs"), 0);
  assert_int_equal(count_rows(f->path, "run_meta"), 0);
  assert_int_equal(count_rows(f->path, "samples"), 0);
  assert_int_equal(count_rows(f->path, "sample_owners"), 0);
}

static void constraint_failure_rolls_back_the_whole_run(void **state) {
  fixture_t     *f = *state;
  store_sample_t in[3];
  three_samples(in);
  const store_kv_t dup[] = {{"machine", "a"}, {"machine", "b"}};
  store_run_t      run = simulated_run();
  run.meta = dup;
  run.meta_count = 2;
  as_err_t err = {0};
  int64_t  id = 0;

  store_t *s = open_ok(f->path);
  assert_int_equal(store_write_run(s, &run, in, 3, &id, &err), AS_ESTORE);
  char want[256];
  expected_msg(want, sizeof want, f->path,
               "writing meta 'machine': UNIQUE constraint failed: "
               "run_meta.run_id, run_meta.key");
  assert_string_equal(err.msg, want);
  assert_int_equal(id, 0);

  /* A bad run kind is refused by the CHECK constraint. */
  store_run_t bad = simulated_run();
  bad.kind = "guessed";
  assert_int_equal(store_write_run(s, &bad, in, 3, &id, &err), AS_ESTORE);
  expected_msg(want, sizeof want, f->path,
               "writing the run: CHECK constraint failed: "
               "kind IN ('measured','simulated')");
  assert_string_equal(err.msg, want);

  /* The next good write succeeds and is the only run. */
  run = simulated_run();
  assert_int_equal(store_write_run(s, &run, in, 3, &id, &err), AS_OK);
  store_close(s);
  assert_int_equal(count_rows(f->path, "runs"), 1);
  assert_int_equal(count_rows(f->path, "run_meta"), 3);
  assert_int_equal(count_rows(f->path, "samples"), 3);
}

static void value_above_int64_max_is_refused_without_writing(void **state) {
  fixture_t     *f = *state;
  store_sample_t in[3];
  three_samples(in);
  in[1].owner_bytes[SIM_OWNER_JEMALLOC] = UINT64_MAX;
  store_run_t run = simulated_run();
  as_err_t    err = {0};
  int64_t     id = 0;
  store_t    *s = open_ok(f->path);
  assert_int_equal(store_write_run(s, &run, in, 3, &id, &err), AS_ESTORE);
  char want[256];
  expected_msg(want, sizeof want, f->path,
               "sample 1: jemalloc 18446744073709551615 is larger than the "
               "store's limit 9223372036854775807");
  assert_string_equal(err.msg, want);
  store_close(s);
  assert_int_equal(count_rows(f->path, "runs"), 0);
}

static void caller_transaction_groups_writes_and_rolls_back(void **state) {
  fixture_t *f = *state;
  as_err_t   err = {0};
  store_t   *s = open_ok(f->path);

  assert_int_equal(store_begin(s, &err), AS_OK);
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(store_db(s),
                                      "INSERT INTO sweeps(workload, params)"
                                      " VALUES (?1, ?2)",
                                      -1, &st, NULL),
                   SQLITE_OK);
  sqlite3_bind_text(st, 1, "survivors", -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, "{\"size\":64}", -1, SQLITE_STATIC);
  assert_int_equal(sqlite3_step(st), SQLITE_DONE);
  sqlite3_finalize(st);
  store_rollback(s);
  assert_int_equal(count_rows(f->path, "sweeps"), 0);

  assert_int_equal(store_begin(s, &err), AS_OK);
  assert_int_equal(sqlite3_exec(store_db(s),
                                "INSERT INTO sweeps(workload, params)"
                                " VALUES ('survivors', '{}')",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  assert_int_equal(store_commit(s, &err), AS_OK);
  store_rollback(s); /* no transaction open: a no-op */
  store_close(s);
  assert_int_equal(count_rows(f->path, "sweeps"), 1);
}

static void run_inside_caller_transaction_commits_with_its_row(void **state) {
  fixture_t     *f = *state;
  store_sample_t in[3];
  three_samples(in);
  store_run_t run = simulated_run();
  as_err_t    err = {0};
  int64_t     id = 0;
  store_t    *s = open_ok(f->path);

  /* Rolled back by the caller: neither the run nor its point remains. */
  assert_int_equal(store_begin(s, &err), AS_OK);
  assert_int_equal(store_write_run(s, &run, in, 3, &id, &err), AS_OK);
  assert_int_equal(id, 1);
  assert_int_equal(sqlite3_get_autocommit(store_db(s)), 0);
  store_rollback(s);
  assert_int_equal(count_rows(f->path, "runs"), 0);
  assert_int_equal(count_rows(f->path, "samples"), 0);

  /* Committed by the caller: the run and the sweep point referring to it. */
  assert_int_equal(store_begin(s, &err), AS_OK);
  assert_int_equal(sqlite3_exec(store_db(s),
                                "INSERT INTO sweeps(id, workload, params)"
                                " VALUES (7, 'survivors', '{}')",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  assert_int_equal(store_write_run(s, &run, in, 3, &id, &err), AS_OK);
  sqlite3_stmt *st = NULL;
  assert_int_equal(
      sqlite3_prepare_v2(store_db(s),
                         "INSERT INTO sweep_points(sweep_id, point, seed,"
                         " params_json, model, page_size, run_id)"
                         " VALUES (7, 0, 42, '{}', 'ideal', 4096, ?1)",
                         -1, &st, NULL),
      SQLITE_OK);
  sqlite3_bind_int64(st, 1, id);
  assert_int_equal(sqlite3_step(st), SQLITE_DONE);
  sqlite3_finalize(st);
  assert_int_equal(count_rows(f->path, "runs"), 0); /* not yet visible */
  assert_int_equal(store_commit(s, &err), AS_OK);
  store_close(s);
  assert_int_equal(count_rows(f->path, "runs"), 1);
  assert_int_equal(count_rows(f->path, "samples"), 3);
  assert_int_equal(count_rows(f->path, "sweep_points"), 1);
}

static void
failed_run_inside_caller_transaction_keeps_earlier_writes(void **state) {
  fixture_t     *f = *state;
  store_sample_t in[3];
  three_samples(in);
  in[1].kind = (sim_sample_kind_t)-1;
  store_run_t run = simulated_run();
  as_err_t    err = {0};
  int64_t     id = 5;
  store_t    *s = open_ok(f->path);

  assert_int_equal(store_begin(s, &err), AS_OK);
  assert_int_equal(sqlite3_exec(store_db(s),
                                "INSERT INTO sweeps(workload, params)"
                                " VALUES ('survivors', '{}')",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  assert_int_equal(store_write_run(s, &run, in, 3, &id, &err), AS_ESTORE);
  assert_int_equal(id, 0);
  char want[256];
  expected_msg(want, sizeof want, f->path,
               "sample 1: kind -1 is not a sample kind (0..3)");
  assert_string_equal(err.msg, want);
  assert_int_equal(sqlite3_get_autocommit(store_db(s)), 0); /* still open */
  assert_int_equal(store_commit(s, &err), AS_OK);
  store_close(s);
  assert_int_equal(count_rows(f->path, "sweeps"), 1);
  assert_int_equal(count_rows(f->path, "runs"), 0);
  assert_int_equal(count_rows(f->path, "run_meta"), 0);
  assert_int_equal(count_rows(f->path, "samples"), 0);
  assert_int_equal(count_rows(f->path, "sample_owners"), 0);
}

/* ---- Round trips -------------------------------------------------------- */

static void
owner_breakdown_round_trips_storing_only_nonzero_owners(void **state) {
  fixture_t     *f = *state;
  store_sample_t in[2];
  memset(in, 0, sizeof in);
  in[0].kind = SIM_SAMPLE_PERIODIC;
  for (int o = 0; o < SIM_OWNER_COUNT; o++)
    in[0].owner_bytes[o] = (uint64_t)(o + 1) * 4096;
  in[1].kind = SIM_SAMPLE_MEASURED;
  in[1].measured_rss_bytes = 123456789;
  in[1].owner_bytes[SIM_OWNER_PYMALLOC] = 262144;
  store_run_t run = simulated_run();
  run.kind = "measured";
  as_err_t err = {0};
  int64_t  id = 0;

  store_t *s = open_ok(f->path);
  assert_int_equal(store_write_run(s, &run, in, 2, &id, &err), AS_OK);
  store_sample_t *out = NULL;
  size_t          n = 0;
  assert_int_equal(store_read_samples(s, id, &out, &n, &err), AS_OK);
  assert_int_equal(n, 2);
  for (int o = 0; o < SIM_OWNER_COUNT; o++)
    assert_int_equal(out[0].owner_bytes[o], (uint64_t)(o + 1) * 4096);
  assert_int_equal(out[1].owner_bytes[SIM_OWNER_PYMALLOC], 262144);
  assert_int_equal(out[1].owner_bytes[SIM_OWNER_BASELINE], 0);
  assert_int_equal(out[1].kind, SIM_SAMPLE_MEASURED);
  assert_int_equal(out[1].measured_rss_bytes, 123456789);
  assert_string_equal(out[1].label, "");
  free(out);

  store_run_record_t rec = {0};
  assert_int_equal(store_read_run(s, id, &rec, &err), AS_OK);
  assert_int_equal(rec.peak_measured_rss_bytes, 123456789);
  store_run_record_free(&rec);
  store_close(s);
  assert_int_equal(count_rows(f->path, "sample_owners"), SIM_OWNER_COUNT + 1);
}

static void meta_reads_back_and_absent_key_reads_empty(void **state) {
  fixture_t  *f = *state;
  store_run_t run = simulated_run();
  as_err_t    err = {0};
  int64_t     id = 0;
  store_t    *s = open_ok(f->path);
  assert_int_equal(store_write_run(s, &run, NULL, 0, &id, &err), AS_OK);

  char buf[32] = "junk";
  assert_int_equal(store_read_meta(s, id, "machine", buf, sizeof buf, &err),
                   AS_OK);
  assert_string_equal(buf, "test-box");
  assert_int_equal(store_read_meta(s, id, "python", buf, sizeof buf, &err),
                   AS_OK);
  assert_string_equal(buf, "");

  char small[5];
  assert_int_equal(store_read_meta(s, id, "libc", small, sizeof small, &err),
                   AS_EINVAL);
  char want[256];
  expected_msg(want, sizeof want, f->path,
               "run 1: meta 'libc' has 10 bytes, the buffer holds 4");
  assert_string_equal(err.msg, want);

  assert_int_equal(store_read_meta(s, 42, "machine", buf, sizeof buf, &err),
                   AS_ESTORE);
  expected_msg(want, sizeof want, f->path, "no run with id 42");
  assert_string_equal(err.msg, want);

  store_sample_t *out = (store_sample_t *)&out;
  size_t          n = 7;
  assert_int_equal(store_read_samples(s, id, &out, &n, &err), AS_OK);
  assert_null(out);
  assert_int_equal(n, 0);
  assert_int_equal(store_read_samples(s, 42, &out, &n, &err), AS_ESTORE);
  assert_string_equal(err.msg, want);
  store_close(s);
}

typedef struct meta_seen_s {
  char text[256];
} meta_seen_t;

static as_status_t collect_meta(void *user, const char *key, const char *value,
                                as_err_t *err) {
  (void)err;
  meta_seen_t *m = user;
  size_t       n = strlen(m->text);
  snprintf(m->text + n, sizeof m->text - n, "%s=%s;", key, value);
  return AS_OK;
}

static void list_meta_visits_pairs_in_key_order(void **state) {
  fixture_t  *f = *state;
  store_run_t run = simulated_run();
  as_err_t    err = {0};
  int64_t     id = 0;
  store_t    *s = open_ok(f->path);
  assert_int_equal(store_write_run(s, &run, NULL, 0, &id, &err), AS_OK);
  meta_seen_t seen = {{0}};
  assert_int_equal(store_list_meta(s, id, collect_meta, &seen, &err), AS_OK);
  assert_string_equal(seen.text,
                      "kernel=6.1.0;libc=glibc 2.36;machine=test-box;");
  store_close(s);
}

typedef struct runs_seen_s {
  int     calls;
  int64_t ids[4];
  int64_t nsamples[4];
  int     stop_after; /* 0: never */
} runs_seen_t;

static as_status_t collect_run(void *user, const store_run_record_t *rec,
                               as_err_t *err) {
  runs_seen_t *r = user;
  r->ids[r->calls] = rec->id;
  r->nsamples[r->calls] = (int64_t)rec->nsamples;
  r->calls++;
  if (r->stop_after != 0 && r->calls == r->stop_after)
    return as_err_set(err, AS_EIO, "stopped");
  return AS_OK;
}

static void
list_runs_visits_runs_in_id_order_until_callback_fails(void **state) {
  fixture_t     *f = *state;
  store_sample_t in[3];
  three_samples(in);
  store_run_t run = simulated_run();
  as_err_t    err = {0};
  int64_t     id = 0;
  store_t    *s = open_ok(f->path);
  assert_int_equal(store_write_run(s, &run, in, 3, &id, &err), AS_OK);
  assert_int_equal(store_write_run(s, &run, in, 1, &id, &err), AS_OK);
  assert_int_equal(store_write_run(s, &run, NULL, 0, &id, &err), AS_OK);

  runs_seen_t seen = {0};
  assert_int_equal(store_list_runs(s, collect_run, &seen, &err), AS_OK);
  assert_int_equal(seen.calls, 3);
  assert_int_equal(seen.ids[0], 1);
  assert_int_equal(seen.ids[1], 2);
  assert_int_equal(seen.ids[2], 3);
  assert_int_equal(seen.nsamples[0], 3);
  assert_int_equal(seen.nsamples[1], 1);
  assert_int_equal(seen.nsamples[2], 0);

  runs_seen_t stop = {.stop_after = 2};
  assert_int_equal(store_list_runs(s, collect_run, &stop, &err), AS_EIO);
  assert_int_equal(stop.calls, 2);

  store_run_record_t rec = {0};
  assert_int_equal(store_read_run(s, 9, &rec, &err), AS_ESTORE);
  char want[256];
  expected_msg(want, sizeof want, f->path, "no run with id 9");
  assert_string_equal(err.msg, want);
  assert_null(rec.kind);
  store_close(s);
}

static void sample_from_sim_copies_and_truncates_label(void **state) {
  (void)state;
  char long_label[100];
  memset(long_label, 'x', sizeof long_label - 1);
  long_label[99] = '\0';
  sim_sample_t sim = {
      .t_ns = 5,
      .kind = SIM_SAMPLE_MARK,
      .label = long_label,
      .rss_bytes = 6,
      .live_bytes = 7,
      .measured_rss_bytes = 8,
  };
  sim.owner_bytes[SIM_OWNER_IDEAL] = 9;
  store_sample_t out;
  memset(&out, 0xAA, sizeof out);
  store_sample_from_sim(&out, &sim);
  assert_int_equal(out.t_ns, 5);
  assert_int_equal(out.kind, SIM_SAMPLE_MARK);
  assert_int_equal(strlen(out.label), 63);
  assert_int_equal(out.label[62], 'x');
  assert_int_equal(out.rss_bytes, 6);
  assert_int_equal(out.live_bytes, 7);
  assert_int_equal(out.measured_rss_bytes, 8);
  assert_int_equal(out.owner_bytes[SIM_OWNER_IDEAL], 9);
  assert_int_equal(out.owner_bytes[SIM_OWNER_BASELINE], 0);

  sim.label = NULL;
  store_sample_from_sim(&out, &sim);
  assert_string_equal(out.label, "");
}

/* ---- Concurrent writers ------------------------------------------------- */

enum { WRITER_RUNS = 20, WRITER_SAMPLES = 200 };

typedef struct writer_s {
  const char *path;
  as_status_t rc;
  as_err_t    err;
  _Atomic int written; /* read by the main thread while the writer runs */
} writer_t;

static void *writer_main(void *arg) {
  writer_t *w = arg;
  store_t  *s = NULL;
  w->rc = store_open(w->path, &s, &w->err);
  if (w->rc != AS_OK)
    return NULL;
  store_sample_t *in = calloc(WRITER_SAMPLES, sizeof *in);
  if (in == NULL) {
    w->rc = AS_ENOMEM;
    store_close(s);
    return NULL;
  }
  for (size_t i = 0; i < WRITER_SAMPLES; i++) {
    in[i].t_ns = i * 1000;
    in[i].kind = SIM_SAMPLE_PERIODIC;
    in[i].rss_bytes = 4096 * (i + 1);
    in[i].owner_bytes[SIM_OWNER_PYMALLOC] = 4096 * (i + 1);
  }
  store_run_t run = simulated_run();
  for (int r = 0; r < WRITER_RUNS && w->rc == AS_OK; r++) {
    int64_t id = 0;
    w->rc = store_write_run(s, &run, in, WRITER_SAMPLES, &id, &w->err);
    if (w->rc == AS_OK)
      w->written++;
  }
  free(in);
  store_close(s);
  return NULL;
}

static void two_connections_writing_concurrently_both_succeed(void **state) {
  fixture_t *f = *state;
  store_close(open_ok(f->path)); /* created once, like a sweep's first run */
  writer_t  w[2] = {{.path = f->path}, {.path = f->path}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&t[i], NULL, writer_main, &w[i]), 0);
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_join(t[i], NULL), 0);
  for (int i = 0; i < 2; i++) {
    if (w[i].rc != AS_OK)
      fail_msg("writer %d: %s", i, w[i].err.msg);
    assert_int_equal(w[i].written, WRITER_RUNS);
  }
  assert_int_equal(count_rows(f->path, "runs"), 2 * WRITER_RUNS);
  assert_int_equal(count_rows(f->path, "samples"),
                   2 * WRITER_RUNS * WRITER_SAMPLES);
}

static void two_connections_creating_a_new_store_both_succeed(void **state) {
  fixture_t *f = *state;
  writer_t   w[2] = {{.path = f->path}, {.path = f->path}};
  pthread_t  t[2];
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&t[i], NULL, writer_main, &w[i]), 0);
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_join(t[i], NULL), 0);
  for (int i = 0; i < 2; i++)
    if (w[i].rc != AS_OK)
      fail_msg("writer %d: %s", i, w[i].err.msg);
  assert_int_equal(count_rows(f->path, "schema_version"), 1);
  assert_int_equal(count_rows(f->path, "runs"), 2 * WRITER_RUNS);
}

static void writer_waits_for_another_connections_transaction(void **state) {
  fixture_t *f = *state;
  as_err_t   err = {0};
  store_t   *a = open_ok(f->path);
  assert_int_equal(store_begin(a, &err), AS_OK); /* holds the write lock */

  writer_t  w = {.path = f->path};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, writer_main, &w), 0);
  struct timespec pause = {.tv_sec = 0, .tv_nsec = 300 * 1000 * 1000};
  nanosleep(&pause, NULL);
  assert_int_equal(w.written, 0); /* still waiting for a's lock */
  assert_int_equal(store_commit(a, &err), AS_OK);
  assert_int_equal(pthread_join(t, NULL), 0);
  if (w.rc != AS_OK)
    fail_msg("writer: %s", w.err.msg);
  assert_int_equal(w.written, WRITER_RUNS);
  store_close(a);
}

static void reading_inside_a_caller_transaction_keeps_it_open(void **state) {
  fixture_t     *f = *state;
  store_sample_t in[3];
  three_samples(in);
  store_run_t run = simulated_run();
  as_err_t    err = {0};
  int64_t     id = 0;
  store_t    *s = open_ok(f->path);
  assert_int_equal(store_write_run(s, &run, in, 3, &id, &err), AS_OK);

  assert_int_equal(store_begin(s, &err), AS_OK);
  assert_int_equal(sqlite3_exec(store_db(s),
                                "INSERT INTO sweeps(workload, params)"
                                " VALUES ('survivors', '{}')",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  store_sample_t *out = NULL;
  size_t          n = 0;
  assert_int_equal(store_read_samples(s, id, &out, &n, &err), AS_OK);
  free(out);
  assert_int_equal(n, 3);
  assert_int_equal(sqlite3_get_autocommit(store_db(s)), 0);
  assert_int_equal(store_commit(s, &err), AS_OK);
  store_close(s);
  assert_int_equal(count_rows(f->path, "sweeps"), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
      T(created_store_keeps_runs_samples_and_meta_after_reopen),
      T(new_store_is_marked_wal_and_the_current_schema),
      T(empty_existing_file_becomes_a_store),
      T(newer_schema_is_refused_naming_both_versions),
      T(a_version_one_store_is_upgraded_in_place),
      T(seed_stats_hold_points_of_many_gib),
      T(foreign_sqlite_file_is_refused_and_left_unchanged),
      T(our_application_id_without_schema_version_is_refused),
      T(garbage_file_is_refused_as_not_a_database),
      T(path_in_missing_directory_is_refused_naming_it),
      T(out_of_range_sample_kind_leaves_no_partial_run),
      T(constraint_failure_rolls_back_the_whole_run),
      T(value_above_int64_max_is_refused_without_writing),
      T(caller_transaction_groups_writes_and_rolls_back),
      T(run_inside_caller_transaction_commits_with_its_row),
      T(failed_run_inside_caller_transaction_keeps_earlier_writes),
      T(owner_breakdown_round_trips_storing_only_nonzero_owners),
      T(meta_reads_back_and_absent_key_reads_empty),
      T(list_meta_visits_pairs_in_key_order),
      T(list_runs_visits_runs_in_id_order_until_callback_fails),
      T(sample_from_sim_copies_and_truncates_label),
      T(two_connections_writing_concurrently_both_succeed),
      T(two_connections_creating_a_new_store_both_succeed),
      T(writer_waits_for_another_connections_transaction),
      T(reading_inside_a_caller_transaction_keeps_it_open),
#undef T
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
