/* traces/import_malloclab.h -- CS:APP malloc lab trace files (the .rep
 * files mdriver reads) into allocsim traces, so that course traces replay
 * against every model and on the real allocators (`allocsim oracle`).
 *
 * Format (mdriver.c read_trace; both the 2002 handout and the 2004-2015
 * Autolab one read four integers, then requests, all whitespace-separated):
 *   H0 NUM_IDS NUM_OPS H3    H0/H3: 2002: heap-size hint and weight;
 *                            Autolab: weight and ignore-ranges (unused here)
 *   a ID SIZE                malloc, remembered as block ID
 *   r ID SIZE                realloc of block ID
 *   f ID                     free of block ID (-1: free(NULL))
 * Semantics follow the Autolab driver (CS:APP3e malloclab-handout
 * mdriver.c:792-793 calloc's the block table, so a block never allocated is
 * NULL): realloc of such a block is realloc(NULL) = malloc, realloc to 0
 * frees it and stores the NULL it returns (mdriver.c:950-975), and free of
 * NULL (or of -1, mdriver.c:990-996) does nothing.  'a' on a live block
 * overwrites the driver's pointer, so the old block is never freed: it stays
 * live, counted as leaked.  Freeing or reallocating a freed block is an error
 * (the driver would pass a dangling pointer).  The driver writes every
 * block it gets (memset in 2002, randomize_block in Autolab), so every
 * allocation is written, as a trace assumes.  Times come from the cost
 * model (sim/cost.h), all on thread 0, raw domain.
 */
#ifndef ALLOCSIM_IMPORT_MALLOCLAB_H
#define ALLOCSIM_IMPORT_MALLOCLAB_H

#include <stdint.h>
#include <stdio.h>

#include "trace_io.h"

typedef struct import_malloclab_opts_s import_malloclab_opts_t;
struct import_malloclab_opts_s {
  uint64_t tick_ns; /* synthetic clock step; 0 = the cost model */
};

typedef struct import_malloclab_stats_s import_malloclab_stats_t;
struct import_malloclab_stats_s {
  uint64_t lines;        /* line of the last token read */
  uint64_t requests;     /* requests read (the header's NUM_OPS) */
  uint64_t num_ids;      /* the header's NUM_IDS */
  uint64_t events;       /* trace events written */
  uint64_t mallocs;      /* 'a', and 'r' of a NULL block */
  uint64_t reallocs;     /* 'r' of a live block to a non-zero size */
  uint64_t frees;        /* 'f' of a live block, 'r' to size 0 */
  uint64_t null_frees;   /* 'f' of -1 or of a NULL block */
  uint64_t leaked;       /* 'a' over a live block: the old one never freed */
  uint64_t live_at_end;  /* objects never freed (leaked ones included) */
  uint64_t max_live_ids; /* peak live objects = ids used */
};

/* Reads a malloc lab trace from in (named name in messages) and writes its
 * events to w; adds source, header and clock provenance to meta (may be
 * NULL) before the first event.  AS_EFORMAT "NAME:LINE: expected ..., got
 * '...'" for a malformed or inconsistent file (request count or id range
 * not what the header says). */
as_status_t import_malloclab_stream(FILE *in, const char *name,
                                    trace_writer_t *w, trace_meta_t *meta,
                                    const import_malloclab_opts_t *opts,
                                    import_malloclab_stats_t      *st,
                                    as_err_t                      *err);

/* The file form (in_path "-" = stdin, may be compressed; out_path "-" =
 * stdout); a failed import leaves no output. */
as_status_t import_malloclab_file(const char *in_path, const char *out_path,
                                  trace_format_t                 fmt,
                                  const import_malloclab_opts_t *opts,
                                  import_malloclab_stats_t *st, as_err_t *err);

#endif
