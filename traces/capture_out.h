/* traces/capture_out.h -- the files `allocsim capture` writes traces to,
 * behind a guard: every write is counted against --max-trace-bytes, and
 * the file system's free space is checked every CAPTURE_GUARD_CHECK_BYTES,
 * so recording stops cleanly, with a reason, before the disk fills.
 *
 * Two levels: capture_guard_poll, called between messages, stops early
 * enough (CAPTURE_GUARD_MARGIN per open trace) that every trace can still
 * be closed whole (its last buffer and end record); a write past
 * --max-trace-bytes all the same is refused outright.
 *
 * A binary trace goes out unbuffered (the writer's own 256 KiB buffer ends
 * at a record boundary), so a trace whose writer stopped -- the guard, or
 * allocsim capture killed -- ends at a record boundary and stays readable.
 */
#ifndef ALLOCSIM_CAPTURE_OUT_H
#define ALLOCSIM_CAPTURE_OUT_H

#include <stdint.h>
#include <stdio.h>

#include "trace_io.h"

#define CAPTURE_GUARD_CHECK_BYTES ((uint64_t)16 << 20)
/* Room a trace may still need after recording stops: the binary writer's
 * buffer, its end record, and one message's events. */
#define CAPTURE_GUARD_MARGIN ((uint64_t)320 << 10)

typedef enum capture_guard_trip_e {
  CAPTURE_GUARD_OK,
  CAPTURE_GUARD_DISK,  /* free space would fall below min_free */
  CAPTURE_GUARD_LIMIT, /* max_bytes would be exceeded */
  CAPTURE_GUARD_IO     /* a write failed */
} capture_guard_trip_t;

typedef struct capture_guard_s capture_guard_t;
struct capture_guard_s {
  uint64_t             max_bytes; /* 0 = no limit */
  uint64_t             min_free;  /* bytes kept free on dir's file system */
  uint64_t             written;   /* by every file of this guard */
  uint64_t             unchecked; /* written since the last statvfs */
  uint64_t             free_at_check;
  capture_guard_trip_t tripped;
  char                 dir[4096]; /* where the traces go */
  char                 detail[160];
};

/* Sets up a guard for traces written under the directory of out_path. */
void capture_guard_init(capture_guard_t *g, const char *out_path,
                        uint64_t max_bytes, uint64_t min_free);

/* Whether recording must stop now, with open traces still to close:
 * sets and returns g->tripped (checks free space every
 * CAPTURE_GUARD_CHECK_BYTES written). */
capture_guard_trip_t capture_guard_poll(capture_guard_t *g,
                                        unsigned         open_traces);

/* AS_EIO with the reason if the file system already has less free space
 * than the guard keeps (a capture would stop at once). */
as_status_t capture_guard_check_start(capture_guard_t *g, as_err_t *err);

/* Creates path (truncating it) as a stream whose writes go through g.
 * AS_EIO naming path if it cannot be created. */
as_status_t capture_out_open(capture_guard_t *g, const char *path,
                             trace_format_t fmt, FILE **out, as_err_t *err);

#endif
