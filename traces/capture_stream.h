/* traces/capture_stream.h -- one captured process image's wire stream
 * (traces/capture/capture_wire.h) into an allocsim trace: records merged by
 * sequence number in a bounded window, addresses turned into dense recycled
 * ids, measured RSS net of the recorder's own pages, touch records checked
 * against the object they name.
 *
 * Type map
 *   capture_stats_t   what one stream held and how it ended
 *   capture_stream_t  the converter (opaque)
 */
#ifndef ALLOCSIM_CAPTURE_STREAM_H
#define ALLOCSIM_CAPTURE_STREAM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "capture/capture_wire.h"
#include "trace_io.h"

typedef struct capture_stats_s capture_stats_t;
struct capture_stats_s {
  uint64_t events;              /* trace events written */
  uint64_t alloc_events;        /* of which malloc-family and free */
  uint64_t touch_events;        /* of which touch */
  uint64_t purge_events;        /* purge (mallctl, mi_collect, ...) */
  uint64_t option_events;       /* option (mallopt, mallctl writes) */
  uint64_t placements;          /* option placed.*: where pymalloc mapped
                                   its arenas */
  uint64_t sites;               /* call sites defined (capture --stacks) */
  uint64_t modules;             /* modules their frames lie in */
  uint64_t trims;               /* malloc_trim calls */
  uint64_t threads;             /* threads besides the first that recorded */
  uint64_t unmatched_frees;     /* free of an address never allocated */
  uint64_t unmatched_reallocs;  /* realloc of such an address: new object */
  uint64_t missed_frees;        /* address returned while still live */
  uint64_t dropped_touches;     /* touch of an address not live, or beyond
                                   its object (a free the table missed) */
  uint64_t late_records;        /* arrived below a released watermark, or
                                   forced out by a full window: written in
                                   arrival order */
  uint64_t untracked_mmaps;     /* the program's own mappings beyond the
                                   recorder's table: their pages are not
                                   counted as other (traces/capture/
                                   progmap.c) */
  uint64_t mimalloc_hint_start; /* where mimalloc's aligned hints started
                                   (traces/mi_hint_area.h), 0 unknown */
  uint64_t wire_bytes;          /* bytes received */
  uint64_t messages;            /* messages received */
  uint64_t baseline_rss_bytes;  /* first measured sample (overhead removed) */
  uint64_t overhead_max_bytes;  /* the recorder's own resident bytes */
  uint64_t peak_rss_bytes;      /* largest measured sample (overhead removed) */
  uint64_t final_rss_bytes;     /* last measured sample (overhead removed) */
  uint64_t max_live_ids;        /* peak number of live objects */
  uint64_t pid, ppid;           /* of the process that sent the stream */
  uint64_t touch_threshold;     /* as the recorder used it; 0 = off */
  uint64_t stacks;              /* return addresses per allocation; 0 = off */
  bool     said_bye;            /* BYE or EXEC came: a clean end */
  bool     said_exec;           /* EXEC was the last word */
  char     exec_untraced[256];  /* set by capture_run: the image it exec'd
                                   (or "") sent no stream of its own */
  bool python_debug_hooks;      /* CPython's debug hooks were under the
                                   domains (capture.c py_note_debug_hooks) */
  char python[32];              /* CPython version the hook saw, or "" */
  char exe[128];                /* the image's executable */
  char own_malloc[128];         /* where its malloc was bound ahead of the
                                   recorder's (the calls were not seen), or "" */
};

typedef struct capture_stream_s capture_stream_t;

/* Decodes the HELLO message (the first of every connection) into *h.
 * AS_EFORMAT naming name and what was expected otherwise. */
as_status_t capture_hello_decode(const void *msg, size_t len, const char *name,
                                 capture_hello_t *h, as_err_t *err);

/* "3.11.2" for CPython's PY_VERSION_HEX 0x030B02F0 (pre-releases get their
 * level and serial: "3.13.0rc1"). */
void capture_python_version(uint64_t hex, char *buf, size_t len);

/* "2.0.9" for mimalloc's mi_version() 209, "3.0.10" for 3010, "3.4.3" for
 * 30403 (the spelling the mimalloc model's version option takes). */
void capture_mimalloc_version(uint32_t v, char *buf, size_t len);

/* "2.16" for gperftools' tc_version() as major * 100 + minor, 216 (the
 * spelling the tcmalloc model's version option takes). */
void capture_tcmalloc_version(uint32_t v, char *buf, size_t len);

/* "5.2.1" for jemalloc's version as major * 10000 + minor * 100 + patch,
 * 50201 (the spelling the jemalloc model's version option takes). */
void capture_jemalloc_version(uint32_t v, char *buf, size_t len);

/* A converter for the stream that said *hello, writing its trace to out
 * (which it takes over and closes) in format, with provenance meta; name is
 * what messages call the stream. */
as_status_t capture_stream_open(const capture_hello_t *hello, FILE *out,
                                const char *name, trace_format_t fmt,
                                const trace_meta_t *meta, capture_stream_t **s,
                                as_err_t *err);

/* Feeds one message after HELLO.  CHUNK and WATERMARK write what became
 * releasable; a malformed message is AS_EFORMAT naming the stream, the
 * message number and the byte offset in it. */
as_status_t capture_stream_feed(capture_stream_t *s, const void *msg,
                                size_t len, as_err_t *err);

/* Writes everything still held (in seq order), closes the trace and frees
 * s; *st (may be NULL) gets the stream's statistics.  A failure to write
 * is reported but s is freed all the same. */
as_status_t capture_stream_close(capture_stream_t *s, capture_stats_t *st,
                                 as_err_t *err);

/* Statistics so far (for progress and the disk guard). */
const capture_stats_t *capture_stream_stats(const capture_stream_t *s);

#endif
