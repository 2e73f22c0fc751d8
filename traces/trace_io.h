/* traces/trace_io.h -- opening trace files in either format.
 *
 * Text format (".trace"; grammar in traces/text.c's header and README):
 *   allocsim-trace 1
 *   #@ key=value                      provenance (header only)
 *   # comment
 *   T THREAD OP ARGS...               T: time (ns, or with ns/us/ms/s suffix)
 * Binary format (".astrace"; layout in traces/binary.c's header): magic,
 * version, provenance, then varint/delta-encoded records, read streaming.
 */
#ifndef ALLOCSIM_TRACE_IO_H
#define ALLOCSIM_TRACE_IO_H

#include <stdio.h>

#include "event.h"

typedef enum trace_format_e {
  TRACE_FORMAT_TEXT,
  TRACE_FORMAT_BINARY,   /* version 3, blocks (written by default) */
  TRACE_FORMAT_BINARY_V2 /* version 2, record after record: for allocsim
                            releases that read no version 3 */
} trace_format_t;

/* Opens path, detecting the format from its first bytes ("-" = stdin). */
as_status_t trace_open(const char *path, trace_source_t **out, as_err_t *err);
as_status_t trace_text_open(const char *path, trace_source_t **out,
                            as_err_t *err);
as_status_t trace_binary_open(const char *path, trace_source_t **out,
                              as_err_t *err);

/* A trace path that can be read more than once: replay (once per address
 * layout), explain, advise, map and report read their trace several times.
 * A path that gives its bytes once -- "-" (stdin), a FIFO, a pipe or
 * process substitution as /dev/fd/N, a terminal -- is copied once by
 * trace_input_open into a private temporary file under $TMPDIR (or /tmp)
 * that has no name, so it is gone when closed or whatever ends the process;
 * a regular file is read in place.  An input whose first bytes cannot
 * begin a trace is copied no further (the header error needs no more).
 * Sources are named as the path (stdin as "<stdin>"). */
/* Whether path gives its bytes once: "-", a FIFO or pipe (/dev/fd/N), a
 * character device such as a terminal.  Commands that keep a trace's path
 * to read it again later (sweep --resume, record's store) refuse those. */
bool trace_path_reads_once(const char *path);

typedef struct trace_input_s trace_input_t;
struct trace_input_s {
  const char *path;     /* as given */
  int         spool_fd; /* the copy, when spooled */
  bool        spooled;
};
/* AS_EIO naming the path if it cannot be read or copied.  Close with
 * trace_input_close, also after a failure; a zeroed one closes too. */
as_status_t trace_input_open(trace_input_t *in, const char *path,
                             as_err_t *err);
/* Opens (again) the input's events. */
as_status_t trace_input_source(const trace_input_t *in, trace_source_t **out,
                               as_err_t *err);
void        trace_input_close(trace_input_t *in);

/* Creates path ("-" = stdout) and writes the header with meta.  A path is
 * written whole or not at all (sim/atomic_file.h): trace_writer_close
 * makes the trace the file's contents only if every write and the close
 * succeeded, and trace_writer_discard throws the output away instead;
 * either way the previous file stays until then, and a device or FIFO is
 * written in place and never removed. */
as_status_t trace_writer_open(const char *path, trace_format_t format,
                              const trace_meta_t *meta, trace_writer_t **out,
                              as_err_t *err);

/* Replaces the value of provenance key in the header of the trace at path,
 * in place: value must have the length of the value it replaces (so a
 * writer can declare "truncated=1" first and say "0" once it knows).
 * AS_EFORMAT naming path if the header has no such key or the lengths
 * differ, AS_EIO if the file cannot be read or written. */
as_status_t trace_patch_meta(const char *path, const char *key,
                             const char *value, as_err_t *err);

/* Closes w without making its output the file's contents (for a failed
 * conversion): a path opened by trace_writer_open keeps what it held
 * before.  A writer on a stream is closed as usual.  NULL is a no-op. */
void trace_writer_discard(trace_writer_t *w);

/* A binary trace ends with an end record and a trailer (event count and
 * checksum); one cut short -- at a record boundary, inside a record or in
 * its trailer -- is an AS_EFORMAT error naming the byte offset.  After
 * trace_set_lenient(src, true) such a trace is read to its last whole
 * record instead, and trace_truncated(src) then says why it ended (for a
 * warning); NULL for a whole trace.  Other sources ignore both: a text
 * trace ends at its last line. */
void        trace_set_lenient(trace_source_t *src, bool lenient);
const char *trace_truncated(const trace_source_t *src);

/* The format a file name implies: .astrace is binary, anything else text. */
trace_format_t trace_format_from_path(const char *path);

/* The first TRACE_QUOTE_BYTES of s[0, len) as an error quotes them, "..."
 * after if there are more: control bytes, DEL and non-ASCII bytes as \xNN,
 * so that the message shows the bytes as they are in the file (not '?' for
 * a tab or a '\r') and a binary line cannot drive the terminal showing it
 * ('\' stays: label errors quote escapes such as \n).  Returns out. */
#define TRACE_QUOTE_BYTES 60
#define TRACE_QUOTE_MAX   (TRACE_QUOTE_BYTES * 4 + 4)
const char *trace_quote(const char *s, size_t len, char out[TRACE_QUOTE_MAX]);

/* ---- Streams already open ----------------------------------------------
 * For stdin, tests and fuzz targets (fmemopen).  The *_open_stream calls take
 * ownership of f whatever they return: the source or writer closes it (stdin
 * and stdout are flushed, never closed), and a failed open closes it at once.
 * name is what messages call the stream.  prefix holds the prefix_len bytes
 * already consumed from f (format detection); the reader sees them first. */
as_status_t trace_open_stream(FILE *f, const char *name, trace_source_t **out,
                              as_err_t *err);
as_status_t trace_text_open_stream(FILE *f, const char *name,
                                   const void *prefix, size_t prefix_len,
                                   trace_source_t **out, as_err_t *err);
as_status_t trace_binary_open_stream(FILE *f, const char *name,
                                     const void *prefix, size_t prefix_len,
                                     trace_source_t **out, as_err_t *err);
as_status_t trace_writer_open_stream(FILE *f, const char *name,
                                     trace_format_t      format,
                                     const trace_meta_t *meta,
                                     trace_writer_t **out, as_err_t *err);
/* The binary writer of a chosen version: 3 (blocks, the default) or 2
 * (one record after another, for readers older than version 3). */
as_status_t trace_binary_writer_open_version(FILE *f, const char *name,
                                             const trace_meta_t *meta,
                                             unsigned            version,
                                             trace_writer_t    **out,
                                             as_err_t           *err);
as_status_t trace_text_writer_open_stream(FILE *f, const char *name,
                                          const trace_meta_t *meta,
                                          trace_writer_t **out, as_err_t *err);
as_status_t trace_binary_writer_open_stream(FILE *f, const char *name,
                                            const trace_meta_t *meta,
                                            trace_writer_t    **out,
                                            as_err_t           *err);

#endif
