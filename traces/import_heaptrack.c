/* traces/import_heaptrack.c -- heaptrack raw and interpreted data files
 * into traces (format, mapping and limits in import_heaptrack.h).
 *
 * Lines are read whole (import_getline, up to IMPORT_LINE_MAX bytes).  The kind
 * of file (raw or interpreted) is decided by the first line only one kind
 * writes ('x' or 'm': raw; 's', 'i' or 'a': interpreted; else the field count
 * of the first '+'), and a line of the other kind afterwards is an error.
 *
 * Ids.  Raw files map addresses to dense recycled ids through
 * traces/addr_ids.  Interpreted files have no addresses: the mapper hands
 * out ids by an ever-increasing key and holds them (detach), each
 * allocation-info index keeps a stack of its live ids (newest first, linked
 * through next[id]), and a free pops the newest.
 */
#include "import_heaptrack.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/grow.h"
#include "addr_ids.h"

/* No free id in a stack link. */
#define HT_NONE UINT64_MAX

typedef enum ht_kind_e { HT_UNKNOWN, HT_RAW, HT_INTERPRETED } ht_kind_t;

/* An interpreted file's allocation info ('a SIZE TRACE'). */
typedef struct ht_info_s ht_info_t;
struct ht_info_s {
  uint64_t size;
  uint64_t top;  /* newest live id, HT_NONE if none */
  uint64_t live; /* live blocks */
};

typedef struct ht_s ht_t;
struct ht_s {
  const char               *name;
  trace_writer_t           *w;
  trace_meta_t             *meta;
  import_heaptrack_stats_t *st;
  import_inserts_t         *inserts;
  ht_kind_t                 kind;
  bool                      started;      /* the first event was written */
  bool                      have_command; /* an 'X' line was read */
  uint64_t                  t_ns;
  addr_ids_t                ids;
  /* interpreted: allocation infos and their live-id stacks */
  ht_info_t *info;
  size_t     ninfo, info_cap;
  uint64_t  *next; /* [id]: the next older live id of its info */
  size_t     next_cap;
  uint64_t   seq; /* keys for the id mapper */
  /* RSS-drop sign */
  uint64_t last_rss;
  uint64_t last_rss_line;
  bool     have_rss;
  uint64_t frees_since_rss;
};

/* ---- Messages ----------------------------------------------------------- */

static as_status_t bad(ht_t *h, const char *what, const char *got,
                       as_err_t *err) {
  char q[TRACE_QUOTE_MAX];
  if (got == NULL)
    return as_err_set(err, AS_EFORMAT,
                      "%s:%" PRIu64 ": expected %s, got end "
                      "of line",
                      h->name, h->st->lines, what);
  return as_err_set(err, AS_EFORMAT, "%s:%" PRIu64 ": expected %s, got '%s'",
                    h->name, h->st->lines, what,
                    trace_quote(got, strlen(got), q));
}

static as_status_t oom(ht_t *h, as_err_t *err) {
  return as_err_set(err, AS_ENOMEM, "%s:%" PRIu64 ": out of memory importing",
                    h->name, h->st->lines);
}

/* ---- Fields ------------------------------------------------------------- */

/* Parses n hex fields (1-16 lowercase or uppercase digits, one space
 * before each) from s; *rest = what follows.  False if malformed. */
static bool hex_fields(const char *s, int n, uint64_t *out, const char **rest) {
  for (int i = 0; i < n; i++) {
    if (*s != ' ')
      return false;
    s++;
    if (!import_hex(&s, &out[i]))
      return false;
  }
  if (rest != NULL)
    *rest = s;
  return true;
}

/* Exactly n hex fields and the end of the line. */
static as_status_t fields(ht_t *h, const char *line, int n, uint64_t *out,
                          const char *what, as_err_t *err) {
  const char *rest;
  if (!hex_fields(line + 1, n, out, &rest) || *rest != '\0')
    return bad(h, what, line, err);
  return AS_OK;
}

/* A string field of a format-3 file ("LEN STRING", linereader.h:111-125)
 * or the rest of the line (format 2); *s and *len give it. */
static bool string_field(const ht_t *h, const char *p, const char **s,
                         size_t *len) {
  if (h->st->file_version >= 3) {
    uint64_t    n;
    const char *rest;
    if (!hex_fields(p, 1, &n, &rest) || *rest != ' ' || n > strlen(rest + 1))
      return false;
    *s = rest + 1;
    *len = (size_t)n;
    return true;
  }
  if (*p != ' ')
    return false;
  *s = p + 1;
  *len = strlen(p + 1);
  return true;
}

/* ---- Provenance --------------------------------------------------------- */

static as_status_t meta_put(ht_t *h, const char *key, const char *value,
                            as_err_t *err) {
  if (h->meta == NULL || h->started)
    return AS_OK; /* the header is written: too late */
  return import_meta_put(h->meta, key, value, err);
}

static as_status_t meta_header(ht_t *h, as_err_t *err) {
  char        ver[32], fmt[8];
  as_status_t rc;
  snprintf(ver, sizeof ver, "%u.%u.%u", h->st->heaptrack_version >> 16 & 0xff,
           h->st->heaptrack_version >> 8 & 0xff,
           h->st->heaptrack_version & 0xff);
  snprintf(fmt, sizeof fmt, "%u", h->st->file_version);
  if ((rc = meta_put(h, "source", "heaptrack", err)) != AS_OK ||
      (rc = meta_put(h, "heaptrack_version", ver, err)) != AS_OK ||
      (rc = meta_put(h, "heaptrack_file_format", fmt, err)) != AS_OK ||
      (rc = meta_put(h, "clock",
                     "heaptrack timestamps: ms since it "
                     "started; events take the last one",
                     err)) != AS_OK ||
      (rc = meta_put(h, "threads", "not recorded (all on thread 0)", err)) !=
          AS_OK ||
      (rc = meta_put(h, "unrecorded", "mmap, munmap, malloc_trim, threads",
                     err)) != AS_OK)
    return rc;
  return AS_OK;
}

/* ---- Events ------------------------------------------------------------- */

static as_status_t emit(ht_t *h, trace_op_t op, uint64_t id, uint64_t size,
                        as_err_t *err) {
  if (!h->started) {
    as_status_t rc = meta_put(h, "heaptrack_data",
                              h->kind == HT_RAW ? "raw" : "interpreted", err);
    if (rc != AS_OK)
      return rc;
    h->started = true;
  }
  return import_emit(h->w, h->t_ns, op, id, size, &h->st->events, err);
}

static as_status_t set_kind(ht_t *h, ht_kind_t k, const char *line,
                            as_err_t *err) {
  if (h->kind == HT_UNKNOWN) {
    h->kind = k;
    h->st->raw = k == HT_RAW;
    return AS_OK;
  }
  if (h->kind == k)
    return AS_OK;
  return bad(h,
             h->kind == HT_RAW ? "a line of a raw heaptrack file"
                               : "a line of an interpreted heaptrack file",
             line, err);
}

/* ---- Raw files ---------------------------------------------------------- */

static as_status_t raw_malloc(ht_t *h, uint64_t size, uint64_t ptr,
                              as_err_t *err) {
  uint64_t    id;
  as_status_t rc;
  if (addr_ids_remove(&h->ids, ptr, &id)) { /* its free was not logged */
    h->st->missed_frees++;
    if ((rc = emit(h, TRACE_FREE, id, 0, err)) != AS_OK)
      return rc;
  }
  if (!addr_ids_add(&h->ids, ptr, &id))
    return oom(h, err);
  h->st->mallocs++;
  return emit(h, TRACE_MALLOC, id, size, err);
}

static as_status_t raw_free(ht_t *h, uint64_t ptr, as_err_t *err) {
  uint64_t id;
  if (!addr_ids_remove(&h->ids, ptr, &id)) {
    h->st->unmatched_frees++; /* allocated before heaptrack started */
    return AS_OK;
  }
  h->st->frees++;
  h->frees_since_rss++;
  return emit(h, TRACE_FREE, id, 0, err);
}

/* ---- Interpreted files -------------------------------------------------- */

static as_status_t info_define(ht_t *h, uint64_t size, as_err_t *err) {
  ht_info_t *v = as_grow(h->info, &h->info_cap, h->ninfo + 1, sizeof *v, 256);
  if (v == NULL)
    return oom(h, err);
  h->info = v;
  v[h->ninfo++] = (ht_info_t){size, HT_NONE, 0};
  return AS_OK;
}

static as_status_t check_index(ht_t *h, uint64_t idx, const char *line,
                               as_err_t *err) {
  if (idx < h->ninfo)
    return AS_OK;
  char what[96];
  snprintf(what, sizeof what,
           "an allocation index below %zu (defined by "
           "'a' lines so far)",
           h->ninfo);
  return bad(h, what, line, err);
}

static as_status_t interp_malloc(ht_t *h, uint64_t idx, const char *line,
                                 as_err_t *err) {
  as_status_t rc = check_index(h, idx, line, err);
  if (rc != AS_OK)
    return rc;
  uint64_t id;
  if (!addr_ids_add(&h->ids, h->seq, &id))
    return oom(h, err);
  addr_ids_detach(&h->ids, h->seq++, &id); /* held until its free */
  if (id >= h->next_cap) {
    uint64_t *n =
        as_grow(h->next, &h->next_cap, (size_t)id + 1, sizeof *n, 1024);
    if (n == NULL) {
      addr_ids_release(&h->ids, id);
      return oom(h, err);
    }
    h->next = n;
  }
  ht_info_t *info = &h->info[idx];
  h->next[id] = info->top;
  info->top = id;
  info->live++;
  h->st->mallocs++;
  return emit(h, TRACE_MALLOC, id, info->size, err);
}

static as_status_t interp_free(ht_t *h, uint64_t idx, const char *line,
                               as_err_t *err) {
  as_status_t rc = check_index(h, idx, line, err);
  if (rc != AS_OK)
    return rc;
  ht_info_t *info = &h->info[idx];
  if (info->top == HT_NONE)
    return bad(h, "a '-' of an allocation index with a live block", line, err);
  uint64_t id = info->top;
  info->top = h->next[id];
  if (info->live-- > 1)
    h->st->ambiguous_frees++;
  addr_ids_release(&h->ids, id);
  h->st->frees++;
  h->frees_since_rss++;
  return emit(h, TRACE_FREE, id, 0, err);
}

/* ---- Lines -------------------------------------------------------------- */

static as_status_t version_line(ht_t *h, const char *line, as_err_t *err) {
  static const char want[] =
      "'v VERSION FILE_FORMAT' (the first line of a heaptrack data file)";
  uint64_t    v[2];
  const char *rest;
  if (line[0] != 'v' || !hex_fields(line + 1, 2, v, &rest) || *rest != '\0')
    return bad(h, want, line[0] ? line : NULL, err);
  h->st->heaptrack_version = (uint32_t)v[0];
  h->st->file_version = (unsigned)(v[1] > 99 ? 99 : v[1]);
  if (v[1] < 2 || v[1] > 3) {
    char got[96];
    snprintf(got, sizeof got,
             "format %" PRIu64 " (written by heaptrack "
             "%" PRIu64 ".%" PRIu64 ".%" PRIu64 ")",
             v[1], v[0] >> 16 & 0xff, v[0] >> 8 & 0xff, v[0] & 0xff);
    return as_err_set(err, AS_EFORMAT,
                      "%s:%" PRIu64 ": expected heaptrack file format 2 or 3 "
                      "(heaptrack 1.1 to 1.5), got %s",
                      h->name, h->st->lines, got);
  }
  return meta_header(h, err);
}

/* The command line: "X arg0 arg1 ..." (libheaptrack.cpp writeCommandLine). */
static as_status_t command_line(ht_t *h, const char *line, as_err_t *err) {
  const char *cmd = line[1] == ' ' ? line + 2 : line + 1; /* "X": none */
  snprintf(h->st->command, sizeof h->st->command, "%s", cmd);
  size_t      n = strcspn(cmd, " ");
  const char *base = cmd;
  for (size_t i = 0; i < n; i++)
    if (cmd[i] == '/')
      base = cmd + i + 1;
  h->st->python = strncmp(base, "python", 6) == 0;
  return meta_put(h, "command", cmd, err);
}

static as_status_t page_size_line(ht_t *h, const char *line, as_err_t *err) {
  uint64_t    v[2];
  as_status_t rc = fields(h, line, 2, v, "'I PAGE_SIZE PAGES' in hex", err);
  if (rc != AS_OK)
    return rc;
  if (v[0] == 0 || (v[0] & (v[0] - 1)) != 0)
    return bad(h, "a page size that is a power of two", line, err);
  h->st->page_size = v[0];
  char ps[32];
  snprintf(ps, sizeof ps, "%" PRIu64, v[0]);
  return meta_put(h, "page_size", ps, err);
}

static as_status_t timestamp_line(ht_t *h, const char *line, as_err_t *err) {
  uint64_t    ms;
  as_status_t rc = fields(h, line, 1, &ms, "'c MILLISECONDS' in hex", err);
  if (rc != AS_OK)
    return rc;
  if (ms > UINT64_MAX / 1000000)
    return bad(h, "a timestamp below 2^64 ns", line, err);
  uint64_t t = ms * 1000000;
  if (t > h->t_ns) /* a clock that steps back keeps the trace ordered */
    h->t_ns = t;
  h->st->end_t_ns = h->t_ns;
  return AS_OK;
}

static as_status_t rss_line(ht_t *h, const char *line, as_err_t *err) {
  uint64_t    pages;
  as_status_t rc = fields(h, line, 1, &pages, "'R PAGES' in hex", err);
  if (rc != AS_OK)
    return rc;
  uint64_t page = h->st->page_size ? h->st->page_size : 4096;
  if (pages > UINT64_MAX / page)
    return bad(h, "an RSS below 2^64 bytes", line, err);
  uint64_t rss = pages * page;
  if (h->have_rss && rss + IMPORT_HEAPTRACK_DROP_BYTES <= h->last_rss &&
      h->frees_since_rss == 0) {
    h->st->rss_drops++;
    if (h->last_rss - rss > h->st->largest_drop_bytes) {
      h->st->largest_drop_bytes = h->last_rss - rss;
      h->st->largest_drop_t_ns = h->t_ns;
      h->st->largest_drop_from_line = h->last_rss_line;
      h->st->largest_drop_line = h->st->lines;
    }
  }
  h->have_rss = true;
  h->last_rss = rss;
  h->last_rss_line = h->st->lines;
  h->frees_since_rss = 0;
  h->st->rss_samples++;
  if (rss > h->st->peak_rss_bytes)
    h->st->peak_rss_bytes = rss;
  return emit(h, TRACE_RSS, 0, rss, err);
}

/* A string of an interpreted file: only pymalloc's function names matter
 * (the sign that CPython's small objects never reached malloc). */
static as_status_t string_line(ht_t *h, const char *line, as_err_t *err) {
  const char *s;
  size_t      n;
  if (!string_field(h, line + 1, &s, &n))
    return bad(h, h->st->file_version >= 3 ? "'s LENGTH STRING'" : "'s STRING'",
               line, err);
  static const char *const pymalloc[] = {"_PyObject_Malloc", "pymalloc_alloc",
                                         "_PyObject_Calloc", "pymalloc_free"};
  for (size_t i = 0; i < sizeof pymalloc / sizeof pymalloc[0]; i++)
    if (n == strlen(pymalloc[i]) && memcmp(s, pymalloc[i], n) == 0)
      h->st->pymalloc_frames = true;
  return AS_OK;
}

static as_status_t alloc_line(ht_t *h, const char *line, as_err_t *err) {
  uint64_t    v[3];
  const char *rest;
  if (h->kind == HT_UNKNOWN)
    (void)set_kind(h,
                   hex_fields(line + 1, 3, v, &rest) && *rest == '\0'
                       ? HT_RAW
                       : HT_INTERPRETED,
                   line, err);
  as_status_t rc;
  if (h->kind == HT_RAW) {
    if ((rc = fields(h, line, 3, v, "'+ SIZE TRACE ADDRESS' in hex", err)) !=
        AS_OK)
      return rc;
    return raw_malloc(h, v[0], v[2], err);
  }
  if ((rc = fields(h, line, 1, v, "'+ INDEX' in hex", err)) != AS_OK)
    return rc;
  return interp_malloc(h, v[0], line, err);
}

static as_status_t free_line(ht_t *h, const char *line, as_err_t *err) {
  uint64_t    v;
  as_status_t rc = fields(
      h, line, 1, &v,
      h->kind == HT_RAW ? "'- ADDRESS' in hex" : "'- INDEX' in hex", err);
  if (rc != AS_OK)
    return rc;
  if (h->kind == HT_UNKNOWN)
    return bad(h, "an allocation ('+') before the first free", line, err);
  return h->kind == HT_RAW ? raw_free(h, v, err) : interp_free(h, v, line, err);
}

static as_status_t line_apply(ht_t *h, const char *line, as_err_t *err) {
  uint64_t    v[2];
  as_status_t rc;
  /* A record is one type character, then a space and its fields or the end
   * of the line: heaptrack 1.4.0 writes every record so
   * (src/track/libheaptrack.cpp:383-620, src/interpret/
   * heaptrack_interpret.cpp:268-311,467-498: writeHexLine, "X", "s ", "i ").
   * Its reader takes the type from the first character and skips two
   * without looking at the second (src/util/linereader.h:36,45), so "tfoo"
   * is no record it writes, and what it would read from it is garbage. */
  if (line[0] != '#' && line[1] != '\0' && line[1] != ' ')
    return bad(h,
               "a record type of one character, then a space or the end "
               "of the line",
               line, err);
  switch (line[0]) {
  case '+':
    return alloc_line(h, line, err);
  case '-':
    return free_line(h, line, err);
  case 'c':
    return timestamp_line(h, line, err);
  case 'R':
    return rss_line(h, line, err);
  case 'a':
    if ((rc = set_kind(h, HT_INTERPRETED, line, err)) != AS_OK ||
        (rc = fields(h, line, 2, v, "'a SIZE TRACE' in hex", err)) != AS_OK)
      return rc;
    return info_define(h, v[0], err);
  case 's':
    if ((rc = set_kind(h, HT_INTERPRETED, line, err)) != AS_OK)
      return rc;
    return string_line(h, line, err);
  case 'i':
    return set_kind(h, HT_INTERPRETED, line, err);
  case 'x':
  case 'm':
    return set_kind(h, HT_RAW, line, err);
  case 'X': /* heaptrack refuses a second one: "Duplicated debuggee entry
             * - corrupt data file?" (accumulatedtracedata.cpp:441-444) */
    if (h->have_command)
      return bad(h, "one 'X' line (the command)", line, err);
    h->have_command = true;
    return command_line(h, line, err);
  case 'I':
    return page_size_line(h, line, err);
  case 'A': /* attached to a running process: earlier blocks are unknown */
    h->st->attached = true;
    return meta_put(h, "attached",
                    "yes (blocks allocated before are not "
                    "in the trace)",
                    err);
  case '#':
    if (strncmp(line, "# strings:", 10) == 0)
      h->st->complete = true;
    return AS_OK;
  case 't': /* call-stack nodes: not imported */
  case 'S': /* embedded leak suppressions */
    return AS_OK;
  case 'v':
    return bad(h, "one 'v' line, the first", line, err);
  default:
    return bad(h,
               "a heaptrack line ('+', '-', 'a', 't', 'i', 's', 'c', "
               "'R', 'X', 'I', 'x', 'm', 'A', 'S' or '#')",
               line, err);
  }
}

/* ---- Driver ------------------------------------------------------------- */

static as_status_t inserts_due(ht_t *h, uint64_t line, as_err_t *err) {
  if (h->inserts == NULL)
    return AS_OK;
  uint64_t    before = h->st->inserted;
  as_status_t rc = import_inserts_emit(h->inserts, line, h->t_ns, h->w,
                                       &h->st->inserted, err);
  if (h->st->inserted != before)
    h->started = true;
  h->st->events += h->st->inserted - before;
  return rc;
}

as_status_t import_heaptrack_stream(FILE *in, const char *name,
                                    trace_writer_t *w, trace_meta_t *meta,
                                    const import_heaptrack_opts_t *opts,
                                    import_heaptrack_stats_t      *st,
                                    as_err_t                      *err) {
  memset(st, 0, sizeof *st);
  ht_t h;
  memset(&h, 0, sizeof h);
  h.name = name;
  h.w = w;
  h.meta = meta;
  h.st = st;
  h.inserts = opts != NULL ? opts->inserts : NULL;
  char       *buf = NULL;
  size_t      cap = 0;
  ssize_t     n;
  as_status_t rc = AS_OK;
  while (rc == AS_OK && (rc = inserts_due(&h, st->lines, err)) == AS_OK &&
         (n = import_getline(&buf, &cap, in, IMPORT_LINE_MAX)) != -1) {
    st->lines++;
    if (n == -2) {
      rc = as_err_set(err, AS_EFORMAT,
                      "%s:%" PRIu64 ": expected a line of at most %d bytes",
                      name, st->lines, IMPORT_LINE_MAX);
      break;
    }
    size_t len = (size_t)n;
    if (strlen(buf) != len) { /* quoted whole: bad() would stop at the NUL */
      char q[TRACE_QUOTE_MAX];
      rc = as_err_set(err, AS_EFORMAT,
                      "%s:%" PRIu64 ": expected text (a heaptrack data file), "
                      "got '%s'",
                      name, st->lines,
                      trace_quote(buf, len - (buf[len - 1] == '\n'), q));
      break;
    }
    if (len == 0 || buf[len - 1] != '\n') {
      rc = as_err_set(err, AS_EFORMAT,
                      "%s:%" PRIu64 ": expected a line ending in a newline, "
                      "got end of file (truncated file?)",
                      name, st->lines);
      break;
    }
    buf[--len] = '\0';
    if (st->lines == 1)
      rc = version_line(&h, buf, err);
    else if (len > 0)
      rc = line_apply(&h, buf, err);
  }
  if (rc == AS_OK && ferror(in))
    rc = as_err_set(err, AS_EIO, "%s: read error: %s", name, strerror(errno));
  if (rc == AS_OK && st->lines == 0)
    rc = as_err_set(err, AS_EFORMAT,
                    "%s:1: expected 'v VERSION FILE_FORMAT' (the first line "
                    "of a heaptrack data file), got end of file",
                    name);
  if (rc == AS_OK)
    rc = inserts_due(&h, IMPORT_AT_END, err);
  st->live_at_end = h.ids.live;
  st->max_live_ids = h.ids.peak;
  free(buf);
  free(h.info);
  free(h.next);
  addr_ids_free(&h.ids);
  return rc;
}

static as_status_t run_stream(FILE *in, const char *name, trace_writer_t *w,
                              trace_meta_t *meta, void *user, as_err_t *err) {
  import_job_t *job = user;
  return import_heaptrack_stream(in, name, w, meta, job->opts, job->st, err);
}

as_status_t import_heaptrack_file(const char *in_path, const char *out_path,
                                  trace_format_t                 fmt,
                                  const import_heaptrack_opts_t *opts,
                                  import_heaptrack_stats_t *st, as_err_t *err) {
  memset(st, 0, sizeof *st);
  trace_meta_t meta;
  memset(&meta, 0, sizeof meta);
  import_job_t job = {opts, st};
  return import_run_file(in_path, out_path, fmt, &meta, run_stream, &job, err);
}
