/* traces/compressed.h -- reading a file that may be compressed, as a plain
 * stdio stream: zstd (libzstd) or gzip (zlib), told from the first bytes,
 * else the bytes as they are.  heaptrack writes its data files through
 * `zstd -c` or `gzip -c` (heaptrack 1.4 src/track/heaptrack.sh.cmake:257-
 * 264), so its importer reads them this way; any importer may.
 *
 * The stream is a fopencookie FILE, so parsers keep using getline.  A
 * decompression error or a compressed stream cut short makes the stream
 * report an error (ferror); cfile_status then says what went wrong and at
 * which compressed byte, so the message can name the place.
 */
#ifndef ALLOCSIM_COMPRESSED_H
#define ALLOCSIM_COMPRESSED_H

#include <stdint.h>
#include <stdio.h>

#include "../sim/status.h"

typedef struct cfile_s cfile_t;

typedef enum cfile_kind_e { CFILE_PLAIN, CFILE_ZSTD, CFILE_GZIP } cfile_kind_t;

/* Opens path ("-" = stdin, named "<stdin>") for reading, detecting the
 * compression from its magic bytes (zstd 28 b5 2f fd, gzip 1f 8b).  AS_EIO
 * naming the file if it cannot be opened; AS_ENOMEM. */
as_status_t cfile_open(const char *path, cfile_t **out, as_err_t *err);
/* Wraps f, which the cfile then owns (closes it unless it is stdin). */
as_status_t cfile_open_stream(FILE *f, const char *name, cfile_t **out,
                              as_err_t *err);
/* The decompressed bytes. */
FILE        *cfile_stream(cfile_t *c);
cfile_kind_t cfile_kind(const cfile_t *c);
/* "zstd", "gzip" or "none". */
const char *cfile_kind_name(cfile_kind_t k);
/* AS_OK, or after a read error the reason: AS_EFORMAT "NAME: zstd stream
 * cut short at compressed byte N (truncated file?)", a decompression error
 * from the library, or AS_EIO for the underlying read. */
as_status_t cfile_status(const cfile_t *c, as_err_t *err);
/* Closes the stream and the file. */
void cfile_close(cfile_t *c);

#endif
