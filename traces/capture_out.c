/* traces/capture_out.c -- guarded trace files (capture_out.h). */
#include "capture_out.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

typedef struct out_s out_t;
struct out_s {
  int              fd;
  capture_guard_t *g;
};

void capture_guard_init(capture_guard_t *g, const char *out_path,
                        uint64_t max_bytes, uint64_t min_free) {
  memset(g, 0, sizeof *g);
  g->max_bytes = max_bytes;
  g->min_free = min_free;
  const char *slash = strrchr(out_path, '/');
  if (slash == NULL)
    as_format_fits(g->dir, sizeof g->dir, ".");
  else if (slash == out_path)
    as_format_fits(g->dir, sizeof g->dir, "/");
  else
    as_format_fits(g->dir, sizeof g->dir, "%.*s", (int)(slash - out_path),
                   out_path);
  g->unchecked = CAPTURE_GUARD_CHECK_BYTES; /* check at the first write */
}

/* a + b, or UINT64_MAX where it would wrap: --min-free and
 * --max-trace-bytes take any 64-bit size. */
static uint64_t sum_sat(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t free_bytes(const capture_guard_t *g, bool *known) {
  struct statvfs v;
  *known = statvfs(g->dir, &v) == 0;
  return *known ? (uint64_t)v.f_bavail * v.f_frsize : 0;
}

capture_guard_trip_t capture_guard_poll(capture_guard_t *g,
                                        unsigned         open_traces) {
  if (g->tripped != CAPTURE_GUARD_OK)
    return g->tripped;
  uint64_t margin = (uint64_t)(open_traces + 1) * CAPTURE_GUARD_MARGIN;
  if (g->max_bytes != 0 && sum_sat(g->written, margin) > g->max_bytes) {
    as_format_fits(g->detail, sizeof g->detail,
                   "the traces reached --max-trace-bytes %" PRIu64
                   " bytes (less the room to close them)",
                   g->max_bytes);
    return g->tripped = CAPTURE_GUARD_LIMIT;
  }
  if (g->unchecked < CAPTURE_GUARD_CHECK_BYTES)
    return CAPTURE_GUARD_OK;
  bool     known;
  uint64_t avail = free_bytes(g, &known);
  g->unchecked = 0;
  if (!known)
    return CAPTURE_GUARD_OK; /* the writes themselves will tell */
  g->free_at_check = avail;
  if (avail <
      sum_sat(sum_sat(g->min_free, margin), CAPTURE_GUARD_CHECK_BYTES)) {
    as_format_fits(g->detail, sizeof g->detail,
                   "%s has %.1f MiB free, the guard keeps %.1f MiB "
                   "(--min-free)",
                   g->dir, (double)avail / 1048576.0,
                   (double)g->min_free / 1048576.0);
    return g->tripped = CAPTURE_GUARD_DISK;
  }
  return CAPTURE_GUARD_OK;
}

as_status_t capture_guard_check_start(capture_guard_t *g, as_err_t *err) {
  bool     known;
  uint64_t avail = free_bytes(g, &known);
  if (known && avail < sum_sat(g->min_free, CAPTURE_GUARD_CHECK_BYTES))
    return as_err_set(err, AS_EIO,
                      "%s has %.1f MiB free; the disk guard keeps %.1f MiB "
                      "(--min-free): not starting",
                      g->dir, (double)avail / 1048576.0,
                      (double)g->min_free / 1048576.0);
  return AS_OK;
}

/* A write past --max-trace-bytes is refused: the traces stay within it. */
static ssize_t out_write(void *cookie, const char *buf, size_t len) {
  out_t           *o = cookie;
  capture_guard_t *g = o->g;
  if (g->max_bytes != 0 && sum_sat(g->written, len) > g->max_bytes) {
    as_format_fits(g->detail, sizeof g->detail,
                   "the traces reached --max-trace-bytes %" PRIu64 " bytes",
                   g->max_bytes);
    g->tripped = CAPTURE_GUARD_LIMIT;
    errno = EFBIG;
    return -1;
  }
  size_t done = 0;
  while (done < len) {
    ssize_t n = write(o->fd, buf + done, len - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      as_format_fits(g->detail, sizeof g->detail, "writing in %s: %s", g->dir,
                     strerror(n < 0 ? errno : EIO));
      g->tripped = CAPTURE_GUARD_IO;
      return done > 0 ? (ssize_t)done : -1;
    }
    done += (size_t)n;
  }
  g->written += len;
  g->unchecked += len;
  return (ssize_t)len;
}

static int out_close(void *cookie) {
  out_t *o = cookie;
  int    rc = close(o->fd);
  free(o);
  return rc;
}

as_status_t capture_out_open(capture_guard_t *g, const char *path,
                             trace_format_t fmt, FILE **out, as_err_t *err) {
  *out = NULL;
  out_t *o = malloc(sizeof *o);
  if (o == NULL)
    return as_err_set(err, AS_ENOMEM, "%s: out of memory", path);
  o->g = g;
  o->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (o->fd < 0) {
    int e = errno;
    free(o);
    return as_err_set(err, AS_EIO, "%s: cannot create: %s", path, strerror(e));
  }
  cookie_io_functions_t fns = {.write = out_write, .close = out_close};
  FILE                 *f = fopencookie(o, "w", fns);
  if (f == NULL) {
    close(o->fd);
    free(o);
    return as_err_set(err, AS_ENOMEM, "%s: out of memory", path);
  }
  /* Binary: the writer buffers whole records; text: a buffer of lines. */
  if (fmt != TRACE_FORMAT_TEXT)
    setvbuf(f, NULL, _IONBF, 0);
  else
    setvbuf(f, NULL, _IOFBF, (size_t)1 << 16);
  *out = f;
  return AS_OK;
}
