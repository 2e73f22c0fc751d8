/* traces/trace_io.c -- opening traces in either format, and the event check
 * both writers share.
 *
 * trace_open reads the first 8 bytes and picks the reader: the binary magic
 * "ASTRACE\0" or text starting "allocsim-trace".  Anything else goes to the
 * reader the file name implies, so a damaged file still gets that format's
 * precise message ("not an allocsim binary trace" for a .astrace, "expected
 * header 'allocsim-trace 1'" otherwise).  Peeked bytes are handed to the
 * reader rather than seeking back, so stdin and pipes work too.
 *
 * A trace compressed with zstd or gzip (`zstd FILE.astrace`) is read as it
 * is, through traces/compressed.c: a stored trace takes a tenth of the
 * room or less, and the reader still holds only its window.  Byte offsets
 * in messages are then offsets in the decompressed bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../sim/atomic_file.h"

#include "compressed.h"
#include "trace_io.h"

#define MAGIC_LEN 8

trace_format_t trace_format_from_path(const char *path) {
  static const char ext[] = ".astrace";
  size_t            n = strlen(path), e = sizeof ext - 1;
  return n >= e && strcmp(path + n - e, ext) == 0 ? TRACE_FORMAT_BINARY
                                                  : TRACE_FORMAT_TEXT;
}

const char *trace_quote(const char *s, size_t len, char out[TRACE_QUOTE_MAX]) {
  char *o = out;
  for (size_t i = 0; i < len && i < TRACE_QUOTE_BYTES; i++) {
    unsigned char b = (unsigned char)s[i];
    if (b < 0x20 || b >= 0x7f)
      o += sprintf(o, "\\x%02x", b);
    else
      *o++ = (char)b;
  }
  strcpy(o, len > TRACE_QUOTE_BYTES ? "..." : "");
  return out;
}

as_status_t trace_open_stream(FILE *f, const char *name, trace_source_t **out,
                              as_err_t *err) {
  *out = NULL;
  unsigned char head[MAGIC_LEN];
  size_t        n = fread(head, 1, sizeof head, f);
  if (n < sizeof head && ferror(f)) {
    if (f != stdin)
      fclose(f);
    return as_err_set(err, AS_EIO, "%s: read error: %s", name, strerror(errno));
  }
  static const char magic[MAGIC_LEN] = "ASTRACE"; /* + NUL */
  static const char text[] = "allocsim-trace";
  bool              binary;
  if (n == MAGIC_LEN && memcmp(head, magic, MAGIC_LEN) == 0)
    binary = true;
  else if (n >= MAGIC_LEN && memcmp(head, text, MAGIC_LEN) == 0)
    binary = false;
  else
    binary = trace_format_from_path(name) == TRACE_FORMAT_BINARY;
  if (binary)
    return trace_binary_open_stream(f, name, head, n, out, err);
  return trace_text_open_stream(f, name, head, n, out, err);
}

/* Whether f, positioned at its start, begins with a zstd frame or a gzip
 * member, leaving it at its start; true too when f cannot seek back (a
 * pipe), so that the decompressing stream, which serves the bytes it
 * peeked, reads it either way. */
static bool needs_cfile(FILE *f) {
  unsigned char head[4];
  if (fseek(f, 0, SEEK_CUR) != 0)
    return true;
  size_t n = fread(head, 1, sizeof head, f);
  if (fseek(f, 0, SEEK_SET) != 0)
    return true;
  clearerr(f);
  static const unsigned char zstd[4] = {0x28, 0xb5, 0x2f, 0xfd};
  return (n == 4 && memcmp(head, zstd, 4) == 0) ||
         (n >= 2 && head[0] == 0x1f && head[1] == 0x8b);
}

/* f read through traces/compressed.c: closing the stream closes f. */
static as_status_t open_decompressed(FILE *f, const char *name,
                                     trace_source_t **out, as_err_t *err) {
  cfile_t    *c;
  as_status_t rc = cfile_open_stream(f, name, &c, err);
  if (rc != AS_OK)
    return rc;
  return trace_open_stream(cfile_stream(c), name, out, err);
}

as_status_t trace_open(const char *path, trace_source_t **out, as_err_t *err) {
  *out = NULL;
  if (strcmp(path, "-") == 0)
    return open_decompressed(stdin, "<stdin>", out, err);
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return as_err_set(err, AS_EIO, "%s: cannot open: %s", path,
                      strerror(errno));
  if (needs_cfile(f))
    return open_decompressed(f, path, out, err);
  return trace_open_stream(f, path, out, err);
}

as_status_t trace_writer_open_stream(FILE *f, const char *name,
                                     trace_format_t      format,
                                     const trace_meta_t *meta,
                                     trace_writer_t **out, as_err_t *err) {
  if (format == TRACE_FORMAT_BINARY)
    return trace_binary_writer_open_stream(f, name, meta, out, err);
  if (format == TRACE_FORMAT_BINARY_V2)
    return trace_binary_writer_open_version(f, name, meta, 2, out, err);
  return trace_text_writer_open_stream(f, name, meta, out, err);
}

/* A writer opened by path: the format's writer on an atomic file, which
 * close commits and trace_writer_discard throws away. */
typedef struct file_writer_s file_writer_t;
struct file_writer_s {
  trace_writer_t  base;  /* must be first */
  trace_writer_t *inner; /* the format's writer; owns out.f */
  atomic_file_t   out;
};

static as_status_t file_write(trace_writer_t *w, const trace_event_t *ev,
                              as_err_t *err) {
  file_writer_t *fw = (file_writer_t *)w;
  return trace_writer_write(fw->inner, ev, err);
}

static as_status_t file_writer_close(trace_writer_t *w, as_err_t *err) {
  file_writer_t *fw = (file_writer_t *)w;
  as_status_t    rc = trace_writer_close(fw->inner, err);
  fw->out.f = NULL; /* closed, and checked, by the inner writer */
  if (rc == AS_OK)
    rc = atomic_file_commit(&fw->out, err);
  else
    atomic_file_discard(&fw->out);
  free(fw);
  return rc;
}

static const trace_writer_methods_t file_writer_methods = {
    .write = file_write,
    .close = file_writer_close,
};

void trace_writer_discard(trace_writer_t *w) {
  if (w == NULL)
    return;
  if (w->methods != &file_writer_methods) {
    (void)trace_writer_close(w, NULL);
    return;
  }
  file_writer_t *fw = (file_writer_t *)w;
  (void)trace_writer_close(fw->inner, NULL);
  fw->out.f = NULL;
  atomic_file_discard(&fw->out);
  free(fw);
}

as_status_t trace_writer_open(const char *path, trace_format_t format,
                              const trace_meta_t *meta, trace_writer_t **out,
                              as_err_t *err) {
  *out = NULL;
  if (strcmp(path, "-") == 0)
    return trace_writer_open_stream(stdout, "<stdout>", format, meta, out, err);
  file_writer_t *fw = calloc(1, sizeof *fw);
  if (fw == NULL)
    return as_err_set(err, AS_ENOMEM, "%s: out of memory", path);
  fw->base.methods = &file_writer_methods;
  as_status_t rc = atomic_file_open(&fw->out, path, err);
  if (rc == AS_OK) {
    rc = trace_writer_open_stream(fw->out.f, path, format, meta, &fw->inner,
                                  err);
    if (rc != AS_OK) {
      fw->out.f = NULL; /* the failed open closed it */
      atomic_file_discard(&fw->out);
    }
  }
  if (rc != AS_OK) {
    free(fw);
    return rc;
  }
  *out = &fw->base;
  return AS_OK;
}

/* ---- Patching a header value ----------------------------------------- */

/* Offset of key's value in a binary header (binary.c: magic, u16 version,
 * then klen key vlen value pairs as varints, klen 0 ending them), or -1. */
static long binary_value_at(const unsigned char *h, size_t n, const char *key,
                            size_t *vlen) {
  size_t i = MAGIC_LEN + 2, kl = strlen(key);
  while (i < n && h[i] != 0) {
    uint64_t len[2];
    size_t   at[2];
    for (int k = 0; k < 2; k++) {
      len[k] = 0;
      for (unsigned shift = 0; i < n && shift < 64; shift += 7) {
        len[k] |= (uint64_t)(h[i] & 0x7f) << shift;
        if (h[i++] < 0x80)
          break;
      }
      at[k] = i;
      if (len[k] > n - i)
        return -1;
      i += (size_t)len[k];
    }
    if (len[0] == kl && memcmp(h + at[0], key, kl) == 0) {
      *vlen = (size_t)len[1];
      return (long)at[1];
    }
  }
  return -1;
}

/* Offset of key's value in a text header ("#@ key=value" lines, as
 * text.c writes them, before the first event), or -1. */
static long text_value_at(const unsigned char *h, size_t n, const char *key,
                          size_t *vlen) {
  size_t kl = strlen(key);
  for (size_t i = 0; i < n;) {
    const unsigned char *nl = memchr(h + i, '\n', n - i);
    size_t               end = nl ? (size_t)(nl - h) : n;
    if (end - i > 3 + kl && memcmp(h + i, "#@ ", 3) == 0 &&
        memcmp(h + i + 3, key, kl) == 0 && h[i + 3 + kl] == '=') {
      *vlen = end - (i + 4 + kl);
      return (long)(i + 4 + kl);
    }
    if (i > 0 && h[i] != '#')
      break; /* the first event: the header is over */
    i = end + 1;
  }
  return -1;
}

as_status_t trace_patch_meta(const char *path, const char *key,
                             const char *value, as_err_t *err) {
  /* A header is at most 32 pairs of 1 + 31 + 2 + 255 bytes. */
  unsigned char h[16384];
  int           fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return as_err_set(err, AS_EIO, "%s: cannot open: %s", path,
                      strerror(errno));
  ssize_t     n = pread(fd, h, sizeof h, 0);
  size_t      vlen = 0;
  long        at = -1;
  as_status_t rc = AS_OK;
  if (n >= MAGIC_LEN && memcmp(h, "ASTRACE", MAGIC_LEN) == 0)
    at = binary_value_at(h, (size_t)n, key, &vlen);
  else if (n > 0)
    at = text_value_at(h, (size_t)n, key, &vlen);
  if (n < 0)
    rc = as_err_set(err, AS_EIO, "%s: read error: %s", path, strerror(errno));
  else if (at < 0)
    rc = as_err_set(err, AS_EFORMAT, "%s: no provenance key '%s' to update",
                    path, key);
  else if (vlen != strlen(value))
    rc = as_err_set(err, AS_EFORMAT,
                    "%s: provenance %s has %zu bytes, the new value %zu", path,
                    key, vlen, strlen(value));
  else if (pwrite(fd, value, vlen, at) != (ssize_t)vlen)
    rc = as_err_set(err, AS_EIO, "%s: write error: %s", path, strerror(errno));
  close(fd);
  return rc;
}
