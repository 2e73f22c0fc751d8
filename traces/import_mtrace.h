/* traces/import_mtrace.h -- glibc mtrace(3) logs (MALLOC_TRACE output) into
 * allocsim traces.
 *
 * The log has addresses, sizes and call sites but no times and no threads,
 * so the importer stamps events with a synthetic clock (tick_ns per emitted
 * event, 100 ns by default, starting at 0) and puts them all on thread 0 in
 * the raw domain.  glibc logs calloc, memalign, posix_memalign,
 * aligned_alloc, valloc and pvalloc as '+' like malloc, so they all import
 * as malloc: the alignment and calloc's zeroing are not in the log.
 * Grammar, semantics and errors: docs/trace-format.md, "Importing".
 */
#ifndef ALLOCSIM_IMPORT_MTRACE_H
#define ALLOCSIM_IMPORT_MTRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "trace_io.h"

typedef struct import_mtrace_opts_s import_mtrace_opts_t;
struct import_mtrace_opts_s {
  bool     lenient; /* skip and count unmatched frees / reallocs */
  uint64_t tick_ns; /* synthetic clock step per event; 0 = the cost
                       model's C malloc (with writes) and free times */
};

/* What an import saw.  The unmatched_* and reused_live counts stay 0 unless
 * opts.lenient, since without it each of those is an error. */
typedef struct import_mtrace_stats_s import_mtrace_stats_t;
struct import_mtrace_stats_s {
  uint64_t lines;              /* log lines read */
  uint64_t events;             /* trace events written */
  uint64_t mallocs;            /* '+' lines (realloc(NULL) included), and
                                  with lenient unmatched reallocs */
  uint64_t frees;              /* '-' lines of live addresses */
  uint64_t reallocs;           /* '<' '>' pairs of live addresses */
  uint64_t failed;             /* '+ (nil)' and '!' lines (nothing changes) */
  uint64_t null_frees;         /* '- (nil)' lines (nothing to free) */
  uint64_t unmatched_frees;    /* lenient: '-' of an unknown address, skipped */
  uint64_t unmatched_reallocs; /* lenient: '<' of an unknown address; the
                                  '>' became a malloc */
  uint64_t reused_live;        /* lenient: an address allocated again while
                                  live; its old object was freed first */
  uint64_t live_at_end;        /* objects never freed */
  uint64_t max_live_ids;       /* peak live objects = ids used */
  bool     saw_end;            /* the log has its '= End' line */
};

/* Reads an mtrace log from in (named name in messages) to its end and
 * writes the events to w.  Does not close in or w.  Returns AS_OK, or
 * AS_EFORMAT with "NAME:LINE: expected ..., got '...'", AS_ENOMEM, AS_EIO,
 * or a writer's error.  *st is filled in on every path (so far as read). */
as_status_t import_mtrace_stream(FILE *in, const char *name, trace_writer_t *w,
                                 const import_mtrace_opts_t *opts,
                                 import_mtrace_stats_t *st, as_err_t *err);

/* Imports the log at in_path ("-" = stdin) into a new trace at out_path
 * ("-" = stdout) in format fmt, with provenance source=mtrace, input=IN_PATH,
 * clock=synthetic ...  out_path is written whole or not at all: on failure
 * it keeps what it held before (trace_writer_open). */
as_status_t import_mtrace_file(const char *in_path, const char *out_path,
                               trace_format_t              fmt,
                               const import_mtrace_opts_t *opts,
                               import_mtrace_stats_t *st, as_err_t *err);

#endif
