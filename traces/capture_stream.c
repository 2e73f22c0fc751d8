/* traces/capture_stream.c -- one process image's capture stream into a
 * trace (capture_stream.h; the wire format and its ordering and window
 * rules are in traces/capture/capture_wire.h).
 *
 * Each CHUNK (one thread's records in seq order) is decoded into an array
 * and put on a min-heap by its next record's seq; a WATERMARK W releases
 * every held record below W, in seq order, into the converter.  So memory
 * holds about one flush period of events, whatever the trace's length.  A
 * record that arrives below a watermark already released (it cannot, by the
 * window rule, unless the recorder gave up waiting on a stuck thread) and a
 * window grown past WINDOW_MAX_RECORDS are written as they come and
 * counted, never dropped.
 *
 * Conversion: addresses become dense ids, lowest free first
 * (traces/addr_ids.h); kernel thread ids become dense thread ids, the main
 * thread 0, with thread_start at a thread's first record and thread_exit at
 * its exit record.  A realloc is two records (the release of the old
 * address, then the result), paired by thread.  Times are made
 * non-decreasing along the merged order (a clock read can lag its seq by a
 * few ns).  rss events carry measured RSS minus the recorder's own bytes.
 */
#include "capture_stream.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr_ids.h"

#define WINDOW_MAX_RECORDS ((size_t)4 << 20)

/* A decoded record. */
typedef struct crec_s crec_t;
struct crec_s {
  uint64_t seq, t_ns, a, x, y;
  uint32_t tid;
  uint32_t text_off; /* into the chunk's text */
  uint32_t site;     /* allocation ops: the call site, 0 = none */
  uint16_t text_len; /* label, or a MODULE or SITE record's blob */
  uint8_t  op, domain, failed;
};

typedef struct chunk_s chunk_t;
struct chunk_s {
  crec_t  *rec;
  size_t   n, pos;
  char    *text;
  size_t   rec_cap, text_cap; /* kept when the chunk is reused */
  uint32_t tid;
  chunk_t *next; /* the same thread's next chunk (a queue) */
};

/* Chunks whose arrays are reused: a capture decodes one per message, and
 * fresh memory would cost a page fault every few records. */
#define SPARE_CHUNKS 64

typedef struct tidmap_s tidmap_t;
struct tidmap_s {
  addr_ids_map_t map;     /* kernel tid -> dense thread + 1 */
  bool          *used;    /* dense ids in use */
  size_t         cap;     /* entries in used */
  addr_ids_map_t pending; /* kernel tid -> object id in a realloc, + 1 */
};

struct capture_stream_s {
  char            name[160];
  trace_writer_t *w;
  bool            write_failed; /* the writer failed: the rest is dropped */
  as_err_t        write_err;
  capture_stats_t st;
  addr_ids_t      ids;   /* address -> object id */
  uint64_t       *sizes; /* object id -> size + 1 (0: not live) */
  size_t          sizes_cap;
  tidmap_t        th;
  uint64_t        main_tid;
  uint64_t        last_t;
  uint64_t        released; /* every record below this was written */
  chunk_t       **heap;
  size_t          nheap, heap_cap;
  chunk_t        *spare[SPARE_CHUNKS];
  size_t          nspare;
  addr_ids_map_t  tails; /* tid -> its queue's last chunk */
  size_t          held;  /* records in the heap's chunks */
  bool            have_sample;
  bool            unknown_module; /* module 0 ("[unknown]") defined */
};

/* ---- Hello -------------------------------------------------------------- */

as_status_t capture_hello_decode(const void *msg, size_t len, const char *name,
                                 capture_hello_t *h, as_err_t *err) {
  capture_msg_hdr_t hd;
  if (len != sizeof hd + sizeof *h)
    return as_err_set(err, AS_EFORMAT,
                      "%s: message 0: expected a HELLO of %zu bytes, got %zu",
                      name, sizeof hd + sizeof *h, len);
  memcpy(&hd, msg, sizeof hd);
  if (hd.type != CAPTURE_MSG_HELLO || hd.version != CAPTURE_WIRE_VERSION)
    return as_err_set(err, AS_EFORMAT,
                      "%s: message 0: expected HELLO (type %d) of wire "
                      "version %d, got type %u version %u (a recorder of "
                      "another allocsim build?)",
                      name, CAPTURE_MSG_HELLO, CAPTURE_WIRE_VERSION, hd.type,
                      hd.version);
  memcpy(h, (const uint8_t *)msg + sizeof hd, sizeof *h);
  h->exe[sizeof h->exe - 1] = '\0';
  h->own_malloc[sizeof h->own_malloc - 1] = '\0';
  return AS_OK;
}

void capture_python_version(uint64_t hex, char *buf, size_t len) {
  /* CPython Include/patchlevel.h: PY_VERSION_HEX = major << 24 | minor << 16
   * | micro << 8 | level << 4 | serial, level 0xA alpha, 0xB beta, 0xC
   * candidate, 0xF final. */
  unsigned    major = (hex >> 24) & 0xff, minor = (hex >> 16) & 0xff;
  unsigned    micro = (hex >> 8) & 0xff, level = (hex >> 4) & 0xf;
  unsigned    serial = hex & 0xf;
  const char *tag = level == 0xA ? "a" : level == 0xB ? "b" : "rc";
  if (level == 0xF)
    as_format_fits(buf, len, "%u.%u.%u", major, minor, micro);
  else
    as_format_fits(buf, len, "%u.%u.%u%s%u", major, minor, micro, tag, serial);
}

void capture_mimalloc_version(uint32_t v, char *buf, size_t len) {
  /* MI_MALLOC_VERSION, include/mimalloc.h:11: 209 = 2.0.9 (major, minor,
   * patch a digit each, v2.0.9), 3010 = 3.0.10 (two-digit patch, v3.0.10),
   * 30403 = 3.4.3 (two digits each after the major, v3.4.3). */
  if (v >= 10000)
    as_format_fits(buf, len, "%u.%u.%u", v / 10000, v / 100 % 100, v % 100);
  else if (v >= 1000)
    as_format_fits(buf, len, "%u.%u.%u", v / 1000, v / 100 % 10, v % 100);
  else
    as_format_fits(buf, len, "%u.%u.%u", v / 100, v / 10 % 10, v % 10);
}

void capture_jemalloc_version(uint32_t v, char *buf, size_t len) {
  as_format_fits(buf, len, "%" PRIu32 ".%" PRIu32 ".%" PRIu32, v / 10000,
                 v / 100 % 100, v % 100);
}

void capture_tcmalloc_version(uint32_t v, char *buf, size_t len) {
  as_format_fits(buf, len, "%" PRIu32 ".%" PRIu32, v / 100, v % 100);
}

/* ---- Threads --------------------------------------------------------------
 */

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

/* ---- Conversion -----------------------------------------------------------
 */

static as_status_t oom(capture_stream_t *s, as_err_t *err) {
  return as_err_set(err, AS_ENOMEM, "%s: out of memory converting", s->name);
}

static as_status_t emit(capture_stream_t *s, trace_event_t *ev, as_err_t *err) {
  if (ev->t_ns < s->last_t)
    ev->t_ns = s->last_t; /* clocks read after seq: keep time monotone */
  s->last_t = ev->t_ns;
  if (s->write_failed)
    return AS_OK;
  as_status_t rc = trace_writer_write(s->w, ev, &s->write_err);
  if (rc != AS_OK) {
    /* The rest is dropped; capture_stream_close reports it. */
    s->write_failed = true;
    return AS_OK;
  }
  s->st.events++;
  if (trace_op_is_alloc(ev->op))
    s->st.alloc_events++;
  (void)err;
  return AS_OK;
}

static bool size_set(capture_stream_t *s, uint64_t id, uint64_t size) {
  if (id >= s->sizes_cap) {
    size_t cap = s->sizes_cap ? s->sizes_cap : 1024;
    while (cap <= id)
      cap *= 2;
    uint64_t *v = realloc(s->sizes, cap * sizeof *v);
    if (v == NULL)
      return false;
    memset(v + s->sizes_cap, 0, (cap - s->sizes_cap) * sizeof *v);
    s->sizes = v;
    s->sizes_cap = cap;
  }
  s->sizes[id] = size;
  return true;
}

static as_status_t emit_free(capture_stream_t *s, const trace_event_t *like,
                             uint64_t id, as_err_t *err) {
  trace_event_t fr = *like;
  fr.op = TRACE_FREE;
  fr.id = id;
  fr.size = 0;
  fr.align = 0;
  fr.offset = 0;
  size_set(s, id, 0);
  return emit(s, &fr, err);
}

/* A new object at address a: a live address means a free was missed. */
static as_status_t new_object(capture_stream_t *s, trace_event_t *ev,
                              uint64_t a, as_err_t *err) {
  uint64_t    old;
  as_status_t rc;
  if (addr_ids_remove(&s->ids, a, &old)) {
    s->st.missed_frees++;
    if ((rc = emit_free(s, ev, old, err)) != AS_OK)
      return rc;
  }
  if (!addr_ids_add(&s->ids, a, &ev->id) || !size_set(s, ev->id, ev->size + 1))
    return oom(s, err);
  return emit(s, ev, err);
}

static void sample_stats(capture_stream_t *s, uint64_t rss, uint64_t own) {
  uint64_t net = rss > own ? rss - own : 0;
  if (own > s->st.overhead_max_bytes)
    s->st.overhead_max_bytes = own;
  if (net > s->st.peak_rss_bytes)
    s->st.peak_rss_bytes = net;
  if (!s->have_sample)
    s->st.baseline_rss_bytes = net;
  s->have_sample = true;
  s->st.final_rss_bytes = net;
}

/* An rss event with the resident bytes no allocator holds in it (the
 * recorder's "other", traces/capture/memmap.c), which the trace carries so
 * that compare can tell the model's error from the program's own growth
 * however the trace reaches the store. */
static as_status_t conv_rss(capture_stream_t *s, const crec_t *r,
                            as_err_t *err) {
  sample_stats(s, r->x, r->y);
  trace_event_t ev = {.t_ns = r->t_ns,
                      .op = TRACE_RSS,
                      .size = r->x > r->y ? r->x - r->y : 0,
                      .offset = r->a};
  return emit(s, &ev, err);
}

static as_status_t conv_touch(capture_stream_t *s, const crec_t *r,
                              trace_event_t *ev, as_err_t *err) {
  uint64_t id;
  if (!addr_ids_lookup(&s->ids, r->a, &id) || id >= s->sizes_cap ||
      s->sizes[id] == 0 || r->y == 0 || r->x > s->sizes[id] - 1 ||
      r->y > s->sizes[id] - 1 - r->x) {
    s->st.dropped_touches++;
    return AS_OK;
  }
  ev->op = TRACE_TOUCH;
  ev->id = id;
  ev->offset = r->x;
  ev->size = r->y;
  s->st.touch_events++;
  return emit(s, ev, err);
}

static as_status_t conv_realloc(capture_stream_t *s, const crec_t *r,
                                trace_event_t *ev, as_err_t *err) {
  uint64_t pend = 0, id;
  bool     known = addr_ids_map_del(&s->th.pending, r->tid, &pend);
  if (r->failed) {
    /* The old block is untouched and still the program's. */
    if (known && !addr_ids_attach(&s->ids, r->a, pend - 1))
      return oom(s, err);
    return AS_OK;
  }
  ev->size = r->x;
  if (!known) {
    s->st.unmatched_reallocs++;
    ev->op = TRACE_MALLOC;
    return new_object(s, ev, r->a, err);
  }
  ev->op = TRACE_REALLOC;
  ev->id = pend - 1;
  as_status_t rc;
  if (addr_ids_remove(&s->ids, r->a, &id)) {
    /* The new address was still live: its free was missed. */
    s->st.missed_frees++;
    if ((rc = emit_free(s, ev, id, err)) != AS_OK)
      return rc;
  }
  if (!addr_ids_attach(&s->ids, r->a, ev->id) ||
      !size_set(s, ev->id, ev->size + 1))
    return oom(s, err);
  return emit(s, ev, err);
}

/* A module: its path as the trace carries it (bytes a path may not hold
 * there, control bytes, '"' and '\\', become '?'). */
static as_status_t conv_module(capture_stream_t *s, const crec_t *r, char *path,
                               trace_event_t *ev, as_err_t *err) {
  size_t n = r->text_len < TRACE_PATH_MAX ? r->text_len : TRACE_PATH_MAX;
  path[n] = '\0';
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)path[i] < 0x20 || path[i] == '"' || path[i] == '\\')
      path[i] = '?';
  if (n == 0 || r->x == 0 || r->x >= TRACE_DEF_ID_MAX)
    return AS_OK; /* the recorder numbers modules from 1 */
  ev->op = TRACE_MODULE;
  ev->id = r->x;
  ev->label = path;
  s->st.modules++;
  return emit(s, ev, err);
}

/* A site: its frames, module id and offset varints (decode_chunk checked
 * them).  Module 0 is the recorder's "no loaded object holds it". */
static as_status_t conv_site(capture_stream_t *s, const crec_t *r,
                             const uint8_t *blob, trace_event_t *ev,
                             as_err_t *err) {
  trace_frame_t  frames[TRACE_FRAMES_MAX];
  uint32_t       n = 0;
  const uint8_t *p = blob, *end = blob + r->text_len;
  bool           unknown = false;
  while (p < end && n < TRACE_FRAMES_MAX) {
    if (capture_get_varint(&p, end, &frames[n].module) != 0 ||
        capture_get_varint(&p, end, &frames[n].offset) != 0)
      break;
    unknown |= frames[n].module == 0;
    n++;
  }
  if (n == 0 || r->x == 0 || r->x >= TRACE_DEF_ID_MAX)
    return AS_OK;
  as_status_t rc;
  if (unknown && !s->unknown_module) {
    trace_event_t m = *ev;
    m.op = TRACE_MODULE;
    m.id = 0;
    m.label = "[unknown]";
    s->unknown_module = true;
    if ((rc = emit(s, &m, err)) != AS_OK)
      return rc;
  }
  ev->op = TRACE_SITE;
  ev->id = r->x;
  ev->frames = frames;
  ev->nframes = n;
  s->st.sites++;
  return emit(s, ev, err);
}

static as_status_t conv_record(capture_stream_t *s, const crec_t *r,
                               const char *text, as_err_t *err) {
  trace_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.t_ns = r->t_ns;
  ev.domain = r->domain < TRACE_DOMAIN_COUNT ? r->domain : TRACE_DOMAIN_RAW;
  as_status_t rc;
  char        label[CAPTURE_BLOB_MAX + 1];
  memcpy(label, text, r->text_len);
  label[r->text_len] = '\0';
  ev.site = r->site;
  switch (r->op) {
  case CAPTURE_OP_RSS:
    return conv_rss(s, r, err);
  case CAPTURE_OP_META:
    if (strncmp(label, "python=", 7) == 0)
      as_format_fits(s->st.python, sizeof s->st.python, "%s", label + 7);
    else if (strcmp(label, "python_debug_hooks=1") == 0)
      s->st.python_debug_hooks = true;
    else if (strncmp(label, "untracked_mmaps=", 16) == 0)
      s->st.untracked_mmaps = strtoull(label + 16, NULL, 10);
    else if (strncmp(label, "mimalloc_hint_start=", 20) == 0)
      s->st.mimalloc_hint_start = strtoull(label + 20, NULL, 10);
    return AS_OK;
  case CAPTURE_OP_TOUCH: {
    /* Probes run on any thread (the flusher's too): no thread_start. */
    uint64_t v;
    if (addr_ids_map_get(&s->th.map, r->tid, &v))
      ev.thread = (uint32_t)(v - 1);
    return conv_touch(s, r, &ev, err);
  }
  default:
    break;
  }
  bool fresh = false;
  if (!thread_of(&s->th, r->tid, s->main_tid, &ev.thread, &fresh))
    return oom(s, err);
  if (fresh) {
    trace_event_t ts = ev;
    ts.op = TRACE_THREAD_START;
    ts.domain = TRACE_DOMAIN_RAW;
    s->st.threads++;
    if ((rc = emit(s, &ts, err)) != AS_OK)
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
    ev.size = r->x;
    ev.align = r->op == CAPTURE_OP_MEMALIGN ? r->y : 0;
    if (ev.op == TRACE_MEMALIGN &&
        (ev.align == 0 || (ev.align & (ev.align - 1))))
      ev.align = 16; /* invalid alignments fail the call in glibc */
    return new_object(s, &ev, r->a, err);
  case CAPTURE_OP_FREE:
    if (!addr_ids_remove(&s->ids, r->a, &id)) {
      s->st.unmatched_frees++;
      return AS_OK;
    }
    ev.op = TRACE_FREE;
    ev.id = id;
    size_set(s, id, 0);
    return emit(s, &ev, err);
  case CAPTURE_OP_REALLOC_BEGIN:
    if (addr_ids_detach(&s->ids, r->a, &id) &&
        !addr_ids_map_put(&s->th.pending, r->tid, id + 1))
      return oom(s, err);
    return AS_OK;
  case CAPTURE_OP_REALLOC:
    return conv_realloc(s, r, &ev, err);
  case CAPTURE_OP_TRIM:
    s->st.trims++;
    ev.op = TRACE_TRIM;
    ev.size = r->x;
    return emit(s, &ev, err);
  case CAPTURE_OP_MARK: {
    ev.op = TRACE_MARK;
    ev.label = label;
    if ((rc = emit(s, &ev, err)) != AS_OK)
      return rc;
    return conv_rss(s, r, err);
  }
  case CAPTURE_OP_OPTION:
    if (!trace_option_name_ok(label, r->text_len))
      return AS_OK; /* the recorder only sends names it knows */
    ev.op = TRACE_OPTION;
    ev.label = label;
    ev.size = r->y;
    if (strcmp(label, "seed.prng") == 0) /* the recorder's thread's seed */
      snprintf(label + r->text_len, sizeof label - r->text_len, ".%" PRIu32,
               ev.thread);
    else if (trace_option_is_placement(label))
      s->st.placements++;
    else
      s->st.option_events++;
    return emit(s, &ev, err);
  case CAPTURE_OP_PURGE:
    ev.op = TRACE_PURGE;
    ev.size = r->x < TRACE_PURGE_COUNT ? r->x : TRACE_PURGE_ALL;
    ev.id = r->y == CAPTURE_ALL_ARENAS ? TRACE_ALL_ARENAS : r->y;
    s->st.purge_events++;
    return emit(s, &ev, err);
  case CAPTURE_OP_MODULE:
    return conv_module(s, r, label, &ev, err);
  case CAPTURE_OP_SITE:
    return conv_site(s, r, (const uint8_t *)text, &ev, err);
  case CAPTURE_OP_THREAD_EXIT: {
    uint64_t v;
    if (addr_ids_map_del(&s->th.map, r->tid, &v)) {
      s->th.used[v - 1] = false;
      if (r->tid != s->main_tid) {
        ev.op = TRACE_THREAD_EXIT;
        return emit(s, &ev, err);
      }
    }
    return AS_OK;
  }
  default:
    return AS_OK; /* checked when decoded */
  }
}

/* ---- Decoding -------------------------------------------------------------
 */

/* Decodes the records of a CHUNK body into *ch.  AS_EFORMAT with the byte
 * offset in the message. */
static as_status_t decode_chunk(capture_stream_t *s, const uint8_t *msg,
                                size_t len, uint32_t tid, chunk_t *ch,
                                as_err_t *err) {
  const uint8_t *p = msg + sizeof(capture_msg_hdr_t), *end = msg + len;
  size_t         text_used = 0;
  uint64_t       seq = 0, t = 0, addr = 0;
  ch->n = ch->pos = 0;
  if (ch->text_cap < len) { /* labels are shorter than their records */
    char *text = realloc(ch->text, len);
    if (text == NULL)
      return oom(s, err);
    ch->text = text;
    ch->text_cap = len;
  }
  const char *what = "record";
  while (p < end) {
    const uint8_t *at = p;
    uint8_t        b = *p++;
    crec_t         r = {.tid = tid};
    uint64_t       v, d;
    r.op = b & CAPTURE_B_OP_MASK;
    r.domain = (b >> CAPTURE_B_DOMAIN_SHIFT) & 3;
    r.failed = (b & CAPTURE_B_FAILED) != 0;
#define GET(name, out)                                                         \
  do {                                                                         \
    what = name;                                                               \
    if (capture_get_varint(&p, end, &(out)) != 0)                              \
      goto bad;                                                                \
  } while (0)
    if (r.op < CAPTURE_OP_MALLOC || r.op >= CAPTURE_OP_COUNT ||
        r.domain >= TRACE_DOMAIN_COUNT) {
      what = "op";
      p = at;
      goto bad;
    }
    GET("seq", d);
    if (ch->n > 0 && d == 0) {
      what = "seq increase";
      goto bad;
    }
    seq += d;
    GET("time", d);
    t += d;
    r.seq = seq;
    r.t_ns = t;
    switch (r.op) {
    case CAPTURE_OP_MALLOC:
    case CAPTURE_OP_CALLOC:
    case CAPTURE_OP_REALLOC:
    case CAPTURE_OP_MEMALIGN:
    case CAPTURE_OP_TOUCH:
    case CAPTURE_OP_REALLOC_BEGIN:
    case CAPTURE_OP_FREE:
      GET("address", v);
      addr += (uint64_t)capture_unzigzag(v);
      r.a = addr;
      if (r.op == CAPTURE_OP_REALLOC_BEGIN || r.op == CAPTURE_OP_FREE)
        break;
      GET("size", r.x);
      if (r.op == CAPTURE_OP_MEMALIGN || r.op == CAPTURE_OP_TOUCH)
        GET(r.op == CAPTURE_OP_TOUCH ? "length" : "alignment", r.y);
      if (r.op != CAPTURE_OP_TOUCH) {
        GET("site", v);
        if (v >= TRACE_DEF_ID_MAX)
          goto bad;
        r.site = (uint32_t)v;
      }
      break;
    case CAPTURE_OP_MODULE:
    case CAPTURE_OP_SITE:
      GET("id", r.x);
      GET("blob length", v);
      what = "blob";
      if (v > CAPTURE_BLOB_MAX || (uint64_t)(end - p) < v)
        goto bad;
      r.text_len = (uint16_t)v;
      r.text_off = (uint32_t)text_used;
      memcpy(ch->text + text_used, p, (size_t)v);
      text_used += (size_t)v;
      p += v;
      break;
    case CAPTURE_OP_TRIM:
    case CAPTURE_OP_RSS:
    case CAPTURE_OP_PURGE:
    case CAPTURE_OP_MARK:
      GET("value", r.x);
      GET("value", r.y);
      if (r.op == CAPTURE_OP_RSS || r.op == CAPTURE_OP_MARK)
        GET("other", r.a);
      if (r.op != CAPTURE_OP_MARK)
        break;
      __attribute__((fallthrough)); /* a mark's label follows */
    case CAPTURE_OP_META:
    case CAPTURE_OP_OPTION:
      what = "text";
      if (p == end || *p > CAPTURE_LABEL_MAX || (size_t)(end - p - 1) < *p)
        goto bad;
      r.text_len = *p++;
      r.text_off = (uint32_t)text_used;
      for (size_t i = 0; i < r.text_len; i++) {
        unsigned char c = p[i];
        ch->text[text_used++] =
            (c < 0x20 && c != '\t') || c == 0x7f ? '?' : (char)c;
      }
      p += r.text_len;
      if (r.op == CAPTURE_OP_OPTION) {
        GET("value", v);
        r.y = (uint64_t)capture_unzigzag(v);
      }
      break;
    default: /* THREAD_EXIT */
      break;
    }
#undef GET
    if (ch->n == ch->rec_cap) {
      size_t  cap = ch->rec_cap ? 2 * ch->rec_cap : 1024;
      crec_t *nr = realloc(ch->rec, cap * sizeof *nr);
      if (nr == NULL)
        return oom(s, err);
      ch->rec = nr;
      ch->rec_cap = cap;
    }
    ch->rec[ch->n++] = r;
    continue;
  bad:
    return as_err_set(err, AS_EFORMAT,
                      "%s: message %" PRIu64 " (chunk of tid %u): byte "
                      "offset %zu: bad %s",
                      s->name, s->st.messages, tid, (size_t)(at - msg), what);
  }
  return AS_OK;
}

/* ---- The window ------------------------------------------------------------
 */

static uint64_t head_seq(const chunk_t *c) {
  return c->rec[c->pos].seq;
}

static void heap_down(capture_stream_t *s, size_t i) {
  chunk_t **h = s->heap;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < s->nheap && head_seq(h[l]) < head_seq(h[m]))
      m = l;
    if (r < s->nheap && head_seq(h[r]) < head_seq(h[m]))
      m = r;
    if (m == i)
      return;
    chunk_t *t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

static void heap_up(capture_stream_t *s, size_t i) {
  chunk_t **h = s->heap;
  while (i > 0 && head_seq(h[(i - 1) / 2]) > head_seq(h[i])) {
    chunk_t *t = h[i];
    h[i] = h[(i - 1) / 2];
    h[(i - 1) / 2] = t;
    i = (i - 1) / 2;
  }
}

static void chunk_destroy(chunk_t *c) {
  free(c->rec);
  free(c->text);
  free(c);
}

/* A chunk to decode into: a spare one, or a new one (NULL: no memory). */
static chunk_t *chunk_get(capture_stream_t *s) {
  return s->nspare > 0 ? s->spare[--s->nspare] : calloc(1, sizeof(chunk_t));
}

/* Done with c: kept for reuse, or freed. */
static void chunk_free_in(capture_stream_t *s, chunk_t *c) {
  if (s->nspare < SPARE_CHUNKS)
    s->spare[s->nspare++] = c;
  else
    chunk_destroy(c);
}

/* Writes the heap's smallest record and moves past it.  The heap holds
 * one queue head per thread: a thread's chunks carry increasing seqs, so
 * the next chunk of a queue takes its head's place when that runs out. */
static as_status_t release_one(capture_stream_t *s, as_err_t *err) {
  chunk_t      *c = s->heap[0];
  const crec_t *r = &c->rec[c->pos++];
  s->held--;
  as_status_t rc = conv_record(s, r, c->text + r->text_off, err);
  if (c->pos == c->n) {
    uint64_t tail;
    if (addr_ids_map_get(&s->tails, c->tid, &tail) &&
        tail == (uint64_t)(uintptr_t)c)
      addr_ids_map_del(&s->tails, c->tid, NULL);
    s->heap[0] = c->next != NULL ? c->next : s->heap[--s->nheap];
    chunk_free_in(s, c);
  }
  if (s->nheap > 1)
    heap_down(s, 0);
  return rc;
}

static as_status_t release_below(capture_stream_t *s, uint64_t w,
                                 as_err_t *err) {
  while (s->nheap > 0 && head_seq(s->heap[0]) < w) {
    as_status_t rc = release_one(s, err);
    if (rc != AS_OK)
      return rc;
  }
  if (w > s->released)
    s->released = w;
  return AS_OK;
}

/* Puts c behind its thread's queue when it continues it, else into the
 * heap as a queue of its own (a thread's first chunk, or a record a signal
 * handler sent ahead of its thread's buffer). */
static as_status_t queue_chunk(capture_stream_t *s, chunk_t *c, as_err_t *err) {
  uint64_t v;
  bool     has_tail = addr_ids_map_get(&s->tails, c->tid, &v);
  chunk_t *tail = has_tail ? (chunk_t *)(uintptr_t)v : NULL;
  s->held += c->n - c->pos;
  c->next = NULL;
  if (tail != NULL && tail->rec[tail->n - 1].seq < c->rec[c->pos].seq) {
    tail->next = c;
    if (!addr_ids_map_put(&s->tails, c->tid, (uint64_t)(uintptr_t)c))
      return oom(s, err);
    return AS_OK;
  }
  if (s->nheap == s->heap_cap) {
    size_t    cap = s->heap_cap ? 2 * s->heap_cap : 64;
    chunk_t **h = realloc(s->heap, cap * sizeof *h);
    if (h == NULL)
      return oom(s, err);
    s->heap = h;
    s->heap_cap = cap;
  }
  s->heap[s->nheap++] = c;
  heap_up(s, s->nheap - 1);
  if (tail == NULL &&
      !addr_ids_map_put(&s->tails, c->tid, (uint64_t)(uintptr_t)c))
    return oom(s, err);
  return AS_OK;
}

static as_status_t add_chunk(capture_stream_t *s, chunk_t *c, as_err_t *err) {
  /* Records below what was released already come too late for the order:
   * written now, counted. */
  while (c->pos < c->n && c->rec[c->pos].seq < s->released) {
    const crec_t *r = &c->rec[c->pos++];
    s->st.late_records++;
    as_status_t rc = conv_record(s, r, c->text + r->text_off, err);
    if (rc != AS_OK) {
      chunk_free_in(s, c);
      return rc;
    }
  }
  if (c->pos == c->n) {
    chunk_free_in(s, c);
    return AS_OK;
  }
  as_status_t rc = queue_chunk(s, c, err);
  if (rc != AS_OK)
    return rc;
  /* A window that no watermark drains (a stuck thread) must not grow
   * without bound: the oldest half goes out now. */
  if (s->held > WINDOW_MAX_RECORDS) {
    while (s->held > WINDOW_MAX_RECORDS / 2) {
      uint64_t seq = head_seq(s->heap[0]);
      if ((rc = release_one(s, err)) != AS_OK)
        return rc;
      s->st.late_records++;
      if (seq + 1 > s->released)
        s->released = seq + 1;
    }
  }
  return AS_OK;
}

/* ---- Entry points -----------------------------------------------------------
 */

as_status_t capture_stream_open(const capture_hello_t *hello, FILE *out,
                                const char *name, trace_format_t fmt,
                                const trace_meta_t *meta, capture_stream_t **sp,
                                as_err_t *err) {
  *sp = NULL;
  capture_stream_t *s = calloc(1, sizeof *s);
  if (s == NULL) {
    fclose(out);
    return as_err_set(err, AS_ENOMEM, "%s: out of memory", name);
  }
  as_format_fits(s->name, sizeof s->name, "%s", name);
  s->main_tid = hello->main_tid;
  s->st.pid = hello->pid;
  s->st.ppid = hello->ppid;
  s->st.touch_threshold = hello->touch_threshold;
  s->st.stacks = hello->stacks;
  as_format_fits(s->st.exe, sizeof s->st.exe, "%s", hello->exe);
  as_format_fits(s->st.own_malloc, sizeof s->st.own_malloc, "%s",
                 hello->own_malloc);
  if (hello->python_hex != 0)
    capture_python_version(hello->python_hex, s->st.python,
                           sizeof s->st.python);
  as_status_t rc = trace_writer_open_stream(out, name, fmt, meta, &s->w, err);
  if (rc != AS_OK) {
    free(s);
    return rc;
  }
  *sp = s;
  return AS_OK;
}

as_status_t capture_stream_feed(capture_stream_t *s, const void *msg,
                                size_t len, as_err_t *err) {
  capture_msg_hdr_t h;
  s->st.messages++;
  s->st.wire_bytes += len;
  if (len < sizeof h)
    return as_err_set(err, AS_EFORMAT,
                      "%s: message %" PRIu64 ": %zu bytes, shorter than a "
                      "header",
                      s->name, s->st.messages, len);
  memcpy(&h, msg, sizeof h);
  if (h.version != CAPTURE_WIRE_VERSION)
    return as_err_set(err, AS_EFORMAT,
                      "%s: message %" PRIu64 ": wire version %u, expected %d",
                      s->name, s->st.messages, h.version, CAPTURE_WIRE_VERSION);
  s->st.said_exec = false;
  switch (h.type) {
  case CAPTURE_MSG_CHUNK: {
    chunk_t *c = chunk_get(s);
    if (c == NULL)
      return oom(s, err);
    as_status_t rc = decode_chunk(s, msg, len, h.aux, c, err);
    c->tid = h.aux;
    if (rc != AS_OK || c->n == 0) {
      chunk_free_in(s, c);
      return rc;
    }
    return add_chunk(s, c, err);
  }
  case CAPTURE_MSG_WATERMARK: {
    uint64_t w;
    if (len != sizeof h + sizeof w)
      return as_err_set(err, AS_EFORMAT,
                        "%s: message %" PRIu64 ": a watermark of %zu bytes, "
                        "expected %zu",
                        s->name, s->st.messages, len, sizeof h + sizeof w);
    memcpy(&w, (const uint8_t *)msg + sizeof h, sizeof w);
    return release_below(s, w, err);
  }
  case CAPTURE_MSG_BYE:
    s->st.said_bye = true;
    return AS_OK;
  case CAPTURE_MSG_EXEC:
    s->st.said_bye = true;
    s->st.said_exec = true;
    return AS_OK;
  case CAPTURE_MSG_FLUSHED:
    return AS_OK;
  default:
    return as_err_set(err, AS_EFORMAT,
                      "%s: message %" PRIu64 ": unknown type %u", s->name,
                      s->st.messages, h.type);
  }
}

const capture_stats_t *capture_stream_stats(const capture_stream_t *s) {
  return &s->st;
}

as_status_t capture_stream_close(capture_stream_t *s, capture_stats_t *st,
                                 as_err_t *err) {
  as_status_t rc = release_below(s, UINT64_MAX, err);
  while (s->nheap > 0)
    for (chunk_t *c = s->heap[--s->nheap], *nx; c != NULL; c = nx) {
      nx = c->next;
      chunk_destroy(c);
    }
  addr_ids_map_free(&s->tails);
  while (s->nspare > 0)
    chunk_destroy(s->spare[--s->nspare]);
  s->st.max_live_ids = s->ids.peak;
  as_err_t    werr = {0};
  as_status_t wrc = trace_writer_close(s->w, &werr);
  if (rc == AS_OK && s->write_failed)
    rc = as_err_set(err, s->write_err.code, "%s", s->write_err.msg);
  else if (rc == AS_OK && wrc != AS_OK)
    rc = as_err_set(err, wrc, "%s", werr.msg);
  if (st != NULL)
    *st = s->st;
  free(s->heap);
  free(s->sizes);
  addr_ids_free(&s->ids);
  addr_ids_map_free(&s->th.map);
  addr_ids_map_free(&s->th.pending);
  free(s->th.used);
  free(s);
  return rc;
}
