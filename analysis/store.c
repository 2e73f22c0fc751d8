/* analysis/store.c -- the SQLite store: opening and identifying the file,
 * schema v1, writing a run in one transaction, reading runs back.
 *
 * The store is the one place allocsim keeps results, and several processes
 * (parallel sweep workers) may write it at once.  So the file is in WAL mode
 * with a busy timeout, every write group is BEGIN IMMEDIATE ... COMMIT with
 * ROLLBACK on any error (an immediate transaction takes the write lock up
 * front, so a writer waits in the busy handler instead of failing with
 * SQLITE_BUSY_SNAPSHOT on upgrade), and every value goes through a bound
 * parameter.  Sweeps and comparisons are written by their own modules
 * through store_db() inside store_begin/store_commit; this file only creates
 * their tables.
 *
 * Identification: a store has PRAGMA application_id STORE_APPLICATION_ID and
 * a schema_version table.  An empty file (no schema objects, no id) becomes
 * a store; anything else without both marks is refused before we change it
 * (in particular we do not switch a foreign file to WAL).
 *
 * Sections
 *   Schema            the DDL of schema v1
 *   Helpers           error messages, statement helpers, name tables
 *   Open and close    identification, creation, pragmas
 *   Transactions      store_begin / store_commit / store_rollback
 *   Writing runs      store_write_run, store_sample_from_sim
 *   Reading runs      samples, meta, run records, listing
 */
#include "store.h"

#include "../sim/grow.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef ALLOCSIM_VERSION
#error "ALLOCSIM_VERSION must be defined by the build (allocsim_options)"
#endif

/* ---- Schema ------------------------------------------------------------- */

/* ISO-8601 UTC with milliseconds, e.g. 2026-11-30T00:17:03.123Z. */
#define STORE_NOW "(strftime('%Y-%m-%dT%H:%M:%fZ','now'))"

/* Schema v1.  Executed once, inside the transaction that creates a store.
 * Byte counts and times are INTEGER with CHECK(>= 0): SQLite integers are
 * signed 64-bit, and a negative value can only come from a bad write.
 * run_meta, samples and sample_owners are WITHOUT ROWID, clustered on their
 * primary key: one b-tree per table instead of a rowid table plus an index,
 * which made writing 10^6 samples about 20% faster and the file 43%
 * smaller. */
static const char SCHEMA_V1[] =
    "CREATE TABLE schema_version(\n"
    "  version INTEGER NOT NULL\n"
    ");\n"
    "CREATE TABLE runs(\n"
    "  id               INTEGER PRIMARY KEY,\n"
    "  kind             TEXT NOT NULL\n"
    "                   CHECK(kind IN ('measured','simulated')),\n"
    "  model            TEXT NOT NULL,\n"
    "  options          TEXT,\n"
    "  page_size        INTEGER NOT NULL CHECK(page_size >= 0),\n"
    "  source           TEXT NOT NULL,\n"
    "  command          TEXT NOT NULL,\n"
    "  allocsim_version TEXT NOT NULL,\n"
    "  created_at       TEXT NOT NULL DEFAULT " STORE_NOW ",\n"
    "  trace_path       TEXT,\n"
    "  trace_sha256     TEXT\n"
    ");\n"
    "CREATE TABLE run_meta(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  key    TEXT NOT NULL,\n"
    "  value  TEXT NOT NULL,\n"
    "  PRIMARY KEY(run_id, key)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE samples(\n"
    "  run_id             INTEGER NOT NULL\n"
    "                     REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  seq                INTEGER NOT NULL CHECK(seq >= 0),\n"
    "  t_ns               INTEGER NOT NULL CHECK(t_ns >= 0),\n"
    "  kind               TEXT NOT NULL\n"
    "                     CHECK(kind IN"
    " ('mark','periodic','measured','final')),\n"
    "  label              TEXT,\n"
    "  rss_bytes          INTEGER NOT NULL CHECK(rss_bytes >= 0),\n"
    "  live_bytes         INTEGER NOT NULL CHECK(live_bytes >= 0),\n"
    "  measured_rss_bytes INTEGER NOT NULL CHECK(measured_rss_bytes >= 0),\n"
    "  PRIMARY KEY(run_id, seq)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE sample_owners(\n"
    "  run_id INTEGER NOT NULL,\n"
    "  seq    INTEGER NOT NULL,\n"
    "  owner  TEXT NOT NULL,\n"
    "  bytes  INTEGER NOT NULL CHECK(bytes >= 0),\n"
    "  PRIMARY KEY(run_id, seq, owner),\n"
    "  FOREIGN KEY(run_id, seq) REFERENCES samples(run_id, seq)\n"
    "    ON DELETE CASCADE\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE sweeps(\n"
    "  id         INTEGER PRIMARY KEY,\n"
    "  workload   TEXT NOT NULL,\n"
    "  params     TEXT NOT NULL,\n"
    "  created_at TEXT NOT NULL DEFAULT " STORE_NOW "\n"
    ");\n"
    "CREATE TABLE sweep_points(\n"
    "  sweep_id             INTEGER NOT NULL\n"
    "                       REFERENCES sweeps(id) ON DELETE CASCADE,\n"
    "  point                INTEGER NOT NULL CHECK(point >= 0),\n"
    "  seed                 INTEGER NOT NULL,\n"
    "  params_json          TEXT NOT NULL,\n"
    "  model                TEXT NOT NULL,\n"
    "  page_size            INTEGER NOT NULL CHECK(page_size >= 0),\n"
    "  simulated_kept_bytes INTEGER,\n"
    "  formula_kept_bytes   REAL,\n"
    "  arenas_pinned        INTEGER,\n"
    "  run_id               INTEGER REFERENCES runs(id) ON DELETE SET NULL,\n"
    "  PRIMARY KEY(sweep_id, point, seed)\n"
    ");\n"
    "CREATE INDEX sweep_points_run ON sweep_points(run_id);\n"
    "CREATE TABLE comparisons(\n"
    "  id                   INTEGER PRIMARY KEY,\n"
    "  measured_run_id      INTEGER NOT NULL\n"
    "                       REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  simulated_run_id     INTEGER NOT NULL\n"
    "                       REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  mean_abs_error_bytes REAL,\n"
    "  max_abs_error_bytes  REAL,\n"
    "  slope                REAL,\n"
    "  r2                   REAL,\n"
    "  intercept_bytes      REAL,\n"
    "  points               INTEGER,\n"
    "  params               TEXT,\n"
    "  created_at           TEXT NOT NULL DEFAULT " STORE_NOW "\n"
    ");\n"
    "CREATE INDEX comparisons_measured ON comparisons(measured_run_id);\n"
    "CREATE INDEX comparisons_simulated ON comparisons(simulated_run_id);\n";

/* Schema v2, applied on top of v1 (to a new store, and to a v1 store when
 * it is opened): identities that survive copying a run or sweep into
 * another store (uid), the state of a sweep and the key of each point, so
 * sweeps can be sharded, resumed and merged (analysis/sweep.h, db merge),
 * and views that give a sweep's points their parameters as columns and
 * their seed aggregates.  Old sweeps keep state 'unknown'. */
static const char SCHEMA_V2[] =
    "ALTER TABLE runs ADD COLUMN uid TEXT;\n"
    "UPDATE runs SET uid = lower(hex(randomblob(16))) WHERE uid IS NULL;\n"
    "CREATE UNIQUE INDEX runs_uid ON runs(uid);\n"
    "ALTER TABLE sweeps ADD COLUMN uid TEXT;\n"
    "UPDATE sweeps SET uid = lower(hex(randomblob(16))) WHERE uid IS NULL;\n"
    "CREATE UNIQUE INDEX sweeps_uid ON sweeps(uid);\n"
    "ALTER TABLE sweeps ADD COLUMN spec_key TEXT;\n"
    "ALTER TABLE sweeps ADD COLUMN state TEXT NOT NULL DEFAULT 'unknown'\n"
    "  CHECK(state IN ('running','complete','interrupted','unknown'));\n"
    "ALTER TABLE sweeps ADD COLUMN total_points INTEGER;\n"
    "ALTER TABLE sweeps ADD COLUMN shard TEXT;\n"
    "ALTER TABLE sweeps ADD COLUMN host TEXT;\n"
    "ALTER TABLE sweeps ADD COLUMN pid INTEGER;\n"
    "ALTER TABLE sweeps ADD COLUMN finished_at TEXT;\n"
    "ALTER TABLE sweeps ADD COLUMN allocsim_version TEXT;\n"
    "CREATE INDEX sweeps_spec ON sweeps(spec_key);\n"
    "ALTER TABLE sweep_points ADD COLUMN key TEXT;\n"
    "CREATE INDEX sweep_points_key ON sweep_points(key);\n"
    "CREATE VIEW sweep_point_params AS\n"
    "  SELECT p.sweep_id, p.point, p.seed, p.key, j.key AS name,\n"
    "         j.value AS value\n"
    "  FROM sweep_points p, json_each(p.params_json) j;\n";

/* Schema 3: sweep_seed_stats squares the kept bytes as reals.  Schema 2
 * squared them as 64-bit integers, and its view failed with "integer
 * overflow" on every query once a point kept about 2 GiB over 2 seeds (a
 * 2.6 GiB survivors sweep at fraction 1).  The view holds no data: an
 * upgrade replaces it. */
static const char SCHEMA_V3[] =
    "DROP VIEW IF EXISTS sweep_seed_stats;\n"
    "CREATE VIEW sweep_seed_stats AS\n"
    "  SELECT sweep_id, point, count(*) AS n,\n"
    "         avg(simulated_kept_bytes) AS mean_kept_bytes,\n"
    "         CASE WHEN count(*) > 1 THEN sqrt(max(0,\n"
    "           (sum(CAST(simulated_kept_bytes AS REAL)\n"
    "                * simulated_kept_bytes)\n"
    "            - sum(simulated_kept_bytes) * avg(simulated_kept_bytes))\n"
    "           / (count(*) - 1))) END AS sd_kept_bytes,\n"
    "         avg(formula_kept_bytes) AS formula_kept_bytes,\n"
    "         min(params_json) AS params_json\n"
    "  FROM sweep_points WHERE simulated_kept_bytes IS NOT NULL\n"
    "  GROUP BY sweep_id, point;\n";

/* The scripts that take a store of schema v (index v - 1) to the next. */
static const char *const SCHEMA_STEPS[] = {SCHEMA_V2, SCHEMA_V3};
_Static_assert(sizeof SCHEMA_STEPS / sizeof SCHEMA_STEPS[0] + 1 ==
                   STORE_SCHEMA_VERSION,
               "one step per schema version after the first");

/* ---- Helpers ------------------------------------------------------------ */

struct store_s {
  sqlite3 *db;   /* One connection; one thread at a time (NOMUTEX) */
  char    *path; /* As given to store_open, for messages */
};

/* Records "PATH: WHAT: sqlite message" (or "PATH: sqlite message" when what
 * is NULL).  Call before any ROLLBACK, which would replace the message. */
static as_status_t db_fail(const store_t *s, as_err_t *err, const char *what) {
  if (what == NULL)
    return as_err_set(err, AS_ESTORE, "%s: %s", s->path, sqlite3_errmsg(s->db));
  return as_err_set(err, AS_ESTORE, "%s: %s: %s", s->path, what,
                    sqlite3_errmsg(s->db));
}

static as_status_t prepare(store_t *s, const char *sql, sqlite3_stmt **st,
                           as_err_t *err) {
  if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) != SQLITE_OK) {
    *st = NULL;
    return db_fail(s, err, "preparing a statement");
  }
  return AS_OK;
}

/* Binds text or NULL. */
static int bind_text(sqlite3_stmt *st, int col, const char *v) {
  if (v == NULL)
    return sqlite3_bind_null(st, col);
  return sqlite3_bind_text(st, col, v, -1, SQLITE_TRANSIENT);
}

/* Column text copied with malloc; NULL for SQL NULL.  *oom set on failure. */
static char *column_dup(sqlite3_stmt *st, int col, bool *oom) {
  const unsigned char *v = sqlite3_column_text(st, col);
  if (v == NULL)
    return NULL;
  size_t n = (size_t)sqlite3_column_bytes(st, col);
  char  *out = malloc(n + 1);
  if (out == NULL) {
    *oom = true;
    return NULL;
  }
  memcpy(out, v, n);
  out[n] = '\0';
  return out;
}

static const char *const SAMPLE_KIND_NAMES[] = {
    [SIM_SAMPLE_MARK] = "mark",
    [SIM_SAMPLE_PERIODIC] = "periodic",
    [SIM_SAMPLE_MEASURED] = "measured",
    [SIM_SAMPLE_FINAL] = "final",
};
#define SAMPLE_KIND_COUNT                                                      \
  (sizeof SAMPLE_KIND_NAMES / sizeof SAMPLE_KIND_NAMES[0])

/* The owner names, from the kernel's own map, so the store needs no link
 * dependency on the kernel and cannot drift from it. */
static const char *const OWNER_NAMES[SIM_OWNER_COUNT] = {
#define STORE_OWNER_NAME(name, str) [SIM_OWNER_##name] = str,
    SIM_OWNER_MAP(STORE_OWNER_NAME)
#undef STORE_OWNER_NAME
};

static int sample_kind_from_name(const char *name) {
  for (size_t i = 0; name != NULL && i < SAMPLE_KIND_COUNT; i++)
    if (strcmp(SAMPLE_KIND_NAMES[i], name) == 0)
      return (int)i;
  return -1;
}

static int owner_from_name(const char *name) {
  for (int i = 0; name != NULL && i < SIM_OWNER_COUNT; i++)
    if (strcmp(OWNER_NAMES[i], name) == 0)
      return i;
  return -1;
}

/* Fails unless v fits a SQLite INTEGER. */
static as_status_t check_i64(const store_t *s, uint64_t v, const char *what,
                             size_t index, as_err_t *err) {
  if (v <= (uint64_t)INT64_MAX)
    return AS_OK;
  return as_err_set(err, AS_ESTORE,
                    "%s: sample %zu: %s %" PRIu64
                    " is larger than the store's limit %" PRId64,
                    s->path, index, what, v, INT64_MAX);
}

/* AS_OK if run id exists, AS_ESTORE "no run with id N" if not. */
static as_status_t check_run_exists(store_t *s, int64_t id, as_err_t *err) {
  sqlite3_stmt *st;
  as_status_t   rc = prepare(s, "SELECT 1 FROM runs WHERE id = ?1", &st, err);
  if (rc != AS_OK)
    return rc;
  sqlite3_bind_int64(st, 1, id);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW)
    rc = AS_OK;
  else if (step == SQLITE_DONE)
    rc = as_err_set(err, AS_ESTORE, "%s: no run with id %" PRId64, s->path, id);
  else
    rc = db_fail(s, err, "looking up a run");
  sqlite3_finalize(st);
  return rc;
}

/* ---- Open and close ----------------------------------------------------- */

/* What the file is, as far as identification goes. */
typedef enum store_kind_e {
  STORE_FILE_EMPTY,   /* no schema objects, application_id 0 */
  STORE_FILE_OURS,    /* our application_id and a schema_version table */
  STORE_FILE_FOREIGN, /* anything else */
} store_kind_t;

/* One integer from a query with no parameters. */
static as_status_t query_int(store_t *s, const char *sql, int64_t *out,
                             as_err_t *err) {
  sqlite3_stmt *st;
  as_status_t   rc = prepare(s, sql, &st, err);
  if (rc != AS_OK)
    return rc;
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    *out = sqlite3_column_int64(st, 0);
    rc = AS_OK;
  } else {
    rc = db_fail(s, err, NULL);
    if (step == SQLITE_DONE)
      rc = as_err_set(err, AS_ESTORE, "%s: '%s' returned no row", s->path, sql);
  }
  sqlite3_finalize(st);
  return rc;
}

/* Reads the header and schema; call inside a transaction so the three
 * reads are one snapshot (another process may be creating the store).  A
 * file that is not SQLite at all fails here with "file is not a database". */
static as_status_t identify(store_t *s, store_kind_t *kind, as_err_t *err) {
  int64_t     app_id = 0, objects = 0, has_version = 0;
  as_status_t rc = query_int(s, "PRAGMA application_id", &app_id, err);
  if (rc == AS_OK)
    rc = query_int(s, "SELECT count(*) FROM sqlite_master", &objects, err);
  if (rc == AS_OK)
    rc = query_int(s,
                   "SELECT count(*) FROM sqlite_master"
                   " WHERE type = 'table' AND name = 'schema_version'",
                   &has_version, err);
  if (rc != AS_OK)
    return rc;
  if (app_id == 0 && objects == 0)
    *kind = STORE_FILE_EMPTY;
  else if (app_id == STORE_APPLICATION_ID && has_version == 1)
    *kind = STORE_FILE_OURS;
  else
    *kind = STORE_FILE_FOREIGN;
  return AS_OK;
}

static as_status_t not_ours(const store_t *s, as_err_t *err) {
  return as_err_set(err, AS_ESTORE, "%s: not an allocsim store", s->path);
}

/* Runs the steps from schema `from` to the current one; false on the first
 * that fails (sqlite3_errmsg says why). */
static bool run_steps(store_t *s, int64_t from) {
  for (int64_t v = from; v < STORE_SCHEMA_VERSION; v++)
    if (sqlite3_exec(s->db, SCHEMA_STEPS[v - 1], NULL, NULL, NULL) != SQLITE_OK)
      return false;
  return true;
}

/* Creates schema v1 if the file is still empty once we hold the write lock
 * (another process may have created it since we looked). */
static as_status_t create_schema(store_t *s, as_err_t *err) {
  as_status_t rc = store_begin(s, err);
  if (rc != AS_OK)
    return rc;
  store_kind_t kind;
  rc = identify(s, &kind, err);
  if (rc == AS_OK && kind == STORE_FILE_FOREIGN)
    rc = not_ours(s, err);
  if (rc == AS_OK && kind == STORE_FILE_EMPTY) {
    /* The DDL and pragmas are fixed text with no values in them. */
    char sql[128];
    snprintf(sql, sizeof sql, "PRAGMA application_id = %d;",
             STORE_APPLICATION_ID);
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_exec(s->db, SCHEMA_V1, NULL, NULL, NULL) != SQLITE_OK ||
        !run_steps(s, 1))
      rc = db_fail(s, err, "creating the schema");
    if (rc == AS_OK) {
      sqlite3_stmt *st;
      rc = prepare(s, "INSERT INTO schema_version(version) VALUES (?1)", &st,
                   err);
      if (rc == AS_OK) {
        sqlite3_bind_int(st, 1, STORE_SCHEMA_VERSION);
        if (sqlite3_step(st) != SQLITE_DONE)
          rc = db_fail(s, err, "writing the schema version");
        sqlite3_finalize(st);
      }
    }
  }
  if (rc != AS_OK) {
    store_rollback(s);
    return rc;
  }
  return store_commit(s, err);
}

/* An older store becomes the current schema in one transaction,
 * re-checked under the write lock in case another process upgraded it
 * meanwhile. */
static as_status_t upgrade(store_t *s, as_err_t *err) {
  as_status_t rc = store_begin(s, err);
  if (rc != AS_OK)
    return rc;
  int64_t version = 0;
  rc = query_int(s, "SELECT coalesce(max(version), 0) FROM schema_version",
                 &version, err);
  char sql[64];
  snprintf(sql, sizeof sql, "UPDATE schema_version SET version = %d",
           STORE_SCHEMA_VERSION);
  if (rc == AS_OK && version >= 1 && version < STORE_SCHEMA_VERSION &&
      (!run_steps(s, version) ||
       sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK)) {
    snprintf(sql, sizeof sql, "upgrading the store to schema %d",
             STORE_SCHEMA_VERSION);
    rc = db_fail(s, err, sql);
  }
  if (rc != AS_OK) {
    store_rollback(s);
    return rc;
  }
  return store_commit(s, err);
}

/* "file:" and path, percent-encoded where a URI needs it, with
 * ?immutable=1; false if it does not fit. */
static bool store_uri(const char *path, char *out, size_t len) {
  size_t used = (size_t)snprintf(out, len, "file:");
  for (const char *p = path; *p != '\0'; p++) {
    if (used + 4 >= len)
      return false;
    unsigned char c = (unsigned char)*p;
    if (c == '%' || c == '?' || c == '#' || c <= ' ' || c >= 0x7f)
      used += (size_t)snprintf(out + used, len - used, "%%%02X", c);
    else
      out[used++] = (char)c;
  }
  return as_format_fits(out + used, len - used, "?immutable=1");
}

static as_status_t schema_version(store_t *s, int64_t *version, as_err_t *err) {
  *version = 0;
  return query_int(s, "SELECT coalesce(max(version), 0) FROM schema_version",
                   version, err);
}

/* The checks that write nothing, made while the file is still untouched: a
 * schema newer than this allocsim's is refused, and so is, in a store we
 * may not write (readonly), one that would need an upgrade. */
static as_status_t refuse_version(store_t *s, bool readonly, as_err_t *err) {
  int64_t     version;
  as_status_t rc = schema_version(s, &version, err);
  if (rc == AS_OK && version > STORE_SCHEMA_VERSION)
    rc = as_err_set(err, AS_ESTORE,
                    "%s: store schema %" PRId64
                    " is newer than this allocsim (%d)",
                    s->path, version, STORE_SCHEMA_VERSION);
  else if (rc == AS_OK && readonly && version != STORE_SCHEMA_VERSION)
    rc = as_err_set(err, AS_ESTORE,
                    "%s: store schema %" PRId64 " needs an upgrade to %d, "
                    "but the file may not be written",
                    s->path, version, STORE_SCHEMA_VERSION);
  return rc;
}

static as_status_t check_version(store_t *s, as_err_t *err) {
  int64_t     version;
  as_status_t rc = schema_version(s, &version, err);
  if (rc != AS_OK)
    return rc;
  if (version >= 1 && version < STORE_SCHEMA_VERSION) {
    if ((rc = upgrade(s, err)) != AS_OK)
      return rc;
    version = STORE_SCHEMA_VERSION;
  }
  if (version > STORE_SCHEMA_VERSION)
    return as_err_set(err, AS_ESTORE,
                      "%s: store schema %" PRId64
                      " is newer than this allocsim (%d)",
                      s->path, version, STORE_SCHEMA_VERSION);
  if (version < 1)
    return as_err_set(err, AS_ESTORE,
                      "%s: store schema version %" PRId64 " is not valid",
                      s->path, version);
  return AS_OK;
}

static as_status_t exec_pragma(store_t *s, const char *sql, as_err_t *err) {
  if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK)
    return db_fail(s, err, sql);
  return AS_OK;
}

/* Switches to WAL and checks that it took ("memory" for ":memory:").
 * Changing the journal mode needs an exclusive lock and SQLite does not call
 * the busy handler for it, so while another connection is creating the same
 * new store we retry here, within the same STORE_BUSY_TIMEOUT_MS.  On a file
 * that is already WAL (every store after its creation) this is a no-op. */
static as_status_t set_wal(store_t *s, as_err_t *err) {
  sqlite3_stmt *st;
  as_status_t   rc = prepare(s, "PRAGMA journal_mode = WAL", &st, err);
  if (rc != AS_OK)
    return rc;
  int step = sqlite3_step(st);
  for (int waited_ms = 0;
       (step & 0xff) == SQLITE_BUSY && waited_ms < STORE_BUSY_TIMEOUT_MS;
       waited_ms += 10) {
    sqlite3_reset(st);
    sqlite3_sleep(10);
    step = sqlite3_step(st);
  }
  if (step != SQLITE_ROW) {
    rc = db_fail(s, err, "switching to WAL mode");
  } else {
    const char *mode = (const char *)sqlite3_column_text(st, 0);
    if (mode == NULL ||
        (strcmp(mode, "wal") != 0 && strcmp(mode, "memory") != 0))
      rc = as_err_set(err, AS_ESTORE,
                      "%s: cannot switch to WAL mode (journal mode is '%s')",
                      s->path, mode != NULL ? mode : "(null)");
  }
  sqlite3_finalize(st);
  return rc;
}

static as_status_t open_store(const char *path, bool create, store_t **out,
                              as_err_t *err);

/* A store that must exist: a regular file, and unless create, one that
 * holds a store already (an empty file is no store to read). */
static as_status_t open_existing(const char *path, bool create, store_t **out,
                                 as_err_t *err) {
  *out = NULL;
  struct stat sb;
  if (stat(path, &sb) != 0)
    return as_err_set(err, AS_EIO, "%s: no such store (%s)", path,
                      strerror(errno));
  if (!S_ISREG(sb.st_mode))
    return as_err_set(err, AS_EIO, "%s: not a store (%s)", path,
                      S_ISDIR(sb.st_mode) ? "a directory" : "not a file");
  return open_store(path, create, out, err);
}

as_status_t store_open_existing(const char *path, store_t **out,
                                as_err_t *err) {
  return open_existing(path, false, out, err);
}

as_status_t store_check_writable(const char *path, as_err_t *err) {
  if (access(path, F_OK) == 0) {
    store_t    *s;
    as_status_t rc = open_existing(path, true, &s, err);
    if (rc == AS_OK)
      store_close(s);
    /* open_store opens a store it may not write read-only, for readers. */
    if (rc == AS_OK && access(path, W_OK) != 0)
      rc = as_err_set(err, AS_ESTORE, "%s: the store may not be written: %s",
                      path, strerror(errno));
    return rc;
  }
  /* Creating it is the one test that holds everywhere: root passes
   * access(W_OK) on /proc, where no file can be made. */
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return as_err_set(err, AS_EIO, "%s: cannot create the store: %s", path,
                      strerror(errno));
  close(fd);
  unlink(path);
  return AS_OK;
}

void store_discard_new(const char *path, bool created_by_us) {
  static const char *const sidecars[] = {"", "-journal", "-wal", "-shm"};
  if (!created_by_us)
    return;
  for (size_t i = 0; i < sizeof sidecars / sizeof *sidecars; i++) {
    char        p[PATH_MAX];
    struct stat sb;
    if (snprintf(p, sizeof p, "%s%s", path, sidecars[i]) < (int)sizeof p &&
        lstat(p, &sb) == 0 && S_ISREG(sb.st_mode))
      unlink(p);
  }
}

as_status_t store_open(const char *path, store_t **out, as_err_t *err) {
  return open_store(path, true, out, err);
}

static as_status_t open_store(const char *path, bool create, store_t **out,
                              as_err_t *err) {
  assert(path != NULL && out != NULL);
  *out = NULL;
  store_t *s = calloc(1, sizeof *s);
  if (s == NULL)
    return as_err_set(err, AS_ENOMEM, "%s: out of memory opening the store",
                      path);
  size_t n = strlen(path) + 1;
  s->path = malloc(n);
  if (s->path == NULL) {
    free(s);
    return as_err_set(err, AS_ENOMEM, "%s: out of memory opening the store",
                      path);
  }
  memcpy(s->path, path, n);

  as_status_t rc;
  /* SQLite writes a journal beside the path (/dev/null-journal for
   * --db /dev/null): a store is a regular file or nothing yet. */
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    rc = as_err_set(err, AS_ESTORE,
                    "%s: not a regular file; a store is an SQLite database "
                    "file",
                    path);
    goto fail;
  }
  /* A store we may not write (read-only, or immutable even to root) is
   * opened read-only and immutable: readers work, writers fail naming it,
   * and SQLite leaves no -wal and -shm files beside it (a WAL database
   * opened any other way would). */
  bool readonly = access(path, F_OK) == 0 && access(path, W_OK) != 0;
  char uri[PATH_MAX * 3 + 32];
  if (readonly && !store_uri(path, uri, sizeof uri)) {
    rc = as_err_set(err, AS_ESTORE, "%s: path too long", path);
    goto fail;
  }
  /* NOMUTEX: a store_t is used by one thread at a time (parallel writers
   * each open their own), so SQLite's per-call mutex is pure cost. */
  if (sqlite3_open_v2(readonly ? uri : path, &s->db,
                      (readonly ? SQLITE_OPEN_READONLY | SQLITE_OPEN_URI
                                : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
                          SQLITE_OPEN_NOMUTEX,
                      NULL) != SQLITE_OK) {
    rc = s->db != NULL
             ? db_fail(s, err, NULL)
             : as_err_set(err, AS_ENOMEM, "%s: out of memory opening the store",
                          path);
    goto fail;
  }
  sqlite3_extended_result_codes(s->db, 1);
  sqlite3_busy_timeout(s->db, STORE_BUSY_TIMEOUT_MS);

  store_kind_t kind;
  if (sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
    rc = db_fail(s, err, NULL);
    goto fail;
  }
  rc = identify(s, &kind, err);
  /* A newer schema is refused before anything is written (the switch to
   * WAL below would rewrite the file's header). */
  if (rc == AS_OK && kind == STORE_FILE_OURS)
    rc = refuse_version(s, readonly, err);
  store_rollback(s); /* ends the read transaction */
  if (rc != AS_OK)
    goto fail;
  if (kind == STORE_FILE_FOREIGN) {
    rc = not_ours(s, err);
    goto fail;
  }
  /* A command that reads a store leaves an empty file as it is. */
  if (kind == STORE_FILE_EMPTY && !create) {
    rc = as_err_set(err, AS_ESTORE, "%s: not an allocsim store (empty)", path);
    goto fail;
  }
  if (readonly) {
    /* Nothing may change: no schema, no WAL switch, no upgrade. */
    if (kind == STORE_FILE_EMPTY) {
      rc = as_err_set(err, AS_ESTORE,
                      "%s: cannot make a store of a file we may not write",
                      path);
      goto fail;
    }
    *out = s;
    return AS_OK;
  }
  /* Only now that the file is ours (or empty) may we change it.  The schema
   * is created first (in the default journal mode, under the write lock),
   * then the file switches to WAL, which must happen outside a
   * transaction. */
  if (kind == STORE_FILE_EMPTY)
    rc = create_schema(s, err);
  if (rc == AS_OK)
    rc = set_wal(s, err);
  if (rc == AS_OK)
    rc = exec_pragma(s, "PRAGMA foreign_keys = ON", err);
  if (rc == AS_OK)
    rc = exec_pragma(s, "PRAGMA synchronous = NORMAL", err);
  if (rc == AS_OK)
    rc = check_version(s, err);
  if (rc != AS_OK)
    goto fail;
  *out = s;
  return AS_OK;

fail:
  store_close(s);
  assert(*out == NULL && rc != AS_OK);
  return rc;
}

void store_close(store_t *s) {
  if (s == NULL)
    return;
  store_rollback(s);
  /* SQLITE_BUSY here means a statement prepared on store_db() was never
   * finalized: a bug in the caller, caught in Debug builds. */
  int rc = sqlite3_close(s->db);
  assert(rc == SQLITE_OK);
  (void)rc;
  free(s->path);
  free(s);
}

const char *store_path(const store_t *s) {
  return s->path;
}

struct sqlite3 *store_db(store_t *s) {
  return s->db;
}

/* ---- Transactions ------------------------------------------------------- */

as_status_t store_begin(store_t *s, as_err_t *err) {
  if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
    return db_fail(s, err, "starting a write transaction");
  return AS_OK;
}

as_status_t store_commit(store_t *s, as_err_t *err) {
  if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
    as_status_t rc = db_fail(s, err, "committing");
    store_rollback(s);
    return rc;
  }
  return AS_OK;
}

void store_rollback(store_t *s) {
  if (s->db != NULL && !sqlite3_get_autocommit(s->db))
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

/* ---- Writing runs ------------------------------------------------------- */

void store_sample_from_sim(store_sample_t *out, const sim_sample_t *in) {
  memset(out, 0, sizeof *out);
  out->t_ns = in->t_ns;
  out->kind = in->kind;
  out->rss_bytes = in->rss_bytes;
  out->live_bytes = in->live_bytes;
  out->measured_rss_bytes = in->measured_rss_bytes;
  memcpy(out->owner_bytes, in->owner_bytes, sizeof out->owner_bytes);
  if (in->label != NULL) {
    size_t n = strnlen(in->label, sizeof out->label - 1);
    memcpy(out->label, in->label, n);
    out->label[n] = '\0';
  }
}

as_status_t store_samples_push(store_samples_t *s, const store_sample_t *x,
                               as_err_t *err) {
  store_sample_t *v = as_grow(s->v, &s->cap, s->n + 1, sizeof *v, 256);
  if (v == NULL)
    return as_err_set(err, AS_ENOMEM, "out of memory for %zu samples",
                      s->n + 1);
  s->v = v;
  s->v[s->n++] = *x;
  return AS_OK;
}

as_status_t store_samples_push_sim(store_samples_t *s, const sim_sample_t *x,
                                   as_err_t *err) {
  store_sample_t one;
  store_sample_from_sim(&one, x);
  return store_samples_push(s, &one, err);
}

void store_samples_free(store_samples_t *s) {
  free(s->v);
  memset(s, 0, sizeof *s);
}

/* The three statements of a run's body, prepared once per write. */
typedef struct run_stmts_s {
  sqlite3_stmt *meta;
  sqlite3_stmt *sample;
  sqlite3_stmt *owner;
} run_stmts_t;

static as_status_t insert_run_row(store_t *s, const store_run_t *run,
                                  int64_t *id, as_err_t *err) {
  if (run->page_size > (uint64_t)INT64_MAX)
    return as_err_set(err, AS_ESTORE,
                      "%s: page size %" PRIu64 " is larger than the store's "
                      "limit %" PRId64,
                      s->path, run->page_size, INT64_MAX);
  sqlite3_stmt *st;
  as_status_t   rc = prepare(
        s,
        "INSERT INTO runs(kind, model, options, page_size, source, command,"
          " allocsim_version, trace_path, trace_sha256, uid)"
          " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,"
          " lower(hex(randomblob(16))))",
        &st, err);
  if (rc != AS_OK)
    return rc;
  bind_text(st, 1, run->kind);
  bind_text(st, 2, run->model);
  bind_text(st, 3, run->options);
  sqlite3_bind_int64(st, 4, (int64_t)run->page_size);
  bind_text(st, 5, run->source);
  bind_text(st, 6, run->command);
  bind_text(st, 7, ALLOCSIM_VERSION);
  bind_text(st, 8, run->trace_path);
  bind_text(st, 9, run->trace_sha256);
  if (sqlite3_step(st) == SQLITE_DONE)
    *id = sqlite3_last_insert_rowid(s->db);
  else
    rc = db_fail(s, err, "writing the run");
  sqlite3_finalize(st);
  return rc;
}

static as_status_t insert_meta(store_t *s, run_stmts_t *q, int64_t id,
                               const store_run_t *run, as_err_t *err) {
  for (size_t i = 0; i < run->meta_count; i++) {
    sqlite3_reset(q->meta);
    sqlite3_bind_int64(q->meta, 1, id);
    bind_text(q->meta, 2, run->meta[i].key);
    bind_text(q->meta, 3, run->meta[i].value);
    if (sqlite3_step(q->meta) != SQLITE_DONE) {
      char what[160];
      snprintf(what, sizeof what, "writing meta '%s'",
               run->meta[i].key != NULL ? run->meta[i].key : "(null)");
      return db_fail(s, err, what);
    }
  }
  return AS_OK;
}

static as_status_t insert_sample(store_t *s, run_stmts_t *q, int64_t id,
                                 const store_sample_t *x, size_t seq,
                                 as_err_t *err) {
  if ((unsigned)x->kind >= SAMPLE_KIND_COUNT)
    return as_err_set(err, AS_ESTORE,
                      "%s: sample %zu: kind %d is not a sample kind (0..%zu)",
                      s->path, seq, (int)x->kind, SAMPLE_KIND_COUNT - 1);
  as_status_t rc = check_i64(s, x->t_ns, "t_ns", seq, err);
  if (rc == AS_OK)
    rc = check_i64(s, x->rss_bytes, "rss_bytes", seq, err);
  if (rc == AS_OK)
    rc = check_i64(s, x->live_bytes, "live_bytes", seq, err);
  if (rc == AS_OK)
    rc = check_i64(s, x->measured_rss_bytes, "measured_rss_bytes", seq, err);
  for (int o = 0; rc == AS_OK && o < SIM_OWNER_COUNT; o++)
    rc = check_i64(s, x->owner_bytes[o], OWNER_NAMES[o], seq, err);
  if (rc != AS_OK)
    return rc;

  size_t label_len = strnlen(x->label, sizeof x->label);
  sqlite3_reset(q->sample);
  sqlite3_bind_int64(q->sample, 1, id);
  sqlite3_bind_int64(q->sample, 2, (int64_t)seq);
  sqlite3_bind_int64(q->sample, 3, (int64_t)x->t_ns);
  bind_text(q->sample, 4, SAMPLE_KIND_NAMES[x->kind]);
  if (label_len == 0)
    sqlite3_bind_null(q->sample, 5);
  else
    sqlite3_bind_text(q->sample, 5, x->label, (int)label_len, SQLITE_TRANSIENT);
  sqlite3_bind_int64(q->sample, 6, (int64_t)x->rss_bytes);
  sqlite3_bind_int64(q->sample, 7, (int64_t)x->live_bytes);
  sqlite3_bind_int64(q->sample, 8, (int64_t)x->measured_rss_bytes);
  if (sqlite3_step(q->sample) != SQLITE_DONE)
    return db_fail(s, err, "writing a sample");

  /* Only non-zero owners are stored: most samples have two or three owners
   * out of eight, and a missing row reads back as 0. */
  for (int o = 0; o < SIM_OWNER_COUNT; o++) {
    if (x->owner_bytes[o] == 0)
      continue;
    sqlite3_reset(q->owner);
    sqlite3_bind_int64(q->owner, 1, id);
    sqlite3_bind_int64(q->owner, 2, (int64_t)seq);
    bind_text(q->owner, 3, OWNER_NAMES[o]);
    sqlite3_bind_int64(q->owner, 4, (int64_t)x->owner_bytes[o]);
    if (sqlite3_step(q->owner) != SQLITE_DONE)
      return db_fail(s, err, "writing a sample's owner bytes");
  }
  return AS_OK;
}

as_status_t store_write_run(store_t *s, const store_run_t *run,
                            const store_sample_t *samples, size_t nsamples,
                            int64_t *run_id, as_err_t *err) {
  assert(s != NULL && run != NULL && run_id != NULL);
  assert(samples != NULL || nsamples == 0);
  assert(run->meta != NULL || run->meta_count == 0);
  *run_id = 0;
  run_stmts_t q = {0};
  int64_t     id = 0;
  /* Inside a caller's transaction (store_begin) the run is a savepoint, so
   * a failure undoes only the run and the caller decides about the rest;
   * otherwise it is its own BEGIN IMMEDIATE ... COMMIT. */
  bool        nested = sqlite3_get_autocommit(s->db) == 0;
  as_status_t rc = AS_OK;
  if (nested) {
    if (sqlite3_exec(s->db, "SAVEPOINT store_write_run", NULL, NULL, NULL) !=
        SQLITE_OK)
      return db_fail(s, err, "starting a savepoint");
  } else if ((rc = store_begin(s, err)) != AS_OK) {
    return rc;
  }
  rc = insert_run_row(s, run, &id, err);
  if (rc == AS_OK)
    rc = prepare(s,
                 "INSERT INTO run_meta(run_id, key, value) VALUES (?1, ?2, ?3)",
                 &q.meta, err);
  if (rc == AS_OK)
    rc = prepare(s,
                 "INSERT INTO samples(run_id, seq, t_ns, kind, label,"
                 " rss_bytes, live_bytes, measured_rss_bytes)"
                 " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                 &q.sample, err);
  if (rc == AS_OK)
    rc = prepare(s,
                 "INSERT INTO sample_owners(run_id, seq, owner, bytes)"
                 " VALUES (?1, ?2, ?3, ?4)",
                 &q.owner, err);
  if (rc == AS_OK)
    rc = insert_meta(s, &q, id, run, err);
  for (size_t i = 0; rc == AS_OK && i < nsamples; i++)
    rc = insert_sample(s, &q, id, &samples[i], i, err);
  sqlite3_finalize(q.meta);
  sqlite3_finalize(q.sample);
  sqlite3_finalize(q.owner);
  if (nested) {
    if (rc == AS_OK && sqlite3_exec(s->db, "RELEASE store_write_run", NULL,
                                    NULL, NULL) != SQLITE_OK)
      rc = db_fail(s, err, "releasing the savepoint");
    if (rc != AS_OK) {
      sqlite3_exec(s->db, "ROLLBACK TO store_write_run", NULL, NULL, NULL);
      sqlite3_exec(s->db, "RELEASE store_write_run", NULL, NULL, NULL);
    }
  } else if (rc != AS_OK) {
    store_rollback(s);
  } else {
    rc = store_commit(s, err);
  }
  if (rc == AS_OK)
    *run_id = id;
  return rc;
}

/* ---- Reading runs ------------------------------------------------------- */

as_status_t store_read_samples(store_t *s, int64_t run_id, store_sample_t **out,
                               size_t *count, as_err_t *err) {
  assert(s != NULL && out != NULL && count != NULL);
  *out = NULL;
  *count = 0;
  store_sample_t *v = NULL;
  size_t          n = 0;
  sqlite3_stmt   *st = NULL;
  int64_t         rows = 0;
  int             step = SQLITE_DONE;

  /* One read transaction, so the count, the samples and the owners are one
   * snapshot even while another connection writes.  Inside a caller's
   * transaction we are already on one snapshot and must not end it. */
  bool own_txn = sqlite3_get_autocommit(s->db) != 0;
  if (own_txn && sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
    return db_fail(s, err, "starting a read transaction");
  as_status_t rc = check_run_exists(s, run_id, err);
  if (rc == AS_OK)
    rc = prepare(s, "SELECT count(*) FROM samples WHERE run_id = ?1", &st, err);
  if (rc == AS_OK) {
    sqlite3_bind_int64(st, 1, run_id);
    if (sqlite3_step(st) == SQLITE_ROW)
      rows = sqlite3_column_int64(st, 0);
    else
      rc = db_fail(s, err, "counting samples");
    sqlite3_finalize(st);
    st = NULL;
  }
  if (rc == AS_OK && rows > 0) {
    v = calloc((size_t)rows, sizeof *v);
    if (v == NULL)
      rc = as_err_set(err, AS_ENOMEM,
                      "%s: out of memory reading %" PRId64 " samples", s->path,
                      rows);
  }
  if (rc == AS_OK && rows > 0)
    rc = prepare(s,
                 "SELECT seq, t_ns, kind, label, rss_bytes, live_bytes,"
                 " measured_rss_bytes FROM samples WHERE run_id = ?1"
                 " ORDER BY seq",
                 &st, err);
  if (rc == AS_OK && rows > 0) {
    sqlite3_bind_int64(st, 1, run_id);
    while (rc == AS_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
      int64_t     seq = sqlite3_column_int64(st, 0);
      const char *kind = (const char *)sqlite3_column_text(st, 2);
      int         k = sample_kind_from_name(kind);
      if (seq != (int64_t)n || n >= (size_t)rows) {
        rc = as_err_set(err, AS_ESTORE,
                        "%s: run %" PRId64 ": sample seq %" PRId64
                        " where %zu was expected",
                        s->path, run_id, seq, n);
        break;
      }
      if (k < 0) {
        rc = as_err_set(err, AS_ESTORE,
                        "%s: run %" PRId64 ": sample %zu has unknown kind '%s'",
                        s->path, run_id, n, kind != NULL ? kind : "(null)");
        break;
      }
      store_sample_t *x = &v[n++];
      x->t_ns = (uint64_t)sqlite3_column_int64(st, 1);
      x->kind = (sim_sample_kind_t)k;
      const char *label = (const char *)sqlite3_column_text(st, 3);
      if (label != NULL) {
        size_t len = strnlen(label, sizeof x->label - 1);
        memcpy(x->label, label, len);
        x->label[len] = '\0';
      }
      x->rss_bytes = (uint64_t)sqlite3_column_int64(st, 4);
      x->live_bytes = (uint64_t)sqlite3_column_int64(st, 5);
      x->measured_rss_bytes = (uint64_t)sqlite3_column_int64(st, 6);
    }
    if (rc == AS_OK && step != SQLITE_DONE)
      rc = db_fail(s, err, "reading samples");
    sqlite3_finalize(st);
    st = NULL;
  }
  if (rc == AS_OK && rows > 0)
    rc = prepare(s,
                 "SELECT seq, owner, bytes FROM sample_owners"
                 " WHERE run_id = ?1",
                 &st, err);
  if (rc == AS_OK && rows > 0) {
    sqlite3_bind_int64(st, 1, run_id);
    while (rc == AS_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
      int64_t     seq = sqlite3_column_int64(st, 0);
      const char *owner = (const char *)sqlite3_column_text(st, 1);
      int         o = owner_from_name(owner);
      if (seq < 0 || seq >= (int64_t)n || o < 0) {
        rc = as_err_set(err, AS_ESTORE,
                        "%s: run %" PRId64 ": owner row (seq %" PRId64
                        ", owner '%s') matches no sample and owner",
                        s->path, run_id, seq, owner != NULL ? owner : "(null)");
        break;
      }
      v[seq].owner_bytes[o] = (uint64_t)sqlite3_column_int64(st, 2);
    }
    if (rc == AS_OK && step != SQLITE_DONE)
      rc = db_fail(s, err, "reading sample owners");
    sqlite3_finalize(st);
  }
  if (own_txn)
    store_rollback(s); /* ends our read transaction; nothing was written */
  if (rc != AS_OK) {
    free(v);
    return rc;
  }
  *out = v;
  *count = n;
  return AS_OK;
}

as_status_t store_read_meta(store_t *s, int64_t run_id, const char *key,
                            char *buf, size_t len, as_err_t *err) {
  assert(s != NULL && key != NULL && buf != NULL && len > 0);
  buf[0] = '\0';
  as_status_t rc = check_run_exists(s, run_id, err);
  if (rc != AS_OK)
    return rc;
  sqlite3_stmt *st;
  rc = prepare(s, "SELECT value FROM run_meta WHERE run_id = ?1 AND key = ?2",
               &st, err);
  if (rc != AS_OK)
    return rc;
  sqlite3_bind_int64(st, 1, run_id);
  bind_text(st, 2, key);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    const char *v = (const char *)sqlite3_column_text(st, 0);
    size_t      n = (size_t)sqlite3_column_bytes(st, 0);
    if (n >= len)
      rc = as_err_set(err, AS_EINVAL,
                      "%s: run %" PRId64
                      ": meta '%s' has %zu bytes, the buffer holds %zu",
                      s->path, run_id, key, n, len - 1);
    else if (v != NULL) {
      memcpy(buf, v, n);
      buf[n] = '\0';
    }
  } else if (step != SQLITE_DONE) {
    rc = db_fail(s, err, "reading meta");
  }
  sqlite3_finalize(st);
  return rc;
}

as_status_t store_list_meta(store_t *s, int64_t run_id, store_meta_fn fn,
                            void *user, as_err_t *err) {
  assert(s != NULL && fn != NULL);
  as_status_t rc = check_run_exists(s, run_id, err);
  if (rc != AS_OK)
    return rc;
  sqlite3_stmt *st;
  rc = prepare(s,
               "SELECT key, value FROM run_meta WHERE run_id = ?1"
               " ORDER BY key",
               &st, err);
  if (rc != AS_OK)
    return rc;
  sqlite3_bind_int64(st, 1, run_id);
  int step = SQLITE_DONE;
  while (rc == AS_OK && (step = sqlite3_step(st)) == SQLITE_ROW)
    rc = fn(user, (const char *)sqlite3_column_text(st, 0),
            (const char *)sqlite3_column_text(st, 1), err);
  if (rc == AS_OK && step != SQLITE_DONE)
    rc = db_fail(s, err, "reading meta");
  sqlite3_finalize(st);
  return rc;
}

void store_run_record_free(store_run_record_t *rec) {
  if (rec == NULL)
    return;
  free(rec->kind);
  free(rec->model);
  free(rec->options);
  free(rec->source);
  free(rec->command);
  free(rec->allocsim_version);
  free(rec->created_at);
  free(rec->trace_path);
  free(rec->trace_sha256);
  memset(rec, 0, sizeof *rec);
}

/* The run columns and the sample summary, in the order record_from_row
 * reads them. */
#define RUN_SELECT                                                             \
  "SELECT r.id, r.kind, r.model, r.options, r.page_size, r.source,"            \
  " r.command, r.allocsim_version, r.created_at, r.trace_path,"                \
  " r.trace_sha256, count(x.seq), coalesce(max(x.rss_bytes), 0),"              \
  " coalesce(max(x.measured_rss_bytes), 0)"                                    \
  " FROM runs r LEFT JOIN samples x ON x.run_id = r.id"
/* Appended after an optional WHERE: one pass over each run's samples. */
#define RUN_GROUP " GROUP BY r.id"

static as_status_t record_from_row(store_t *s, sqlite3_stmt *st,
                                   store_run_record_t *rec, as_err_t *err) {
  bool oom = false;
  memset(rec, 0, sizeof *rec);
  rec->id = sqlite3_column_int64(st, 0);
  rec->kind = column_dup(st, 1, &oom);
  rec->model = column_dup(st, 2, &oom);
  rec->options = column_dup(st, 3, &oom);
  rec->page_size = (uint64_t)sqlite3_column_int64(st, 4);
  rec->source = column_dup(st, 5, &oom);
  rec->command = column_dup(st, 6, &oom);
  rec->allocsim_version = column_dup(st, 7, &oom);
  rec->created_at = column_dup(st, 8, &oom);
  rec->trace_path = column_dup(st, 9, &oom);
  rec->trace_sha256 = column_dup(st, 10, &oom);
  rec->nsamples = (uint64_t)sqlite3_column_int64(st, 11);
  rec->peak_rss_bytes = (uint64_t)sqlite3_column_int64(st, 12);
  rec->peak_measured_rss_bytes = (uint64_t)sqlite3_column_int64(st, 13);
  if (oom) {
    store_run_record_free(rec);
    return as_err_set(err, AS_ENOMEM, "%s: out of memory reading a run",
                      s->path);
  }
  return AS_OK;
}

as_status_t store_read_run(store_t *s, int64_t id, store_run_record_t *out,
                           as_err_t *err) {
  assert(s != NULL && out != NULL);
  memset(out, 0, sizeof *out);
  sqlite3_stmt *st;
  as_status_t   rc =
      prepare(s, RUN_SELECT " WHERE r.id = ?1" RUN_GROUP, &st, err);
  if (rc != AS_OK)
    return rc;
  sqlite3_bind_int64(st, 1, id);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW)
    rc = record_from_row(s, st, out, err);
  else if (step == SQLITE_DONE)
    rc = as_err_set(err, AS_ESTORE, "%s: no run with id %" PRId64, s->path, id);
  else
    rc = db_fail(s, err, "reading a run");
  sqlite3_finalize(st);
  return rc;
}

as_status_t store_list_runs(store_t *s, store_run_fn fn, void *user,
                            as_err_t *err) {
  assert(s != NULL && fn != NULL);
  sqlite3_stmt *st;
  as_status_t rc = prepare(s, RUN_SELECT RUN_GROUP " ORDER BY r.id", &st, err);
  if (rc != AS_OK)
    return rc;
  int step = SQLITE_DONE;
  while (rc == AS_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    store_run_record_t rec;
    rc = record_from_row(s, st, &rec, err);
    if (rc == AS_OK) {
      rc = fn(user, &rec, err);
      store_run_record_free(&rec);
    }
  }
  if (rc == AS_OK && step != SQLITE_DONE)
    rc = db_fail(s, err, "listing runs");
  sqlite3_finalize(st);
  return rc;
}
