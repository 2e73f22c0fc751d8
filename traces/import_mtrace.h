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
 *
 * What the log does not record, so the import cannot reproduce: malloc_trim
 * (glibc 2.36 malloc/mtrace-impl.c hooks malloc, free, realloc and the
 * memalign family only) and threads.  A user restores trims and marks with
 * opts.inserts (an --assume-trim-at position or a marks file,
 * traces/import_util.h).  Threads leave a sign the importer counts: a
 * block smaller than glibc's smallest mmap threshold (128 KiB,
 * malloc/malloc.c:1002 DEFAULT_MMAP_THRESHOLD_MIN) far from the main heap
 * came from another thread's arena (heaps are mmap'd HEAP_MAX_SIZE-aligned
 * regions, arena.c:445-525, nowhere near the brk heap).
 */
#ifndef ALLOCSIM_IMPORT_MTRACE_H
#define ALLOCSIM_IMPORT_MTRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "import_util.h"
#include "trace_io.h"

/* Smaller blocks farther than this from the log's first small block are
 * counted as another arena's: the brk heap and the mmap area lie
 * terabytes apart on x86-64 Linux, a heap spans at most what was brk'd. */
#define IMPORT_MTRACE_ARENA_DISTANCE (UINT64_C(1) << 30)

typedef struct import_mtrace_opts_s import_mtrace_opts_t;
struct import_mtrace_opts_s {
  bool     lenient;          /* skip and count unmatched frees / reallocs */
  uint64_t tick_ns;          /* synthetic clock step per event; 0 = the cost
                                model's C malloc (with writes) and free times */
  import_inserts_t *inserts; /* events to insert after log lines (sorted
                                by import_inserts_sort); may be NULL */
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
  uint64_t inserted;           /* events from opts.inserts */
  uint64_t other_arena_blocks; /* blocks < 128 KiB far from the main heap:
                                  allocated by other threads */
  uint64_t first_other_arena_line; /* where the first of them was, or 0 */
  bool     saw_end;                /* the log has its '= End' line */
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
