/* traces/text.c -- the line-oriented text trace format: reader and writer.
 *
 * The text format exists for tests, teaching and hand-written scenarios; real
 * traces use the binary format (traces/binary.c).  Grammar (also in
 * docs/trace-format.md):
 *
 *   file       = header { line }
 *   header     = "allocsim-trace" WS "1" [comment] EOL      (first line)
 *   line       = [WS] ( provenance | comment | event [comment] | "" ) EOL
 *   provenance = "#@" [WS] KEY [WS] "=" [WS] VALUE  (only before 1st event;
 *                KEY 1-31 bytes, no spaces, controls or '='; VALUE 0-255
 *                bytes, no control bytes but tab)
 *   comment    = "#" any-text
 *   event      = TIME WS THREAD WS op-args
 *   op-args    = ("malloc"|"calloc"|"realloc") WS ID WS SIZE [WS DOMAIN]
 *              | "memalign" WS ID WS ALIGN WS SIZE [WS DOMAIN]
 *              | "free" WS ID [WS DOMAIN]
 *              | "thread_start" | "thread_exit"
 *              | "mark" WS LABEL
 *              | "idle" WS TIME            (duration)
 *              | "trim" WS SIZE            (pad)
 *              | "rss" WS SIZE [WS SIZE]   (measured bytes [of which no
 *                                           allocator holds: above 0])
 *              | "purge" WS KIND [WS ARENA] (KIND = all|decay|tcache;
 *                                           ARENA digits, default all)
 *              | "option" WS NAME WS VALUE (NAME = 1-63 of [a-z0-9_.];
 *                                           VALUE = ["-"] SIZE, |v| < 2^63)
 *              | "touch" WS ID WS OFFSET WS LENGTH  (SIZEs; LENGTH > 0)
 *   TIME       = digits | number unit,  unit = ns|us|ms|s; number = digits
 *                ["." digits]; the value must be a whole number of ns < 2^64
 *   SIZE       = digits | number suffix, suffix = K|KiB|M|MiB|G|GiB (1024^n)
 *   THREAD     = digits below 2^32;  ID = digits below 2^64
 *   ALIGN      = SIZE, a power of two
 *   DOMAIN     = "raw" | "mem" | "obj"  (default raw)
 *   LABEL      = bare | quoted, at most 63 bytes once unescaped; bare = bytes
 *                0x21-0x7e except " # \ , or >= 0x80; quoted = '"' { byte
 *                other than control (tab allowed), '"', '\' | '\"' | '\\' }
 *                '"'
 *
 * WS is spaces and tabs; a '#' outside a quoted label starts a comment; a
 * CR before the LF is ignored.  Times are non-decreasing.  Semantic checks
 * (a free of an unknown id) are the engine's job.
 *
 * The writer emits the canonical form: single spaces, integer ns and bytes,
 * the domain only when it is not raw, labels quoted only when they must be,
 * provenance as "#@ key=value".  Reading canonical text and writing it again
 * is byte-identical, which the round-trip tests rely on.
 *
 * Sections: number parsing, line reader, parser, source, writer.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/units.h"
#include "trace_io.h"

#define TEXT_HEADER      "allocsim-trace"
#define TEXT_VERSION     1
#define TEXT_BUF_INITIAL ((size_t)64 * 1024)
#define TEXT_LINE_MAX    ((size_t)1024 * 1024) /* longer is an error */

/* ---- Number parsing ----------------------------------------------------- */

/* ---- Source state ------------------------------------------------------- */

/* Invariants: buf[pos, len) holds bytes read but not yet consumed; the line
 * last returned by read_line stays valid until the next read_line call. */
typedef struct text_src_s {
  trace_source_t base;    /* must be first */
  FILE          *f;       /* NULL once closed */
  bool           own_f;   /* false for stdin */
  char          *buf;     /* read buffer, cap bytes */
  size_t         cap;     /* allocated size of buf */
  size_t         pos;     /* first unconsumed byte */
  size_t         len;     /* bytes valid in buf */
  bool           eof;     /* f has no more bytes */
  uint64_t       line;    /* 1-based number of the current line */
  const char    *cur;     /* current line (no EOL), valid till next read */
  size_t         cur_len; /* its length */
  bool           pending; /* cur holds an event line not yet parsed */
  bool           seen_event;
  bool           done;      /* AS_DONE returned */
  as_err_t       failure;   /* sticky error once next() failed */
  uint64_t       prev_t_ns; /* last event's time */
  char           label[TRACE_LABEL_MAX + 1]; /* current mark's label */
  char           path[TRACE_PATH_MAX + 1];   /* current module's path */
  trace_frame_t  frames[TRACE_FRAMES_MAX];   /* current site's frames */
  trace_defs_t   defs; /* modules and sites defined so far */
} text_src_t;

/* Parse cursor over one line. */
typedef struct cursor_s {
  const char *p;
  const char *end;
} cursor_t;

static as_status_t fail(text_src_t *s, as_err_t *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static as_status_t fail(text_src_t *s, as_err_t *err, const char *fmt, ...) {
  char    what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return as_err_set(err, AS_EFORMAT, "%s:%" PRIu64 ": %s", s->base.name,
                    s->line, what);
}

/* "expected WHAT, got 'TOKEN'" or "... got end of line" (tok NULL). */
static as_status_t fail_got(text_src_t *s, as_err_t *err, const char *what,
                            const char *tok, size_t len) {
  if (tok == NULL)
    return fail(s, err, "expected %s, got end of line", what);
  char q[TRACE_QUOTE_MAX];
  return fail(s, err, "expected %s, got '%s'", what, trace_quote(tok, len, q));
}

/* ---- Line reader -------------------------------------------------------- */

/* Reads more bytes into buf, compacting and growing it; AS_OK with
 * s->eof set once the file is exhausted. */
static as_status_t fill(text_src_t *s, as_err_t *err) {
  if (s->pos > 0) {
    memmove(s->buf, s->buf + s->pos, s->len - s->pos);
    s->len -= s->pos;
    s->pos = 0;
  }
  if (s->len == s->cap) {
    size_t ncap = s->cap * 2;
    char  *nbuf = realloc(s->buf, ncap);
    if (nbuf == NULL)
      return as_err_set(err, AS_ENOMEM, "%s:%" PRIu64 ": out of memory",
                        s->base.name, s->line);
    s->buf = nbuf;
    s->cap = ncap;
  }
  size_t n = fread(s->buf + s->len, 1, s->cap - s->len, s->f);
  s->len += n;
  if (n == 0) {
    if (ferror(s->f))
      return as_err_set(err, AS_EIO, "%s:%" PRIu64 ": read error: %s",
                        s->base.name, s->line, strerror(errno));
    s->eof = true;
  }
  return AS_OK;
}

/* Makes the next line current (s->cur, s->cur_len, without EOL or a CR
 * before it) and counts it; AS_DONE at end of file. */
static as_status_t read_line(text_src_t *s, as_err_t *err) {
  size_t scanned = 0;
  for (;;) {
    char  *start = s->buf + s->pos;
    char  *nl = memchr(start + scanned, '\n', s->len - s->pos - scanned);
    size_t avail = s->len - s->pos;
    if (nl != NULL || (s->eof && avail > 0)) {
      size_t llen = nl != NULL ? (size_t)(nl - start) : avail;
      s->line++;
      s->pos += llen + (nl != NULL);
      if (llen > 0 && start[llen - 1] == '\r')
        llen--;
      if (llen > TEXT_LINE_MAX)
        return fail(s, err, "expected a line of at most %zu bytes, got %zu",
                    TEXT_LINE_MAX, llen);
      s->cur = start;
      s->cur_len = llen;
      return AS_OK;
    }
    if (s->eof)
      return AS_DONE;
    if (avail > TEXT_LINE_MAX + 2) {
      s->line++; /* the line being read, not the one before it */
      return fail(s, err, "expected a line of at most %zu bytes",
                  TEXT_LINE_MAX);
    }
    scanned = avail;
    as_status_t rc = fill(s, err);
    if (rc != AS_OK)
      return rc;
  }
}

/* ---- Parser ------------------------------------------------------------- */

static bool is_ws(char c) {
  return c == ' ' || c == '\t';
}

static void skip_ws(cursor_t *c) {
  while (c->p < c->end && is_ws(*c->p))
    c->p++;
}

/* The next whitespace-delimited token, stopping at a comment; false (and
 * *tok NULL) at end of line or comment. */
static bool next_token(cursor_t *c, const char **tok, size_t *len) {
  skip_ws(c);
  if (c->p == c->end || *c->p == '#') {
    *tok = NULL;
    *len = 0;
    return false;
  }
  const char *start = c->p;
  while (c->p < c->end && !is_ws(*c->p) && *c->p != '#')
    c->p++;
  *tok = start;
  *len = (size_t)(c->p - start);
  return true;
}

static as_status_t expect_end(text_src_t *s, cursor_t *c, as_err_t *err) {
  const char *tok;
  size_t      len;
  if (next_token(c, &tok, &len))
    return fail_got(s, err, "end of line", tok, len);
  return AS_OK;
}

/* Parses a TIME field named field ("TIME", "DURATION"). */
static as_status_t take_time(text_src_t *s, cursor_t *c, const char *field,
                             uint64_t *out, as_err_t *err) {
  const char *tok;
  size_t      len;
  as_num_rc_t rc = AS_NUM_MALFORMED;
  if (next_token(c, &tok, &len)) {
    rc = as_parse_number(tok, len, as_time_units, out);
    if (rc == AS_NUM_OK)
      return AS_OK;
  }
  /* Messages are built only on failure: this runs for every field. */
  char what[160];
  if (rc == AS_NUM_OVERFLOW)
    snprintf(what, sizeof what, "%s below 2^64 ns", field);
  else if (rc == AS_NUM_FRACTION)
    snprintf(what, sizeof what, "%s to be a whole number of ns", field);
  else
    snprintf(what, sizeof what,
             "%s (integer ns, or a number with unit ns/us/ms/s)", field);
  return fail_got(s, err, what, tok, len);
}

/* The error for number field tok (len bytes, quoted whole) that parsed
 * as rc: out of range (range says what was allowed), not whole, or not a
 * number of units (NULL: a plain integer). */
static as_status_t fail_number(text_src_t *s, as_err_t *err, const char *field,
                               const as_unit_t *units, as_num_rc_t rc,
                               const char *range, const char *tok, size_t len) {
  char what[160];
  if (rc == AS_NUM_OVERFLOW)
    snprintf(what, sizeof what, "%s %s", field, range);
  else if (rc == AS_NUM_FRACTION)
    snprintf(what, sizeof what, "%s to be a whole number of bytes", field);
  else if (units != NULL)
    snprintf(what, sizeof what,
             "%s (integer bytes, or a number with suffix K/KiB/M/MiB/G/GiB)",
             field);
  else
    snprintf(what, sizeof what, "%s (a decimal integer)", field);
  return fail_got(s, err, what, tok, len);
}

/* Parses a SIZE field (with suffixes) or, when units is NULL, a plain
 * integer field; max bounds the value (THREAD). */
static as_status_t take_u64(text_src_t *s, cursor_t *c, const char *field,
                            const as_unit_t *units, uint64_t max, uint64_t *out,
                            as_err_t *err) {
  const char *tok;
  size_t      len;
  as_num_rc_t rc = AS_NUM_MALFORMED;
  if (next_token(c, &tok, &len)) {
    rc = as_parse_number(tok, len, units, out);
    if (rc == AS_NUM_OK && *out > max)
      rc = AS_NUM_OVERFLOW;
    if (rc == AS_NUM_OK)
      return AS_OK;
  }
  char range[48];
  snprintf(range, sizeof range, "no larger than %" PRIu64, max);
  return fail_number(s, err, field, units, rc, range, tok, len);
}

/* A SIZE no larger than max and above 0 into *out. */
static as_status_t take_size_above_0(text_src_t *s, cursor_t *c,
                                     const char *field, uint64_t max,
                                     uint64_t *out, as_err_t *err) {
  const char *tok = c->p;
  as_status_t rc = take_u64(s, c, field, as_size_units, max, out, err);
  if (rc != AS_OK || *out != 0)
    return rc;
  while (is_ws(*tok))
    tok++;
  char what[64];
  snprintf(what, sizeof what, "%s above 0", field);
  return fail_got(s, err, what, tok, (size_t)(c->p - tok));
}

/* ["-"] SIZE into *out, within int64_t; an error quotes the token with
 * its sign. */
static as_status_t take_i64(text_src_t *s, cursor_t *c, const char *field,
                            int64_t *out, as_err_t *err) {
  const char *tok;
  size_t      len;
  as_num_rc_t rc = AS_NUM_MALFORMED;
  uint64_t    v = 0;
  *out = 0;
  if (next_token(c, &tok, &len)) {
    bool neg = tok[0] == '-';
    rc = as_parse_number(tok + neg, len - neg, as_size_units, &v);
    if (rc == AS_NUM_OK && v > (uint64_t)INT64_MAX + neg)
      rc = AS_NUM_OVERFLOW;
    if (rc == AS_NUM_OK) {
      *out = neg ? (int64_t)(0 - v) : (int64_t)v;
      return AS_OK;
    }
  }
  char range[64];
  snprintf(range, sizeof range, "from %" PRId64 " to %" PRId64, INT64_MIN,
           INT64_MAX);
  return fail_number(s, err, field, as_size_units, rc, range, tok, len);
}

/* An option event's knob name into s->label. */
static as_status_t take_option_name(text_src_t *s, cursor_t *c, as_err_t *err) {
  const char *tok;
  size_t      len;
  if (!next_token(c, &tok, &len) || !trace_option_name_ok(tok, len))
    return fail_got(s, err, "an option NAME (1-63 bytes of a-z, 0-9, _ .)", tok,
                    tok ? len : 0);
  memcpy(s->label, tok, len);
  s->label[len] = '\0';
  return AS_OK;
}

/* A byte allowed in an unquoted label. */
static bool label_bare_byte(unsigned char b) {
  return (b > 0x20 && b < 0x7f && b != '"' && b != '#' && b != '\\') ||
         b >= 0x80;
}

/* A label (into s->label, at most TRACE_LABEL_MAX bytes) or, for module
 * events, a path (into s->path, at most TRACE_PATH_MAX bytes): a bare word
 * or a double-quoted string. */
static as_status_t take_string(text_src_t *s, cursor_t *c, char *out,
                               size_t max, const char *what, const char *kind,
                               as_err_t *err) {
  skip_ws(c);
  if (c->p == c->end || *c->p == '#')
    return fail_got(s, err, what, NULL, 0);
  size_t      n = 0;
  const char *start = c->p;
  bool        too_long = false;
  if (*c->p == '"') {
    c->p++;
    for (;;) {
      if (c->p == c->end)
        return fail_got(s, err, "a closing '\"' after the label", start,
                        (size_t)(c->end - start));
      unsigned char b = (unsigned char)*c->p++;
      if (b == '"')
        break;
      if (b == '\\') {
        if (c->p == c->end || (*c->p != '"' && *c->p != '\\'))
          return fail_got(s, err, "'\\\"' or '\\\\' in a quoted label",
                          c->p - 1, c->p < c->end ? 2 : 1);
        b = (unsigned char)*c->p++;
      } else if (b < 0x20 && b != '\t') {
        return fail(s, err,
                    "expected a printable byte in a label, got byte 0x%02x", b);
      }
      if (n < max)
        out[n] = (char)b;
      else
        too_long = true;
      n++;
    }
  } else {
    while (c->p < c->end && label_bare_byte((unsigned char)*c->p)) {
      if (n < max)
        out[n] = *c->p;
      else
        too_long = true;
      n++;
      c->p++;
    }
    if (c->p < c->end && !is_ws(*c->p) && *c->p != '#') {
      const char *q = start;
      while (q < c->end && !is_ws(*q))
        q++;
      return fail_got(s, err, what, start, (size_t)(q - start));
    }
  }
  if (too_long) {
    char w[64];
    snprintf(w, sizeof w, "a %s of at most %zu bytes", kind, max);
    return fail_got(s, err, w, start, (size_t)(c->p - start));
  }
  out[n] = '\0';
  return AS_OK;
}

static as_status_t take_label(text_src_t *s, cursor_t *c, as_err_t *err) {
  return take_string(s, c, s->label, TRACE_LABEL_MAX,
                     "a label (a bare word or a double-quoted string)", "label",
                     err);
}

/* "@SITE": a call site id, 1 to TRACE_DEF_ID_MAX - 1. */
static as_status_t take_site(text_src_t *s, const char *tok, size_t len,
                             trace_event_t *ev, as_err_t *err) {
  uint64_t v = 0;
  size_t   i = 1;
  for (; i < len && tok[i] >= '0' && tok[i] <= '9' && v < TRACE_DEF_ID_MAX; i++)
    v = v * 10 + (uint64_t)(tok[i] - '0');
  if (len < 2 || i != len || v == 0 || v >= TRACE_DEF_ID_MAX) {
    char w[80];
    snprintf(w, sizeof w, "a call site '@SITE' with SITE 1 to %u",
             TRACE_DEF_ID_MAX - 1);
    return fail_got(s, err, w, tok, len);
  }
  ev->site = v;
  return AS_OK;
}

/* Optional DOMAIN, then (allocations) an optional @SITE, then end of
 * line. */
static as_status_t take_domain(text_src_t *s, cursor_t *c, trace_event_t *ev,
                               as_err_t *err) {
  const char    *tok;
  size_t         len;
  trace_domain_t d;
  bool           alloc = ev->op != TRACE_FREE;
  as_status_t    rc;
  if (!next_token(c, &tok, &len))
    return AS_OK;
  if (alloc && tok[0] == '@') {
    if ((rc = take_site(s, tok, len, ev, err)) != AS_OK)
      return rc;
    return expect_end(s, c, err);
  }
  if (!trace_domain_parse(tok, len, &d))
    return fail_got(s, err,
                    alloc ? "a domain (raw, mem, obj), a call site '@SITE' or "
                            "end of line"
                          : "a domain (raw, mem, obj) or end of line",
                    tok, len);
  ev->domain = (uint8_t)d;
  if (alloc && next_token(c, &tok, &len)) {
    if (tok[0] != '@')
      return fail_got(s, err, "a call site '@SITE' or end of line", tok, len);
    if ((rc = take_site(s, tok, len, ev, err)) != AS_OK)
      return rc;
  }
  return expect_end(s, c, err);
}

/* FRAME = MODULE "+0x" HEX: a module id and an offset from its base. */
static as_status_t take_frame(text_src_t *s, const char *tok, size_t len,
                              trace_frame_t *f, as_err_t *err) {
  static const char what[] =
      "a frame MODULE+0xOFFSET (a module id, an offset in hex)";
  size_t   i = 0;
  uint64_t m = 0, off = 0;
  for (; i < len && tok[i] >= '0' && tok[i] <= '9'; i++) {
    if (m >= TRACE_DEF_ID_MAX)
      return fail_got(s, err, what, tok, len);
    m = m * 10 + (uint64_t)(tok[i] - '0');
  }
  if (i == 0 || len - i < 4 || tok[i] != '+' || tok[i + 1] != '0' ||
      tok[i + 2] != 'x' || len - i - 3 > 16)
    return fail_got(s, err, what, tok, len);
  for (i += 3; i < len; i++) {
    char     ch = tok[i];
    unsigned d = ch >= '0' && ch <= '9'   ? (unsigned)(ch - '0')
                 : ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10)
                                          : 16;
    if (d == 16)
      return fail_got(s, err, what, tok, len);
    off = off << 4 | d;
  }
  f->module = m;
  f->offset = off;
  return AS_OK;
}

static as_status_t parse_event(text_src_t *s, cursor_t *c, trace_event_t *ev,
                               as_err_t *err) {
  as_status_t rc;
  uint64_t    v;
  memset(ev, 0, sizeof *ev);
  const char *t_tok = c->p;
  if ((rc = take_time(s, c, "TIME", &ev->t_ns, err)) != AS_OK)
    return rc;
  if (ev->t_ns < s->prev_t_ns) {
    while (is_ws(*t_tok))
      t_tok++;
    char w[96];
    snprintf(w, sizeof w, "TIME >= %" PRIu64 " ns (the previous event's)",
             s->prev_t_ns);
    return fail_got(s, err, w, t_tok, (size_t)(c->p - t_tok));
  }
  if ((rc = take_u64(s, c, "THREAD", NULL, UINT32_MAX, &v, err)) != AS_OK)
    return rc;
  ev->thread = (uint32_t)v;
  const char       *tok;
  size_t            len;
  trace_op_t        op;
  static const char op_what[] =
      "an op (malloc, calloc, realloc, memalign, free, thread_start, "
      "thread_exit, mark, idle, trim, rss, purge, option, touch, module, "
      "site)";
  if (!next_token(c, &tok, &len))
    return fail_got(s, err, op_what, NULL, 0);
  if (!trace_op_parse(tok, len, &op))
    return fail_got(s, err, op_what, tok, len);
  ev->op = (uint8_t)op;
  switch (op) {
  case TRACE_MALLOC:
  case TRACE_CALLOC:
  case TRACE_REALLOC:
  case TRACE_MEMALIGN:
    if ((rc = take_u64(s, c, "ID", NULL, UINT64_MAX, &ev->id, err)) != AS_OK)
      return rc;
    if (op == TRACE_MEMALIGN) {
      const char *a_tok = c->p;
      rc = take_u64(s, c, "ALIGN", as_size_units, UINT64_MAX, &ev->align, err);
      if (rc != AS_OK)
        return rc;
      if (ev->align == 0 || (ev->align & (ev->align - 1)) != 0) {
        while (is_ws(*a_tok))
          a_tok++;
        return fail_got(s, err, "ALIGN to be a power of two", a_tok,
                        (size_t)(c->p - a_tok));
      }
    }
    rc = take_u64(s, c, "SIZE", as_size_units, UINT64_MAX, &ev->size, err);
    if (rc != AS_OK)
      return rc;
    return take_domain(s, c, ev, err);
  case TRACE_FREE:
    if ((rc = take_u64(s, c, "ID", NULL, UINT64_MAX, &ev->id, err)) != AS_OK)
      return rc;
    return take_domain(s, c, ev, err);
  case TRACE_THREAD_START:
  case TRACE_THREAD_EXIT:
    break;
  case TRACE_MARK:
    if ((rc = take_label(s, c, err)) != AS_OK)
      return rc;
    ev->label = s->label;
    break;
  case TRACE_IDLE:
    if ((rc = take_time(s, c, "DURATION", &ev->size, err)) != AS_OK)
      return rc;
    break;
  case TRACE_TRIM:
    rc = take_u64(s, c, "PAD", as_size_units, UINT64_MAX, &ev->size, err);
    if (rc != AS_OK)
      return rc;
    break;
  case TRACE_RSS: {
    rc = take_u64(s, c, "BYTES", as_size_units, UINT64_MAX, &ev->size, err);
    if (rc != AS_OK)
      return rc;
    cursor_t peek = *c;
    if (next_token(&peek, &tok, &len) &&
        (rc = take_size_above_0(s, c, "OTHER", UINT64_MAX, &ev->offset, err)) !=
            AS_OK)
      return rc;
    break;
  }
  case TRACE_PURGE: {
    trace_purge_kind_t k;
    if (!next_token(c, &tok, &len) || !trace_purge_parse(tok, len, &k))
      return fail_got(s, err, "a purge KIND (all, decay, tcache)", tok,
                      tok ? len : 0);
    ev->size = k;
    ev->id = TRACE_ALL_ARENAS;
    cursor_t peek = *c;
    if (next_token(&peek, &tok, &len)) {
      rc = take_u64(s, c, "ARENA", NULL, UINT32_MAX, &ev->id, err);
      if (rc != AS_OK)
        return rc;
    }
    break;
  }
  case TRACE_OPTION: {
    int64_t value;
    if ((rc = take_option_name(s, c, err)) != AS_OK)
      return rc;
    if ((rc = take_i64(s, c, "VALUE", &value, err)) != AS_OK)
      return rc;
    ev->label = s->label;
    ev->size = (uint64_t)value;
    break;
  }
  case TRACE_TOUCH: {
    if ((rc = take_u64(s, c, "ID", NULL, UINT64_MAX, &ev->id, err)) != AS_OK)
      return rc;
    rc = take_u64(s, c, "OFFSET", as_size_units, UINT64_MAX, &ev->offset, err);
    if (rc != AS_OK)
      return rc;
    rc = take_size_above_0(s, c, "LENGTH", UINT64_MAX - ev->offset, &ev->size,
                           err);
    if (rc != AS_OK)
      return rc;
    break;
  }
  case TRACE_MODULE:
    rc = take_u64(s, c, "ID", NULL, TRACE_DEF_ID_MAX - 1, &ev->id, err);
    if (rc != AS_OK)
      return rc;
    rc = take_string(s, c, s->path, TRACE_PATH_MAX,
                     "a module path (a bare word or a double-quoted string)",
                     "module path", err);
    if (rc != AS_OK)
      return rc;
    for (const char *q = s->path; *q != '\0'; q++)
      if ((unsigned char)*q < 0x20 || *q == '"' || *q == '\\')
        return fail(s, err,
                    "expected a module path without control bytes, '\"' or "
                    "'\\', got byte 0x%02x",
                    (unsigned char)*q);
    if (s->path[0] == '\0')
      return fail(s, err, "expected a module path of 1 to %d bytes, got ''",
                  TRACE_PATH_MAX);
    ev->label = s->path;
    break;
  case TRACE_SITE: {
    const char *id_tok = c->p;
    rc = take_u64(s, c, "ID", NULL, TRACE_DEF_ID_MAX - 1, &ev->id, err);
    if (rc != AS_OK)
      return rc;
    if (ev->id == 0) {
      while (is_ws(*id_tok))
        id_tok++;
      return fail_got(s, err, "a site ID above 0", id_tok,
                      (size_t)(c->p - id_tok));
    }
    ev->frames = s->frames;
    while (next_token(c, &tok, &len)) {
      if (ev->nframes == TRACE_FRAMES_MAX) {
        char w[64];
        snprintf(w, sizeof w, "end of line after %d frames", TRACE_FRAMES_MAX);
        return fail_got(s, err, w, tok, len);
      }
      if ((rc = take_frame(s, tok, len, &s->frames[ev->nframes], err)) != AS_OK)
        return rc;
      ev->nframes++;
    }
    if (ev->nframes == 0)
      return fail_got(s, err,
                      "a frame MODULE+0xOFFSET (a module id, an offset in hex)",
                      NULL, 0);
    break;
  }
  case TRACE_OP_COUNT:
    break;
  }
  return expect_end(s, c, err);
}

static as_status_t parse_provenance(text_src_t *s, cursor_t *c, as_err_t *err) {
  const char *line = c->p;
  c->p += 2; /* "#@" */
  skip_ws(c);
  const char *eq = memchr(c->p, '=', (size_t)(c->end - c->p));
  if (eq == NULL)
    return fail_got(s, err, "'#@ key=value'", line, (size_t)(c->end - line));
  const char *kend = eq;
  while (kend > c->p && is_ws(kend[-1]))
    kend--;
  size_t klen = (size_t)(kend - c->p);
  for (const char *q = c->p; q < kend; q++) {
    if ((unsigned char)*q <= 0x20 || *q == 0x7f)
      return fail_got(s, err, "a provenance key without spaces", c->p, klen);
  }
  if (klen == 0)
    return fail_got(s, err, "a provenance key before '='", line,
                    (size_t)(c->end - line));
  if (klen >= sizeof s->base.meta.key[0])
    return fail_got(s, err, "a provenance key of at most 31 bytes", c->p, klen);
  const char *v = eq + 1;
  const char *vend = c->end;
  while (v < vend && is_ws(*v))
    v++;
  while (vend > v && is_ws(vend[-1]))
    vend--;
  size_t vlen = (size_t)(vend - v);
  for (const char *q = v; q < vend; q++) {
    if ((unsigned char)*q < 0x20 && *q != '\t')
      return fail(s, err,
                  "expected a provenance value without control bytes, got "
                  "byte 0x%02x",
                  (unsigned char)*q);
  }
  if (vlen >= sizeof s->base.meta.value[0])
    return fail_got(s, err, "a provenance value of at most 255 bytes", v, vlen);
  char key[32], value[256];
  memcpy(key, c->p, klen);
  key[klen] = '\0';
  memcpy(value, v, vlen);
  value[vlen] = '\0';
  as_err_t sub;
  char     quoted[TRACE_QUOTE_MAX];
  if (trace_meta_get(&s->base.meta, key) != NULL) /* which would count? */
    return fail(s, err, "provenance key '%s' given twice",
                trace_quote(key, klen, quoted));
  if (trace_meta_set(&s->base.meta, key, value, &sub) != AS_OK) {
    char q[TRACE_QUOTE_MAX];
    return fail(s, err, "expected at most %d provenance keys, got '%s'",
                TRACE_META_MAX, trace_quote(key, klen, q));
  }
  return AS_OK;
}

/* Classifies the current line: handles provenance, comments and blank
 * lines (returning AS_OK with *is_event false), or leaves an event line for
 * parse_event (*is_event true). */
static as_status_t scan_line(text_src_t *s, cursor_t *c, bool *is_event,
                             as_err_t *err) {
  c->p = s->cur;
  c->end = s->cur + s->cur_len;
  *is_event = false;
  const char *nul = memchr(c->p, '\0', s->cur_len);
  if (nul != NULL)
    return fail(s, err, "expected text, got a NUL byte at column %zu",
                (size_t)(nul - c->p) + 1);
  skip_ws(c);
  if (c->p == c->end)
    return AS_OK;
  if (*c->p == '#') {
    if (c->end - c->p >= 2 && c->p[1] == '@') {
      if (s->seen_event)
        return fail(s, err,
                    "expected provenance ('#@') only before the first event");
      return parse_provenance(s, c, err);
    }
    return AS_OK;
  }
  *is_event = true;
  return AS_OK;
}

/* ---- Source ------------------------------------------------------------- */

static as_status_t text_next(trace_source_t *src, trace_event_t *ev,
                             as_err_t *err) {
  text_src_t *s = (text_src_t *)src;
  if (s->failure.code != AS_OK)
    return as_err_set(err, s->failure.code, "%s", s->failure.msg);
  if (s->done)
    return AS_DONE;
  as_status_t rc = AS_OK;
  cursor_t    c;
  for (;;) {
    bool is_event = s->pending;
    if (s->pending) {
      s->pending = false;
      c.p = s->cur;
      c.end = s->cur + s->cur_len;
    } else {
      rc = read_line(s, &s->failure);
      if (rc == AS_DONE) {
        s->done = true;
        return AS_DONE;
      }
      if (rc == AS_OK)
        rc = scan_line(s, &c, &is_event, &s->failure);
      if (rc != AS_OK)
        break;
    }
    if (is_event) {
      rc = parse_event(s, &c, ev, &s->failure);
      if (rc != AS_OK)
        break;
      char            why[160];
      trace_defs_rc_t d = trace_defs_note(&s->defs, ev, why, sizeof why);
      if (d != TRACE_DEFS_OK) {
        rc = d == TRACE_DEFS_NOMEM
                 ? as_err_set(&s->failure, AS_ENOMEM,
                              "%s:%" PRIu64 ": out of memory for call sites",
                              s->base.name, s->line)
                 : fail(s, &s->failure, "%s", why);
        break;
      }
      s->seen_event = true;
      s->prev_t_ns = ev->t_ns;
      return AS_OK;
    }
  }
  s->failure.code = rc;
  return as_err_set(err, rc, "%s", s->failure.msg);
}

static void text_close(trace_source_t *src) {
  text_src_t *s = (text_src_t *)src;
  if (s->f != NULL && s->own_f)
    fclose(s->f);
  trace_defs_free(&s->defs);
  free(s->buf);
  free(s);
}

static void text_where(const trace_source_t *src, char *buf, size_t len) {
  snprintf(buf, len, "line %" PRIu64, ((const text_src_t *)src)->line);
}

static const trace_source_methods_t text_source_methods = {
    .next = text_next,
    .close = text_close,
    .where = text_where,
};

/* Reads the header line and the provenance block, leaving the first event
 * line pending. */
static as_status_t read_header(text_src_t *s, as_err_t *err) {
  as_status_t       rc = read_line(s, err);
  static const char what[] = "header 'allocsim-trace 1'";
  if (rc == AS_DONE) {
    s->line = 1;
    return fail(s, err, "expected %s, got end of file", what);
  }
  if (rc != AS_OK)
    return rc;
  cursor_t    c = {s->cur, s->cur + s->cur_len};
  const char *tok;
  size_t      len;
  if (!next_token(&c, &tok, &len) ||
      !(len == strlen(TEXT_HEADER) && memcmp(tok, TEXT_HEADER, len) == 0))
    return fail_got(s, err, what, s->cur, s->cur_len);
  if (!next_token(&c, &tok, &len))
    return fail_got(s, err, "a version after 'allocsim-trace'", NULL, 0);
  uint64_t    v;
  as_num_rc_t nrc = as_parse_number(tok, len, NULL, &v);
  if (nrc == AS_NUM_MALFORMED)
    return fail_got(s, err, "a version number", tok, len);
  char q[TRACE_QUOTE_MAX];
  if (nrc != AS_NUM_OK || v != TEXT_VERSION)
    return fail(s, err, "unsupported version %s, expected %d",
                trace_quote(tok, len, q), TEXT_VERSION);
  if ((rc = expect_end(s, &c, err)) != AS_OK)
    return rc;
  for (;;) {
    rc = read_line(s, err);
    if (rc == AS_DONE) {
      s->done = true;
      return AS_OK;
    }
    bool is_event = false;
    if (rc == AS_OK)
      rc = scan_line(s, &c, &is_event, err);
    if (rc != AS_OK)
      return rc;
    if (is_event) {
      s->pending = true;
      return AS_OK;
    }
  }
}

as_status_t trace_text_open_stream(FILE *f, const char *name,
                                   const void *prefix, size_t prefix_len,
                                   trace_source_t **out, as_err_t *err) {
  *out = NULL;
  text_src_t *s = calloc(1, sizeof *s);
  size_t      cap = TEXT_BUF_INITIAL;
  while (cap < prefix_len)
    cap *= 2;
  char *buf = malloc(cap);
  if (s == NULL || buf == NULL) {
    free(s);
    free(buf);
    if (f != stdin)
      fclose(f);
    return as_err_set(err, AS_ENOMEM, "%s: out of memory", name);
  }
  s->base.methods = &text_source_methods;
  snprintf(s->base.name, sizeof s->base.name, "%s", name);
  s->f = f;
  s->own_f = f != stdin;
  s->buf = buf;
  s->cap = cap;
  if (prefix_len > 0)
    memcpy(s->buf, prefix, prefix_len);
  s->len = prefix_len;
  as_status_t rc = read_header(s, err);
  if (rc != AS_OK) {
    text_close(&s->base);
    return rc;
  }
  *out = &s->base;
  return AS_OK;
}

as_status_t trace_text_open(const char *path, trace_source_t **out,
                            as_err_t *err) {
  *out = NULL;
  if (strcmp(path, "-") == 0)
    return trace_text_open_stream(stdin, "<stdin>", NULL, 0, out, err);
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return as_err_set(err, AS_EIO, "%s: cannot open: %s", path,
                      strerror(errno));
  return trace_text_open_stream(f, path, NULL, 0, out, err);
}

/* ---- Writer ------------------------------------------------------------- */

typedef struct text_writer_s {
  trace_writer_t base; /* must be first */
  FILE          *f;
  bool           own_f;     /* false for stdout */
  char           name[256]; /* for messages */
  uint64_t       count;     /* events written */
  uint64_t       prev_t_ns;
} text_writer_t;

/* Appends the decimal digits of v at p; returns the new end. */
static char *put_u64(char *p, uint64_t v) {
  char tmp[20];
  int  n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0)
    *p++ = tmp[--n];
  return p;
}

static char *put_str(char *p, const char *s) {
  size_t n = strlen(s);
  memcpy(p, s, n);
  return p + n;
}

static as_status_t text_write(trace_writer_t *w, const trace_event_t *ev,
                              as_err_t *err) {
  text_writer_t *tw = (text_writer_t *)w;
  as_status_t    rc =
      trace_event_validate(ev, tw->prev_t_ns, tw->name, tw->count, err);
  if (rc != AS_OK)
    return rc;
  /* Longest line: a site of 32 frames, each 8 + 3 + 16 characters and a
   * space, after two numbers and the op: under 1200; other events (3
   * numbers of 20 digits + a quoted label of 63 escaped bytes (126), a
   * quoted module path of 255 bytes) are shorter. */
  char  line[1280];
  char *p = line;
  p = put_u64(p, ev->t_ns);
  *p++ = ' ';
  p = put_u64(p, ev->thread);
  *p++ = ' ';
  p = put_str(p, trace_op_name((trace_op_t)ev->op));
  switch ((trace_op_t)ev->op) {
  case TRACE_MALLOC:
  case TRACE_CALLOC:
  case TRACE_REALLOC:
  case TRACE_MEMALIGN:
  case TRACE_FREE:
    *p++ = ' ';
    p = put_u64(p, ev->id);
    if (ev->op == TRACE_MEMALIGN) {
      *p++ = ' ';
      p = put_u64(p, ev->align);
    }
    if (ev->op != TRACE_FREE) {
      *p++ = ' ';
      p = put_u64(p, ev->size);
    }
    if (ev->domain != TRACE_DOMAIN_RAW) {
      *p++ = ' ';
      p = put_str(p, trace_domain_name((trace_domain_t)ev->domain));
    }
    if (ev->op != TRACE_FREE && ev->site != 0) {
      *p++ = ' ';
      *p++ = '@';
      p = put_u64(p, ev->site);
    }
    break;
  case TRACE_MODULE: {
    const char *l = ev->label; /* validated: no '"', '\\', control bytes */
    bool        bare = true;
    for (const char *q = l; *q != '\0'; q++)
      bare = bare && label_bare_byte((unsigned char)*q);
    *p++ = ' ';
    p = put_u64(p, ev->id);
    *p++ = ' ';
    if (!bare)
      *p++ = '"';
    p = put_str(p, l);
    if (!bare)
      *p++ = '"';
    break;
  }
  case TRACE_SITE:
    *p++ = ' ';
    p = put_u64(p, ev->id);
    for (uint32_t i = 0; i < ev->nframes; i++) {
      static const char hex[] = "0123456789abcdef";
      char              tmp[16];
      int               n = 0;
      uint64_t          off = ev->frames[i].offset;
      *p++ = ' ';
      p = put_u64(p, ev->frames[i].module);
      p = put_str(p, "+0x");
      do {
        tmp[n++] = hex[off & 15];
        off >>= 4;
      } while (off != 0);
      while (n > 0)
        *p++ = tmp[--n];
    }
    break;
  case TRACE_MARK: {
    const char *l = ev->label != NULL ? ev->label : "";
    bool        bare = *l != '\0';
    for (const char *q = l; *q != '\0'; q++)
      bare = bare && label_bare_byte((unsigned char)*q);
    *p++ = ' ';
    if (bare) {
      p = put_str(p, l);
    } else {
      *p++ = '"';
      for (const char *q = l; *q != '\0'; q++) {
        if (*q == '"' || *q == '\\')
          *p++ = '\\';
        *p++ = *q;
      }
      *p++ = '"';
    }
    break;
  }
  case TRACE_IDLE:
  case TRACE_TRIM:
  case TRACE_RSS:
    *p++ = ' ';
    p = put_u64(p, ev->size);
    if (ev->op == TRACE_RSS && ev->offset != 0) {
      *p++ = ' ';
      p = put_u64(p, ev->offset);
    }
    break;
  case TRACE_PURGE:
    *p++ = ' ';
    p = put_str(p, trace_purge_name((trace_purge_kind_t)ev->size));
    if (ev->id != TRACE_ALL_ARENAS) {
      *p++ = ' ';
      p = put_u64(p, ev->id);
    }
    break;
  case TRACE_OPTION: {
    int64_t v = (int64_t)ev->size;
    *p++ = ' ';
    p = put_str(p, ev->label);
    *p++ = ' ';
    if (v < 0)
      *p++ = '-';
    p = put_u64(p, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
    break;
  }
  case TRACE_TOUCH:
    *p++ = ' ';
    p = put_u64(p, ev->id);
    *p++ = ' ';
    p = put_u64(p, ev->offset);
    *p++ = ' ';
    p = put_u64(p, ev->size);
    break;
  case TRACE_THREAD_START:
  case TRACE_THREAD_EXIT:
  case TRACE_OP_COUNT:
    break;
  }
  *p++ = '\n';
  if (fwrite(line, 1, (size_t)(p - line), tw->f) != (size_t)(p - line))
    return as_err_set(err, AS_EIO, "%s: write error: %s", tw->name,
                      strerror(errno));
  tw->count++;
  tw->prev_t_ns = ev->t_ns;
  return AS_OK;
}

static as_status_t text_writer_close(trace_writer_t *w, as_err_t *err) {
  text_writer_t *tw = (text_writer_t *)w;
  as_status_t    rc = AS_OK;
  if (fflush(tw->f) != 0 || ferror(tw->f))
    rc = as_err_set(err, AS_EIO, "%s: write error: %s", tw->name,
                    strerror(errno));
  if (tw->own_f && fclose(tw->f) != 0 && rc == AS_OK)
    rc = as_err_set(err, AS_EIO, "%s: close failed: %s", tw->name,
                    strerror(errno));
  free(tw);
  return rc;
}

static const trace_writer_methods_t text_writer_methods = {
    .write = text_write,
    .close = text_writer_close,
};

/* A provenance pair the text format can carry back unchanged. */
static bool meta_fits_text(const char *key, const char *value) {
  size_t vlen = strlen(value);
  return trace_meta_key_ok(key) && trace_meta_value_ok(value) &&
         !(vlen > 0 && (is_ws(value[0]) || is_ws(value[vlen - 1])));
}

as_status_t trace_text_writer_open_stream(FILE *f, const char *name,
                                          const trace_meta_t *meta,
                                          trace_writer_t **out, as_err_t *err) {
  *out = NULL;
  text_writer_t *tw = calloc(1, sizeof *tw);
  if (tw == NULL) {
    if (f != stdout)
      fclose(f);
    return as_err_set(err, AS_ENOMEM, "%s: out of memory", name);
  }
  tw->base.methods = &text_writer_methods;
  tw->f = f;
  tw->own_f = f != stdout;
  snprintf(tw->name, sizeof tw->name, "%s", name);
  fprintf(f, "%s %d\n", TEXT_HEADER, TEXT_VERSION);
  for (size_t i = 0; meta != NULL && i < meta->count; i++) {
    if (!meta_fits_text(meta->key[i], meta->value[i])) {
      as_err_set(err, AS_EINVAL,
                 "%s: provenance '%.31s' cannot be written as text (key "
                 "with spaces, '=' or control bytes, or value with control "
                 "bytes or surrounding spaces)",
                 name, meta->key[i]);
      text_writer_close(&tw->base, NULL);
      return AS_EINVAL;
    }
    fprintf(f, "#@ %s=%s\n", meta->key[i], meta->value[i]);
  }
  *out = &tw->base;
  return AS_OK;
}
