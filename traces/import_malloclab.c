/* traces/import_malloclab.c -- CS:APP malloc lab trace files into traces
 * (format and semantics in import_malloclab.h).
 *
 * Reading: mdriver reads the file with fscanf, so line breaks carry no
 * meaning; tokens are read one by one and each remembers its line for
 * messages.  Block ids map to dense recycled trace ids through
 * traces/addr_ids (the block id is the key), and freed block ids are
 * remembered in a hash set so that a second free is caught; memory grows
 * with the blocks in the file, never with the header's claims.
 */
#include "import_malloclab.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "addr_ids.h"
#include "import_util.h"

#define TOKEN_MAX 64

typedef struct lab_s lab_t;
struct lab_s {
  FILE                     *in;
  const char               *name;
  trace_writer_t           *w;
  import_malloclab_stats_t *st;
  uint64_t                  tick_ns;
  uint64_t                  t_ns;
  uint64_t                  line;     /* line of the current token */
  uint64_t                  pos_line; /* line the reader is on */
  bool                      eof;
  char                      tok[TOKEN_MAX];
  size_t                    tok_len;   /* strlen falls short at a NUL */
  addr_ids_t                ids;       /* block id -> trace id, live blocks */
  addr_ids_map_t            freed;     /* block ids freed (dangling) */
  uint64_t                  max_block; /* largest block id used */
  bool                      any_block;
};

/* ---- Tokens ------------------------------------------------------------- */

static as_status_t bad(lab_t *l, const char *what, as_err_t *err) {
  char q[TRACE_QUOTE_MAX];
  if (l->eof)
    return as_err_set(err, AS_EFORMAT,
                      "%s:%" PRIu64 ": expected %s, got end "
                      "of file",
                      l->name, l->line, what);
  return as_err_set(err, AS_EFORMAT, "%s:%" PRIu64 ": expected %s, got '%s'",
                    l->name, l->line, what, trace_quote(l->tok, l->tok_len, q));
}

/* Reads the next whitespace-separated token into l->tok; false at end of
 * file (l->eof) or on a read error. */
static bool next_token(lab_t *l) {
  int c;
  while ((c = getc(l->in)) != EOF && (c == ' ' || c == '\t' || c == '\n' ||
                                      c == '\r' || c == '\v' || c == '\f'))
    if (c == '\n')
      l->pos_line++;
  l->line = l->pos_line;
  l->tok[0] = '\0';
  l->tok_len = 0;
  if (c == EOF) {
    l->eof = true;
    return false;
  }
  l->st->lines = l->line; /* the last token's */
  size_t n = 0;
  do {
    if (n + 4 == TOKEN_MAX) {
      /* No request or number is this long: the token ends in "..." so it
       * parses as nothing, and the rest is not read (an endless token,
       * /dev/zero, would never end). */
      memcpy(l->tok + n, "...", 4);
      l->tok_len = n + 3;
      return true;
    }
    l->tok[n++] = (char)c;
  } while ((c = getc(l->in)) != EOF && !(c == ' ' || c == '\t' || c == '\n' ||
                                         c == '\r' || c == '\v' || c == '\f'));
  if (c == '\n')
    ungetc(c, l->in);
  l->tok[n] = '\0';
  l->tok_len = n;
  return true;
}

/* The next token as a decimal integer in [lo, hi]. */
static as_status_t take_int(lab_t *l, int64_t lo, int64_t hi, const char *what,
                            int64_t *out, as_err_t *err) {
  if (!next_token(l))
    return ferror(l->in) ? as_err_set(err, AS_EIO, "%s: read error: %s",
                                      l->name, strerror(errno))
                         : bad(l, what, err);
  const char *s = l->tok;
  bool        neg = *s == '-';
  s += neg;
  if (*s < '0' || *s > '9')
    return bad(l, what, err);
  int64_t v = 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    if (v > (INT64_MAX - (*s - '0')) / 10)
      return bad(l, what, err);
    v = v * 10 + (*s - '0');
  }
  if (s != l->tok + l->tok_len) /* not at the end, or at a NUL */
    return bad(l, what, err);
  v = neg ? -v : v;
  if (v < lo || v > hi)
    return bad(l, what, err);
  *out = v;
  return AS_OK;
}

/* ---- Requests ----------------------------------------------------------- */

static as_status_t emit(lab_t *l, trace_op_t op, uint64_t id, uint64_t size,
                        as_err_t *err) {
  uint64_t t = l->t_ns;
  l->t_ns += import_tick_ns(l->tick_ns, op, size);
  return import_emit(l->w, t, op, id, size, &l->st->events, err);
}

static as_status_t oom(lab_t *l, as_err_t *err) {
  return as_err_set(err, AS_ENOMEM, "%s:%" PRIu64 ": out of memory importing",
                    l->name, l->line);
}

static as_status_t dangling(lab_t *l, uint64_t block, const char *what,
                            as_err_t *err) {
  return as_err_set(err, AS_EFORMAT,
                    "%s:%" PRIu64 ": expected a %s of a live block, got block "
                    "%" PRIu64 ", already freed (the driver would pass a "
                    "dangling pointer)",
                    l->name, l->line, what, block);
}

/* A new object named block: malloc of size. */
static as_status_t do_malloc(lab_t *l, uint64_t block, uint64_t size,
                             as_err_t *err) {
  uint64_t id;
  if (addr_ids_lookup(&l->ids, block, &id)) {
    /* The driver's pointer is overwritten: the old block is never freed. */
    addr_ids_detach(&l->ids, block, &id);
    l->st->leaked++;
  }
  addr_ids_map_del(&l->freed, block, NULL);
  if (!addr_ids_add(&l->ids, block, &id))
    return oom(l, err);
  l->st->mallocs++;
  return emit(l, TRACE_MALLOC, id, size, err);
}

static as_status_t do_realloc(lab_t *l, uint64_t block, uint64_t size,
                              as_err_t *err) {
  uint64_t id;
  if (addr_ids_map_get(&l->freed, block, &id))
    return dangling(l, block, "realloc", err);
  if (!addr_ids_lookup(&l->ids, block, &id))
    return do_malloc(l, block, size, err); /* realloc(NULL, size) */
  if (size == 0) { /* glibc realloc(p, 0) frees p and returns NULL */
    addr_ids_remove(&l->ids, block, NULL);
    l->st->frees++;
    return emit(l, TRACE_FREE, id, 0, err);
  }
  l->st->reallocs++;
  return emit(l, TRACE_REALLOC, id, size, err);
}

static as_status_t do_free(lab_t *l, int64_t block, as_err_t *err) {
  uint64_t id;
  if (block < 0) { /* -1: free(NULL) */
    l->st->null_frees++;
    return AS_OK;
  }
  uint64_t b = (uint64_t)block;
  if (addr_ids_map_get(&l->freed, b, &id))
    return dangling(l, b, "free", err);
  if (!addr_ids_remove(&l->ids, b, &id)) { /* NULL in the block table */
    l->st->null_frees++;
    return AS_OK;
  }
  if (!addr_ids_map_put(&l->freed, b, 1))
    return oom(l, err);
  l->st->frees++;
  return emit(l, TRACE_FREE, id, 0, err);
}

/* One request: its op token has been read into l->tok. */
static as_status_t request(lab_t *l, as_err_t *err) {
  char    op = l->tok[0];
  int64_t block, size = 0;
  if ((op != 'a' && op != 'r' && op != 'f') || l->tok_len != 1)
    return bad(l, "a request 'a ID SIZE', 'r ID SIZE' or 'f ID'", err);
  int64_t     max_id = (int64_t)l->st->num_ids - 1;
  char        what[96];
  as_status_t rc;
  snprintf(what, sizeof what,
           "a block id from %s0 to %" PRId64 " (the "
           "header's %" PRIu64 " ids)",
           op == 'f' ? "-1 or " : "", max_id, l->st->num_ids);
  if ((rc = take_int(l, op == 'f' ? -1 : 0, max_id, what, &block, err)) !=
      AS_OK)
    return rc;
  if (op != 'f' &&
      (rc = take_int(l, 0, UINT32_MAX, "a size in bytes (0 to 4294967295)",
                     &size, err)) != AS_OK)
    return rc;
  if (block >= 0) {
    l->any_block = true;
    if ((uint64_t)block > l->max_block)
      l->max_block = (uint64_t)block;
  }
  if (op == 'a')
    return do_malloc(l, (uint64_t)block, (uint64_t)size, err);
  if (op == 'r')
    return do_realloc(l, (uint64_t)block, (uint64_t)size, err);
  return do_free(l, block, err);
}

/* ---- Driver ------------------------------------------------------------- */

/* Reads the four header numbers; *num_ops = the third. */
static as_status_t read_header(lab_t *l, trace_meta_t *meta, uint64_t *num_ops,
                               as_err_t *err) {
  static const char *const what[4] = {
      "the first header number (heap-size hint or weight",
      "the number of block ids (header line 2",
      "the number of requests (header line 3",
      "the fourth header number (weight or ignore-ranges flag"};
  int64_t     h[4];
  as_status_t rc;
  for (int i = 0; i < 4; i++) {
    int64_t lo = i == 1 || i == 2 ? 0 : INT32_MIN;
    char    range[128]; /* the range too: a number past it is refused */
    snprintf(range, sizeof range, "%s, %" PRId64 " to %" PRId32 ")", what[i],
             lo, INT32_MAX);
    if ((rc = take_int(l, lo, INT32_MAX, range, &h[i], err)) != AS_OK)
      return rc;
  }
  l->st->num_ids = (uint64_t)h[1];
  *num_ops = (uint64_t)h[2];
  if (meta == NULL)
    return AS_OK;
  char header[96], clock[96];
  snprintf(header, sizeof header,
           "%" PRId64 " %" PRId64 " %" PRId64 " %" PRId64, h[0], h[1], h[2],
           h[3]);
  if (l->tick_ns)
    snprintf(clock, sizeof clock, "synthetic, %" PRIu64 " ns per event",
             l->tick_ns);
  else
    snprintf(clock, sizeof clock,
             "synthetic, the cost model's C malloc and free times");
  if ((rc = trace_meta_set(meta, "source", "malloclab", err)) != AS_OK ||
      (rc = trace_meta_set(meta, "malloclab_header", header, err)) != AS_OK ||
      (rc = trace_meta_set(meta, "clock", clock, err)) != AS_OK ||
      (rc = trace_meta_set(meta, "threads", "1 (the driver's)", err)) != AS_OK)
    return rc;
  return AS_OK;
}

as_status_t import_malloclab_stream(FILE *in, const char *name,
                                    trace_writer_t *w, trace_meta_t *meta,
                                    const import_malloclab_opts_t *opts,
                                    import_malloclab_stats_t      *st,
                                    as_err_t                      *err) {
  memset(st, 0, sizeof *st);
  lab_t l;
  memset(&l, 0, sizeof l);
  l.in = in;
  l.name = name;
  l.w = w;
  l.st = st;
  l.tick_ns = opts != NULL ? opts->tick_ns : 0;
  l.pos_line = 1;
  uint64_t    num_ops = 0;
  as_status_t rc = read_header(&l, meta, &num_ops, err);
  while (rc == AS_OK && next_token(&l)) {
    if (st->requests == num_ops) {
      char what[96];
      snprintf(what, sizeof what,
               "end of file after the header's %" PRIu64 " requests", num_ops);
      rc = bad(&l, what, err);
      break;
    }
    st->requests++;
    rc = request(&l, err);
  }
  if (rc == AS_OK && ferror(in))
    rc = as_err_set(err, AS_EIO, "%s: read error: %s", name, strerror(errno));
  if (rc == AS_OK && st->requests != num_ops) {
    char what[96];
    snprintf(what, sizeof what,
             "%" PRIu64 " requests (header line 3), "
             "found %" PRIu64,
             num_ops, st->requests);
    rc = bad(&l, what, err);
  }
  if (rc == AS_OK && st->num_ids > 0 &&
      (!l.any_block || l.max_block != st->num_ids - 1))
    rc = as_err_set(err, AS_EFORMAT,
                    "%s: expected block ids up to %" PRIu64 " (header line 2 "
                    "says %" PRIu64 " ids), got %s%" PRIu64,
                    name, st->num_ids - 1, st->num_ids,
                    l.any_block ? "up to " : "none",
                    l.any_block ? l.max_block : 0);
  st->live_at_end = l.ids.live;
  st->max_live_ids = l.ids.peak;
  addr_ids_free(&l.ids);
  addr_ids_map_free(&l.freed);
  return rc;
}

static as_status_t run_stream(FILE *in, const char *name, trace_writer_t *w,
                              trace_meta_t *meta, void *user, as_err_t *err) {
  import_job_t *job = user;
  return import_malloclab_stream(in, name, w, meta, job->opts, job->st, err);
}

as_status_t import_malloclab_file(const char *in_path, const char *out_path,
                                  trace_format_t                 fmt,
                                  const import_malloclab_opts_t *opts,
                                  import_malloclab_stats_t *st, as_err_t *err) {
  memset(st, 0, sizeof *st);
  trace_meta_t meta;
  memset(&meta, 0, sizeof meta);
  import_job_t job = {opts, st};
  return import_run_file(in_path, out_path, fmt, &meta, run_stream, &job, err);
}
