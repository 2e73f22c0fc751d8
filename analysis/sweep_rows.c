/* analysis/sweep_rows.c -- a stored sweep as a table (see sweep_rows.h). */
#include "sweep_rows.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

static as_status_t db_error(store_t *s, as_err_t *err) {
  return as_err_set(err, AS_ESTORE, "%s: %s", store_path(s),
                    sqlite3_errmsg(store_db(s)));
}

as_status_t sweep_rows_find(store_t *s, int64_t *id, as_err_t *err) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(store_db(s),
                         "SELECT id FROM sweeps WHERE ?1 = 0 OR id = ?1 "
                         "ORDER BY id DESC LIMIT 1",
                         -1, &st, NULL) != SQLITE_OK)
    return db_error(s, err);
  sqlite3_bind_int64(st, 1, *id);
  as_status_t rc = AS_OK;
  if (sqlite3_step(st) == SQLITE_ROW)
    *id = sqlite3_column_int64(st, 0);
  else if (*id)
    rc =
        as_err_set(err, AS_EINVAL, "%s: no sweep %" PRId64, store_path(s), *id);
  else
    rc = as_err_set(err, AS_EINVAL, "%s: no sweeps", store_path(s));
  sqlite3_finalize(st);
  return rc;
}

/* Columns of every sweep that an axis may share a name with (--vary
 * model=..., --vary page_size=...): there the column is named alt, so
 * that no row has two keys of one name (a JSON object keeping only the
 * last, a CSV header naming two columns alike). */
typedef struct fixed_column_s fixed_column_t;
struct fixed_column_s {
  const char *expr, *name, *alt;
};
static const fixed_column_t k_fixed[] = {
    {"p.page_size", "page_size", "page_size_bytes"},
    {"p.model", "model", "model_spec"},
};
#define FIXED_COUNT (sizeof k_fixed / sizeof k_fixed[0])

/* Appends ", json_extract(p.params_json, '$."NAME"') AS "NAME"" for each
 * axis of sweep id, with the quotes of NAME doubled; shared[i] is set if
 * an axis is named as k_fixed[i]. */
static as_status_t axis_columns(store_t *s, int64_t id, sqlite3_str *sql,
                                bool shared[FIXED_COUNT], as_err_t *err) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(store_db(s),
                         "SELECT j.key FROM sweeps w, "
                         "json_each(w.params, '$.vary') j WHERE w.id = ?1",
                         -1, &st, NULL) != SQLITE_OK)
    return db_error(s, err);
  sqlite3_bind_int64(st, 1, id);
  while (sqlite3_step(st) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(st, 0);
    sqlite3_str_appendf(
        sql, ", json_extract(p.params_json, '$.\"%w\"') AS \"%w\"", name, name);
    for (size_t i = 0; i < FIXED_COUNT; i++)
      shared[i] |= strcmp(name, k_fixed[i].name) == 0;
  }
  sqlite3_finalize(st);
  return AS_OK;
}

/* Whether sweep id replays trace files (its points' args name each one)
 * rather than a workload. */
static bool over_traces(store_t *s, int64_t id) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(store_db(s),
                         "SELECT 1 FROM sweeps WHERE id = ?1 AND "
                         "workload = 'trace'",
                         -1, &st, NULL) != SQLITE_OK)
    return false;
  sqlite3_bind_int64(st, 1, id);
  bool yes = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  return yes;
}

as_status_t sweep_rows_prepare(store_t *s, int64_t sweep_id,
                               struct sqlite3_stmt **st, as_err_t *err) {
  *st = NULL;
  as_status_t rc = sweep_rows_find(s, &sweep_id, err);
  if (rc != AS_OK)
    return rc;
  sqlite3_str *sql = sqlite3_str_new(store_db(s));
  sqlite3_str_appendall(sql, "SELECT p.point");
  if (over_traces(s, sweep_id)) /* two files may hold one trace */
    sqlite3_str_appendall(sql,
                          ", json_extract(p.params_json, '$.args') AS trace");
  bool shared[FIXED_COUNT] = {false};
  rc = axis_columns(s, sweep_id, sql, shared, err);
  sqlite3_str_appendall(sql, ", p.seed");
  for (size_t i = 0; i < FIXED_COUNT; i++)
    sqlite3_str_appendf(sql, ", %s AS %s", k_fixed[i].expr,
                        shared[i] ? k_fixed[i].alt : k_fixed[i].name);
  sqlite3_str_appendf(sql,
                      ", p.simulated_kept_bytes AS kept_bytes,"
                      " p.formula_kept_bytes, p.arenas_pinned, p.run_id, p.key"
                      " FROM sweep_points p WHERE p.rowid IN ("
                      "  SELECT max(q.rowid) FROM sweep_points q"
                      "  JOIN sweeps w ON w.id = q.sweep_id"
                      "  WHERE q.sweep_id = %lld OR w.spec_key = "
                      "   (SELECT spec_key FROM sweeps WHERE id = %lld)"
                      "  GROUP BY coalesce(q.key, q.rowid))"
                      " ORDER BY p.point, p.seed",
                      (long long)sweep_id, (long long)sweep_id);
  char *text = sqlite3_str_finish(sql);
  if (rc == AS_OK && !text)
    rc = as_err_set(err, AS_ENOMEM, "out of memory for a query");
  if (rc == AS_OK &&
      sqlite3_prepare_v2(store_db(s), text, -1, st, NULL) != SQLITE_OK)
    rc = db_error(s, err);
  sqlite3_free(text);
  return rc;
}
