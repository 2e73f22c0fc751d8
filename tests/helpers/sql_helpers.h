/* tests/helpers/sql_helpers.h -- looking into a store file behind the
 * store's back, for tests (include after <cmocka.h>). */
#ifndef ALLOCSIM_TEST_SQL_HELPERS_H
#define ALLOCSIM_TEST_SQL_HELPERS_H

#include <stdint.h>
#include <stdio.h>

#include <sqlite3.h>

/* SELECT count(*) FROM what ("runs", "runs WHERE id = 7"), read-only. */
static inline int64_t count_rows(const char *path, const char *what) {
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL),
                   SQLITE_OK);
  char sql[512];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", what);
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  int64_t n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

/* Runs sql on the file, failing the test with SQLite's message. */
static inline void raw_exec(const char *path, const char *sql) {
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
  char *msg = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
    fail_msg("%s: %s", sql, msg);
  sqlite3_close(db);
}

#endif
