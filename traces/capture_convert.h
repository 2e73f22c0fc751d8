/* traces/capture_convert.h -- the raw log of liballocsim_capture.so into an
 * allocsim trace (addresses to dense recycled ids, per-thread chunks merged
 * by sequence number, measured RSS net of the library's own pages).
 */
#ifndef ALLOCSIM_CAPTURE_CONVERT_H
#define ALLOCSIM_CAPTURE_CONVERT_H

#include <stdint.h>

#include "event.h"

typedef struct capture_convert_stats_s capture_convert_stats_t;
struct capture_convert_stats_s {
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
 * and leaves out_path as it was (written whole or not at all). */
as_status_t capture_convert(const char *raw_path, const char *out_path,
                                   const trace_meta_t     *meta,
                                   capture_convert_stats_t *st, as_err_t *err);

#endif
