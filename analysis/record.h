/* analysis/record.h -- recording measured runs: storing traces that carry
 * measured RSS (measured-run files, captures) in the store, capturing a
 * command under liballocsim_capture.so, and converting the capture's raw
 * logs into allocsim traces.
 *
 * Type map
 *   record_info_t            what record_trace_file found and stored
 *   record_convert_stats_t   what converting one raw log found
 *   record_capture_opts_t    how to run a command under capture
 *   record_capture_result_t  what a capture produced
 *
 * Samples of a measured run (the store's samples table):
 *   - a mark followed by an rss event at the same time is one
 *     SIM_SAMPLE_MARK sample with measured_rss_bytes = that rss; a mark with
 *     no such rss is a mark sample with measured_rss_bytes 0;
 *   - every other rss event is a SIM_SAMPLE_MEASURED sample;
 *   - rss_bytes (the predicted column) is 0; live_bytes is what the trace's
 *     allocation events hold live at that point.
 */
#ifndef ALLOCSIM_RECORD_H
#define ALLOCSIM_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../sim/status.h"
#include "../traces/event.h"
#include "store.h"

/* ---- SHA-256 ---------------------------------------------------------- */

/* Hex SHA-256 (64 characters and a NUL) of len bytes at data. */
void record_sha256_hex(const void *data, size_t len, char out[65]);
/* Hex SHA-256 of the file at path; AS_EIO naming the file on failure. */
as_status_t record_sha256_file(const char *path, char out[65], as_err_t *err);

/* ---- Recording a trace as a measured run ------------------------------ */

typedef struct record_info_s record_info_t;
struct record_info_s {
  int64_t  run_id;            /* the stored run */
  uint64_t events;            /* events in the trace */
  uint64_t alloc_events;      /* malloc/calloc/realloc/memalign/free */
  uint64_t marks;             /* mark samples stored */
  uint64_t measured;          /* other rss samples stored */
  uint64_t marks_without_rss; /* marks not followed by an rss at their time */
  uint64_t peak_measured_rss_bytes;
  char     sha256[65]; /* "" if the trace has no allocation events */
};

/* Reads the trace at path (any format), and stores it in s as a run of
 * kind measured: its provenance (#@ lines) as run_meta, plus extra (may be
 * NULL), its samples as described above, and, if it has allocation events,
 * its path and SHA-256: relative to the store's directory when the trace
 * lies below it, else absolute.  command is the command line stored when
 * the trace has no "command" provenance.  Bad traces fail with the reader's
 * message (file and position), a trace without rss events with AS_EFORMAT;
 * nothing is stored then. */
as_status_t record_trace_file(store_t *s, const char *path, const char *command,
                              const store_kv_t *extra, size_t nextra,
                              record_info_t *info, as_err_t *err);

/* The libc model spec ("glibc:arena_max=2,mmap_threshold=65536") implied
 * by environment knobs recorded in provenance.  get(user, key) returns the
 * value of a key or NULL; keys are tried as "env.NAME", "env_NAME" and
 * "NAME" for MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_,
 * MALLOC_TOP_PAD_ and GLIBC_TUNABLES's glibc.malloc.{arena_max,
 * mmap_threshold,trim_threshold,top_pad}; a "malloc_env" entry ("NAME=V
 * NAME=V") is read too, and "ncpus" becomes the model's ncpus.  Writes
 * "glibc" when none is set.  AS_EINVAL if a knob's value is not a number or buf
 * is too small. */
typedef const char *(*record_meta_get_fn)(void *user, const char *key);
as_status_t record_libc_spec(record_meta_get_fn get, void *user, char *buf,
                             size_t len, as_err_t *err);

/* ---- Converting a raw capture log ------------------------------------- */

typedef struct record_convert_stats_s record_convert_stats_t;
struct record_convert_stats_s {
  uint64_t events;             /* trace events written */
  uint64_t alloc_events;       /* of which malloc-family */
  uint64_t threads;            /* distinct threads that allocated */
  uint64_t unmatched_frees;    /* free of an address never allocated */
  uint64_t unmatched_reallocs; /* realloc of such an address: new object */
  uint64_t missed_frees;       /* address returned while still live */
  uint64_t truncated_records;  /* a chunk cut short at the end of the log */
  uint64_t baseline_rss_bytes; /* first measured sample (overhead removed) */
  uint64_t overhead_max_bytes; /* the capture library's own resident bytes */
  uint64_t peak_rss_bytes;     /* largest measured sample (overhead removed) */
  uint64_t max_live_ids;       /* peak number of live objects */
  uint64_t pid;                /* of the process that wrote the log */
  char     python[32];         /* CPython version the hook saw, or "" */
};

/* Converts the raw log at raw_path into the trace out_path (format from
 * the name: .astrace binary, else text) with provenance meta (may be NULL;
 * the converter adds pid, baseline_rss_bytes, capture_overhead_bytes and
 * python when known).  Addresses become dense ids, lowest free id first.
 * rss events carry measured RSS minus the library's own resident bytes.
 * A malformed log fails with AS_EFORMAT naming the file and byte offset,
 * and leaves no output file behind. */
as_status_t record_capture_convert(const char *raw_path, const char *out_path,
                                   const trace_meta_t     *meta,
                                   record_convert_stats_t *st, as_err_t *err);

/* ---- Running a command under capture ---------------------------------- */

typedef struct record_capture_opts_s record_capture_opts_t;
struct record_capture_opts_s {
  char *const *argv;            /* the command, NULL-terminated */
  const char  *out_path;        /* trace to write (the command's process) */
  uint64_t     sample_every_ns; /* RSS sampling period; 0 = marks only */
  const char  *lib_path;        /* NULL: record_capture_find_lib() */
  bool         keep_raw;        /* keep the raw logs' directory */
};

#define RECORD_CAPTURE_MAX_EXTRA 16

typedef struct record_capture_result_s record_capture_result_t;
struct record_capture_result_s {
  int                    exit_code; /* the command's, 128+N if signalled */
  double                 wall_s;    /* the command's wall time */
  record_convert_stats_t main;      /* the command's own process */
  size_t                 nextra;    /* forked / exec'd processes */
  size_t                 nskipped;  /* more of them, not converted */
  char                   extra_path[RECORD_CAPTURE_MAX_EXTRA][512];
  record_convert_stats_t extra[RECORD_CAPTURE_MAX_EXTRA];
  trace_meta_t           meta;         /* provenance written to the trace */
  char                   raw_dir[256]; /* kept raw logs, if keep_raw */
};

/* Finds liballocsim_capture.so: $ALLOCSIM_CAPTURE_LIB, then next to the
 * running binary, then its build-tree place relative to it, then the path
 * it was built to.  AS_EINVAL listing the places tried. */
as_status_t record_capture_find_lib(char *buf, size_t len, as_err_t *err);

/* Runs o->argv with LD_PRELOAD'd capture (and, for CPython, PYTHONPATH
 * pointing at sitecustomize.py), waits for it, and converts its raw logs:
 * the command's process (the last image its pid exec'd) to o->out_path,
 * other processes and earlier images (fork, exec) to OUT.PID[.N].EXT, the
 * first RECORD_CAPTURE_MAX_EXTRA of them (the rest are counted in
 * nskipped).
 * Provenance: command, machine, kernel, page_size, libc, python, env knobs
 * (env.NAME), capture settings.  A command that cannot be started is AS_EINVAL;
 * its non-zero exit is not an error (see exit_code). */
as_status_t record_capture_run(const record_capture_opts_t *o,
                               record_capture_result_t *res, as_err_t *err);

/* The environment variables recorded as env.NAME provenance: MALLOC_*,
 * GLIBC_TUNABLES, LD_PRELOAD (without the capture library), MALLOC_CONF,
 * MIMALLOC_*, PYTHONMALLOC, PYTHONHASHSEED. */
bool record_env_knob(const char *name);

#endif
