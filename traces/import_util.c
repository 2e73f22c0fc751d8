/* traces/import_util.c -- helpers every importer uses: message quoting,
 * the cost-model clock, user-inserted events, the deferred writer and the
 * file driver (contracts in import_util.h).
 */
#include "import_util.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/cost.h"
#include "../sim/grow.h"
#include "../sim/units.h"
#include "capture/capture_wire.h"
#include "compressed.h"

/* ---- Messages and clock ------------------------------------------------- */

ssize_t import_getline(char **buf, size_t *cap, FILE *in, size_t max) {
  size_t len = 0;
  int    c = EOF;
  while (len <= max && (c = getc_unlocked(in)) != EOF) {
    if (len + 2 > *cap) {
      size_t want = *cap ? 2 * *cap : 128;
      char  *grown = realloc(*buf, want);
      if (grown == NULL)
        return -1; /* as getline: ENOMEM, and ferror is not set */
      *buf = grown;
      *cap = want;
    }
    (*buf)[len++] = (char)c;
    if (c == '\n')
      break;
  }
  if (len == 0)
    return -1;
  (*buf)[len] = '\0';
  return len > max ? -2 : (ssize_t)len;
}

bool import_hex(const char **p, uint64_t *out) {
  const char *s = *p;
  uint64_t    v = 0;
  int         nd = 0;
  for (;; s++, nd++) {
    int d;
    if (*s >= '0' && *s <= '9')
      d = *s - '0';
    else if (*s >= 'a' && *s <= 'f')
      d = *s - 'a' + 10;
    else if (*s >= 'A' && *s <= 'F')
      d = *s - 'A' + 10;
    else
      break;
    if (nd == 16)
      return false;
    v = v << 4 | (uint64_t)d;
  }
  if (nd == 0)
    return false;
  *out = v;
  *p = s;
  return true;
}

as_status_t import_meta_put(trace_meta_t *m, const char *key, const char *value,
                            as_err_t *err) {
  char v[256];
  while (*value == ' ' || *value == '\t')
    value++;
  size_t n = 0;
  for (; value[n] != '\0' && n < sizeof v - 1; n++)
    v[n] =
        ((unsigned char)value[n] < 0x20 && value[n] != '\t') || value[n] == 0x7f
            ? '?'
            : value[n];
  while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
    n--;
  v[n] = '\0';
  return trace_meta_set(m, key, v, err);
}

as_status_t import_meta_put_env_knobs(trace_meta_t *m, char *const *env,
                                      as_err_t *err) {
  char        long_env[256] = "";
  size_t      long_len = 0;
  as_status_t rc = AS_OK;
  for (size_t i = 0; env[i] != NULL && rc == AS_OK; i++) {
    const char *eq = strchr(env[i], '=');
    size_t      n = eq != NULL ? (size_t)(eq - env[i]) : 0;
    if (n == 0 || n > 64 || !capture_wire_env_knob(env[i], n))
      continue;
    char key[32];
    if (as_format_fits(key, sizeof key, "env.%.*s", (int)n, env[i]))
      rc = import_meta_put(m, key, eq + 1, err);
    else if (long_len + strlen(env[i]) + 1 < sizeof long_env)
      long_len +=
          (size_t)snprintf(long_env + long_len, sizeof long_env - long_len,
                           "%s%s", long_len ? " " : "", env[i]);
  }
  if (rc == AS_OK && long_len > 0)
    rc = import_meta_put(m, "malloc_env", long_env, err);
  return rc;
}

uint64_t import_tick_ns(uint64_t tick_ns, trace_op_t op, uint64_t size) {
  if (tick_ns != 0)
    return tick_ns;
  if (op == TRACE_FREE)
    return sim_cost_measured.free_ns;
  return sim_cost_c_alloc_ns(&sim_cost_measured, size);
}

as_status_t import_emit(trace_writer_t *w, uint64_t t_ns, trace_op_t op,
                        uint64_t id, uint64_t size, uint64_t *events,
                        as_err_t *err) {
  trace_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.t_ns = t_ns;
  ev.op = (uint8_t)op;
  ev.id = id;
  ev.size = size;
  ev.domain = TRACE_DOMAIN_RAW;
  (*events)++;
  return trace_writer_write(w, &ev, err);
}

/* ---- Inserted events ---------------------------------------------------- */

static as_status_t inserts_push(import_inserts_t *ins, const import_insert_t *x,
                                as_err_t *err) {
  import_insert_t *v = as_grow(ins->v, &ins->cap, ins->n + 1, sizeof *v, 8);
  if (v == NULL)
    return as_err_set(err, AS_ENOMEM, "out of memory for inserted events");
  ins->v = v;
  v[ins->n] = *x;
  v[ins->n].order = ins->n;
  ins->n++;
  return AS_OK;
}

as_status_t import_inserts_add_trim(import_inserts_t *ins, uint64_t line,
                                    as_err_t *err) {
  import_insert_t x;
  memset(&x, 0, sizeof x);
  x.after_line = line;
  x.op = TRACE_TRIM;
  snprintf(x.from, sizeof x.from, "--assume-trim-at");
  return inserts_push(ins, &x, err);
}

bool import_parse_at(const char *s, uint64_t *line) {
  if (strcmp(s, "end") == 0) {
    *line = IMPORT_AT_END;
    return true;
  }
  uint64_t v;
  /* 2^64 - 1 is IMPORT_AT_END: taken as a line it would silently mean
   * "end", never "past the input's last line". */
  if (as_parse_number(s, strlen(s), NULL, &v) != AS_NUM_OK ||
      v == IMPORT_AT_END)
    return false;
  *line = v;
  return true;
}

/* Splits the next whitespace-separated word off *p into buf (NUL-ended);
 * false if there is none or it does not fit. */
static bool next_word(char **p, char *buf, size_t len) {
  char *s = *p;
  while (*s == ' ' || *s == '\t')
    s++;
  size_t n = strcspn(s, " \t");
  if (n == 0 || n >= len)
    return false;
  memcpy(buf, s, n);
  buf[n] = '\0';
  *p = s + n;
  return true;
}

/* got_len bytes from got, which may hold a NUL; NULL: the end of the line. */
static as_status_t marks_bad_len(const char *path, uint64_t line,
                                 const char *what, const char *got,
                                 size_t got_len, as_err_t *err) {
  char q[TRACE_QUOTE_MAX];
  return as_err_set(err, AS_EFORMAT, "%s:%" PRIu64 ": expected %s, got %s%s%s",
                    path, line, what, got ? "'" : "",
                    got ? trace_quote(got, got_len, q) : "end of line",
                    got ? "'" : "");
}

static as_status_t marks_bad(const char *path, uint64_t line, const char *what,
                             const char *got, as_err_t *err) {
  return marks_bad_len(path, line, what, got, got ? strlen(got) : 0, err);
}

/* A mark's label from the n bytes at p into out (TRACE_LABEL_MAX + 1
 * bytes): the bytes as they are (spaces allowed, no '"'), or, between
 * double quotes, unquoted as a text trace's label is (\" and \\
 * escape), so that a label written for a text trace means the same here.
 * False if empty, too long, not printable, or badly quoted. */
static bool take_mark_label(const char *p, size_t n, char *out) {
  size_t len = 0;
  if (n > 0 && p[0] == '"') {
    if (n < 2 || p[n - 1] != '"')
      return false;
    for (size_t i = 1; i < n - 1; i++) {
      char b = p[i];
      if (b == '"')
        return false; /* unescaped: the label ended before the line */
      if (b == '\\') {
        if (i + 1 == n - 1 || (p[i + 1] != '"' && p[i + 1] != '\\'))
          return false;
        b = p[++i];
      }
      if (len == TRACE_LABEL_MAX)
        return false;
      out[len++] = b;
    }
  } else {
    if (n > TRACE_LABEL_MAX || memchr(p, '"', n) != NULL)
      return false;
    memcpy(out, p, n);
    len = n;
  }
  out[len] = '\0';
  bool ok = len > 0;
  for (size_t i = 0; ok && i < len; i++)
    ok = (unsigned char)out[i] >= 0x20 && out[i] != 0x7f;
  return ok;
}

/* The length of a marks-file line's content: up to its first '#' outside
 * a double-quoted label (a comment, as in text traces), or its end. */
static size_t marks_content_len(const char *s) {
  bool   quoted = false;
  size_t i = 0;
  for (; s[i] != '\0' && s[i] != '\r' && s[i] != '\n'; i++) {
    if (quoted && s[i] == '\\' && (s[i + 1] == '"' || s[i + 1] == '\\'))
      i++;
    else if (s[i] == '"')
      quoted = !quoted;
    else if (s[i] == '#' && !quoted)
      break;
  }
  return i;
}

/* One marks-file line (comment and blank lines already skipped). */
static as_status_t marks_line(import_inserts_t *ins, const char *path,
                              uint64_t lineno, char *s, as_err_t *err) {
  char            at[32], op[16], arg[128];
  import_insert_t x;
  memset(&x, 0, sizeof x);
  snprintf(x.from, sizeof x.from, "%.80s:%" PRIu64, path, lineno);
  char *p = s;
  if (!next_word(&p, at, sizeof at) || !import_parse_at(at, &x.after_line))
    return marks_bad(path, lineno, "an input line number or 'end'", s, err);
  while (*p == ' ' || *p == '\t')
    p++;
  char *op_at = p;
  if (!next_word(&p, op, sizeof op))
    return marks_bad(path, lineno, "'mark', 'trim' or 'idle' after the line",
                     NULL, err);
  while (*p == ' ' || *p == '\t')
    p++;
  size_t n = strlen(p);
  while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
    p[--n] = '\0';
  if (strcmp(op, "mark") == 0) {
    x.op = TRACE_MARK;
    if (!take_mark_label(p, n, x.label)) {
      char what[112];
      snprintf(what, sizeof what,
               "a label of 1 to %d printable bytes, bare or double-quoted "
               "('\\\"' and '\\\\' inside quotes)",
               TRACE_LABEL_MAX);
      return marks_bad(path, lineno, what, n ? p : NULL, err);
    }
  } else if (strcmp(op, "trim") == 0) {
    char *args = p;
    x.op = TRACE_TRIM;
    if (n > 0 && (!next_word(&p, arg, sizeof arg) || *p != '\0' ||
                  !as_parse_bytes(arg, &x.size)))
      return marks_bad(path, lineno, "a pad in bytes ('0', '128K') or nothing",
                       args, err);
  } else if (strcmp(op, "idle") == 0) {
    char *args = p;
    x.op = TRACE_IDLE;
    if (!next_word(&p, arg, sizeof arg) || *p != '\0' ||
        !as_parse_duration_ns(arg, &x.size))
      return marks_bad(path, lineno, "a duration ('10ms', '2s')",
                       n ? args : NULL, err);
  } else {
    return marks_bad(path, lineno, "'mark', 'trim' or 'idle'", op_at, err);
  }
  return inserts_push(ins, &x, err);
}

as_status_t import_inserts_read(import_inserts_t *ins, const char *path,
                                as_err_t *err) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return as_err_set(err, AS_EIO, "%s: %s", path, strerror(errno));
  char       *buf = NULL;
  size_t      cap = 0;
  uint64_t    lineno = 0;
  as_status_t rc = AS_OK;
  ssize_t     len;
  while (rc == AS_OK &&
         (len = import_getline(&buf, &cap, f, IMPORT_LINE_MAX)) != -1) {
    lineno++;
    if (len == -2) {
      rc = as_err_set(err, AS_EFORMAT,
                      "%s:%" PRIu64 ": expected a line of "
                      "at most %d bytes",
                      path, lineno, IMPORT_LINE_MAX);
      break;
    }
    if (strlen(buf) != (size_t)len) { /* a NUL: quoted whole, where it is */
      rc = marks_bad_len(path, lineno, "text", buf,
                         (size_t)len - (buf[len - 1] == '\n'), err);
      break;
    }
    /* A '#' starts a comment anywhere but in a quoted label, as in text
     * traces: a bare label stops before it, and an event may be followed
     * by one. */
    buf[marks_content_len(buf)] = '\0';
    char *s = buf;
    while (*s == ' ' || *s == '\t')
      s++;
    if (*s == '\0')
      continue;
    rc = marks_line(ins, path, lineno, s, err);
  }
  if (rc == AS_OK && ferror(f))
    rc = as_err_set(err, AS_EIO, "%s: read error: %s", path, strerror(errno));
  free(buf);
  fclose(f);
  return rc;
}

static int insert_cmp(const void *a, const void *b) {
  const import_insert_t *x = a, *y = b;
  if (x->after_line != y->after_line)
    return x->after_line < y->after_line ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

void import_inserts_sort(import_inserts_t *ins) {
  if (ins->n > 1)
    qsort(ins->v, ins->n, sizeof *ins->v, insert_cmp);
  ins->next = 0;
}

as_status_t import_inserts_emit(import_inserts_t *ins, uint64_t line,
                                uint64_t t_ns, trace_writer_t *w,
                                uint64_t *emitted, as_err_t *err) {
  if (line != IMPORT_AT_END)
    ins->last_line = line;
  while (ins->next < ins->n && ins->v[ins->next].after_line <= line) {
    const import_insert_t *x = &ins->v[ins->next++];
    if (line == IMPORT_AT_END && x->after_line != IMPORT_AT_END)
      return as_err_set(err, AS_EFORMAT,
                        "%s: input line %" PRIu64 " is past the input's "
                        "last line (%" PRIu64 "); expected a line of the "
                        "decompressed input, or 'end'",
                        x->from, x->after_line, ins->last_line);
    trace_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.t_ns = t_ns;
    ev.op = x->op;
    ev.size = x->size;
    ev.label = x->op == TRACE_MARK ? x->label : NULL;
    as_status_t rc = trace_writer_write(w, &ev, err);
    if (rc != AS_OK)
      return rc;
    (*emitted)++;
  }
  return AS_OK;
}

void import_inserts_free(import_inserts_t *ins) {
  free(ins->v);
  memset(ins, 0, sizeof *ins);
}

/* ---- Deferred writer ---------------------------------------------------- */

typedef struct deferred_s deferred_t;
struct deferred_s {
  trace_writer_t  base; /* must be first */
  trace_writer_t *real; /* NULL until the first event */
  trace_meta_t   *meta;
  trace_format_t  fmt;
  FILE           *f; /* the stream form: not yet handed over */
  char            name[256];
  char           *path;     /* the file form */
  uint64_t        shift_ns; /* inserted idles so far: later events move */
};

static as_status_t deferred_start(deferred_t *d, as_err_t *err) {
  if (d->real != NULL)
    return AS_OK;
  if (d->f != NULL) {
    FILE *f = d->f;
    d->f = NULL; /* trace_writer_open_stream owns it from here */
    return trace_writer_open_stream(f, d->name, d->fmt, d->meta, &d->real, err);
  }
  return trace_writer_open(d->path, d->fmt, d->meta, &d->real, err);
}

/* Writes ev, later by the idles inserted before it: a log has no idles of
 * its own, and an idle moves the clock past everything the program did
 * after it (traces/event.h), so what follows an inserted idle moves by its
 * length. */
static as_status_t deferred_write(trace_writer_t *w, const trace_event_t *ev,
                                  as_err_t *err) {
  deferred_t   *d = (deferred_t *)w;
  trace_event_t moved = *ev;
  uint64_t      idle = ev->op == TRACE_IDLE ? ev->size : 0;
  moved.t_ns += d->shift_ns;
  if (moved.t_ns < ev->t_ns || moved.t_ns + idle < moved.t_ns)
    return as_err_set(
        err, AS_EFORMAT,
        "the idles inserted by --marks run the clock past 2^64 ns "
        "(%" PRIu64 " ns of idles up to an event at %" PRIu64 " ns)",
        d->shift_ns + idle, ev->t_ns);
  d->shift_ns += idle;
  as_status_t rc = deferred_start(d, err);
  return rc != AS_OK ? rc : trace_writer_write(d->real, &moved, err);
}

static as_status_t deferred_close(trace_writer_t *w, as_err_t *err) {
  deferred_t *d = (deferred_t *)w;
  as_status_t rc = deferred_start(d, err);
  if (d->real != NULL) {
    as_err_t    cerr = {0};
    as_status_t crc = trace_writer_close(d->real, &cerr);
    if (rc == AS_OK && crc != AS_OK) {
      rc = crc;
      if (err != NULL)
        *err = cerr;
    }
  }
  if (d->f != NULL && d->f != stdout)
    fclose(d->f);
  free(d->path);
  free(d);
  return rc;
}

/* Drops the output of a failed import: a real writer, if one was ever
 * started, is discarded, so a path keeps what it held before
 * (trace_writer_discard). */
static void deferred_discard(trace_writer_t *w) {
  deferred_t *d = (deferred_t *)w;
  trace_writer_discard(d->real);
  if (d->f != NULL && d->f != stdout)
    fclose(d->f);
  free(d->path);
  free(d);
}

static const trace_writer_methods_t deferred_methods = {
    .write = deferred_write,
    .close = deferred_close,
};

static as_status_t deferred_new(FILE *f, const char *name, const char *path,
                                trace_format_t fmt, trace_meta_t *meta,
                                trace_writer_t **out, as_err_t *err) {
  *out = NULL;
  deferred_t *d = calloc(1, sizeof *d);
  if (d == NULL || (path != NULL && (d->path = strdup(path)) == NULL)) {
    free(d);
    if (f != NULL && f != stdout)
      fclose(f);
    return as_err_set(err, AS_ENOMEM, "out of memory for a writer");
  }
  d->base.methods = &deferred_methods;
  d->meta = meta;
  d->fmt = fmt;
  d->f = f;
  snprintf(d->name, sizeof d->name, "%s", name ? name : path);
  *out = &d->base;
  return AS_OK;
}

as_status_t import_writer_open(const char *path, trace_format_t fmt,
                               trace_meta_t *meta, trace_writer_t **out,
                               as_err_t *err) {
  return deferred_new(NULL, NULL, path, fmt, meta, out, err);
}

as_status_t import_writer_open_stream(FILE *f, const char *name,
                                      trace_format_t fmt, trace_meta_t *meta,
                                      trace_writer_t **out, as_err_t *err) {
  return deferred_new(f, name, NULL, fmt, meta, out, err);
}

/* ---- Driver ------------------------------------------------------------- */

as_status_t import_run_file(const char *in_path, const char *out_path,
                            trace_format_t fmt, trace_meta_t *meta,
                            import_stream_fn fn, void *user, as_err_t *err) {
  cfile_t    *in;
  as_status_t rc = cfile_open(in_path, &in, err);
  if (rc != AS_OK)
    return rc;
  char input[256];
  snprintf(input, sizeof input, "%s", in_path); /* truncated if longer */
  if ((rc = trace_meta_set(meta, "input", input, err)) != AS_OK ||
      (cfile_kind(in) != CFILE_PLAIN &&
       (rc = trace_meta_set(meta, "compression",
                            cfile_kind_name(cfile_kind(in)), err)) != AS_OK)) {
    cfile_close(in);
    return rc;
  }
  trace_writer_t *w;
  if ((rc = import_writer_open(out_path, fmt, meta, &w, err)) != AS_OK) {
    cfile_close(in);
    return rc;
  }
  const char *name = strcmp(in_path, "-") == 0 ? "<stdin>" : in_path;
  rc = fn(cfile_stream(in), name, w, meta, user, err);
  if (rc != AS_OK && cfile_status(in, NULL) != AS_OK)
    rc = cfile_status(in, err);
  cfile_close(in);
  if (rc == AS_OK)
    return trace_writer_close(w, err);
  deferred_discard(w);
  return rc;
}
