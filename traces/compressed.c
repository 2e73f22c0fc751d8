/* traces/compressed.c -- a file that may be zstd- or gzip-compressed, read
 * as a plain stdio stream (fopencookie over libzstd's streaming decoder or
 * zlib's inflate).
 *
 * Why both libraries: heaptrack compresses with zstd when it was built with
 * it and the zstd tool is installed, and with gzip otherwise (heaptrack 1.4
 * src/track/heaptrack.sh.cmake:257-264), so a file handed over from another
 * machine may be either.  Debian's libzstd and zlib do the decoding; the
 * raw inflate interface (not gzread) is used so that stdin, whose first
 * bytes were already read to detect the format, works the same way.
 *
 * Truncation: a zstd frame or gzip member that the input ends inside is an
 * error (ZSTD_decompressStream's hint is non-zero; inflate has not reached
 * Z_STREAM_END), so a file cut short in transfer is never read as a short
 * but valid log.  Several zstd frames or gzip members in a row are read
 * one after another, as the zstd and gzip tools do.
 */
#include "compressed.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <zlib.h>
#include <zstd.h>

#define CFILE_INBUF (64 * 1024)

struct cfile_s {
  FILE         *raw;    /* the file as stored */
  FILE         *stream; /* the decompressed bytes (fopencookie) */
  bool          owns_raw;
  cfile_kind_t  kind;
  char          name[256];
  uint8_t       prefix[4]; /* magic bytes read to detect the format */
  size_t        prefix_len, prefix_pos;
  uint8_t      *in; /* compressed input window */
  size_t        in_len, in_pos;
  uint64_t      consumed; /* compressed bytes consumed */
  ZSTD_DStream *zd;
  size_t        zstd_hint; /* 0 at a frame boundary */
  z_stream      z;
  bool          z_ready;
  bool          gz_member_done; /* at a member boundary */
  as_status_t   status;
  char          msg[400];
};

const char *cfile_kind_name(cfile_kind_t k) {
  return k == CFILE_ZSTD ? "zstd" : k == CFILE_GZIP ? "gzip" : "none";
}

/* ---- Input -------------------------------------------------------------- */

static ssize_t fail(cfile_t *c, as_status_t code, const char *what) {
  c->status = code;
  (void)as_format_fits(c->msg, sizeof c->msg,
                       "%s: %s at compressed byte %" PRIu64, c->name, what,
                       c->consumed);
  errno = EBADMSG; /* what a reader holding only the stream can say */
  return -1;
}

/* Reads more compressed bytes into the window (the magic bytes first);
 * false at end of file or on a read error (c->status then set). */
static bool refill(cfile_t *c) {
  if (c->prefix_pos < c->prefix_len) {
    size_t n = c->prefix_len - c->prefix_pos;
    memcpy(c->in, c->prefix + c->prefix_pos, n);
    c->prefix_pos = c->prefix_len;
    c->in_len = n;
    c->in_pos = 0;
    return true;
  }
  size_t n = fread(c->in, 1, CFILE_INBUF, c->raw);
  if (n == 0) {
    if (ferror(c->raw)) {
      c->status = AS_EIO;
      (void)as_format_fits(c->msg, sizeof c->msg, "%s: read error: %s", c->name,
                           strerror(errno));
    }
    return false;
  }
  c->in_len = n;
  c->in_pos = 0;
  return true;
}

static ssize_t read_plain(cfile_t *c, char *buf, size_t size) {
  if (c->in_pos == c->in_len && !refill(c))
    return c->status != AS_OK ? (errno = EIO, -1) : 0;
  size_t n = c->in_len - c->in_pos < size ? c->in_len - c->in_pos : size;
  memcpy(buf, c->in + c->in_pos, n);
  c->in_pos += n;
  c->consumed += n;
  return (ssize_t)n;
}

static ssize_t read_zstd(cfile_t *c, char *buf, size_t size) {
  for (;;) {
    ZSTD_inBuffer  in = {c->in, c->in_len, c->in_pos};
    ZSTD_outBuffer out = {buf, size, 0};
    size_t         r = ZSTD_decompressStream(c->zd, &out, &in);
    bool           progress = in.pos > c->in_pos || out.pos > 0;
    c->consumed += in.pos - c->in_pos;
    c->in_pos = in.pos;
    if (ZSTD_isError(r)) {
      char what[200];
      snprintf(what, sizeof what, "zstd: %s", ZSTD_getErrorName(r));
      return fail(c, AS_EFORMAT, what);
    }
    /* Only a call that did something says where the stream stands: at a
     * frame's end a call with no input already asks for the next frame's
     * header (non-zero). */
    if (progress)
      c->zstd_hint = r;
    if (out.pos > 0)
      return (ssize_t)out.pos;
    if (c->in_pos < c->in_len)
      continue;
    if (!refill(c)) {
      if (c->status != AS_OK)
        return errno = EIO, -1;
      if (c->zstd_hint != 0)
        return fail(c, AS_EFORMAT, "zstd stream cut short (truncated file?)");
      return 0;
    }
  }
}

static ssize_t read_gzip(cfile_t *c, char *buf, size_t size) {
  for (;;) {
    if (c->in_pos == c->in_len && !refill(c)) {
      if (c->status != AS_OK)
        return errno = EIO, -1;
      if (!c->gz_member_done)
        return fail(c, AS_EFORMAT, "gzip stream cut short (truncated file?)");
      return 0;
    }
    c->z.next_in = c->in + c->in_pos;
    c->z.avail_in = (uInt)(c->in_len - c->in_pos);
    c->z.next_out = (Bytef *)buf;
    c->z.avail_out = (uInt)(size < UINT32_MAX ? size : UINT32_MAX);
    int    r = inflate(&c->z, Z_NO_FLUSH);
    size_t used = (c->in_len - c->in_pos) - c->z.avail_in;
    size_t made = (size < UINT32_MAX ? size : UINT32_MAX) - c->z.avail_out;
    c->in_pos += used;
    c->consumed += used;
    if (r == Z_STREAM_END) {
      c->gz_member_done = true;
      inflateReset(&c->z); /* another member may follow */
    } else if (r == Z_OK || r == Z_BUF_ERROR) {
      if (used > 0 || made > 0)
        c->gz_member_done = false;
    } else {
      char what[200];
      snprintf(what, sizeof what, "gzip: %s",
               c->z.msg ? c->z.msg : "corrupt data");
      return fail(c, AS_EFORMAT, what);
    }
    if (made > 0)
      return (ssize_t)made;
  }
}

static ssize_t cf_read(void *cookie, char *buf, size_t size) {
  cfile_t *c = cookie;
  if (c->status != AS_OK)
    return errno = EIO, -1;
  switch (c->kind) {
  case CFILE_ZSTD:
    return read_zstd(c, buf, size);
  case CFILE_GZIP:
    return read_gzip(c, buf, size);
  default:
    return read_plain(c, buf, size);
  }
}

static void cfile_free(cfile_t *c) {
  if (c->zd != NULL)
    ZSTD_freeDStream(c->zd);
  if (c->z_ready)
    inflateEnd(&c->z);
  if (c->owns_raw && c->raw != NULL)
    fclose(c->raw);
  free(c->in);
  free(c);
}

/* Closing the stream frees everything, so that a reader handed the stream
 * alone (trace_open) releases it with its fclose. */
static int cf_close(void *cookie) {
  cfile_free(cookie);
  return 0;
}

/* ---- Opening ------------------------------------------------------------ */

as_status_t cfile_open_stream(FILE *f, const char *name, cfile_t **out,
                              as_err_t *err) {
  *out = NULL;
  cfile_t *c = calloc(1, sizeof *c);
  uint8_t *in = malloc(CFILE_INBUF);
  if (c == NULL || in == NULL) {
    free(c);
    free(in);
    if (f != stdin)
      fclose(f);
    return as_err_set(err, AS_ENOMEM, "%s: out of memory", name);
  }
  c->raw = f;
  c->owns_raw = f != stdin;
  c->in = in;
  snprintf(c->name, sizeof c->name, "%s", name);
  c->prefix_len = fread(c->prefix, 1, sizeof c->prefix, f);
  static const uint8_t zstd_magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
  if (c->prefix_len == 4 && memcmp(c->prefix, zstd_magic, 4) == 0)
    c->kind = CFILE_ZSTD;
  else if (c->prefix_len >= 2 && c->prefix[0] == 0x1f && c->prefix[1] == 0x8b)
    c->kind = CFILE_GZIP;
  else
    c->kind = CFILE_PLAIN;
  as_status_t rc = AS_OK;
  if (ferror(f)) {
    rc = as_err_set(err, AS_EIO, "%s: read error: %s", name, strerror(errno));
  } else if (c->kind == CFILE_ZSTD) {
    c->zd = ZSTD_createDStream();
    if (c->zd == NULL || ZSTD_isError(ZSTD_initDStream(c->zd)))
      rc = as_err_set(err, AS_ENOMEM, "%s: cannot start zstd", name);
  } else if (c->kind == CFILE_GZIP) {
    /* 16 + MAX_WBITS: a gzip header and trailer (zlib.h inflateInit2). */
    if (inflateInit2(&c->z, 16 + MAX_WBITS) != Z_OK)
      rc = as_err_set(err, AS_ENOMEM, "%s: cannot start zlib", name);
    else
      c->z_ready = true;
  }
  if (rc == AS_OK) {
    cookie_io_functions_t io = {.read = cf_read, .close = cf_close};
    c->stream = fopencookie(c, "r", io);
    if (c->stream == NULL)
      rc = as_err_set(err, AS_ENOMEM, "%s: out of memory", name);
  }
  if (rc != AS_OK) {
    cfile_close(c);
    return rc;
  }
  *out = c;
  return AS_OK;
}

as_status_t cfile_open(const char *path, cfile_t **out, as_err_t *err) {
  *out = NULL;
  if (strcmp(path, "-") == 0)
    return cfile_open_stream(stdin, "<stdin>", out, err);
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return as_err_set(err, AS_EIO, "%s: %s", path, strerror(errno));
  return cfile_open_stream(f, path, out, err);
}

FILE *cfile_stream(cfile_t *c) {
  return c->stream;
}

cfile_kind_t cfile_kind(const cfile_t *c) {
  return c->kind;
}

as_status_t cfile_status(const cfile_t *c, as_err_t *err) {
  if (c->status == AS_OK)
    return AS_OK;
  return as_err_set(err, c->status, "%s", c->msg);
}

void cfile_close(cfile_t *c) {
  if (c == NULL)
    return;
  if (c->stream != NULL)
    fclose(c->stream); /* cf_close frees c */
  else
    cfile_free(c);
}
