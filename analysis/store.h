/* analysis/store.h -- the project's SQLite store: recorded (measured) and
 * simulated runs with provenance, their sample time series, sweeps and
 * comparisons.
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
 */
#ifndef ALLOCSIM_STORE_H
#define ALLOCSIM_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "../sim/engine.h"
#include "../sim/status.h"

#define STORE_SCHEMA_VERSION 1

typedef struct store_s store_t;

/* Opens path, creating schema v1 in a new or empty file.  Refuses (AS_ESTORE
 * with a message naming the file) a database of a newer schema, or one that
 * is not an allocsim store. */
as_status_t store_open(const char *path, store_t **out, as_err_t *err);
void        store_close(store_t *s);

typedef struct store_kv_s store_kv_t;
struct store_kv_s {
  const char *key;
  const char *value;
};

typedef struct store_run_s store_run_t;
struct store_run_s {
  const char       *kind;         /* "measured" or "simulated" */
  const char       *model;        /* model_describe() or the allocator used */
  const char       *options;      /* libc spec, CLI options; may be NULL */
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
 * new id.  On error nothing is written. */
as_status_t store_write_run(store_t *s, const store_run_t *run,
                            const store_sample_t *samples, size_t nsamples,
                            int64_t *run_id, as_err_t *err);

/* Copies a sim_sample_t into a store_sample_t (label truncated to 63). */
void store_sample_from_sim(store_sample_t *out, const sim_sample_t *in);

/* Reads back a run's samples in order (caller frees *out with free()). */
as_status_t store_read_samples(store_t *s, int64_t run_id,
                               store_sample_t **out, size_t *count,
                               as_err_t *err);

/* Reads one meta value of a run into buf ("" if absent). */
as_status_t store_read_meta(store_t *s, int64_t run_id, const char *key,
                            char *buf, size_t len, as_err_t *err);

/* The underlying handle, for analysis modules adding their own queries
 * (sweeps, comparisons) inside store_begin/store_commit. */
struct sqlite3 *store_db(store_t *s);
as_status_t     store_begin(store_t *s, as_err_t *err);
as_status_t     store_commit(store_t *s, as_err_t *err);
void            store_rollback(store_t *s);

#endif
