/* traces/capture_convert.c -- turns the raw log liballocsim_capture.so
 * writes into an allocsim trace.
 *
 * Trade-off: the converter maps the raw log read-only and merges its
 * per-thread chunks with a heap (memory grows with the number of chunks,
 * 48 bytes per 128 KiB of log, and with live objects), instead of sorting
 * the whole log in memory.  The alternative, one file per thread merged
 * k-way, would leave thousands of files behind for programs that start many
 * short threads.  Addresses become recycled object ids through
 * traces/addr_ids.h, which the trace importers share.
 */
#include "capture_convert.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "addr_ids.h"
#include "capture/capture_log.h"
#include "trace_io.h"


typedef struct chunk_s chunk_t;
struct chunk_s {
  const capture_rec_t *rec; /* first record after the chunk header */
  size_t               n;   /* records in the chunk */
  size_t               pos; /* next record to merge */
};

typedef struct tidmap_s tidmap_t;
struct tidmap_s {
  addr_ids_map_t map;     /* kernel tid -> dense thread + 1 */
  bool          *used;    /* dense ids in use */
  size_t         cap;     /* entries in used */
  addr_ids_map_t pending; /* kernel tid -> object id in a realloc, + 1 */
};

/* Dense thread id for tid: 0 for the main thread; others lowest free from 1.
 * *fresh tells whether the thread was just seen. */
static bool thread_of(tidmap_t *t, uint64_t tid, uint64_t main_tid,
                      uint32_t *out, bool *fresh) {
  uint64_t v;
  *fresh = false;
  if (addr_ids_map_get(&t->map, tid, &v)) {
    *out = (uint32_t)(v - 1);
    return true;
  }
  size_t d = 0;
  if (tid != main_tid) {
    d = 1;
    while (d < t->cap && t->used[d])
      d++;
  }
  if (d >= t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 64;
    while (cap <= d)
      cap *= 2;
    bool *u = realloc(t->used, cap * sizeof *u);
    if (u == NULL)
      return false;
    memset(u + t->cap, 0, (cap - t->cap) * sizeof *u);
    t->used = u;
    t->cap = cap;
  }
  t->used[d] = true;
  if (!addr_ids_map_put(&t->map, tid, d + 1))
    return false;
  *out = (uint32_t)d;
  *fresh = tid != main_tid;
  return true;
}

typedef struct conv_s conv_t;
struct conv_s {
  const char             *raw_path;
  trace_writer_t         *w;
  capture_convert_stats_t *st;
  addr_ids_t              ids; /* address -> object id */
  tidmap_t                th;
  uint64_t                main_tid;
  uint64_t                last_t;
  const capture_rec_t    *base; /* the mapped log, for byte offsets */
};

static as_status_t conv_emit(conv_t *c, trace_event_t *ev, as_err_t *err) {
  if (ev->t_ns < c->last_t)
    ev->t_ns = c->last_t; /* clocks read after seq: keep time monotone */
  c->last_t = ev->t_ns;
  c->st->events++;
  if (trace_op_is_alloc(ev->op))
    c->st->alloc_events++;
  return trace_writer_write(c->w, ev, err);
}

static as_status_t conv_oom(conv_t *c, as_err_t *err) {
  return as_err_set(err, AS_ENOMEM, "%s: out of memory converting",
                    c->raw_path);
}

/* A new object at address a: a live address means a free was missed. */
static as_status_t conv_new_object(conv_t *c, trace_event_t *ev, uint64_t a,
                                   as_err_t *err) {
  uint64_t old;
  if (addr_ids_remove(&c->ids, a, &old)) {
    c->st->missed_frees++;
    trace_event_t fr = *ev;
    fr.op = TRACE_FREE;
    fr.id = old;
    fr.size = 0;
    fr.align = 0;
    as_status_t rc = conv_emit(c, &fr, err);
    if (rc != AS_OK)
      return rc;
  }
  if (!addr_ids_add(&c->ids, a, &ev->id))
    return conv_oom(c, err);
  return conv_emit(c, ev, err);
}

static void label_copy(char *out, const capture_rec_t *labs, size_t n) {
  size_t len = 0;
  for (size_t i = 0; i < n && len < TRACE_LABEL_MAX; i++) {
    const unsigned char *p = (const unsigned char *)&labs[i];
    for (size_t k = 0; k < CAPTURE_LABEL_BYTES_PER_REC && len < TRACE_LABEL_MAX;
         k++) {
      if (p[k] == 0) {
        i = n;
        break;
      }
      out[len++] =
          (p[k] < 0x20 && p[k] != '\t') || p[k] == 0x7f ? '?' : (char)p[k];
    }
  }
  out[len] = '\0';
}

/* Converts one merged record with its nlabs label records (nlabs is what
 * the chunk really holds, which a damaged log may make less than extra). */
static as_status_t conv_record(conv_t *c, const capture_rec_t *r,
                               const capture_rec_t *labs, size_t nlabs,
                               as_err_t *err) {
  trace_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.t_ns = r->t_ns;
  ev.domain = r->domain < TRACE_DOMAIN_COUNT ? r->domain : TRACE_DOMAIN_RAW;
  bool        fresh = false;
  as_status_t rc;
  if (r->op == CAPTURE_OP_RSS) {
    uint64_t rss = r->a > r->b ? r->a - r->b : 0;
    if (r->b > c->st->overhead_max_bytes)
      c->st->overhead_max_bytes = r->b;
    if (rss > c->st->peak_rss_bytes)
      c->st->peak_rss_bytes = rss;
    ev.op = TRACE_RSS;
    ev.size = rss;
    ev.domain = TRACE_DOMAIN_RAW;
    return conv_emit(c, &ev, err);
  }
  if (r->op == CAPTURE_OP_MARK && (r->flags & CAPTURE_FLAG_META))
    return AS_OK; /* provenance, gathered in the first pass */
  if (!thread_of(&c->th, r->tid, c->main_tid, &ev.thread, &fresh))
    return conv_oom(c, err);
  if (fresh) {
    trace_event_t ts = ev;
    ts.op = TRACE_THREAD_START;
    ts.domain = TRACE_DOMAIN_RAW;
    c->st->threads++;
    if ((rc = conv_emit(c, &ts, err)) != AS_OK)
      return rc;
  }
  uint64_t id;
  switch (r->op) {
  case CAPTURE_OP_MALLOC:
  case CAPTURE_OP_CALLOC:
  case CAPTURE_OP_MEMALIGN:
    ev.op = r->op == CAPTURE_OP_MALLOC   ? TRACE_MALLOC
            : r->op == CAPTURE_OP_CALLOC ? TRACE_CALLOC
                                         : TRACE_MEMALIGN;
    ev.size = r->b;
    ev.align = r->op == CAPTURE_OP_MEMALIGN ? r->c : 0;
    if (ev.op == TRACE_MEMALIGN &&
        (ev.align == 0 || (ev.align & (ev.align - 1))))
      ev.align = 16; /* invalid alignments fail the call in glibc */
    return conv_new_object(c, &ev, r->a, err);
  case CAPTURE_OP_FREE:
    if (!addr_ids_remove(&c->ids, r->a, &id)) {
      c->st->unmatched_frees++;
      return AS_OK;
    }
    ev.op = TRACE_FREE;
    ev.id = id;
    return conv_emit(c, &ev, err);
  case CAPTURE_OP_REALLOC_BEGIN:
    if (addr_ids_detach(&c->ids, r->a, &id)) {
      if (!addr_ids_map_put(&c->th.pending, r->tid, id + 1))
        return conv_oom(c, err);
    }
    return AS_OK;
  case CAPTURE_OP_REALLOC: {
    uint64_t pend = 0;
    bool     known = addr_ids_map_del(&c->th.pending, r->tid, &pend);
    if (r->flags & CAPTURE_FLAG_FAILED) {
      /* The old block is untouched and still the program's. */
      if (known && !addr_ids_attach(&c->ids, r->c, pend - 1))
        return conv_oom(c, err);
      return AS_OK;
    }
    ev.size = r->b;
    if (!known) {
      c->st->unmatched_reallocs++;
      ev.op = TRACE_MALLOC;
      return conv_new_object(c, &ev, r->a, err);
    }
    ev.op = TRACE_REALLOC;
    ev.id = pend - 1;
    if (addr_ids_remove(&c->ids, r->a, &id)) {
      /* The new address was still live: its free was missed. */
      c->st->missed_frees++;
      trace_event_t fr = ev;
      fr.op = TRACE_FREE;
      fr.id = id;
      fr.size = 0;
      if ((rc = conv_emit(c, &fr, err)) != AS_OK)
        return rc;
    }
    if (!addr_ids_attach(&c->ids, r->a, ev.id))
      return conv_oom(c, err);
    return conv_emit(c, &ev, err);
  }
  case CAPTURE_OP_TRIM:
    ev.op = TRACE_TRIM;
    ev.size = r->b;
    return conv_emit(c, &ev, err);
  case CAPTURE_OP_MARK: {
    char label[TRACE_LABEL_MAX + 1];
    label_copy(label, labs, nlabs);
    ev.op = TRACE_MARK;
    ev.label = label;
    if ((rc = conv_emit(c, &ev, err)) != AS_OK)
      return rc;
    capture_rec_t rss = *r;
    rss.op = CAPTURE_OP_RSS;
    return conv_record(c, &rss, NULL, 0, err);
  }
  case CAPTURE_OP_THREAD_EXIT: {
    uint64_t v;
    if (addr_ids_map_del(&c->th.map, r->tid, &v)) {
      c->th.used[v - 1] = false;
      if (r->tid != c->main_tid) {
        ev.op = TRACE_THREAD_EXIT;
        return conv_emit(c, &ev, err);
      }
    }
    return AS_OK;
  }
  default:
    return as_err_set(
        err, AS_EFORMAT, "%s: offset %zu: expected a record op 2..12, got %u",
        c->raw_path, (size_t)(r - c->base) * sizeof(capture_rec_t), r->op);
  }
}

/* Merge heap of chunk indexes ordered by their current record's seq. */
static bool chunk_less(const chunk_t *ch, size_t a, size_t b) {
  return ch[a].rec[ch[a].pos].seq < ch[b].rec[ch[b].pos].seq;
}

static void heap_down(const chunk_t *ch, size_t *h, size_t n, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && chunk_less(ch, h[l], h[m]))
      m = l;
    if (r < n && chunk_less(ch, h[r], h[m]))
      m = r;
    if (m == i)
      return;
    size_t t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

as_status_t capture_convert(const char *raw_path, const char *out_path,
                                   const trace_meta_t     *meta,
                                   capture_convert_stats_t *st, as_err_t *err) {
  memset(st, 0, sizeof *st);
  as_status_t rc = AS_OK;
  chunk_t    *ch = NULL;
  size_t     *heap = NULL, nch = 0, capch = 0;
  void       *map = MAP_FAILED;
  size_t      size = 0;
  conv_t      c;
  memset(&c, 0, sizeof c);
  c.raw_path = raw_path;
  c.st = st;

  int         fd = open(raw_path, O_RDONLY | O_CLOEXEC);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0) {
    rc = as_err_set(err, AS_EIO, "%s: cannot open: %s", raw_path,
                    strerror(errno));
    goto done;
  }
  size = (size_t)sb.st_size;
  if (size < 2 * sizeof(capture_rec_t)) {
    rc = as_err_set(err, AS_EFORMAT,
                    "%s: offset 0: expected a capture log "
                    "header, the file has %zu bytes",
                    raw_path, size);
    goto done;
  }
  map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) {
    rc = as_err_set(err, AS_EIO, "%s: cannot map: %s", raw_path,
                    strerror(errno));
    goto done;
  }
  const capture_rec_t *recs = map;
  size_t               nrec = size / sizeof(capture_rec_t);
  if (recs[0].seq != CAPTURE_CHUNK_MAGIC || recs[0].a != 1 ||
      recs[1].seq != CAPTURE_LOG_MAGIC ||
      recs[1].op != CAPTURE_OP_FILE_HEADER) {
    rc = as_err_set(err, AS_EFORMAT,
                    "%s: offset 0: not an allocsim capture "
                    "log (bad magic)",
                    raw_path);
    goto done;
  }
  st->pid = recs[1].a;
  c.main_tid = recs[1].tid;
  c.base = recs;

  /* Pass 1: index chunks, gather provenance and the baseline sample. */
  trace_meta_t tm;
  if (meta != NULL)
    tm = *meta;
  else
    memset(&tm, 0, sizeof tm);
  uint64_t first_rss_seq = UINT64_MAX, first_rss = 0;
  for (size_t i = 2; i < nrec;) {
    if (recs[i].seq != CAPTURE_CHUNK_MAGIC) {
      rc = as_err_set(err, AS_EFORMAT,
                      "%s: offset %zu: expected a chunk "
                      "header",
                      raw_path, i * sizeof(capture_rec_t));
      goto done;
    }
    size_t n = (size_t)recs[i].a;
    if (n == 0 || n > nrec - i - 1) {
      st->truncated_records += nrec - i - 1; /* the writer died mid-chunk */
      break;
    }
    if (nch == capch) {
      capch = capch ? 2 * capch : 256;
      chunk_t *v = realloc(ch, capch * sizeof *v);
      if (v == NULL) {
        rc = conv_oom(&c, err);
        goto done;
      }
      ch = v;
    }
    ch[nch++] = (chunk_t){.rec = &recs[i + 1], .n = n, .pos = 0};
    for (size_t k = i + 1; k < i + 1 + n; k++) {
      const capture_rec_t *r = &recs[k];
      if (r->op == CAPTURE_OP_LABEL)
        continue;
      if (r->op == CAPTURE_OP_MARK && (r->flags & CAPTURE_FLAG_META)) {
        char kv[TRACE_LABEL_MAX + 1];
        label_copy(kv, r + 1, k + r->extra < i + 1 + n ? r->extra : 0);
        char *eq = strchr(kv, '=');
        if (eq != NULL) {
          *eq = '\0';
          if (strcmp(kv, "python") == 0)
            as_format_fits(st->python, sizeof st->python, "%s", eq + 1);
          (void)trace_meta_set(&tm, kv, eq + 1, NULL);
        }
      }
      if ((r->op == CAPTURE_OP_RSS ||
           (r->op == CAPTURE_OP_MARK && !(r->flags & CAPTURE_FLAG_META))) &&
          r->seq < first_rss_seq) {
        first_rss_seq = r->seq;
        first_rss = r->a > r->b ? r->a - r->b : 0;
      }
    }
    i += 1 + n;
  }
  st->baseline_rss_bytes = first_rss;
  char num[32];
  as_format_fits(num, sizeof num, "%" PRIu64, st->pid);
  (void)trace_meta_set(&tm, "pid", num, NULL);
  if (first_rss_seq != UINT64_MAX) {
    as_format_fits(num, sizeof num, "%" PRIu64, first_rss);
    (void)trace_meta_set(&tm, "baseline_rss_bytes", num, NULL);
  }
  if (recs[1].c != 0 && trace_meta_get(&tm, "page_size") == NULL) {
    as_format_fits(num, sizeof num, "%" PRIu64, recs[1].c);
    (void)trace_meta_set(&tm, "page_size", num, NULL);
  }

  if ((rc = trace_writer_open(out_path, trace_format_from_path(out_path), &tm,
                              &c.w, err)) != AS_OK)
    goto done;

  /* Pass 2: k-way merge of the chunks by seq. */
  heap = malloc((nch ? nch : 1) * sizeof *heap);
  if (heap == NULL) {
    rc = conv_oom(&c, err);
    goto done;
  }
  size_t nh = 0;
  for (size_t i = 0; i < nch; i++)
    heap[nh++] = i;
  for (size_t i = nh / 2; i-- > 0;)
    heap_down(ch, heap, nh, i);
  while (nh > 0) {
    chunk_t             *k = &ch[heap[0]];
    const capture_rec_t *r = &k->rec[k->pos];
    size_t               nl = r->op == CAPTURE_OP_MARK ? r->extra : 0;
    if (k->pos + 1 + nl > k->n)
      nl = k->n - k->pos - 1;
    if (r->op != CAPTURE_OP_LABEL &&
        (rc = conv_record(&c, r, r + 1, nl, err)) != AS_OK)
      goto done;
    k->pos += 1 + nl;
    if (k->pos >= k->n)
      heap[0] = heap[--nh];
    heap_down(ch, heap, nh, 0);
  }
  st->max_live_ids = c.ids.peak;
  rc = trace_writer_close(c.w, err);
  c.w = NULL;

done:
  if (c.w != NULL) {
    /* A half-written trace would look like a short capture: out_path keeps
     * what it held before. */
    trace_writer_discard(c.w);
  }
  if (map != MAP_FAILED)
    munmap(map, size);
  if (fd >= 0)
    close(fd);
  free(ch);
  free(heap);
  addr_ids_free(&c.ids);
  addr_ids_map_free(&c.th.map);
  addr_ids_map_free(&c.th.pending);
  free(c.th.used);
  return rc;
}

