/* traces/import_util.h -- what the importers (import_mtrace.c,
 * import_heaptrack.c, import_malloclab.c) share: quoting input in
 * messages, the cost-model clock for logs without times, events a user
 * inserts where a log is silent (a marks file, --assume-trim-at), and
 * running an importer from one file into a new trace.
 *
 * Type map
 *   import_insert_t   one event to insert after an input line
 *   import_inserts_t  the list of them, sorted by line, with a cursor
 *   import_stream_fn  an importer's stream entry point, for import_run_file
 */
#ifndef ALLOCSIM_IMPORT_UTIL_H
#define ALLOCSIM_IMPORT_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "trace_io.h"

/* ---- Messages ----------------------------------------------------------- */

/* The longest line the line-oriented readers (mtrace and heaptrack logs,
 * marks files) take: far beyond any symbol or path they hold, and what the
 * text trace reader allows, so an endless line (/dev/zero, a binary file)
 * is an error, not a read that fills memory. */
#define IMPORT_LINE_MAX 1048576

/* getline with a bound: reads one line, its '\n' included, into *buf
 * (grown as getline does) and returns its length; -1 at end of file or on
 * a read error (ferror tells), -2 when the line runs past max bytes (the
 * rest of it is left unread).  NUL bytes are kept: compare strlen. */
ssize_t import_getline(char **buf, size_t *cap, FILE *in, size_t max);

/* Parses 1 to 16 hex digits (either case) at *p into *out and advances *p
 * past them; false (nothing advanced) if there are none or more than 16. */
bool import_hex(const char **p, uint64_t *out);

/* Sets provenance key to value as any trace format can carry it back: cut
 * to 255 bytes, control bytes (but tab) as '?', surrounding spaces
 * dropped (a command line or path read from another tool's file). */
as_status_t import_meta_put(trace_meta_t *m, const char *key, const char *value,
                            as_err_t *err);

/* Records the allocator settings among env ("NAME=VALUE" entries, NULL
 * at the end; capture_wire_env_knob says which names) as env.NAME
 * provenance; a name too long for a key (31 bytes:
 * TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES) goes into malloc_env as
 * "NAME=VALUE ...", which models/env.c reads too.  Names over 64 bytes
 * are no allocator's. */
as_status_t import_meta_put_env_knobs(trace_meta_t *m, char *const *env,
                                      as_err_t *err);

/* ---- Clock -------------------------------------------------------------- */

/* How far a synthetic clock advances after an event of op and size: tick_ns
 * if non-zero, else the cost model's (sim/cost.h) C free, or C malloc of
 * size bytes that the program then writes. */
uint64_t import_tick_ns(uint64_t tick_ns, trace_op_t op, uint64_t size);

/* Writes an event of op on object id (size bytes) at t_ns on thread 0 in
 * the raw domain to w, counting it in *events. */
as_status_t import_emit(trace_writer_t *w, uint64_t t_ns, trace_op_t op,
                        uint64_t id, uint64_t size, uint64_t *events,
                        as_err_t *err);

/* What the file drivers below pass an importer's stream function: its
 * options and statistics, typed by the importer. */
typedef struct import_job_s import_job_t;
struct import_job_s {
  const void *opts;
  void       *st;
};

/* ---- Inserted events ------------------------------------------------------
 * A log that does not record malloc_trim (mtrace, heaptrack) or marks can
 * have them restored by the user: each insert is emitted after input line
 * `after_line` has been applied (IMPORT_AT_END: after the last line), at the
 * time the importer has reached.  Marks-file syntax, one insert a line:
 *
 *   # comment
 *   AT  mark LABEL        AT: an input line number, or "end"
 *   AT  trim [PAD]        PAD: a size, default 0
 *   AT  idle DURATION     DURATION: "10ms", "2s", ...
 *
 * A '#' starts a comment after an event too (a label stops before it).
 */
#define IMPORT_AT_END UINT64_MAX

typedef struct import_insert_s import_insert_t;
struct import_insert_s {
  uint64_t after_line; /* input line, or IMPORT_AT_END */
  uint8_t  op;         /* TRACE_MARK, TRACE_TRIM or TRACE_IDLE */
  uint64_t size;       /* trim pad, idle ns */
  char     label[TRACE_LABEL_MAX + 1];
  uint64_t order;    /* position in the file / command line, for ties */
  char     from[96]; /* where it was asked for: "FILE:LINE" or the option */
};

typedef struct import_inserts_s import_inserts_t;
struct import_inserts_s {
  import_insert_t *v;
  size_t           n, cap;
  size_t           next;      /* first not yet emitted (after sorting) */
  uint64_t         last_line; /* the last input line emit was told of */
};

/* Adds "trim 0" after line (IMPORT_AT_END for the end). */
as_status_t import_inserts_add_trim(import_inserts_t *ins, uint64_t line,
                                    as_err_t *err);
/* Parses "LINE" (below 2^64 - 1) or "end" (an --assume-trim-at value);
 * false if neither. */
bool import_parse_at(const char *s, uint64_t *line);
/* Reads a marks file (syntax above).  AS_EFORMAT "PATH:LINE: expected ...,
 * got '...'" for a bad line, AS_EIO if it cannot be read. */
as_status_t import_inserts_read(import_inserts_t *ins, const char *path,
                                as_err_t *err);
/* Sorts by line (stable in the order given) and rewinds the cursor; call
 * once before importing. */
void import_inserts_sort(import_inserts_t *ins);
/* Writes, at time t_ns on thread 0, every insert due after input line
 * `line` (IMPORT_AT_END: all that remain; one asked for after a line the
 * input did not have is an AS_EFORMAT error naming where it was asked
 * for); *emitted counts them.  Events written after an idle through the
 * importer's writer (import_writer_open) move later by its length. */
as_status_t import_inserts_emit(import_inserts_t *ins, uint64_t line,
                                uint64_t t_ns, trace_writer_t *w,
                                uint64_t *emitted, as_err_t *err);
void        import_inserts_free(import_inserts_t *ins);

/* ---- Output ------------------------------------------------------------
 * An importer learns provenance from a log's own header (heaptrack's
 * version, command line and page size) before its first event, but a trace
 * writes its header first.  So importers write through a deferred writer:
 * it creates the real writer, with *meta as it is then, at the first event
 * (or at close, for a log with none).  The importer adds to *meta until
 * then; later additions are ignored. */
as_status_t import_writer_open(const char *path, trace_format_t fmt,
                               trace_meta_t *meta, trace_writer_t **out,
                               as_err_t *err);
/* The same over an open stream f, which the writer then owns (tests). */
as_status_t import_writer_open_stream(FILE *f, const char *name,
                                      trace_format_t fmt, trace_meta_t *meta,
                                      trace_writer_t **out, as_err_t *err);

/* ---- Running an importer on files -------------------------------------- */

/* Reads in (decompressed, named name in messages) to its end, writing
 * events to w, a deferred writer over meta (above); user is the importer's
 * own state (options and statistics). */
typedef as_status_t (*import_stream_fn)(FILE *in, const char *name,
                                        trace_writer_t *w, trace_meta_t *meta,
                                        void *user, as_err_t *err);

/* Opens in_path ("-" = stdin) through traces/compressed.h, adds
 * input=IN_PATH and, for a compressed file, compression=KIND to meta, runs
 * fn with a deferred writer creating out_path ("-" = stdout) in format fmt,
 * and closes both.  A decompression error wins over the parser's message
 * (it is the cause).  On failure out_path keeps what it held before (the
 * trace writer writes whole files or none). */
as_status_t import_run_file(const char *in_path, const char *out_path,
                            trace_format_t fmt, trace_meta_t *meta,
                            import_stream_fn fn, void *user, as_err_t *err);

#endif
