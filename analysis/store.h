/* analysis/store.h -- the project's SQLite store: recorded (measured) and
 * simulated runs with provenance, their sample time series, sweeps and
 * comparisons.
 *
 * Type map
 *   store_t             an open store: one SQLite connection, one thread at
 *                       a time; parallel writers each open their own
 *   store_run_t         a run to write (borrowed strings, meta pairs)
 *   store_sample_t      one sample with its owner breakdown, as stored
 *   store_run_record_t  a run read back (owned strings, sample summary)
 *
 * Schema v1 (schema_version table holds 1; application_id marks the file as
 * an allocsim store).  WAL mode.  Every write group runs in BEGIN IMMEDIATE
 * ... COMMIT with ROLLBACK on any error, so a failure leaves no partial run.
 *   runs(id, kind measured|simulated, model, options, page_size, source,
 *        command, allocsim_version, created_at, trace_path, trace_sha256)
 *   run_meta(run_id, key, value)           provenance: machine, kernel, libc,
 *                                          python, env knobs, ...
 *   samples(run_id, seq, t_ns, kind, label, rss_bytes, live_bytes,
 *           measured_rss_bytes)
 *   sample_owners(run_id, seq, owner, bytes)  predicted RSS by owner
 *   sweeps(id, workload, params, created_at)
 *   sweep_points(sweep_id, point, seed, params_json, model, page_size,
 *                simulated_kept_bytes, formula_kept_bytes, arenas_pinned,
 *                run_id)
 *   comparisons(id, measured_run_id, simulated_run_id, mean_abs_error_bytes,
 *               max_abs_error_bytes, slope, r2, created_at)
 *
 * Column details (see SCHEMA_V1 in store.c for the exact DDL):
 *   - runs.kind is 'measured' or 'simulated' (CHECK); created_at defaults to
 *     strftime('%Y-%m-%dT%H:%M:%fZ','now'), ISO-8601 UTC with milliseconds,
 *     as do sweeps.created_at and comparisons.created_at, so modules can
 *     leave it out of their INSERTs.
 *   - samples.seq is 0..n-1 in run order; samples.kind is the text 'mark',
 *     'periodic', 'measured' or 'final' (CHECK); label is NULL when empty.
 *   - sample_owners.owner is sim_owner_name() text ("pymalloc", ...); only
 *     owners with non-zero bytes are stored, a missing row means 0.
 *   - sweeps.params and sweep_points.params_json are JSON text; the sweep
 *     point is identified by (sweep_id, point, seed), the primary key.
 *     simulated_kept_bytes and arenas_pinned are INTEGER, formula_kept_bytes
 *     is REAL (an expectation); all three and run_id may be NULL.
 *   - comparisons also has intercept_bytes REAL, points INTEGER (number of
 *     aligned samples) and params TEXT (JSON: how samples were aligned); all
 *     statistic columns may be NULL.
 *   - Every run_id column references runs(id) ON DELETE CASCADE, except
 *     sweep_points.run_id (ON DELETE SET NULL).  Byte counts and times are
 *     stored as SQLite INTEGER, so values above INT64_MAX are refused.
 */
#ifndef ALLOCSIM_STORE_H
#define ALLOCSIM_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "../engine/engine.h"
#include "../sim/status.h"

#define STORE_SCHEMA_VERSION 3

typedef struct store_s store_t;

/* Opens path, creating schema v1 in a new or empty file.  Refuses (AS_ESTORE
 * with a message naming the file) a database of a newer schema, or one that
 * is not an allocsim store. */
as_status_t store_open(const char *path, store_t **out, as_err_t *err);
/* store_open of a store that must exist already: a missing path (or a
 * directory) is AS_EIO naming it, an empty file (or an SQLite database
 * without tables) AS_ESTORE, and nothing is created, for commands that read
 * a store (runs, compare, explain, advise, map and report of a run, db
 * points, sweep --status, formula --validate). */
as_status_t store_open_existing(const char *path, store_t **out, as_err_t *err);
/* Before a long job that ends by writing to path: AS_OK if path is a store
 * that may be written (opened and closed again) or a file that can be
 * created there (its directory exists and is writable); else the error
 * writing would give at the end, or AS_EIO naming the directory. */
as_status_t store_check_writable(const char *path, as_err_t *err);
/* After a failed write to a store that did not exist before the command
 * (created_by_us: path was missing then): removes the regular file path
 * and SQLite's -journal, -wal and -shm beside it, so the failure leaves
 * the disk as it was.  Does nothing otherwise. */
void store_discard_new(const char *path, bool created_by_us);
void store_close(store_t *s);

typedef struct store_kv_s store_kv_t;
struct store_kv_s {
  const char *key;
  const char *value;
};

typedef struct store_run_s store_run_t;
struct store_run_s {
  const char       *kind;    /* "measured" or "simulated" */
  const char       *model;   /* model_describe() or the allocator used */
  const char       *options; /* libc spec, CLI options; may be NULL */
  uint64_t          page_size;
  const char       *source;       /* trace path or workload description */
  const char       *command;      /* command line that produced the run */
  const char       *trace_path;   /* may be NULL */
  const char       *trace_sha256; /* may be NULL */
  const store_kv_t *meta;         /* provenance pairs */
  size_t            meta_count;
};

/* One sample as stored (a copy of sim_sample_t with an owned label). */
typedef struct store_sample_s store_sample_t;
struct store_sample_s {
  uint64_t          t_ns;
  sim_sample_kind_t kind;
  char              label[64];
  uint64_t          rss_bytes;
  uint64_t          live_bytes;
  uint64_t          measured_rss_bytes;
  uint64_t          owner_bytes[SIM_OWNER_COUNT];
};

/* Writes the run, its meta and samples in one transaction; *run_id gets the
 * new id.  On error nothing is written.  Called inside the caller's
 * store_begin ... store_commit, the run becomes part of that transaction (a
 * SAVEPOINT): on error only the run is undone, the transaction stays open,
 * and the run is durable only when the caller commits -- so a run and the
 * row that refers to it (sweep point, comparison) can be written together. */
as_status_t store_write_run(store_t *s, const store_run_t *run,
                            const store_sample_t *samples, size_t nsamples,
                            int64_t *run_id, as_err_t *err);

/* Copies a sim_sample_t into a store_sample_t (label truncated to 63). */
void store_sample_from_sim(store_sample_t *out, const sim_sample_t *in);

/* A growing list of samples (what a run will store). */
typedef struct store_samples_s store_samples_t;
struct store_samples_s {
  store_sample_t *v;
  size_t          n, cap;
};
/* Appends a copy of x; AS_ENOMEM (list unchanged) if memory runs out. */
as_status_t store_samples_push(store_samples_t *s, const store_sample_t *x,
                               as_err_t *err);
/* Appends sim sample x (store_sample_from_sim). */
as_status_t store_samples_push_sim(store_samples_t *s, const sim_sample_t *x,
                                   as_err_t *err);
/* Frees the list's storage and empties it. */
void store_samples_free(store_samples_t *s);

/* Reads back a run's samples in order (caller frees *out with free()).
 * AS_ESTORE if there is no such run; a run with no samples gives *out NULL
 * and *count 0. */
as_status_t store_read_samples(store_t *s, int64_t run_id, store_sample_t **out,
                               size_t *count, as_err_t *err);

/* Reads one meta value of a run into buf ("" if absent).  AS_ESTORE if
 * there is no such run; AS_EINVAL if the value does not fit in len. */
as_status_t store_read_meta(store_t *s, int64_t run_id, const char *key,
                            char *buf, size_t len, as_err_t *err);

/* The underlying handle, for analysis modules adding their own queries
 * (sweeps, comparisons) inside store_begin/store_commit. */
struct sqlite3 *store_db(store_t *s);
/* BEGIN IMMEDIATE (waits up to STORE_BUSY_TIMEOUT_MS for other writers). */
as_status_t store_begin(store_t *s, as_err_t *err);
/* COMMIT; on failure rolls back and returns AS_ESTORE. */
as_status_t store_commit(store_t *s, as_err_t *err);
/* ROLLBACK if a transaction is open; a no-op otherwise. */
void store_rollback(store_t *s);

/* ---- Additions for reading runs back (compare, sweep, `allocsim runs`) - */

/* PRAGMA application_id of every allocsim store: 'AllS'. */
#define STORE_APPLICATION_ID 0x416C6C53
/* How long a writer waits for another connection's write lock. */
#define STORE_BUSY_TIMEOUT_MS 5000

/* The path the store was opened with (owned by the store), for messages. */
const char *store_path(const store_t *s);

/* One run as stored, plus a summary of its samples.  Strings are owned by
 * the record; optional ones (options, trace_path, trace_sha256) are NULL
 * when absent, the others are never NULL. */
typedef struct store_run_record_s store_run_record_t;
struct store_run_record_s {
  int64_t  id;
  char    *kind; /* "measured" or "simulated" */
  char    *model;
  char    *options;   /* may be NULL */
  uint64_t page_size; /* bytes */
  char    *source;
  char    *command;
  char    *allocsim_version;        /* version that wrote the run */
  char    *created_at;              /* ISO-8601 UTC, "...T00:17:03.123Z" */
  char    *trace_path;              /* may be NULL */
  char    *trace_sha256;            /* may be NULL */
  uint64_t nsamples;                /* rows in samples */
  uint64_t peak_rss_bytes;          /* max samples.rss_bytes, 0 if none */
  uint64_t peak_measured_rss_bytes; /* max measured_rss_bytes, 0 if none */
};

/* Reads run id into *out (free with store_run_record_free).  AS_ESTORE with
 * "FILE: no run with id N" if there is none; *out is zeroed on failure. */
as_status_t store_read_run(store_t *s, int64_t id, store_run_record_t *out,
                           as_err_t *err);
/* Frees the strings of a record filled by store_read_run and zeroes it. */
void store_run_record_free(store_run_record_t *rec);

/* Calls fn for every run in id order.  The record is valid only during the
 * call.  A non-AS_OK return from fn stops the walk and is returned. */
typedef as_status_t (*store_run_fn)(void *user, const store_run_record_t *rec,
                                    as_err_t *err);
as_status_t store_list_runs(store_t *s, store_run_fn fn, void *user,
                            as_err_t *err);

/* Calls fn for every meta pair of run run_id in key order (strings valid
 * only during the call).  AS_ESTORE if there is no such run. */
typedef as_status_t (*store_meta_fn)(void *user, const char *key,
                                     const char *value, as_err_t *err);
as_status_t store_list_meta(store_t *s, int64_t run_id, store_meta_fn fn,
                            void *user, as_err_t *err);

#endif
