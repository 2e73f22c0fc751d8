/* traces/binary.c -- the compact binary trace format (".astrace"): a
 * streaming reader and writer.
 *
 * Real traces hold hundreds of millions of events, so the reader never loads
 * a file whole: it keeps a 256 KiB window, refilled with fread, and decodes a
 * record with no bounds checks whenever the window holds at least
 * BIN_RECORD_MAX bytes (the longest record, or the longest prefix of a bad
 * one that is read before the error shows).  Only the last few records of a
 * file go through the checked decoder.  In the unchecked decoder, 1-3 byte
 * varints, the thread pick and the presence of a size are decoded without
 * data-dependent branches (get_varint3), which took a random malloc/free mix
 * from 1.8 branch mispredictions per record to 0.02 and from ~25 to ~14 ns
 * per event on the development VM (tests/bench/bench_trace_decode).  Tried
 * and not kept: decoding 256-event batches with state in registers, and
 * field boundaries from one 16-byte SSE2 mask -- both ran more instructions
 * than they saved.  The text format (traces/text.c) is for people; this one
 * is for volume.
 *
 * Layout (all integers are unsigned LEB128 varints unless stated; also in
 * docs/trace-format.md):
 *
 *   offset 0   magic    8 bytes  "ASTRACE\0"
 *   offset 8   version  u16 little-endian, 2 (1 is read too)
 *   offset 10  provenance, repeated:  klen (1..31), key bytes,
 *                                     vlen (0..255), value bytes
 *              terminated by klen = 0; at most 32 pairs; no NUL bytes.
 *   records, then an end record (byte 0x0F), then (version 2) the
 *   trailer: the number of records (varint) and the checksum of the
 *   record bytes (8 bytes, little-endian; bin_sum below); bytes after it
 *   are ignored.  A file that ends before its end record (at a record
 *   boundary or inside one) or inside its trailer was cut short: an error
 *   naming the offset, or, after trace_set_lenient, the end of the events
 *   read so far (trace_truncated says so).  Version 1 files have no
 *   trailer; their end record is required all the same (every writer of
 *   them wrote it).
 *
 *   record = B [dt] [thread] [id] [align] [offset] [size] [label] [value]
 *     B bits 0-3  op: 0 malloc, 1 calloc, 2 realloc, 3 memalign, 4 free,
 *                 5 thread_start, 6 thread_exit, 7 mark, 8 idle, 9 trim,
 *                 10 rss, 11 purge, 12 option, 13 touch; 15 with bits 4-7
 *                 clear = end record
 *     B bits 4-5  domain (0 raw, 1 mem, 2 obj) for ops 0-4; op 10: 1 when
 *                 the record carries "other"; 0 for others
 *     B bit 6     SAME_THREAD: thread equals the previous record's (0 at the
 *                 start); thread field omitted
 *     B bit 7     ZERO_DT: time equals the previous record's; dt omitted
 *     dt          time minus the previous record's time (0 at the start), ns
 *     thread      thread id, below 2^32
 *     id          ops 0-4 and 13: zigzag(id - previous id) modulo 2^64,
 *                 where the previous id is that of the last record of ops
 *                 0-4 or 13 (0 at the start); zigzag(d) = (d << 1) ^
 *                 (d >> 63), d signed; op 11: the arena, plain (2^64 - 1 =
 *                 all arenas)
 *     align       op 3: log2(align), below 64
 *     offset      op 13: first byte written, from the object's start
 *     size        ops 0-3: bytes; 8 idle: ns; 9 trim: pad; 10 rss: bytes;
 *                 11 purge: kind (0 all, 1 decay, 2 tcache); 13: length > 0
 *     other       op 10 with bits 4-5 = 1: of those bytes, how many no
 *                 allocator holds (a capture measures it), above 0
 *     label       ops 7 and 12: length (<= 63) then that many bytes, none
 *                 of them a control byte other than tab (op 12: a knob
 *                 name, [a-z0-9_.])
 *     value       op 12: zigzag(value), the option's signed value
 *
 *   Call sites (docs/trace-format.md, "Call sites"):
 *     B op 14     an allocation with a call site: B's domain and flag bits
 *                 as for ops 0-3, then dt and thread as usual, then the
 *                 varint site << 2 | op (op 0-3), then that op's fields
 *     B 0x1F      module definition (bits 6-7 as usual): dt, thread, id,
 *                 path length (1-255), path bytes
 *     B 0x2F      site definition (bits 6-7 as usual): dt, thread, id (1 to
 *                 2^24 - 1), frame count (1-32), then per frame its module
 *                 id and offset
 *   Traces without call sites are byte for byte what they were, so the
 *   version stays 2; an older reader refuses op 14 and 0x1F/0x2F as unknown
 *   op bytes.
 *
 * Fields an op does not use are not stored and read back as 0 / NULL.
 * Typical malloc/free records take 3-5 bytes.  Alternatives not taken: a
 * fixed-width record (simpler, 4x larger) and zstd framing (a dependency;
 * compress the file instead if needed).
 *
 * Sections: varints, reader, writer.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_io.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "binary.c's get_varint3 assumes a little-endian host"
#endif

#define BIN_MAGIC       "ASTRACE" /* + its NUL: 8 bytes */
#define BIN_MAGIC_LEN   8
#define BIN_VERSION     2        /* written; 1 (no trailer) is read too */
#define BIN_TRAILER_MAX (10 + 8) /* count varint + checksum */
#define BIN_BUF_SIZE    ((size_t)256 * 1024)
#define BIN_RECORD_MAX  128 /* >= 1 + 5 varints of 10 + 10 + 63 */
#define BIN_OP_END      0x0F
#define BIN_OP_SITED    14   /* an allocation with a call site */
#define BIN_OP_MODULE   0x1F /* module definition (with bits 6-7) */
#define BIN_OP_SITE     0x2F /* site definition (with bits 6-7) */
/* Longest module or site definition: B, dt, thread, id, count, 32 frames
 * of two varints (or a path of 255 bytes and its length). */
#define BIN_DEF_MAX      (1 + 4 * 10 + TRACE_FRAMES_MAX * 20)
#define BIN_SAME_THREAD  0x40
#define BIN_ZERO_DT      0x80
#define BIN_DOMAIN_SHIFT 4
#define BIN_RSS_OTHER    1 /* an rss record's domain bits: "other" follows */

/* The op numbers are part of the file format: trace_op_t must not move. */
_Static_assert(TRACE_MALLOC == 0 && TRACE_CALLOC == 1 && TRACE_REALLOC == 2 &&
                   TRACE_MEMALIGN == 3 && TRACE_FREE == 4 &&
                   TRACE_THREAD_START == 5 && TRACE_THREAD_EXIT == 6 &&
                   TRACE_MARK == 7 && TRACE_IDLE == 8 && TRACE_TRIM == 9 &&
                   TRACE_RSS == 10 && TRACE_PURGE == 11 && TRACE_OPTION == 12 &&
                   TRACE_TOUCH == 13 && TRACE_MODULE == 14 &&
                   TRACE_SITE == 15 && TRACE_OP_COUNT == 16,
               "binary op codes are fixed by the file format");

#define LIKELY(x)     __builtin_expect(!!(x), 1)
#define UNLIKELY(x)   __builtin_expect(!!(x), 0)
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* ---- Varints ------------------------------------------------------------ */

typedef enum dec_rc_e {
  DEC_OK,
  DEC_TRUNCATED, /* window ended inside the record */
  DEC_OVERFLOW,  /* varint longer than 10 bytes or >= 2^64 */
  DEC_BAD_OP,    /* unknown record byte */
  DEC_RANGE,     /* a field out of its range (message in s->detail) */
  DEC_END        /* end record */
} dec_rc_t;

/* Decodes one varint at *pp; checked: stop at end.  Advances *pp only on
 * success. */
static ALWAYS_INLINE dec_rc_t get_varint(const uint8_t **pp, const uint8_t *end,
                                         bool checked, uint64_t *out) {
  const uint8_t *p = *pp;
  if (checked && p == end)
    return DEC_TRUNCATED;
  uint64_t b = *p++;
  if (LIKELY(b < 0x80)) {
    *out = b;
    *pp = p;
    return DEC_OK;
  }
  uint64_t v = b & 0x7f;
  for (unsigned shift = 7;; shift += 7) {
    if (checked && p == end)
      return DEC_TRUNCATED;
    b = *p++;
    if (shift == 63) {
      if (b > 1)
        return DEC_OVERFLOW;
      v |= b << 63;
      break;
    }
    v |= (b & 0x7f) << shift;
    if (b < 0x80)
      break;
  }
  *out = v;
  *pp = p;
  return DEC_OK;
}

/* The unchecked decoder's varint: 1-3 byte values (below 2^21, nearly all
 * deltas, ids and sizes in practice) without a branch on their length,
 * because on real malloc/free mixes that branch is a coin toss and its
 * mispredictions cost more than this arithmetic (measured: 1.8
 * mispredictions per record before, 0.02 after; see bench_trace_decode).
 * Reads 4 bytes, so only for the window's fast region.  When present is 0
 * it consumes nothing and yields 0.  Longer varints take get_varint. */
static ALWAYS_INLINE dec_rc_t get_varint3(const uint8_t **pp, uint32_t present,
                                          uint64_t *out) {
  const uint8_t *p = *pp;
  uint32_t       x;
  memcpy(&x, p, 4); /* little-endian: byte 0 is the low byte */
  uint32_t c0 = (x >> 7) & 1, c1 = (x >> 15) & c0; /* continuation bits */
  if (UNLIKELY((x >> 23) & c1 & present))
    return get_varint(pp, NULL, false, out);
  uint32_t v = (x & 0x7fu) | ((x >> 1) & (0x3f80u & (0 - c0))) |
               ((x >> 2) & (0x1fc000u & (0 - c1)));
  *pp = p + ((1 + c0 + c1) & (0 - present));
  *out = v & (0 - present);
  return DEC_OK;
}

/* Appends v as a varint; returns the new end (at most 10 bytes). */
static ALWAYS_INLINE uint8_t *put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

/* ---- Checksum ----------------------------------------------------------- */

/* The trailer's checksum of the record bytes (docs/trace-format.md): start
 * at BIN_SUM_SEED; for each 8-byte little-endian word w of the bytes (the
 * last one padded with zero bytes), h = rotl64(h ^ w, 29) * BIN_SUM_MUL;
 * then h ^= the byte count and mix once more.  A word at a time, so that
 * hashing costs a fraction of decoding; it guards against cuts and
 * corruption, not against forgery.  BIN_SUM_MUL is the 64-bit golden
 * ratio (Knuth's multiplicative hashing), BIN_SUM_SEED the first 64 bits
 * of pi's fraction. */
#define BIN_SUM_SEED UINT64_C(0x243F6A8885A308D3)
#define BIN_SUM_MUL  UINT64_C(0x9E3779B97F4A7C15)

typedef struct bin_sum_s bin_sum_t;
struct bin_sum_s {
  uint64_t h;
  uint64_t bytes;    /* hashed so far */
  uint8_t  carry[8]; /* a word not yet complete */
  unsigned ncarry;
};

static inline uint64_t sum_mix(uint64_t h, uint64_t w) {
  h ^= w;
  return ((h << 29) | (h >> 35)) * BIN_SUM_MUL;
}

static void sum_init(bin_sum_t *s) {
  memset(s, 0, sizeof *s);
  s->h = BIN_SUM_SEED;
}

static void sum_bytes(bin_sum_t *s, const uint8_t *p, size_t n) {
  s->bytes += n;
  while (n > 0 && s->ncarry > 0 && s->ncarry < 8) {
    s->carry[s->ncarry++] = *p++;
    n--;
  }
  if (s->ncarry == 8) {
    uint64_t w;
    memcpy(&w, s->carry, 8);
    s->h = sum_mix(s->h, w);
    s->ncarry = 0;
  }
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    memcpy(&w, p, 8); /* little-endian host (checked above) */
    s->h = sum_mix(s->h, w);
  }
  memcpy(s->carry + s->ncarry, p, n);
  s->ncarry += (unsigned)n;
}

static uint64_t sum_final(const bin_sum_t *s) {
  uint64_t h = s->h;
  if (s->ncarry > 0) {
    uint8_t last[8] = {0};
    memcpy(last, s->carry, s->ncarry);
    uint64_t w;
    memcpy(&w, last, 8);
    h = sum_mix(h, w);
  }
  return sum_mix(h, s->bytes);
}

/* ---- Reader ------------------------------------------------------------- */

/* Invariants: buf[0, end - buf) holds the bytes of the file from offset
 * base_off; p is the next unread byte; prev_* describe the last record. */
typedef struct bin_src_s {
  trace_source_t base; /* must be first */
  FILE          *f;
  bool           own_f;     /* false for stdin */
  bool           eof;       /* f has no more bytes */
  bool           done;      /* AS_DONE returned */
  uint8_t       *buf;       /* BIN_BUF_SIZE bytes */
  const uint8_t *p;         /* next byte to decode */
  const uint8_t *end;       /* end of valid bytes */
  uint64_t       base_off;  /* file offset of buf[0] */
  uint64_t       prev_t_ns; /* time of the last record */
  uint64_t       prev_id;   /* id of the last record with an id */
  uint32_t       prev_thread;
  uint64_t       last_off;    /* byte offset of the last record returned */
  as_err_t       failure;     /* sticky error */
  const char    *field;       /* what a failed decode was reading */
  const uint8_t *err_at;      /* where the failed field starts */
  char           detail[128]; /* DEC_RANGE explanation */
  char           label[TRACE_LABEL_MAX + 1];
  char           path[TRACE_PATH_MAX + 1];
  trace_frame_t  frames[TRACE_FRAMES_MAX];
  trace_defs_t   defs;     /* modules and sites defined so far */
  unsigned       version;  /* 1 or 2 */
  uint64_t       records;  /* decoded so far */
  bin_sum_t      sum;      /* of the record bytes before sum_from */
  const uint8_t *sum_from; /* first record byte not yet hashed, or NULL
                              before the records and after the end */
  bool lenient;            /* a cut-short file ends at its last record */
  char truncated[200];     /* why it ended early (lenient), or "" */
} bin_src_t;

static uint64_t offset_of(const bin_src_t *s, const uint8_t *at) {
  return s->base_off + (uint64_t)(at - s->buf);
}

/* Moves the unread tail to the front and reads until the window is full or
 * the file ends. */
static as_status_t refill(bin_src_t *s, as_err_t *err) {
  if (s->sum_from != NULL) { /* the records consumed leave the window */
    sum_bytes(&s->sum, s->sum_from, (size_t)(s->p - s->sum_from));
    s->sum_from = s->buf;
  }
  size_t tail = (size_t)(s->end - s->p);
  s->base_off += (uint64_t)(s->p - s->buf);
  memmove(s->buf, s->p, tail);
  s->p = s->buf;
  size_t n = fread(s->buf + tail, 1, BIN_BUF_SIZE - tail, s->f);
  s->end = s->buf + tail + n;
  if (n < BIN_BUF_SIZE - tail) {
    if (ferror(s->f))
      return as_err_set(err, AS_EIO,
                        "%s: read error at byte offset %" PRIu64 ": %s",
                        s->base.name, offset_of(s, s->end), strerror(errno));
    s->eof = true;
  }
  return AS_OK;
}

#define GET(field_name, var)                                                   \
  do {                                                                         \
    field = (field_name);                                                      \
    at = p;                                                                    \
    dec_rc_t rc_ = checked ? get_varint(&p, end, true, &(var))                 \
                           : get_varint3(&p, 1, &(var));                       \
    if (UNLIKELY(rc_ != DEC_OK)) {                                             \
      rc = rc_;                                                                \
      goto fail;                                                               \
    }                                                                          \
  } while (0)

/* A module or site definition at s->p (B is 0x1F or 0x2F, bits 6-7 the
 * usual flags), always decoded with bounds checks: it may be longer than
 * the window's unchecked margin.  DEC_TRUNCATED when the window ends inside
 * it (the caller refills and retries). */
static dec_rc_t decode_def(bin_src_t *s, trace_event_t *ev, bool checked) {
  const uint8_t *p = s->p, *end = s->end;
  unsigned       b = *p++;
  uint64_t       v, t = s->prev_t_ns, thread = s->prev_thread;
  dec_rc_t       rc;
  (void)checked;
#define GETC(field_name, var)                                                  \
  do {                                                                         \
    s->field = (field_name);                                                   \
    s->err_at = p;                                                             \
    if ((rc = get_varint(&p, end, true, &(var))) != DEC_OK)                    \
      return rc;                                                               \
  } while (0)
#define RANGE(...)                                                             \
  do {                                                                         \
    snprintf(s->detail, sizeof s->detail, __VA_ARGS__);                        \
    return DEC_RANGE;                                                          \
  } while (0)
  if (!(b & BIN_ZERO_DT)) {
    GETC("time delta", v);
    t += v;
    if (t < v)
      RANGE("time overflows 2^64 ns (previous %" PRIu64 " + delta %" PRIu64 ")",
            s->prev_t_ns, v);
  }
  if (!(b & BIN_SAME_THREAD)) {
    GETC("thread", thread);
    if (thread > UINT32_MAX)
      RANGE("expected a thread id below 2^32, got %" PRIu64, thread);
  }
  memset(ev, 0, sizeof *ev);
  ev->t_ns = t;
  ev->thread = (uint32_t)thread;
  GETC((b & 0x3f) == BIN_OP_MODULE ? "module id" : "site id", ev->id);
  if ((b & 0x3f) == BIN_OP_MODULE) {
    ev->op = TRACE_MODULE;
    if (ev->id >= TRACE_DEF_ID_MAX)
      RANGE("expected a module id below %u, got %" PRIu64, TRACE_DEF_ID_MAX,
            ev->id);
    GETC("module path length", v);
    if (v == 0 || v > TRACE_PATH_MAX)
      RANGE("expected a module path of 1 to %d bytes, got %" PRIu64,
            TRACE_PATH_MAX, v);
    s->field = "module path";
    s->err_at = p;
    if ((uint64_t)(end - p) < v)
      return DEC_TRUNCATED;
    for (size_t i = 0; i < v; i++)
      if (p[i] < 0x20 || p[i] == '"' || p[i] == '\\') {
        s->err_at = p + i;
        RANGE("expected a module path byte, got 0x%02x", p[i]);
      }
    memcpy(s->path, p, (size_t)v);
    s->path[v] = '\0';
    p += v;
    ev->label = s->path;
  } else {
    ev->op = TRACE_SITE;
    if (ev->id == 0 || ev->id >= TRACE_DEF_ID_MAX)
      RANGE("expected a site id 1 to %u, got %" PRIu64, TRACE_DEF_ID_MAX - 1,
            ev->id);
    GETC("frame count", v);
    if (v == 0 || v > TRACE_FRAMES_MAX)
      RANGE("expected 1 to %d frames, got %" PRIu64, TRACE_FRAMES_MAX, v);
    for (uint32_t i = 0; i < v; i++) {
      GETC("frame module", s->frames[i].module);
      GETC("frame offset", s->frames[i].offset);
    }
    ev->frames = s->frames;
    ev->nframes = (uint32_t)v;
  }
#undef GETC
#undef RANGE
  s->prev_t_ns = t;
  s->prev_thread = (uint32_t)thread;
  s->p = p;
  return DEC_OK;
}

/* Decodes the record at s->p into *ev.  checked: the window may end inside
 * the record.  On failure s->field, s->err_at say where. */
static ALWAYS_INLINE dec_rc_t decode(bin_src_t *s, trace_event_t *ev,
                                     bool checked) {
  const uint8_t *p = s->p, *end = s->end, *at = p;
  const char    *field = "record byte";
  dec_rc_t       rc;
  unsigned       b = *p++;
  unsigned       op = b & 0x0f;
  unsigned       domain = (b >> BIN_DOMAIN_SHIFT) & 3;
  uint64_t       v;
  bool           sited = false;
  if (UNLIKELY(op >= TRACE_MODULE || (domain != 0 && op > TRACE_FREE) ||
               domain == 3) &&
      !(op == TRACE_RSS && domain == BIN_RSS_OTHER)) {
    if (op == BIN_OP_SITED && domain != 3) {
      sited = true;
    } else {
      unsigned low = b & 0x3f;
      rc = b == BIN_OP_END ? DEC_END
           : low == BIN_OP_MODULE || low == BIN_OP_SITE
               ? decode_def(s, ev, checked)
               : DEC_BAD_OP;
      if (rc == DEC_OK)
        return rc;
      goto fail_def;
    }
  }
  uint64_t t = s->prev_t_ns;
  if (!(b & BIN_ZERO_DT)) {
    GET("time delta", v);
    t += v;
    if (UNLIKELY(t < v)) {
      snprintf(s->detail, sizeof s->detail,
               "time overflows 2^64 ns (previous %" PRIu64 " + delta %" PRIu64
               ")",
               s->prev_t_ns, v);
      rc = DEC_RANGE;
      goto fail;
    }
  }
  uint32_t thread = s->prev_thread;
  if (!checked && ((b & BIN_SAME_THREAD) | (*p < 0x80))) {
    /* Same thread or a 1-byte id: pick without a branch. */
    unsigned same = (b >> 6) & 1;
    thread = same ? thread : *p;
    p += !same;
  } else if (!(b & BIN_SAME_THREAD)) {
    GET("thread", v);
    if (UNLIKELY(v > UINT32_MAX)) {
      snprintf(s->detail, sizeof s->detail,
               "expected a thread id below 2^32, got %" PRIu64, v);
      rc = DEC_RANGE;
      goto fail;
    }
    thread = (uint32_t)v;
  }
  ev->t_ns = t;
  ev->thread = thread;
  ev->op = (uint8_t)op;
  ev->domain = (uint8_t)domain;
  ev->id = 0;
  ev->size = 0;
  ev->align = 0;
  ev->offset = 0;
  ev->prev_size = 0;
  ev->flags = 0;
  ev->label = NULL;
  ev->site = 0;
  ev->frames = NULL;
  ev->nframes = 0;
  if (UNLIKELY(sited)) {
    GET("call site", v);
    op = (unsigned)(v & 3);
    ev->op = (uint8_t)op;
    ev->site = v >> 2;
    if (UNLIKELY(ev->site == 0 || ev->site >= TRACE_DEF_ID_MAX)) {
      snprintf(s->detail, sizeof s->detail,
               "expected a call site 1 to %u, got %" PRIu64,
               TRACE_DEF_ID_MAX - 1, ev->site);
      rc = DEC_RANGE;
      goto fail;
    }
  }
  if (op <= TRACE_FREE) {
    GET("id", v);
    s->prev_id += (v >> 1) ^ (0 - (v & 1)); /* un-zigzag, modulo 2^64 */
    ev->id = s->prev_id;
    if (!checked) {
      /* Whether a size follows (not for free) is also a coin toss. */
      if (UNLIKELY(op == TRACE_MEMALIGN)) {
        GET("align", v);
        if (UNLIKELY(v > 63)) {
          snprintf(s->detail, sizeof s->detail,
                   "expected log2(align) below 64, got %" PRIu64, v);
          rc = DEC_RANGE;
          goto fail;
        }
        ev->align = (uint64_t)1 << v;
      }
      field = "size";
      at = p;
      rc = get_varint3(&p, op != TRACE_FREE, &ev->size);
      if (UNLIKELY(rc != DEC_OK))
        goto fail;
    } else if (op != TRACE_FREE) {
      if (UNLIKELY(op == TRACE_MEMALIGN)) {
        GET("align", v);
        if (UNLIKELY(v > 63)) {
          snprintf(s->detail, sizeof s->detail,
                   "expected log2(align) below 64, got %" PRIu64, v);
          rc = DEC_RANGE;
          goto fail;
        }
        ev->align = (uint64_t)1 << v;
      }
      GET("size", ev->size);
    }
  } else if (op >= TRACE_IDLE && op <= TRACE_RSS) {
    GET("size", ev->size);
    if (op == TRACE_RSS && domain == BIN_RSS_OTHER) {
      ev->domain = TRACE_DOMAIN_RAW;
      GET("other", ev->offset);
      if (UNLIKELY(ev->offset == 0)) {
        snprintf(s->detail, sizeof s->detail,
                 "expected bytes no allocator holds above 0, got 0");
        rc = DEC_RANGE;
        goto fail;
      }
    }
  } else if (op == TRACE_MARK || op == TRACE_OPTION) {
    GET("label length", v);
    if (UNLIKELY(v > TRACE_LABEL_MAX)) {
      snprintf(s->detail, sizeof s->detail,
               "expected a label of at most %d bytes, got %" PRIu64,
               TRACE_LABEL_MAX, v);
      rc = DEC_RANGE;
      goto fail;
    }
    field = "label";
    at = p;
    if (checked && (uint64_t)(end - p) < v) {
      rc = DEC_TRUNCATED;
      goto fail;
    }
    for (size_t i = 0; i < v; i++) {
      if (p[i] < 0x20 && p[i] != '\t') {
        at = p + i;
        snprintf(s->detail, sizeof s->detail,
                 "expected a printable label byte, got 0x%02x", p[i]);
        rc = DEC_RANGE;
        goto fail;
      }
    }
    if (op == TRACE_OPTION && !trace_option_name_ok((const char *)p, v)) {
      snprintf(s->detail, sizeof s->detail,
               "expected an option name of 1-%d bytes of [a-z0-9_.]",
               TRACE_LABEL_MAX);
      rc = DEC_RANGE;
      goto fail;
    }
    memcpy(s->label, p, (size_t)v);
    s->label[v] = '\0';
    p += v;
    ev->label = s->label;
    if (op == TRACE_OPTION) {
      GET("value", v);
      ev->size = (v >> 1) ^ (0 - (v & 1)); /* un-zigzag */
    }
  } else if (op == TRACE_PURGE) {
    GET("arena", ev->id);
    GET("purge kind", ev->size);
    if (UNLIKELY(ev->size >= TRACE_PURGE_COUNT)) {
      snprintf(s->detail, sizeof s->detail,
               "expected a purge kind 0-%d, got %" PRIu64,
               TRACE_PURGE_COUNT - 1, ev->size);
      rc = DEC_RANGE;
      goto fail;
    }
  } else if (op == TRACE_TOUCH) {
    GET("id", v);
    s->prev_id += (v >> 1) ^ (0 - (v & 1));
    ev->id = s->prev_id;
    GET("offset", ev->offset);
    GET("length", ev->size);
    if (UNLIKELY(ev->size == 0 || ev->offset + ev->size < ev->offset)) {
      snprintf(s->detail, sizeof s->detail,
               "expected a touch length above 0 ending below 2^64, got "
               "%" PRIu64 " at offset %" PRIu64,
               ev->size, ev->offset);
      rc = DEC_RANGE;
      goto fail;
    }
  }
  s->prev_t_ns = t;
  s->prev_thread = thread;
  s->p = p;
  return DEC_OK;
fail:
  s->field = field;
  s->err_at = at;
fail_def: /* decode_def set field and err_at */
  return rc;
}

#undef GET

/* Turns a failed decode into the message naming the byte offset. */
static as_status_t decode_error(bin_src_t *s, dec_rc_t rc, as_err_t *err) {
  const char *name = s->base.name;
  uint64_t    rec = offset_of(s, s->p), at = offset_of(s, s->err_at);
  switch (rc) {
  case DEC_TRUNCATED:
    return as_err_set(err, AS_EFORMAT,
                      "%s: truncated record at byte offset %" PRIu64
                      ": expected %s at byte offset %" PRIu64
                      ", got end of file",
                      name, rec, s->field, at);
  case DEC_OVERFLOW:
    return as_err_set(err, AS_EFORMAT,
                      "%s: byte offset %" PRIu64
                      ": varint overflow in %s, expected at most 10 bytes "
                      "encoding a value below 2^64",
                      name, at, s->field);
  case DEC_BAD_OP:
    return as_err_set(err, AS_EFORMAT,
                      "%s: byte offset %" PRIu64
                      ": unknown op byte 0x%02x, expected an op 0-14 with "
                      "domain bits only on ops 0-4 and 14 (or 1 on op 10), "
                      "0x1f, 0x2f or 0x0f",
                      name, rec, *s->p);
  case DEC_RANGE:
    return as_err_set(err, AS_EFORMAT, "%s: byte offset %" PRIu64 ": %s", name,
                      at, s->detail);
  case DEC_OK:
  case DEC_END:
    break;
  }
  return as_err_set(err, AS_EFORMAT, "%s: byte offset %" PRIu64 ": bad record",
                    name, rec);
}

/* The file ends before its end record or inside its trailer: an error, or
 * with lenient the end of the events (the reason kept for
 * trace_truncated).  msg says what was expected where. */
static as_status_t cut_short(bin_src_t *s, const char *msg, as_err_t *err) {
  s->done = true;
  s->sum_from = NULL;
  if (s->lenient) {
    snprintf(s->truncated, sizeof s->truncated, "%s", msg);
    return AS_DONE;
  }
  s->failure.code = as_err_set(&s->failure, AS_EFORMAT,
                               "%s: %s: the trace was cut short (--lenient "
                               "reads it to its last whole record)",
                               s->base.name, msg);
  return as_err_set(err, s->failure.code, "%s", s->failure.msg);
}

/* Makes n bytes from s->p readable if the file has them. */
static as_status_t want(bin_src_t *s, size_t n, as_err_t *err) {
  if ((size_t)(s->end - s->p) >= n || s->eof)
    return AS_OK;
  return refill(s, err);
}

/* The end record at s->p: version 2's trailer must follow and agree with
 * what was read. */
static as_status_t finish(bin_src_t *s, as_err_t *err) {
  sum_bytes(&s->sum, s->sum_from, (size_t)(s->p - s->sum_from));
  s->sum_from = NULL;
  s->p++; /* the end record */
  if (s->version < 2) {
    s->done = true;
    return AS_DONE;
  }
  char           msg[160];
  uint64_t       count, want_sum = sum_final(&s->sum);
  as_status_t    rc = want(s, BIN_TRAILER_MAX, err);
  const uint8_t *at = s->p;
  if (rc != AS_OK)
    return s->failure.code = rc;
  if (get_varint(&s->p, s->end, true, &count) != DEC_OK ||
      (size_t)(s->end - s->p) < 8) {
    snprintf(msg, sizeof msg,
             "byte offset %" PRIu64 ": the trailer (event count and "
             "checksum) is incomplete",
             offset_of(s, at));
    return cut_short(s, msg, err);
  }
  uint64_t got_sum;
  memcpy(&got_sum, s->p, 8);
  s->p += 8;
  s->done = true;
  if (count != s->records || got_sum != want_sum) {
    s->failure.code = as_err_set(
        &s->failure, AS_EFORMAT,
        "%s: byte offset %" PRIu64 ": the trailer says %" PRIu64
        " events and checksum %016" PRIx64 ", but %" PRIu64 " events "
        "with checksum %016" PRIx64 " were read: the trace is damaged",
        s->base.name, offset_of(s, at), count, got_sum, s->records, want_sum);
    return as_err_set(err, s->failure.code, "%s", s->failure.msg);
  }
  return AS_DONE;
}

/* A call site or definition just decoded: checked against what the trace
 * defined before (trace_defs_note). */
static as_status_t note_defs(bin_src_t *s, const trace_event_t *ev,
                             as_err_t *err) {
  char            why[160];
  trace_defs_rc_t d = trace_defs_note(&s->defs, ev, why, sizeof why);
  if (d == TRACE_DEFS_OK)
    return AS_OK;
  s->failure.code = d == TRACE_DEFS_NOMEM
                        ? as_err_set(&s->failure, AS_ENOMEM,
                                     "%s: byte offset %" PRIu64
                                     ": out of memory for call sites",
                                     s->base.name, s->last_off)
                        : as_err_set(&s->failure, AS_EFORMAT,
                                     "%s: byte offset %" PRIu64 ": %s",
                                     s->base.name, s->last_off, why);
  s->p = s->end;
  s->eof = true;
  s->done = true;
  return as_err_set(err, s->failure.code, "%s", s->failure.msg);
}

static as_status_t bin_next(trace_source_t *src, trace_event_t *ev,
                            as_err_t *err) {
  bin_src_t *s = (bin_src_t *)src;
  if (LIKELY((size_t)(s->end - s->p) >= BIN_RECORD_MAX)) {
    s->last_off = offset_of(s, s->p);
    dec_rc_t rc = decode(s, ev, false);
    if (LIKELY(rc == DEC_OK)) {
      s->records++;
      if (UNLIKELY(ev->site != 0 || ev->op >= TRACE_MODULE))
        return note_defs(s, ev, err);
      return AS_OK;
    }
    if (rc == DEC_END)
      return finish(s, err);
    if (rc == DEC_TRUNCATED && !s->eof) {
      /* A definition longer than the window's margin: read on, retry. */
      as_status_t st = refill(s, &s->failure);
      if (st != AS_OK) {
        s->failure.code = st;
        return as_err_set(err, st, "%s", s->failure.msg);
      }
      return bin_next(src, ev, err);
    }
    if (rc == DEC_TRUNCATED) {
      if (s->lenient) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "byte offset %" PRIu64 ": end of file inside a record after "
                 "%" PRIu64 " events",
                 offset_of(s, s->p), s->records);
        return cut_short(s, msg, err);
      }
      s->failure.code = decode_error(s, rc, &s->failure);
      return as_err_set(err, s->failure.code, "%s", s->failure.msg);
    }
    s->failure.code = decode_error(s, rc, &s->failure);
    s->p = s->end; /* fall into the slow path's sticky checks next time */
    s->eof = true;
    return as_err_set(err, s->failure.code, "%s", s->failure.msg);
  }
  if (s->failure.code != AS_OK)
    return as_err_set(err, s->failure.code, "%s", s->failure.msg);
  if (s->done)
    return AS_DONE;
  if (!s->eof) {
    as_status_t st = refill(s, &s->failure);
    if (st != AS_OK) {
      s->failure.code = st;
      return as_err_set(err, st, "%s", s->failure.msg);
    }
    if ((size_t)(s->end - s->p) >= BIN_RECORD_MAX)
      return bin_next(src, ev, err);
  }
  if (s->p == s->end) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "byte offset %" PRIu64 ": end of file after %" PRIu64
             " events, expected an end record",
             offset_of(s, s->p), s->records);
    return cut_short(s, msg, err);
  }
  s->last_off = offset_of(s, s->p);
  dec_rc_t rc = decode(s, ev, true);
  if (rc == DEC_OK) {
    s->records++;
    if (ev->site != 0 || ev->op >= TRACE_MODULE)
      return note_defs(s, ev, err);
    return AS_OK;
  }
  if (rc == DEC_END)
    return finish(s, err);
  if (rc == DEC_TRUNCATED && s->lenient) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "byte offset %" PRIu64 ": end of file inside a record after "
             "%" PRIu64 " events",
             offset_of(s, s->p), s->records);
    return cut_short(s, msg, err);
  }
  s->failure.code = decode_error(s, rc, &s->failure);
  return as_err_set(err, s->failure.code, "%s", s->failure.msg);
}

static void bin_close(trace_source_t *src) {
  bin_src_t *s = (bin_src_t *)src;
  if (s->own_f)
    fclose(s->f);
  trace_defs_free(&s->defs);
  free(s->buf);
  free(s);
}

static void bin_where(const trace_source_t *src, char *buf, size_t len) {
  snprintf(buf, len, "byte offset %" PRIu64,
           ((const bin_src_t *)src)->last_off);
}

static const trace_source_methods_t bin_source_methods = {
    .next = bin_next,
    .close = bin_close,
    .where = bin_where,
};

void trace_set_lenient(trace_source_t *src, bool lenient) {
  if (src != NULL && src->methods == &bin_source_methods)
    ((bin_src_t *)src)->lenient = lenient;
}

const char *trace_truncated(const trace_source_t *src) {
  if (src == NULL || src->methods != &bin_source_methods)
    return NULL;
  const bin_src_t *s = (const bin_src_t *)src;
  return s->truncated[0] ? s->truncated : NULL;
}

/* Reads one length-prefixed header string of at most max bytes into out. */
static as_status_t header_string(bin_src_t *s, const char *what, uint64_t max,
                                 char *out, as_err_t *err) {
  const uint8_t *at = s->p;
  uint64_t       n;
  dec_rc_t       rc = get_varint(&s->p, s->end, true, &n);
  if (rc == DEC_TRUNCATED)
    return as_err_set(err, AS_EFORMAT,
                      "%s: truncated header at byte offset %" PRIu64
                      ": expected the length of a %s, got end of file",
                      s->base.name, offset_of(s, at), what);
  if (rc == DEC_OVERFLOW)
    return as_err_set(err, AS_EFORMAT,
                      "%s: byte offset %" PRIu64
                      ": varint overflow in the length of a %s",
                      s->base.name, offset_of(s, at), what);
  if (n > max)
    return as_err_set(err, AS_EFORMAT,
                      "%s: byte offset %" PRIu64
                      ": expected a %s of at most %" PRIu64
                      " bytes, got length %" PRIu64,
                      s->base.name, offset_of(s, at), what, max, n);
  if ((uint64_t)(s->end - s->p) < n)
    return as_err_set(err, AS_EFORMAT,
                      "%s: truncated header at byte offset %" PRIu64
                      ": expected %" PRIu64 " bytes of a %s, got end of file",
                      s->base.name, offset_of(s, s->p), n, what);
  if (memchr(s->p, '\0', (size_t)n) != NULL)
    return as_err_set(err, AS_EFORMAT,
                      "%s: byte offset %" PRIu64
                      ": expected a %s without NUL bytes",
                      s->base.name, offset_of(s, s->p), what);
  memcpy(out, s->p, (size_t)n);
  out[n] = '\0';
  s->p += n;
  return AS_OK;
}

/* Magic, version and provenance.  The header is at most 32 * 307 + 11
 * bytes, so one full window holds it. */
static as_status_t read_header(bin_src_t *s, as_err_t *err) {
  as_status_t rc = refill(s, err);
  if (rc != AS_OK)
    return rc;
  const char *name = s->base.name;
  size_t      have = (size_t)(s->end - s->p);
  if (have < BIN_MAGIC_LEN || memcmp(s->p, BIN_MAGIC, BIN_MAGIC_LEN) != 0)
    return as_err_set(err, AS_EFORMAT,
                      "%s: byte offset 0: not an allocsim binary trace "
                      "(expected magic 'ASTRACE\\0')",
                      name);
  if (have < BIN_MAGIC_LEN + 2)
    return as_err_set(err, AS_EFORMAT,
                      "%s: truncated header at byte offset 8: expected the "
                      "version, got end of file",
                      name);
  unsigned version = s->p[8] | (unsigned)s->p[9] << 8;
  if (version < 1 || version > BIN_VERSION)
    return as_err_set(err, AS_EFORMAT,
                      "%s: byte offset 8: unsupported version %u, expected "
                      "1 to %d",
                      name, version, BIN_VERSION);
  s->version = version;
  s->p += BIN_MAGIC_LEN + 2;
  for (unsigned pairs = 0;; pairs++) {
    char key[32], value[256];
    if (s->p < s->end && *s->p == 0) {
      s->p++;
      sum_init(&s->sum);
      s->sum_from = s->p; /* the records start here */
      return AS_OK;
    }
    const uint8_t *at = s->p;
    if ((rc = header_string(s, "provenance key", 31, key, err)) != AS_OK)
      return rc;
    if ((rc = header_string(s, "provenance value", 255, value, err)) != AS_OK)
      return rc;
    if (pairs == TRACE_META_MAX ||
        trace_meta_set(&s->base.meta, key, value, NULL) != AS_OK)
      return as_err_set(err, AS_EFORMAT,
                        "%s: byte offset %" PRIu64
                        ": expected at most %d provenance pairs, got '%s'",
                        name, offset_of(s, at), TRACE_META_MAX, key);
  }
}

as_status_t trace_binary_open_stream(FILE *f, const char *name,
                                     const void *prefix, size_t prefix_len,
                                     trace_source_t **out, as_err_t *err) {
  *out = NULL;
  bin_src_t *s = calloc(1, sizeof *s);
  uint8_t   *buf = malloc(BIN_BUF_SIZE);
  if (s == NULL || buf == NULL || prefix_len > BIN_BUF_SIZE) {
    free(s);
    free(buf);
    if (f != stdin)
      fclose(f);
    return as_err_set(err, AS_ENOMEM, "%s: out of memory", name);
  }
  s->base.methods = &bin_source_methods;
  snprintf(s->base.name, sizeof s->base.name, "%s", name);
  s->f = f;
  s->own_f = f != stdin;
  s->buf = buf;
  if (prefix_len > 0)
    memcpy(buf, prefix, prefix_len);
  s->p = buf;
  s->end = buf + prefix_len;
  as_status_t rc = read_header(s, err);
  if (rc != AS_OK) {
    bin_close(&s->base);
    return rc;
  }
  *out = &s->base;
  return AS_OK;
}

as_status_t trace_binary_open(const char *path, trace_source_t **out,
                              as_err_t *err) {
  *out = NULL;
  if (strcmp(path, "-") == 0)
    return trace_binary_open_stream(stdin, "<stdin>", NULL, 0, out, err);
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return as_err_set(err, AS_EIO, "%s: cannot open: %s", path,
                      strerror(errno));
  return trace_binary_open_stream(f, path, NULL, 0, out, err);
}

/* ---- Writer ------------------------------------------------------------- */

typedef struct bin_writer_s {
  trace_writer_t base; /* must be first */
  FILE          *f;
  bool           own_f;  /* false for stdout */
  bool           failed; /* a write failed; close reports it */
  char           name[256];
  uint8_t       *buf;   /* BIN_BUF_SIZE bytes */
  size_t         len;   /* bytes pending in buf */
  uint64_t       count; /* events written */
  uint64_t       prev_t_ns;
  uint64_t       prev_id;
  uint32_t       prev_thread;
  size_t         sum_from; /* buf offset of the first record byte not
                              yet hashed */
  bin_sum_t sum;           /* of the record bytes written */
} bin_writer_t;

static as_status_t flush(bin_writer_t *w, as_err_t *err) {
  sum_bytes(&w->sum, w->buf + w->sum_from, w->len - w->sum_from);
  w->sum_from = 0;
  if (w->len > 0 && fwrite(w->buf, 1, w->len, w->f) != w->len) {
    w->failed = true;
    return as_err_set(err, AS_EIO, "%s: write error: %s", w->name,
                      strerror(errno));
  }
  w->len = 0;
  return AS_OK;
}

static as_status_t bin_write(trace_writer_t *tw, const trace_event_t *ev,
                             as_err_t *err) {
  bin_writer_t *w = (bin_writer_t *)tw;
  as_status_t   rc =
      trace_event_validate(ev, w->prev_t_ns, w->name, w->count, err);
  if (rc != AS_OK)
    return rc;
  if (BIN_BUF_SIZE - w->len < BIN_DEF_MAX && (rc = flush(w, err)) != AS_OK)
    return rc;
  uint8_t *p = w->buf + w->len;
  uint8_t *bp = p++;
  unsigned op = ev->op;
  bool     sited = op < TRACE_FREE && ev->site != 0;
  unsigned b = op == TRACE_MODULE ? BIN_OP_MODULE
               : op == TRACE_SITE ? BIN_OP_SITE
               : sited            ? BIN_OP_SITED
                                  : op;
  if (op <= TRACE_FREE)
    b |= (unsigned)ev->domain << BIN_DOMAIN_SHIFT;
  else if (op == TRACE_RSS && ev->offset != 0)
    b |= BIN_RSS_OTHER << BIN_DOMAIN_SHIFT;
  if (sited && ev->site >= TRACE_DEF_ID_MAX)
    return as_err_set(err, AS_EINVAL,
                      "%s: event %" PRIu64 ": call site %" PRIu64
                      " is not below %u",
                      w->name, w->count, ev->site, TRACE_DEF_ID_MAX);
  uint64_t dt = ev->t_ns - w->prev_t_ns;
  if (dt == 0)
    b |= BIN_ZERO_DT;
  else
    p = put_varint(p, dt);
  if (ev->thread == w->prev_thread)
    b |= BIN_SAME_THREAD;
  else
    p = put_varint(p, ev->thread);
  *bp = (uint8_t)b;
  if (sited)
    p = put_varint(p, ev->site << 2 | op);
  if (op <= TRACE_FREE) {
    uint64_t d = ev->id - w->prev_id; /* modulo 2^64, read as signed */
    p = put_varint(p, (d << 1) ^ (0 - (d >> 63)));
    w->prev_id = ev->id;
    if (op == TRACE_MEMALIGN)
      p = put_varint(p, (uint64_t)__builtin_ctzll(ev->align));
    if (op != TRACE_FREE)
      p = put_varint(p, ev->size);
  } else if (op >= TRACE_IDLE && op <= TRACE_RSS) {
    p = put_varint(p, ev->size);
    if (op == TRACE_RSS && ev->offset != 0)
      p = put_varint(p, ev->offset);
  } else if (op == TRACE_MARK || op == TRACE_OPTION) {
    const char *l = ev->label != NULL ? ev->label : "";
    size_t      n = strlen(l); /* <= TRACE_LABEL_MAX, validated */
    *p++ = (uint8_t)n;
    memcpy(p, l, n);
    p += n;
    if (op == TRACE_OPTION) {
      uint64_t v = ev->size; /* int64_t as written, zigzagged */
      p = put_varint(p, (v << 1) ^ (0 - (v >> 63)));
    }
  } else if (op == TRACE_PURGE) {
    p = put_varint(p, ev->id);
    p = put_varint(p, ev->size);
  } else if (op == TRACE_TOUCH) {
    uint64_t d = ev->id - w->prev_id;
    p = put_varint(p, (d << 1) ^ (0 - (d >> 63)));
    w->prev_id = ev->id;
    p = put_varint(p, ev->offset);
    p = put_varint(p, ev->size);
  } else if (op == TRACE_MODULE) {
    size_t n = strlen(ev->label); /* 1..TRACE_PATH_MAX, validated */
    p = put_varint(p, ev->id);
    p = put_varint(p, n);
    memcpy(p, ev->label, n);
    p += n;
  } else if (op == TRACE_SITE) {
    p = put_varint(p, ev->id);
    p = put_varint(p, ev->nframes);
    for (uint32_t i = 0; i < ev->nframes; i++) {
      p = put_varint(p, ev->frames[i].module);
      p = put_varint(p, ev->frames[i].offset);
    }
  }
  w->len = (size_t)(p - w->buf);
  w->prev_t_ns = ev->t_ns;
  w->prev_thread = ev->thread;
  w->count++;
  return AS_OK;
}

static as_status_t bin_writer_close(trace_writer_t *tw, as_err_t *err) {
  bin_writer_t *w = (bin_writer_t *)tw;
  as_status_t   rc = AS_OK;
  if (!w->failed && (rc = flush(w, err)) == AS_OK) {
    /* The end record and the trailer: what a reader checks to know the
     * trace is whole. */
    uint8_t *p = w->buf;
    *p++ = BIN_OP_END;
    p = put_varint(p, w->count);
    uint64_t h = sum_final(&w->sum);
    memcpy(p, &h, 8); /* little-endian host */
    w->len = (size_t)(p + 8 - w->buf);
    w->sum_from = w->len; /* not record bytes */
    rc = flush(w, err);
  }
  if (rc == AS_OK && (fflush(w->f) != 0 || ferror(w->f)))
    rc = as_err_set(err, AS_EIO, "%s: write error: %s", w->name,
                    strerror(errno));
  if (w->own_f && fclose(w->f) != 0 && rc == AS_OK)
    rc = as_err_set(err, AS_EIO, "%s: close failed: %s", w->name,
                    strerror(errno));
  free(w->buf);
  free(w);
  return rc;
}

static const trace_writer_methods_t bin_writer_methods = {
    .write = bin_write,
    .close = bin_writer_close,
};

as_status_t trace_binary_writer_open_stream(FILE *f, const char *name,
                                            const trace_meta_t *meta,
                                            trace_writer_t    **out,
                                            as_err_t           *err) {
  *out = NULL;
  bin_writer_t *w = calloc(1, sizeof *w);
  uint8_t      *buf = malloc(BIN_BUF_SIZE);
  if (w == NULL || buf == NULL) {
    free(w);
    free(buf);
    if (f != stdout)
      fclose(f);
    return as_err_set(err, AS_ENOMEM, "%s: out of memory", name);
  }
  w->base.methods = &bin_writer_methods;
  w->f = f;
  w->own_f = f != stdout;
  w->buf = buf;
  snprintf(w->name, sizeof w->name, "%s", name);
  uint8_t *p = buf;
  memcpy(p, BIN_MAGIC, BIN_MAGIC_LEN);
  p += BIN_MAGIC_LEN;
  *p++ = BIN_VERSION & 0xff;
  *p++ = BIN_VERSION >> 8;
  size_t count = meta != NULL ? meta->count : 0;
  for (size_t i = 0; i < count; i++) {
    size_t kn = strnlen(meta->key[i], sizeof meta->key[i]);
    size_t vn = strnlen(meta->value[i], sizeof meta->value[i]);
    if (kn == 0 || kn == sizeof meta->key[i] || vn == sizeof meta->value[i]) {
      as_err_set(err, AS_EINVAL, "%s: provenance pair %zu is malformed", name,
                 i);
      w->failed = true;
      bin_writer_close(&w->base, NULL);
      return AS_EINVAL;
    }
    p = put_varint(p, kn);
    memcpy(p, meta->key[i], kn);
    p += kn;
    p = put_varint(p, vn);
    memcpy(p, meta->value[i], vn);
    p += vn;
  }
  *p++ = 0;
  w->len = (size_t)(p - buf);
  w->sum_from = w->len; /* the header is not hashed */
  sum_init(&w->sum);
  *out = &w->base;
  return AS_OK;
}
