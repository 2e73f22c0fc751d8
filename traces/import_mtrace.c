/* traces/import_mtrace.c -- glibc mtrace(3) logs into allocsim traces.
 *
 * What glibc writes (glibc 2.36, malloc/mtrace-impl.c, which
 * malloc/malloc-debug.c:77 includes through malloc/mtrace.c:20; mtrace() in
 * libc itself is a no-op since 2.34, malloc/mtrace.c:46-53, so the program
 * must run with LD_PRELOAD=libc_malloc_debug.so.0):
 *   "= Start"                          do_mtrace, line 189
 *   "= End"                            do_muntrace, line 214
 *   CALLER "+ %p %#lx"                 malloc, calloc, memalign family and
 *                                      realloc(NULL, n): lines 110, 132, 151
 *   CALLER "- %p"                      free (never of NULL, line 91) and
 *                                      realloc(p, 0) returning NULL: 98, 129
 *   CALLER "< %p" CALLER "> %p %#lx"   realloc p -> q: lines 135-137, one
 *                                      locked pair, so the lines are adjacent
 *   CALLER "! %p %#lx"                 failed realloc (p still live): 127
 * CALLER (tr_where, lines 38-73) is "" when there is no return address,
 * "@ [%p] " when dladdr fails, else "@ FILE:(SYM+OFF)[0xREL] " with FILE,
 * ":" and "(SYM+OFF)" each optional and FILE possibly holding spaces.  So
 * the caller is whatever lies between "@ " and the line's last "] ".  %p
 * prints NULL as "(nil)" (a failed malloc is "+ (nil) 0x10"); %#lx prints
 * 0 as "0" and others as "0x...".
 *
 * Semantics.  Each emitted event takes the next tick of a synthetic clock
 * (no times in the log) on thread 0 in the raw domain.  Addresses map to
 * dense recycled ids through traces/addr_ids.  A free of an address not
 * live, or a realloc of one, means the object was allocated before mtrace()
 * started (glibc's own exit-time __libc_freeres is the usual case): an
 * error, or with opts.lenient a counted skip (the realloc's '>' becomes a
 * malloc).  An address allocated again while still live (possible only
 * when threads race, since glibc logs a free after the block is released)
 * is likewise an error, or with lenient a free of the old object first.
 *
 * Trade-off: lines are read whole with getline (memory grows with the
 * longest line, i.e. symbol and file names) rather than parsed byte by byte
 * from a fixed window; mtrace lines are short, and a bound would turn a
 * long C++ symbol into a spurious error.
 */
#include "import_mtrace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "addr_ids.h"
#include "import_util.h"

typedef struct imp_s imp_t;
struct imp_s {
  const char            *name;
  trace_writer_t        *w;
  import_mtrace_stats_t *st;
  bool                   lenient;
  uint64_t               tick_ns;
  uint64_t               t_ns; /* time of the next event */
  addr_ids_t             ids;  /* address -> object id */
  import_inserts_t      *inserts;
  uint64_t               main_heap; /* first small block's address, or 0 */
};

/* ---- Lexing ------------------------------------------------------------- */

/* got_len bytes from got, which may hold a NUL; NULL: the end of the line. */
static as_status_t bad_len(imp_t *im, as_err_t *err, const char *what,
                           const char *got, size_t got_len) {
  char q[TRACE_QUOTE_MAX];
  if (got == NULL)
    return as_err_set(err, AS_EFORMAT, "%s:%" PRIu64 ": expected %s, got %s",
                      im->name, im->st->lines, what, "end of line");
  return as_err_set(err, AS_EFORMAT, "%s:%" PRIu64 ": expected %s, got '%s'",
                    im->name, im->st->lines, what,
                    trace_quote(got, got_len, q));
}

static as_status_t bad(imp_t *im, as_err_t *err, const char *what,
                       const char *got) {
  return bad_len(im, err, what, got, got ? strlen(got) : 0);
}

/* Parses one field at *p ending at a space or the end of the line:
 * "(nil)" as 0 when nil_ok, "0", or "0x" and 1-16 hex digits.  Advances *p
 * past it.  False if malformed. */
static bool hex_field(const char **p, bool nil_ok, uint64_t *out) {
  const char *s = *p;
  if (nil_ok && strncmp(s, "(nil)", 5) == 0 && (s[5] == ' ' || !s[5])) {
    *out = 0;
    s += 5;
  } else if (s[0] == '0' && (s[1] == ' ' || s[1] == '\0')) {
    *out = 0;
    s += 1;
  } else {
    if (s[0] != '0' || s[1] != 'x')
      return false;
    s += 2; /* glibc writes lowercase digits; hand edits may not */
    if (!import_hex(&s, out) || (*s != ' ' && *s != '\0'))
      return false;
  }
  *p = s;
  return true;
}

/* One record: op is '+', '-', '<', '>' or '!'; addr, and size for the ops
 * that have one.  Caller prefix removed.  Returns AS_EFORMAT on a bad line. */
typedef struct rec_s rec_t;
struct rec_s {
  uint64_t line; /* where it was read */
  char     op;
  uint64_t addr;
  uint64_t size;
};

static as_status_t parse_record(imp_t *im, const char *line, rec_t *r,
                                as_err_t *err) {
  static const char want[] =
      "'[@ CALLER] OP ...' with OP '+', '-', '<', '>' or '!' (an mtrace "
      "record)";
  const char *s = line;
  r->line = im->st->lines;
  if (s[0] == '@' && s[1] == ' ') {
    const char *close = strrchr(s, ']');
    if (close == NULL || close[1] != ' ')
      return bad(im, err, "a caller '@ ...[0xADDR] ' before the op", line);
    s = close + 2;
  }
  if (s[0] == '\0' || strchr("+-<>!", s[0]) == NULL || s[1] != ' ')
    return bad(im, err, want, s[0] ? s : NULL);
  r->op = s[0];
  s += 2;
  bool nil_ok = r->op != '<' && r->op != '>' && r->op != '!';
  if (!hex_field(&s, nil_ok, &r->addr))
    return bad(im, err,
               nil_ok ? "an address '0x...' or '(nil)'" : "an address '0x...'",
               *s ? s : NULL);
  r->size = 0;
  if (r->op == '+' || r->op == '>' || r->op == '!') {
    if (*s == ' ')
      s++;
    if (!hex_field(&s, false, &r->size))
      return bad(im, err, "a size '0x...' or '0'", *s ? s : NULL);
  }
  if (*s != '\0')
    return bad(im, err, "end of line", s);
  return AS_OK;
}

/* ---- Emitting ----------------------------------------------------------- */

static as_status_t emit(imp_t *im, trace_op_t op, uint64_t id, uint64_t size,
                        as_err_t *err) {
  uint64_t t = im->t_ns;
  im->t_ns += import_tick_ns(im->tick_ns, op, size);
  return import_emit(im->w, t, op, id, size, &im->st->events, err);
}

static as_status_t oom(imp_t *im, as_err_t *err) {
  return as_err_set(err, AS_ENOMEM, "%s:%" PRIu64 ": out of memory importing",
                    im->name, im->st->lines);
}

/* addr is about to name a new object: it must not be live already. */
static as_status_t free_if_live(imp_t *im, uint64_t addr, as_err_t *err) {
  uint64_t id;
  if (!addr_ids_lookup(&im->ids, addr, &id))
    return AS_OK;
  if (!im->lenient)
    return as_err_set(err, AS_EFORMAT,
                      "%s:%" PRIu64 ": expected an address that is not live, "
                      "got 0x%" PRIx64 " allocated again without a '-' (a "
                      "racing free? --lenient frees the old object first)",
                      im->name, im->st->lines, addr);
  im->st->reused_live++;
  addr_ids_remove(&im->ids, addr, NULL);
  return emit(im, TRACE_FREE, id, 0, err);
}

/* A small block far from the first one came from another arena, i.e.
 * another thread (import_mtrace.h). */
static void note_arena(imp_t *im, uint64_t addr, uint64_t size) {
  if (size >= (UINT64_C(128) << 10))
    return;
  if (im->main_heap == 0) {
    im->main_heap = addr;
    return;
  }
  uint64_t d =
      addr > im->main_heap ? addr - im->main_heap : im->main_heap - addr;
  if (d > IMPORT_MTRACE_ARENA_DISTANCE && im->st->other_arena_blocks++ == 0)
    im->st->first_other_arena_line = im->st->lines;
}

static as_status_t do_malloc(imp_t *im, uint64_t addr, uint64_t size,
                             as_err_t *err) {
  note_arena(im, addr, size);
  as_status_t rc = free_if_live(im, addr, err);
  if (rc != AS_OK)
    return rc;
  uint64_t id;
  if (!addr_ids_add(&im->ids, addr, &id))
    return oom(im, err);
  im->st->mallocs++;
  return emit(im, TRACE_MALLOC, id, size, err);
}

static as_status_t unmatched(imp_t *im, const rec_t *r, const char *what,
                             as_err_t *err) {
  return as_err_set(err, AS_EFORMAT,
                    "%s:%" PRIu64 ": expected a %s of an address allocated "
                    "since '= Start', got 0x%" PRIx64 " (allocated before "
                    "mtrace() started? --lenient skips these)",
                    im->name, r->line, what, r->addr);
}

/* ---- Records ------------------------------------------------------------ */

/* Applies r; for '<', pair is the '>' record that follows it. */
static as_status_t apply(imp_t *im, const rec_t *r, const rec_t *pair,
                         as_err_t *err) {
  uint64_t id;
  switch (r->op) {
  case '+':
    if (r->addr == 0) {
      im->st->failed++; /* malloc returned NULL: nothing allocated */
      return AS_OK;
    }
    return do_malloc(im, r->addr, r->size, err);
  case '-':
    if (r->addr == 0) {
      im->st->null_frees++; /* realloc(NULL, 0) that returned NULL */
      return AS_OK;
    }
    if (!addr_ids_remove(&im->ids, r->addr, &id)) {
      if (!im->lenient)
        return unmatched(im, r, "'-' (free)", err);
      im->st->unmatched_frees++;
      return AS_OK;
    }
    im->st->frees++;
    return emit(im, TRACE_FREE, id, 0, err);
  case '!':
    im->st->failed++; /* the old block stays live and unchanged */
    return AS_OK;
  case '<':
    if (!addr_ids_detach(&im->ids, r->addr, &id)) {
      if (!im->lenient)
        return unmatched(im, r, "'<' (realloc)", err);
      im->st->unmatched_reallocs++;
      return do_malloc(im, pair->addr, pair->size, err);
    }
    if (pair->addr != r->addr) {
      as_status_t rc = free_if_live(im, pair->addr, err);
      if (rc != AS_OK) {
        addr_ids_release(&im->ids, id);
        return rc;
      }
    }
    if (!addr_ids_attach(&im->ids, pair->addr, id)) {
      addr_ids_release(&im->ids, id);
      return oom(im, err);
    }
    note_arena(im, pair->addr, pair->size);
    im->st->reallocs++;
    return emit(im, TRACE_REALLOC, id, pair->size, err);
  default:
    return bad(im, err, "'<' before '>' (a realloc pair)", "> ...");
  }
}

/* ---- Driver ------------------------------------------------------------- */

/* Reads the next line into *buf without its "\n" (and "\r"); false at end
 * of file (or on a read error: ferror tells).  *line_len: its length, which
 * strlen falls short of if it holds a NUL.  *too_long: the line runs past
 * IMPORT_LINE_MAX (an endless line is not read to its end). */
static bool next_line(FILE *in, char **buf, size_t *cap, size_t *line_len,
                      bool *too_long, uint64_t *lines) {
  ssize_t n = import_getline(buf, cap, in, IMPORT_LINE_MAX);
  *too_long = n == -2;
  if (n == -2)
    n = (ssize_t)IMPORT_LINE_MAX;
  if (n < 0)
    return false;
  (*lines)++;
  size_t len = (size_t)n;
  if (len > 0 && (*buf)[len - 1] == '\n')
    (*buf)[--len] = '\0';
  if (len > 0 && (*buf)[len - 1] == '\r')
    (*buf)[--len] = '\0';
  *line_len = len;
  return true;
}

/* Writes the inserts due after the lines read so far (all of them at the
 * end), unless a realloc pair is open. */
static as_status_t inserts_due(imp_t *im, uint64_t line, bool pair_open,
                               as_err_t *err) {
  if (im->inserts == NULL || pair_open)
    return AS_OK;
  uint64_t    before = im->st->inserted;
  as_status_t rc = import_inserts_emit(im->inserts, line, im->t_ns, im->w,
                                       &im->st->inserted, err);
  im->st->events += im->st->inserted - before;
  return rc;
}

as_status_t import_mtrace_stream(FILE *in, const char *name, trace_writer_t *w,
                                 const import_mtrace_opts_t *opts,
                                 import_mtrace_stats_t *st, as_err_t *err) {
  memset(st, 0, sizeof *st);
  imp_t im;
  memset(&im, 0, sizeof im);
  im.name = name;
  im.w = w;
  im.st = st;
  im.lenient = opts != NULL && opts->lenient;
  im.tick_ns = opts != NULL ? opts->tick_ns : 0;
  im.inserts = opts != NULL ? opts->inserts : NULL;
  char       *buf = NULL;
  size_t      cap = 0;
  size_t      len = 0;
  bool        too_long = false, started = false;
  uint64_t    pair_line = 0;
  rec_t       pending = {0}; /* a '<' waiting for its '>' */
  as_status_t rc = AS_OK;

  while (rc == AS_OK &&
         (rc = inserts_due(&im, st->lines, pair_line != 0, err)) == AS_OK &&
         next_line(in, &buf, &cap, &len, &too_long, &st->lines)) {
    if (too_long) {
      rc = as_err_set(err, AS_EFORMAT,
                      "%s:%" PRIu64 ": expected a line of at most %d bytes",
                      name, st->lines, IMPORT_LINE_MAX);
      break;
    }
    if (strlen(buf) != len) { /* a NUL: quoted whole, where it is */
      rc = bad_len(&im, err, "text (an mtrace log)", buf, len);
      break;
    }
    if (!started) {
      if (strcmp(buf, "= Start") != 0)
        rc = bad(&im, err, "'= Start' (the first line of a glibc mtrace log)",
                 buf[0] ? buf : NULL);
      started = true;
      continue;
    }
    if (st->saw_end) {
      if (buf[0] != '\0')
        rc = bad(&im, err, "end of file after '= End'", buf);
      continue;
    }
    if (pair_line != 0) {
      rec_t r;
      char  what[96];
      snprintf(what, sizeof what,
               "'[@ CALLER] > 0xNEW 0xSIZE' completing the realloc on line "
               "%" PRIu64,
               pair_line);
      if ((rc = parse_record(&im, buf, &r, err)) != AS_OK || r.op != '>') {
        rc = bad(&im, err, what, buf[0] ? buf : NULL);
        break;
      }
      pair_line = 0;
      rc = apply(&im, &pending, &r, err);
      continue;
    }
    if (buf[0] == '\0')
      continue; /* glibc writes none; tolerate hand edits */
    if (strcmp(buf, "= End") == 0) {
      st->saw_end = true;
      continue;
    }
    if (buf[0] == '=') {
      rc = bad(&im, err, "'= End' or an mtrace record", buf);
      break;
    }
    rec_t r;
    if ((rc = parse_record(&im, buf, &r, err)) != AS_OK)
      break;
    if (r.op == '<') {
      pending = r;
      pair_line = st->lines;
      continue;
    }
    if (r.op == '>') {
      rc =
          bad(&im, err, "'+', '-', '<' or '!' ('>' only right after '<')", buf);
      break;
    }
    rc = apply(&im, &r, NULL, err);
  }
  if (rc == AS_OK && ferror(in))
    rc = as_err_set(err, AS_EIO, "%s:%" PRIu64 ": read error: %s", name,
                    st->lines, strerror(errno));
  else if (rc == AS_OK && !started)
    rc = as_err_set(err, AS_EFORMAT,
                    "%s:1: expected '= Start' (the first line of a glibc "
                    "mtrace log), got end of file",
                    name);
  else if (rc == AS_OK && pair_line != 0)
    rc = as_err_set(err, AS_EFORMAT,
                    "%s:%" PRIu64 ": expected '[@ CALLER] > 0xNEW 0xSIZE' "
                    "completing the realloc on line %" PRIu64
                    ", got end of file",
                    name, st->lines + 1, pair_line);
  if (rc == AS_OK)
    rc = inserts_due(&im, IMPORT_AT_END, false, err);
  free(buf);
  st->live_at_end = im.ids.live;
  st->max_live_ids = im.ids.peak;
  addr_ids_free(&im.ids);
  return rc;
}

/* The log carries no provenance of its own: meta was filled in before. */
static as_status_t run_stream(FILE *in, const char *name, trace_writer_t *w,
                              trace_meta_t *meta, void *user, as_err_t *err) {
  import_job_t *job = user;
  (void)meta;
  return import_mtrace_stream(in, name, w, job->opts, job->st, err);
}

as_status_t import_mtrace_file(const char *in_path, const char *out_path,
                               trace_format_t              fmt,
                               const import_mtrace_opts_t *opts,
                               import_mtrace_stats_t *st, as_err_t *err) {
  memset(st, 0, sizeof *st);
  trace_meta_t meta;
  memset(&meta, 0, sizeof meta);
  char clock[96];
  if (opts != NULL && opts->tick_ns)
    snprintf(clock, sizeof clock, "synthetic, %" PRIu64 " ns per event",
             opts->tick_ns);
  else
    snprintf(clock, sizeof clock,
             "synthetic, the cost model's C malloc and free times");
  as_status_t rc;
  if ((rc = trace_meta_set(&meta, "source", "mtrace", err)) != AS_OK ||
      (rc = trace_meta_set(&meta, "clock", clock, err)) != AS_OK ||
      (rc = trace_meta_set(&meta, "threads", "unknown (all on thread 0)",
                           err)) != AS_OK ||
      (rc = trace_meta_set(&meta, "unrecorded", "malloc_trim, threads", err)) !=
          AS_OK)
    return rc;
  import_job_t job = {opts, st};
  return import_run_file(in_path, out_path, fmt, &meta, run_stream, &job, err);
}
