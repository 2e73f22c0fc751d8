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
  TRACE_FORMAT_BINARY
} trace_format_t;

/* Opens path, detecting the format from its first bytes ("-" = stdin). */
as_status_t trace_open(const char *path, trace_source_t **out, as_err_t *err);
as_status_t trace_text_open(const char *path, trace_source_t **out,
                            as_err_t *err);
as_status_t trace_binary_open(const char *path, trace_source_t **out,
                              as_err_t *err);

/* Creates path ("-" = stdout) and writes the header with meta. */
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

/* The format a file name implies: .astrace is binary, anything else text. */
trace_format_t trace_format_from_path(const char *path);

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
                                     trace_format_t format,
                                     const trace_meta_t *meta,
                                     trace_writer_t **out, as_err_t *err);
as_status_t trace_text_writer_open_stream(FILE *f, const char *name,
                                          const trace_meta_t *meta,
                                          trace_writer_t **out, as_err_t *err);
as_status_t trace_binary_writer_open_stream(FILE *f, const char *name,
                                            const trace_meta_t *meta,
                                            trace_writer_t **out,
                                            as_err_t *err);


#endif
