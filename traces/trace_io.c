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
 *
 * A trace_input_t copies an input that gives its bytes once (stdin, a pipe,
 * a FIFO) into a file without a name (O_TMPFILE), and opens that copy
 * afresh through /proc/self/fd for every reader.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

static const char          k_binary_magic[MAGIC_LEN] = "ASTRACE"; /* + NUL */
static const char          k_text_magic[] = "allocsim-trace";
static const unsigned char k_zstd_magic[4] = {0x28, 0xb5, 0x2f, 0xfd};

/* Whether the n bytes at head begin a zstd frame or a gzip member. */
static bool is_compressed(const unsigned char *head, size_t n) {
  return (n >= 4 && memcmp(head, k_zstd_magic, 4) == 0) ||
         (n >= 2 && head[0] == 0x1f && head[1] == 0x8b);
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
  bool binary;
  if (n == MAGIC_LEN && memcmp(head, k_binary_magic, MAGIC_LEN) == 0)
    binary = true;
  else if (n >= MAGIC_LEN && memcmp(head, k_text_magic, MAGIC_LEN) == 0)
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
  return is_compressed(head, n);
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

/* The file f at its start, compressed or not, as the trace name. */
static as_status_t open_file(FILE *f, const char *name, trace_source_t **out,
                             as_err_t *err) {
  if (needs_cfile(f))
    return open_decompressed(f, name, out, err);
  return trace_open_stream(f, name, out, err);
}

as_status_t trace_open(const char *path, trace_source_t **out, as_err_t *err) {
  *out = NULL;
  if (strcmp(path, "-") == 0)
    return open_decompressed(stdin, "<stdin>", out, err);
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return as_err_set(err, AS_EIO, "%s: cannot open: %s", path,
                      strerror(errno));
  return open_file(f, path, out, err);
}

/* ---- A trace read more than once -------------------------------------- */

/* The copy's unit; also all that is copied of an input that cannot be a
 * trace (stdin from /dev/zero): the readers' header errors need no more. */
#define SPOOL_BLOCK (64 * 1024)

/* The input's name, the directory of the copy, the reason. */
#define SPOOL_FAILED                                                           \
  "%s: cannot copy it into a temporary file in %s (it is read more than "      \
  "once; TMPDIR sets where): %s"

/* Whether the n bytes at head, an input's first, may begin a trace. */
static bool may_be_trace(const unsigned char *head, size_t n) {
  size_t k = n < MAGIC_LEN ? n : MAGIC_LEN;
  return memcmp(head, k_binary_magic, k) == 0 ||
         memcmp(head, k_text_magic, k) == 0 || is_compressed(head, n);
}

bool trace_path_reads_once(const char *path) {
  struct stat st;
  return strcmp(path, "-") == 0 ||
         (stat(path, &st) == 0 &&
          (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)));
}

static const char *input_name(const trace_input_t *in) {
  return strcmp(in->path, "-") == 0 ? "<stdin>" : in->path;
}

static bool write_all(int fd, const unsigned char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

/* Copies from into fd, the temporary file in dir. */
static as_status_t spool_copy(FILE *from, const char *name, const char *dir,
                              int fd, as_err_t *err) {
  unsigned char *buf = malloc(SPOOL_BLOCK);
  if (buf == NULL)
    return as_err_set(err, AS_ENOMEM, "%s: out of memory", name);
  as_status_t rc = AS_OK;
  size_t      n;
  for (bool first = true;
       rc == AS_OK && (n = fread(buf, 1, SPOOL_BLOCK, from)) > 0;
       first = false) {
    if (!write_all(fd, buf, n))
      rc = as_err_set(err, AS_EIO, SPOOL_FAILED, name, dir, strerror(errno));
    else if (first && !may_be_trace(buf, n))
      break;
  }
  if (rc == AS_OK && ferror(from))
    rc = as_err_set(err, AS_EIO, "%s: read error: %s", name, strerror(errno));
  free(buf);
  return rc;
}

/* Copies from into a file under $TMPDIR (or /tmp) that has no name, so
 * that nothing is left behind whatever ends the process. */
static as_status_t spool(trace_input_t *in, FILE *from, as_err_t *err) {
  const char *dir = getenv("TMPDIR");
  if (dir == NULL || dir[0] == '\0')
    dir = "/tmp";
  int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    return as_err_set(err, AS_EIO, SPOOL_FAILED, input_name(in), dir,
                      strerror(errno));
  as_status_t rc = spool_copy(from, input_name(in), dir, fd, err);
  if (rc != AS_OK) {
    close(fd);
    return rc;
  }
  in->spool_fd = fd;
  in->spooled = true;
  return AS_OK;
}

as_status_t trace_input_open(trace_input_t *in, const char *path,
                             as_err_t *err) {
  memset(in, 0, sizeof *in);
  in->path = path;
  if (!trace_path_reads_once(path))
    return AS_OK; /* read in place; trace_open names a missing file */
  bool  is_stdin = strcmp(path, "-") == 0;
  FILE *from = is_stdin ? stdin : fopen(path, "rb");
  if (from == NULL)
    return as_err_set(err, AS_EIO, "%s: cannot open: %s", path,
                      strerror(errno));
  as_status_t rc = spool(in, from, err);
  if (!is_stdin)
    fclose(from);
  return rc;
}

as_status_t trace_input_source(const trace_input_t *in, trace_source_t **out,
                               as_err_t *err) {
  if (!in->spooled)
    return trace_open(in->path, out, err);
  *out = NULL;
  /* A fresh open of the copy, not a dup of its descriptor: each source
   * has its own offset, and replay keeps one open while the next reads. */
  char copy[64];
  snprintf(copy, sizeof copy, "/proc/self/fd/%d", in->spool_fd);
  FILE *f = fopen(copy, "rb");
  if (f == NULL)
    return as_err_set(err, AS_EIO, "%s: cannot read its copy %s again: %s",
                      input_name(in), copy, strerror(errno));
  return open_file(f, input_name(in), out, err);
}

void trace_input_close(trace_input_t *in) {
  if (in->spooled)
    close(in->spool_fd);
  in->spooled = false;
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
