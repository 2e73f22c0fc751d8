/* analysis/merge.c -- merging stores (see merge.h).
 *
 * Identity across stores: a run or a sweep by its uid (schema 2), a sweep
 * point by its key within sweeps of the same spec key.  The input is
 * attached read-only-in-effect (nothing writes to it) and copied in one
 * transaction of the output: a conflict or any error rolls everything
 * back.  Ids are renumbered through temporary maps, in the input's order,
 * so merging shards in shard order gives the same ids every time.
 */
#include "merge.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

/* Runs one statement with no result rows. */
static as_status_t exec(store_t *s, const char *sql, const char *what,
                        as_err_t *err) {
  char *msg = NULL;
  if (sqlite3_exec(store_db(s), sql, NULL, NULL, &msg) == SQLITE_OK)
    return AS_OK;
  as_status_t rc = as_err_set(err, AS_ESTORE, "%s: %s: %s", store_path(s), what,
                              msg ? msg : "");
  sqlite3_free(msg);
  return rc;
}

static as_status_t query_i64(store_t *s, const char *sql, int64_t *out,
                             as_err_t *err) {
  sqlite3_stmt *st = NULL;
  int           rc = sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL);
  if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
    *out = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return AS_OK;
  }
  as_status_t r = as_err_set(err, AS_ESTORE, "%s: %s", store_path(s),
                             sqlite3_errmsg(store_db(s)));
  sqlite3_finalize(st);
  return r;
}

/* The copy, statement by statement, once src is attached and checked. */
static const char *const COPY[][2] = {
    {"CREATE TEMP TABLE run_map(old INTEGER PRIMARY KEY, new INTEGER);"
     "CREATE TEMP TABLE sweep_map(old INTEGER PRIMARY KEY, new INTEGER);",
     "preparing the id maps"},
    /* Runs already present (same uid) map to the present ones. */
    {"INSERT INTO temp.run_map SELECT s.id, m.id FROM src.runs s "
     "JOIN main.runs m ON m.uid = s.uid;",
     "matching runs"},
    /* New runs get the next ids, in the input's order. */
    {"INSERT INTO temp.run_map SELECT s.id, "
     " (SELECT coalesce(max(id), 0) FROM main.runs) + row_number() OVER "
     " (ORDER BY s.id) FROM src.runs s WHERE s.id NOT IN "
     " (SELECT old FROM temp.run_map);",
     "numbering new runs"},
    {"INSERT INTO main.runs(id, kind, model, options, page_size, source, "
     " command, allocsim_version, created_at, trace_path, trace_sha256, uid) "
     "SELECT m.new, s.kind, s.model, s.options, s.page_size, s.source, "
     " s.command, s.allocsim_version, s.created_at, s.trace_path, "
     " s.trace_sha256, s.uid FROM src.runs s JOIN temp.run_map m ON "
     " m.old = s.id WHERE m.new NOT IN (SELECT id FROM main.runs) "
     "ORDER BY s.id;",
     "copying runs"},
    {"INSERT OR IGNORE INTO main.run_meta SELECT m.new, s.key, s.value FROM "
     "src.run_meta s JOIN temp.run_map m ON m.old = s.run_id;",
     "copying run provenance"},
    {"INSERT OR IGNORE INTO main.samples SELECT m.new, s.seq, s.t_ns, "
     "s.kind, s.label, s.rss_bytes, s.live_bytes, s.measured_rss_bytes FROM "
     "src.samples s JOIN temp.run_map m ON m.old = s.run_id;",
     "copying samples"},
    {"INSERT OR IGNORE INTO main.sample_owners SELECT m.new, s.seq, "
     "s.owner, s.bytes FROM src.sample_owners s JOIN temp.run_map m ON "
     "m.old = s.run_id;",
     "copying sample owners"},
    {"INSERT INTO temp.sweep_map SELECT s.id, m.id FROM src.sweeps s "
     "JOIN main.sweeps m ON m.uid = s.uid;",
     "matching sweeps"},
    {"INSERT INTO temp.sweep_map SELECT s.id, "
     " (SELECT coalesce(max(id), 0) FROM main.sweeps) + row_number() OVER "
     " (ORDER BY s.id) FROM src.sweeps s WHERE s.id NOT IN "
     " (SELECT old FROM temp.sweep_map);",
     "numbering new sweeps"},
    {"INSERT INTO main.sweeps(id, workload, params, created_at, uid, "
     " spec_key, state, total_points, shard, host, pid, finished_at, "
     " allocsim_version) "
     "SELECT m.new, s.workload, s.params, s.created_at, s.uid, s.spec_key, "
     " s.state, s.total_points, s.shard, s.host, s.pid, s.finished_at, "
     " s.allocsim_version FROM src.sweeps s JOIN temp.sweep_map m ON "
     " m.old = s.id WHERE m.new NOT IN (SELECT id FROM main.sweeps) "
     "ORDER BY s.id;",
     "copying sweeps"},
    {"INSERT OR IGNORE INTO main.sweep_points(sweep_id, point, seed, "
     " params_json, model, page_size, simulated_kept_bytes, "
     " formula_kept_bytes, arenas_pinned, run_id, key) "
     "SELECT sm.new, p.point, p.seed, p.params_json, p.model, p.page_size, "
     " p.simulated_kept_bytes, p.formula_kept_bytes, p.arenas_pinned, "
     " rm.new, p.key FROM src.sweep_points p "
     "JOIN temp.sweep_map sm ON sm.old = p.sweep_id "
     "LEFT JOIN temp.run_map rm ON rm.old = p.run_id;",
     "copying sweep points"},
    {"INSERT INTO main.comparisons(measured_run_id, simulated_run_id, "
     " mean_abs_error_bytes, max_abs_error_bytes, slope, r2, "
     " intercept_bytes, points, params, created_at) "
     "SELECT a.new, b.new, c.mean_abs_error_bytes, c.max_abs_error_bytes, "
     " c.slope, c.r2, c.intercept_bytes, c.points, c.params, c.created_at "
     "FROM src.comparisons c JOIN temp.run_map a ON a.old = "
     " c.measured_run_id JOIN temp.run_map b ON b.old = c.simulated_run_id "
     "WHERE NOT EXISTS (SELECT 1 FROM main.comparisons x WHERE "
     " x.measured_run_id = a.new AND x.simulated_run_id = b.new AND "
     " x.created_at = c.created_at);",
     "copying comparisons"},
};

/* A point of the input whose key a sweep of the same spec key in the
 * output completed with other results. */
static const char CONFLICT[] =
    "SELECT p.key, p.simulated_kept_bytes, q.simulated_kept_bytes "
    "FROM src.sweep_points p JOIN src.sweeps sw ON sw.id = p.sweep_id "
    "JOIN main.sweeps mw ON mw.spec_key = sw.spec_key "
    "JOIN main.sweep_points q ON q.sweep_id = mw.id AND q.key = p.key "
    "WHERE p.run_id IS NOT NULL AND q.run_id IS NOT NULL AND "
    "(p.simulated_kept_bytes IS NOT q.simulated_kept_bytes OR "
    " p.formula_kept_bytes IS NOT q.formula_kept_bytes OR "
    " p.arenas_pinned IS NOT q.arenas_pinned OR p.model IS NOT q.model OR "
    " p.page_size IS NOT q.page_size) LIMIT 1";

static as_status_t check_conflicts(store_t *s, const char *in_path,
                                   as_err_t *err) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(store_db(s), CONFLICT, -1, &st, NULL) != SQLITE_OK)
    return as_err_set(err, AS_ESTORE, "%s: %s", store_path(s),
                      sqlite3_errmsg(store_db(s)));
  as_status_t rc = AS_OK;
  if (sqlite3_step(st) == SQLITE_ROW)
    rc = as_err_set(err, AS_EINVAL,
                    "%s: sweep point %.16s... is in %s with other results "
                    "(kept %lld vs %lld bytes): the stores disagree; "
                    "nothing merged",
                    in_path, (const char *)sqlite3_column_text(st, 0),
                    store_path(s), (long long)sqlite3_column_int64(st, 2),
                    (long long)sqlite3_column_int64(st, 1));
  sqlite3_finalize(st);
  return rc;
}

/* Attaches in_path as src and checks it is a store of this schema. */
static as_status_t attach(store_t *s, const char *in_path, as_err_t *err) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(store_db(s), "ATTACH DATABASE ?1 AS src", -1, &st,
                         NULL) != SQLITE_OK)
    return as_err_set(err, AS_ESTORE, "%s", sqlite3_errmsg(store_db(s)));
  sqlite3_bind_text(st, 1, in_path, -1, SQLITE_TRANSIENT);
  int step = sqlite3_step(st);
  sqlite3_finalize(st);
  if (step != SQLITE_DONE)
    return as_err_set(err, AS_ESTORE, "%s: cannot attach: %s", in_path,
                      sqlite3_errmsg(store_db(s)));
  int64_t     app = 0, version = 0;
  as_status_t rc = query_i64(s, "PRAGMA src.application_id", &app, err);
  if (rc == AS_OK && app != STORE_APPLICATION_ID)
    rc = as_err_set(err, AS_EINVAL, "%s: not an allocsim store", in_path);
  if (rc == AS_OK && query_i64(s, "SELECT max(version) FROM src.schema_version",
                               &version, err) != AS_OK)
    rc = as_err_set(err, AS_EINVAL, "%s: not an allocsim store", in_path);
  if (rc == AS_OK && version != STORE_SCHEMA_VERSION)
    rc = as_err_set(err, AS_EINVAL,
                    "%s: store schema %" PRId64 ", this allocsim merges "
                    "schema %d (open it with allocsim first to upgrade an "
                    "older one)",
                    in_path, version, STORE_SCHEMA_VERSION);
  return rc;
}

/* A write transaction that locks the store merged into and not the input:
 * BEGIN IMMEDIATE takes the write lock of every attached database, so an
 * input another process was writing failed the merge after the busy wait
 * with "OUT: starting a write transaction: database is locked", naming the
 * wrong store.  The input is only read (a snapshot: WAL readers do not
 * wait for its writer); a write statement that changes nothing takes the
 * output's lock before anything is read. */
static as_status_t begin_on_output(store_t *s, as_err_t *err) {
  as_status_t rc = exec(s, "BEGIN DEFERRED", "starting a transaction", err);
  if (rc == AS_OK && (rc = exec(s, "DELETE FROM main.schema_version WHERE 0",
                                "starting a write transaction", err)) != AS_OK)
    store_rollback(s);
  return rc;
}

as_status_t store_merge(store_t *s, const char *in_path,
                        store_merge_stats_t *st, as_err_t *err) {
  memset(st, 0, sizeof *st);
  int64_t     runs0 = 0, points0 = 0, sweeps0 = 0;
  as_status_t rc = attach(s, in_path, err);
  if (rc == AS_OK)
    rc = begin_on_output(s, err);
  bool in_tx = rc == AS_OK;
  if (rc == AS_OK)
    rc = check_conflicts(s, in_path, err);
  if (rc == AS_OK)
    rc = query_i64(s, "SELECT count(*) FROM main.runs", &runs0, err);
  if (rc == AS_OK)
    rc = query_i64(s, "SELECT count(*) FROM main.sweep_points", &points0, err);
  if (rc == AS_OK)
    rc = query_i64(s, "SELECT count(*) FROM main.sweeps", &sweeps0, err);
  for (size_t i = 0; rc == AS_OK && i < sizeof COPY / sizeof COPY[0]; i++)
    rc = exec(s, COPY[i][0], COPY[i][1], err);
  int64_t runs1 = 0, points1 = 0, sweeps1 = 0;
  if (rc == AS_OK)
    rc = query_i64(s, "SELECT count(*) FROM main.runs", &runs1, err);
  if (rc == AS_OK)
    rc = query_i64(s, "SELECT count(*) FROM main.sweep_points", &points1, err);
  if (rc == AS_OK)
    rc = query_i64(s, "SELECT count(*) FROM main.sweeps", &sweeps1, err);
  if (rc == AS_OK)
    rc = exec(s, "DROP TABLE temp.run_map; DROP TABLE temp.sweep_map;",
              "dropping the id maps", err);
  if (rc == AS_OK) {
    rc = store_commit(s, err);
    in_tx = false;
  }
  if (in_tx)
    store_rollback(s);
  exec(s, "DETACH DATABASE src", "detaching", NULL);
  st->runs = (uint64_t)(runs1 - runs0);
  st->sweeps = (uint64_t)(sweeps1 - sweeps0);
  st->points = (uint64_t)(points1 - points0);
  return rc;
}
