/* analysis/sweep.h -- parameter sweeps: run a workload or trace files at
 * every point of a grid (several seeds each), against models, and store
 * kept memory beside the formula's prediction.
 *
 * Type map
 *   sweep_axis_t    one varied parameter: a workload option, page_size,
 *                   mmap_offset, model, libc, or a model option
 *                   ("glibc.arena_max")
 *   sweep_config_t  workload or traces, axes, fixed options, seeds, model,
 *                   libc, jobs
 *   sweep_point_t   one point of the grid: its parameters and results
 *
 * Identity.  Every point has a key: the SHA-256 of everything that decides
 * its result (the workload and its arguments, or the trace's SHA-256; the
 * model and libc specs; page size, layout offset and seed), so points that
 * are the same simulation are one point (a model option axis does not
 * multiply points of another model), and a sweep has a spec key, the
 * SHA-256 of its points' keys.  Shards of one sweep share the spec key;
 * --resume skips the points whose key a sweep with that spec key already
 * completed; merging stores matches points by key.
 *
 * A point is one simulation (sim_session_open + sim_engine_run) per address
 * layout, each with its own session, so points run in parallel on worker
 * threads.  Where ASLR puts mmaps decides which pymalloc arenas are pool
 * aligned, so a point is the mean over layouts (mmap_top lowered by 0 ..
 * N-1 OS pages, the rule of `compare --layouts`), with kept's min-max; N is
 * part of the point's key when it is above 1.  Results come back
 * to the calling thread, which reports and stores them one at a time (the
 * store is never touched by workers).  Every point is stored as a simulated
 * run (its mark samples) and a sweep_points row, in point order of
 * completion, so an interrupted sweep keeps the points it finished.
 * For the survivors workload a point also gets the (1 - p)^k formula and
 * the number of pymalloc arenas still holding a used pool at `after`.
 * The seed axis applies only to workloads with a --seed option, and for
 * survivors only to the random pattern (stride and oldest ignore it).
 */
#ifndef ALLOCSIM_SWEEP_H
#define ALLOCSIM_SWEEP_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../sim/kernel.h"
#include "../sim/status.h"
#include "../traces/workload.h"
#include "store.h"

#define SWEEP_MAX_AXES   8
#define SWEEP_MAX_FIXED  16
#define SWEEP_MAX_MARKS  8
#define SWEEP_MAX_TRACES 64

typedef struct sweep_axis_s sweep_axis_t;
struct sweep_axis_s {
  char name[48]; /* workload option ("fraction"), "page_size",
                    "mmap_offset", "model", "libc" or "<model>.<option>" */
  size_t count;  /* values, >= 1 */
  char **values; /* owned copies, as typed */
};

/* Parses "name=v1,v2,..." for workload wl (NULL for trace sweeps).  name
 * is one of wl's options ('_' and '-' are interchangeable), page_size
 * (4096, 16384, 65536, 16K ...), mmap_offset: bytes (a multiple of 4096
 * below 1 GiB) by which the simulated kernel's mmap_top is lowered, i.e. a
 * different address-space layout, as ASLR gives each real run (it decides
 * which pymalloc arenas are 16 KiB aligned); model or libc (model specs,
 * "glibc:arena_max=2"); or MODEL.OPTION, an option of a registered model
 * ("glibc.arena_max=1,2,8"), which applies to the points whose model or
 * libc is that model and to no other (sweep_expand refuses it when no
 * point simulates that model).
 * AS_EUSAGE naming the axis for an unknown name, an empty value, a value
 * the option or kernel refuses.  Free with sweep_axis_free. */
as_status_t sweep_axis_parse(const workload_def_t *wl, const char *spec,
                             sweep_axis_t *out, as_err_t *err);
void        sweep_axis_free(sweep_axis_t *a);

typedef struct sweep_config_s sweep_config_t;
struct sweep_config_s {
  const workload_def_t *workload; /* NULL when the sweep replays traces */
  const char           *traces[SWEEP_MAX_TRACES]; /* trace files */
  size_t                ntraces;
  sweep_axis_t          axes[SWEEP_MAX_AXES]; /* last varies fastest */
  size_t                naxes;
  const char *fixed_name[SWEEP_MAX_FIXED]; /* workload options held fixed */
  const char *fixed_value[SWEEP_MAX_FIXED];
  size_t      nfixed;
  unsigned    seeds;           /* seeds 1..seeds for seeded points */
  const char *model;           /* model spec, e.g. "cpython:version=3.11"; NULL
                                  for traces: the one each trace's provenance
                                  implies (record_run_specs) */
  const char         *libc;    /* libc spec or NULL */
  sim_kernel_config_t kernel;  /* page_size is the default for points */
  unsigned            jobs;    /* worker threads; 0 = online cores */
  unsigned            layouts; /* address layouts per point, averaged (0: all
                                  that differ for the page size, 4 with 4 KiB
                                  pages; 1 with an mmap_offset axis, which sets
                                  them itself) */
  volatile sig_atomic_t *stop; /* set (by a signal handler): start no new
                                  point; may be NULL */
  const char *command;         /* the command line, stored with each run */
};

typedef struct sweep_mark_s sweep_mark_t;
struct sweep_mark_s {
  char     label[32];
  uint64_t rss_bytes;
};

typedef struct sweep_point_s sweep_point_t;
struct sweep_point_s {
  /* Parameters. */
  uint64_t    point;                  /* index in the grid */
  uint64_t    seed;                   /* 0 when the point is unseeded */
  const char *values[SWEEP_MAX_AXES]; /* this point's value on each axis */
  uint64_t    page_size;              /* OS page, bytes */
  uint64_t    mmap_offset;            /* mmap_top lowered by, bytes */
  char        args[512];              /* workload arguments, as for
                                         `allocsim run WORKLOAD ...`, or
                                         the trace file */
  const char *trace;                  /* the trace file, or NULL */
  char        model[384];             /* the model spec simulated */
  char        libc[256];              /* the libc spec, "" for default */
  char        key[65];                /* the point's key (file comment) */
  /* Results (valid when ran and status is AS_OK). */
  bool         ran; /* sweep_run ran it (not after a stop) */
  as_status_t  status;
  char         error[512];
  char         model_desc[512];        /* model_describe() */
  sweep_mark_t marks[SWEEP_MAX_MARKS]; /* RSS at each mark, in order */
  size_t       nmarks;
  bool         have_kept;     /* marks start and after exist */
  int64_t      kept_bytes;    /* RSS(after) - RSS(start) */
  int64_t      arenas_pinned; /* pymalloc arenas with a used pool
                                 at after; -1 if not pymalloc */
  int64_t  arenas_peak;       /* pymalloc arenas at peak, and */
  int64_t  unaligned_peak;    /* those with 63 pools; -1: n/a */
  bool     have_formula;
  double   formula_kept_bytes;
  double   formula_sd_bytes;
  uint64_t events;
  uint64_t peak_rss_bytes;
  double   seconds;              /* wall time of the simulation */
  unsigned layouts;              /* replays averaged (compare.h): RSS,
                                    kept and the arena counts are
                                    their means */
  int64_t        kept_min_bytes; /* kept over the layouts */
  int64_t        kept_max_bytes;
  store_sample_t samples[SWEEP_MAX_MARKS + 1]; /* marks and final */
  size_t         nsamples;
};

/* RSS at the mark labelled label, or false if the point has none. */
bool sweep_point_mark(const sweep_point_t *p, const char *label,
                      uint64_t *rss_bytes);

/* Expands c into its points (traces x grid x seeds, without duplicate
 * keys, in a deterministic order); *out is freed with free().  Checks every
 * point's workload arguments by opening the workload once, and its model
 * spec by parsing it, so a bad value fails here, naming the option, before
 * anything runs.  spec_key (may be NULL) receives the sweep's spec key. */
as_status_t sweep_expand(const sweep_config_t *c, sweep_point_t **out,
                         size_t *count, char spec_key[65], as_err_t *err);

/* Keeps the points of shard index of count (every count-th point from
 * index, in expansion order), moving them to the front; returns how many. */
size_t sweep_shard(sweep_point_t *points, size_t n, unsigned index,
                   unsigned count);

/* Removes the points whose key a sweep of store s with spec key spec_key
 * completed (stored with its run), moving the rest to the front; *n
 * receives how many are left. */
as_status_t sweep_skip_done(store_t *s, const char *spec_key,
                            sweep_point_t *points, size_t *n, as_err_t *err);

/* Runs one point; safe to call from several threads at once.  A failed
 * simulation is recorded in p->status / p->error and also returned. */
as_status_t sweep_run_point(const sweep_config_t *c, sweep_point_t *p,
                            as_err_t *err);

/* Called on the thread that called sweep_run as each point finishes (in
 * completion order); ndone counts finished points including this one.  A
 * non-AS_OK return stops the sweep (running points finish, no new start). */
typedef as_status_t (*sweep_done_fn)(void *user, sweep_point_t *p, size_t ndone,
                                     size_t total, as_err_t *err);

/* Runs all n points on c->jobs worker threads.  Returns the first error of
 * done(); failed points are reported to done() like the others. */
as_status_t sweep_run(const sweep_config_t *c, sweep_point_t *points, size_t n,
                      sweep_done_fn done, void *user, as_err_t *err);

/* How a sweep is recorded: its spec key, how many points it has in all,
 * its shard ("2/8", or NULL), and whether to continue the latest sweep of
 * the same spec key and shard (resume) instead of starting another. */
typedef struct sweep_store_info_s sweep_store_info_t;
struct sweep_store_info_s {
  const char *spec_key;
  size_t      total_points; /* before sharding */
  const char *shard;
  bool        resume;
};

/* Writes (or, resuming, reopens) the sweeps row (workload, JSON of axes,
 * fixed options, seeds, model; spec key, shard, host, pid, state
 * 'running') and returns its id. */
as_status_t sweep_store_begin(store_t *s, const sweep_config_t *c,
                              const sweep_store_info_t *info, int64_t *sweep_id,
                              as_err_t *err);
/* Records how the sweep ended: state "complete" or "interrupted". */
as_status_t sweep_store_finish(store_t *s, int64_t sweep_id, const char *state,
                               as_err_t *err);
/* Writes point p in one transaction: its simulated run (mark samples,
 * provenance) and its sweep_points row, so a kill leaves the point whole
 * or absent.  params_json holds the axes' values, page_size, seed, the
 * workload arguments and, for survivors, formula_sd_bytes. */
as_status_t sweep_store_point(store_t *s, int64_t sweep_id,
                              const sweep_config_t *c, const sweep_point_t *p,
                              as_err_t *err);

/* params_json of p (as stored) into buf. */
void sweep_point_json(const sweep_config_t *c, const sweep_point_t *p,
                      char *buf, size_t len);

#endif
