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
 * is for volume.  Version 3 (written by default; the reader below the
 * version 2 one) groups the same records in blocks with a table of record
 * shapes, which took the decoding of bench_trace_decode's mix from 11.8
 * to 5.7 ns per event and its size from 6.30 to 5.45 bytes per event.
 * Its reader then went from 90 to 54 instructions per event (callgrind,
 * the whole read by batches) by decoding the common events between two
 * rare ones with no test at all and checking each such run once
 * (blk_run), and by keeping expanded shapes across blocks; what is left
 * is mostly the 88-byte trace_event_t written per event, and the kernel's
 * copy of the file (about 0.7 ns per event here).  Tried and not kept:
 * blocks of 256 events (the shapes' cost per event grows; 10 % slower).
 *
 * Layout of versions 1 and 2 (all integers are unsigned LEB128 varints
 * unless stated; also in docs/trace-format.md):
 *
 *   offset 0   magic    8 bytes  "ASTRACE\0"
 *   offset 8   version  u16 little-endian, 2 (1 is read too; 3 below)
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
#include <stdarg.h>
#include <stddef.h>
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
#define BIN_VERSION     3 /* the newest, written by default; 1 and 2 are read */
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
 * of pi's fraction.  Version 3 hashes word i into lane i mod 4 (each lane
 * so started and mixed), then mixes the four lanes in order into one more
 * started at the seed, and the byte count last: four independent chains
 * of multiplies instead of one, so that the checksum stops being a tenth
 * of decoding. */
#define BIN_SUM_SEED      UINT64_C(0x243F6A8885A308D3)
#define BIN_SUM_MUL       UINT64_C(0x9E3779B97F4A7C15)
#define BIN_SUM_LANES_MAX 4

typedef struct bin_sum_s bin_sum_t;
struct bin_sum_s {
  uint64_t h[BIN_SUM_LANES_MAX];
  unsigned lanes;    /* 1 (versions 1-2) or 4 (version 3) */
  uint64_t words;    /* hashed so far */
  uint64_t bytes;    /* hashed so far */
  uint8_t  carry[8]; /* a word not yet complete */
  unsigned ncarry;
};

static inline uint64_t sum_mix(uint64_t h, uint64_t w) {
  h ^= w;
  return ((h << 29) | (h >> 35)) * BIN_SUM_MUL;
}

static void sum_init(bin_sum_t *s, unsigned version) {
  memset(s, 0, sizeof *s);
  s->lanes = version >= 3 ? BIN_SUM_LANES_MAX : 1;
  for (unsigned l = 0; l < BIN_SUM_LANES_MAX; l++)
    s->h[l] = BIN_SUM_SEED;
}

static inline void sum_word(bin_sum_t *s, uint64_t w) {
  unsigned l = (unsigned)(s->words++ & (s->lanes - 1)); /* lanes: 1 or 4 */
  s->h[l] = sum_mix(s->h[l], w);
}

/* n whole words at p (little-endian host, checked above). */
static void sum_words(bin_sum_t *s, const uint8_t *p, size_t n) {
  uint64_t w[BIN_SUM_LANES_MAX];
  for (; n > 0 && (s->lanes == 1 || (s->words & (s->lanes - 1)) != 0);
       n--, p += 8) {
    memcpy(w, p, 8);
    sum_word(s, w[0]);
  }
  if (s->lanes == BIN_SUM_LANES_MAX) {
    uint64_t h0 = s->h[0], h1 = s->h[1], h2 = s->h[2], h3 = s->h[3];
    for (; n >= 4; n -= 4, p += 32, s->words += 4) {
      memcpy(w, p, 32);
      h0 = sum_mix(h0, w[0]);
      h1 = sum_mix(h1, w[1]);
      h2 = sum_mix(h2, w[2]);
      h3 = sum_mix(h3, w[3]);
    }
    s->h[0] = h0, s->h[1] = h1, s->h[2] = h2, s->h[3] = h3;
  }
  for (; n > 0; n--, p += 8) {
    memcpy(w, p, 8);
    sum_word(s, w[0]);
  }
}

static void sum_bytes(bin_sum_t *s, const uint8_t *p, size_t n) {
  s->bytes += n;
  while (n > 0 && s->ncarry > 0 && s->ncarry < 8) {
    s->carry[s->ncarry++] = *p++;
    n--;
  }
  if (s->ncarry == 8) {
    sum_words(s, s->carry, 1);
    s->ncarry = 0;
  }
  sum_words(s, p, n / 8);
  p += n / 8 * 8;
  memcpy(s->carry + s->ncarry, p, n % 8);
  s->ncarry += (unsigned)(n % 8);
}

static uint64_t sum_final(const bin_sum_t *s) {
  bin_sum_t last = *s;
  if (last.ncarry > 0) {
    uint8_t pad[8] = {0};
    memcpy(pad, last.carry, last.ncarry);
    sum_words(&last, pad, 1);
  }
  uint64_t h = last.h[0];
  if (last.lanes > 1) {
    h = BIN_SUM_SEED;
    for (unsigned l = 0; l < last.lanes; l++)
      h = sum_mix(h, last.h[l]);
  }
  return sum_mix(h, last.bytes);
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
  trace_defs_t   defs;         /* modules and sites defined so far */
  unsigned       version;      /* 1 to 3 */
  uint64_t       records;      /* decoded so far */
  bin_sum_t      sum;          /* of the record bytes before sum_from */
  const uint8_t *sum_from;     /* first record byte not yet hashed, or NULL
                                  before the records and after the end */
  bool                lenient; /* a cut-short file ends at its last record */
  char                truncated[200]; /* why it ended early (lenient), or "" */
  trace_event_t      *blk;            /* version 3: the block's events */
  size_t              blk_n;          /* events in blk */
  size_t              blk_next;       /* the first not yet handed out */
  uint64_t            blk_off;        /* byte offset of the block */
  uint64_t            blk_ops_off;    /* byte offset of its ops column */
  uint64_t           *blk_rare_at;    /* by event: its rare record's offset */
  uint64_t            blk_rare[16];   /* bits: which events are rare */
  bool                batched;        /* the last events went out by batch */
  struct blk_shape_s *shape_cache;    /* expanded shapes (blk_shape_cached) */
  struct blk_cache_tag_s *shape_tag;  /* by cache slot: what it holds */
  uint32_t                blocks;     /* blocks read, modulo 2^32 */
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
                               "%s: %s: the trace was cut short (`allocsim "
                               "convert --lenient` copies it up to its last "
                               "whole record)",
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
  free(s->blk);
  free(s->blk_rare_at);
  free(s->shape_cache);
  free(s->shape_tag);
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

/* ---- Reader, version 3: blocks ------------------------------------------
 *
 * A version 3 file holds the same events as version 2, grouped in blocks
 * of up to BLK_EVENTS_MAX, so that the common records (malloc, calloc,
 * realloc and free without a call site) decode without a branch on their
 * content and a whole block goes to the engine at once
 * (trace_source_batch).  Each common event is one byte naming its shape --
 * op, domain, and how many bytes each of its fields takes -- in the
 * block's table of shapes, and its fields are plain little-endian bytes in
 * the data column, so an event's fields sit at offsets its shape gives
 * (no varint continuation bits to chase from byte to byte):
 *
 *   block = events (varint 1..BLK_EVENTS_MAX; a single 0 byte instead ends
 *             the blocks, and the version 2 trailer follows)
 *           shapes (varint 1..256), data bytes (varint), rare bytes (varint)
 *           the shapes, 2 bytes each, little-endian:
 *             bits 0-1   op: 0 malloc, 1 calloc, 2 realloc, 3 free
 *             bits 2-3   domain 0-2; 3 = rare (the whole shape is 0x000c)
 *             bits 4-5   thread: 0 the previous event's, else its id in
 *                        1, 2 or 4 bytes
 *             bits 6-8   time delta length, bits 9-11 id length, bits
 *                        12-14 size length: codes 0-7 for 0, 1, 2, 3, 4,
 *                        5, 6 or 8 bytes (0 bytes = the value 0; free has
 *                        no size)
 *             bit 15     0
 *           ops: one byte per event, an index into the shapes
 *           data: per common event, its time delta, thread, zigzag(id -
 *             previous id) and size, little-endian, in its shape's lengths
 *           rare: for each rare event, the whole version 2 record
 *
 * Time, thread and id run through common and rare events alike, in event
 * order.  An event with a label or frames (mark, option, module and site
 * definitions) must end its block, so that one label buffer serves a
 * block.  The data and rare columns must be used exactly.  The checksum
 * covers every byte from the first block to the end byte.  The decoder
 * reads 8 bytes per field, so up to 8 past an event's data, and checks
 * that a run of events stayed inside the data column only at its end
 * (blk_run), so a lying block can have it read up to BLK_EVENTS_MAX events
 * of BLK_EVENT_DATA_MAX bytes past the column: BLK_SLACK zero bytes after
 * the window keep those reads inside the buffer. */
#define BLK_EVENTS_MAX     1024
#define BLK_SHAPES_MAX     256
#define BLK_BYTES_MAX      ((size_t)128 * 1024)
#define BLK_EVENT_DATA_MAX (8 + 4 + 8 + 8) /* time, thread, id, size */
#define BLK_SLACK          (BLK_EVENTS_MAX * BLK_EVENT_DATA_MAX + 64)
#define BLK_HEADER_MAX     (4 * 10)
#define BLK_END            0x00 /* in place of a block: the blocks end */
#define BLK_SHAPE_RARE     0x000C
#define BLK_FIELDS         4 /* time delta, thread, id, size */
#define BLK_COMMON_OPS                                                         \
  (1u << TRACE_MALLOC | 1u << TRACE_CALLOC | 1u << TRACE_REALLOC |             \
   1u << TRACE_FREE)

/* Bytes of a field by its 3-bit length code, and the thread's 2-bit one. */
static const uint8_t blk_len_of_code[8] = {0, 1, 2, 3, 4, 5, 6, 8};
static const uint8_t blk_thread_len[4] = {0, 1, 2, 4};
static const uint8_t blk_op_of_code[4] = {TRACE_MALLOC, TRACE_CALLOC,
                                          TRACE_REALLOC, TRACE_FREE};

/* Where an event's thread, op, domain and flags sit: one 8-byte word, which
 * the block decoder stores at once (trace_event_set's field by field stores
 * were a fifth of the decoder's instructions), and the ranges of fields a
 * common event leaves zero.  Only a rare event sets those (align, offset,
 * label .. nframes), so a common event does not clear them: the block's
 * array starts zeroed and blk_clean_rare zeroes them again in the slots
 * the last block's rare events took, before the next block is decoded;
 * prev_size, which the engine writes on the events it is handed, is
 * cleared by each.  If trace_event_t changes, these asserts say that this
 * must change too. */
#define BLK_EV_WORD   offsetof(trace_event_t, thread)
#define BLK_EV_ZERO_A offsetof(trace_event_t, align) /* align .. prev_size */
#define BLK_EV_ZERO_B offsetof(trace_event_t, label) /* label .. nframes */
_Static_assert(offsetof(trace_event_t, t_ns) == 0 &&
                   offsetof(trace_event_t, id) == 8 &&
                   offsetof(trace_event_t, size) == 16 && BLK_EV_ZERO_A == 24 &&
                   offsetof(trace_event_t, offset) == 32 &&
                   offsetof(trace_event_t, prev_size) == 40 &&
                   BLK_EV_WORD == 48 && offsetof(trace_event_t, op) == 52 &&
                   offsetof(trace_event_t, domain) == 53 &&
                   offsetof(trace_event_t, flags) == 54 &&
                   BLK_EV_ZERO_B == 56 && offsetof(trace_event_t, site) == 64 &&
                   offsetof(trace_event_t, frames) == 72 &&
                   offsetof(trace_event_t, nframes) == 80 &&
                   sizeof(trace_event_t) == 88,
               "the block decoder writes trace_event_t by these offsets");

/* A shape as the decoder uses it: where each field starts in the event's
 * data and the mask that keeps its bytes out of an 8-byte load.  64 bytes,
 * so that finding an event's shape takes one shift. */
typedef struct blk_shape_s blk_shape_t;
struct blk_shape_s {
  _Alignas(64) uint64_t mask[BLK_FIELDS];
  uint64_t word; /* the op and domain as the event's BLK_EV_WORD holds them,
                    thread 0 */
  uint64_t keep_thread;    /* the thread's 32 bits of BLK_EV_WORD when the
                              thread is the previous event's, else 0: a
                              select without a branch (a branch mispredicted
                              on mixes of threads) */
  uint8_t off[BLK_FIELDS]; /* off[0] is 0: the time delta comes first */
  uint8_t len;             /* data bytes of the event */
  bool    rare;
  bool    wide_dt; /* an 8-byte time delta: a run of them can overflow
                      2^64 ns more than once (blk_run_fast) */
};

static uint64_t blk_mask(unsigned bytes) {
  return bytes >= 8 ? UINT64_MAX : ((uint64_t)1 << (8 * bytes)) - 1;
}

/* Expands shape code v into *sh; false if v is not a shape.  Straight-line
 * stores, no memset: a block of bench_trace_decode's mix lists about 100
 * shapes, and their expansion was 8 % of the decoder's instructions. */
static bool blk_shape(unsigned v, blk_shape_t *sh) {
  if (v == BLK_SHAPE_RARE) {
    *sh = (blk_shape_t){.rare = true};
    return true;
  }
  unsigned op = blk_op_of_code[v & 3], domain = (v >> 2) & 3;
  unsigned dt = blk_len_of_code[(v >> 6) & 7],
           th = blk_thread_len[(v >> 4) & 3];
  unsigned id = blk_len_of_code[(v >> 9) & 7],
           size = blk_len_of_code[(v >> 12) & 7];
  if ((v >> 15) || domain == 3 || (op == TRACE_FREE && size != 0))
    return false;
  sh->mask[0] = blk_mask(dt);
  sh->mask[1] = blk_mask(th);
  sh->mask[2] = blk_mask(id);
  sh->mask[3] = blk_mask(size);
  sh->word = (uint64_t)op << 8 * (offsetof(trace_event_t, op) - BLK_EV_WORD) |
             (uint64_t)domain
                 << 8 * (offsetof(trace_event_t, domain) - BLK_EV_WORD);
  sh->off[0] = 0;
  sh->off[1] = (uint8_t)dt;
  sh->off[2] = (uint8_t)(dt + th);
  sh->off[3] = (uint8_t)(dt + th + id);
  sh->keep_thread = th != 0 ? 0 : UINT32_MAX;
  sh->len = (uint8_t)(dt + th + id + size);
  sh->rare = false;
  sh->wide_dt = dt == 8;
  return true;
}

/* What a slot of the source's cache of shapes holds: the code + 1 (0 =
 * nothing) and the last block that used it. */
#define BLK_CACHE_BITS 10
#define BLK_CACHE      ((size_t)1 << BLK_CACHE_BITS)
typedef struct blk_cache_tag_s blk_cache_tag_t;
struct blk_cache_tag_s {
  uint32_t block;
  uint16_t code;
};

/* A block's table of shapes: where each one is expanded, in the source's
 * cache of shapes or in own. */
typedef struct blk_table_s blk_table_t;
struct blk_table_s {
  const blk_shape_t *at[BLK_SHAPES_MAX];
  blk_shape_t        own[BLK_SHAPES_MAX];
};

/* Shape code v expanded (NULL if it is not a shape), from the source's
 * cache when an earlier block expanded it: a block of bench_trace_decode's
 * mix lists about 60 shapes, mostly those of the block before, and their
 * expansion was 6 % of the decoder's instructions.  A slot that an
 * earlier shape of this block holds is not taken (the block points into
 * it); own is used instead. */
static const blk_shape_t *blk_shape_cached(bin_src_t *s, unsigned v,
                                           blk_shape_t *own) {
  size_t           slot = (uint32_t)(v * 0x9E3779B1u) >> (32 - BLK_CACHE_BITS);
  blk_cache_tag_t *tag = &s->shape_tag[slot];
  if (tag->code == v + 1) { /* never for v = 0xffff, not a shape */
    tag->block = s->blocks;
    return &s->shape_cache[slot];
  }
  blk_shape_t *sh = tag->block == s->blocks ? own : &s->shape_cache[slot];
  bool         ok = blk_shape(v, sh);
  if (sh != own)
    *tag = (blk_cache_tag_t){.code = (uint16_t)(ok ? v + 1 : 0),
                             .block = s->blocks};
  return ok ? sh : NULL;
}

/* A block's layout in the window. */
typedef struct blk_cols_s blk_cols_t;
struct blk_cols_s {
  const uint8_t *ops, *data, *data_end, *rare, *rare_end;
  size_t         n;           /* events */
  bool           wide_dt;     /* some shape has an 8-byte time delta */
  unsigned       rare_shapes; /* how many shapes are BLK_SHAPE_RARE */
  uint8_t        rare_shape;  /* the first of them */
};

/* Stops the source at the error in s->failure (sticky) and reports it. */
static as_status_t blk_stop(bin_src_t *s, as_err_t *err) {
  s->p = s->end;
  s->eof = true;
  s->done = true;
  return as_err_set(err, s->failure.code, "%s", s->failure.msg);
}

static as_status_t blk_fail(bin_src_t *s, as_err_t *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static as_status_t blk_fail(bin_src_t *s, as_err_t *err, const char *fmt, ...) {
  char    msg[sizeof s->failure.msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  s->failure.code =
      as_err_set(&s->failure, AS_EFORMAT, "%s: %s", s->base.name, msg);
  return blk_stop(s, err);
}

/* The rare event at *rare: a whole version 2 record, decoded with bounds
 * at the rare column's end. */
static as_status_t blk_rare(bin_src_t *s, trace_event_t *ev, size_t index,
                            const uint8_t **rare, const blk_cols_t *c,
                            as_err_t *err) {
  const uint8_t *window_end = s->end;
  s->p = *rare;
  s->end = c->rare_end;
  s->last_off = offset_of(s, s->p);
  /* Marked before decode writes the slot: blk_clean_rare cleans it even
   * after a failure. */
  s->blk_rare[index / 64] |= (uint64_t)1 << (index % 64);
  s->blk_rare_at[index] = s->last_off;
  dec_rc_t rc = s->p == s->end ? DEC_TRUNCATED : decode(s, ev, true);
  s->end = window_end;
  if (rc == DEC_TRUNCATED)
    return blk_fail(s, err,
                    "byte offset %" PRIu64 ": event %zu of the block at byte "
                    "offset %" PRIu64 " runs past the block's rare column",
                    s->last_off, index, s->blk_off);
  if (rc == DEC_END)
    rc = DEC_BAD_OP; /* the end record has no place in a block */
  if (rc != DEC_OK) {
    s->failure.code = decode_error(s, rc, &s->failure);
    return blk_stop(s, err);
  }
  *rare = s->p;
  if ((ev->label != NULL || ev->frames != NULL) && index + 1 != c->n)
    return blk_fail(s, err,
                    "byte offset %" PRIu64 ": a %s must be the last event of "
                    "its block (event %zu of %zu)",
                    s->last_off, trace_op_name(ev->op), index + 1, c->n);
  if (ev->site != 0 || ev->op >= TRACE_MODULE)
    return note_defs(s, ev, err);
  return AS_OK;
}

/* A common event's field k from its data at p. */
static ALWAYS_INLINE uint64_t blk_field(const uint8_t *p, const blk_shape_t *sh,
                                        unsigned k) {
  uint64_t w;
  memcpy(&w, p + (k == 0 ? 0 : sh->off[k]), 8); /* little-endian host
                                                    (checked above) */
  return w & sh->mask[k];
}

/* Where decoding stands in a block: the next data byte and what the next
 * event's deltas apply to. */
typedef struct blk_state_s blk_state_t;
struct blk_state_s {
  const uint8_t *p;
  uint64_t       t, id;
  uint64_t       word; /* the last event's BLK_EV_WORD: its low 32 bits are
                          its thread */
};

/* Decodes the common event at st->p with shape sh into *ev and advances
 * st past it. */
static ALWAYS_INLINE void blk_common(blk_state_t *st, const blk_shape_t *sh,
                                     trace_event_t *ev) {
  const uint8_t *p = st->p;
  uint64_t       dt = blk_field(p, sh, 0), th = blk_field(p, sh, 1);
  uint64_t       zz = blk_field(p, sh, 2), size = blk_field(p, sh, 3);
  st->p = p + sh->len;
  st->t += dt;
  st->id += (zz >> 1) ^ (0 - (zz & 1)); /* un-zigzag, modulo 2^64 */
  st->word = (st->word & sh->keep_thread) | th | sh->word; /* th is 0 if
                                                             kept */
  uint8_t *e = (uint8_t *)ev;
  memcpy(e, &st->t, 8);
  memcpy(e + 8, &st->id, 8);
  memcpy(e + 16, &size, 8);
  memset(e + offsetof(trace_event_t, prev_size), 0, 8);
  memcpy(e + BLK_EV_WORD, &st->word, 8);
}

/* The index of the first rare event from i on, or the block's event
 * count.  A writer lists the rare shape once, and then memchr finds it
 * faster than the decoding loop could test each event's shape. */
static size_t blk_next_rare(const blk_shape_t *const *shapes,
                            const blk_cols_t *c, size_t i) {
  if (c->rare_shapes == 0)
    return c->n;
  if (c->rare_shapes == 1) {
    const uint8_t *at = memchr(c->ops + i, c->rare_shape, c->n - i);
    return at == NULL ? c->n : (size_t)(at - c->ops);
  }
  while (i < c->n && !shapes[c->ops[i]]->rare)
    i++;
  return i;
}

/* Decodes the common events from *i to stop (the next rare event) with no
 * check at all, for speed: the caller checks the run as a whole afterwards
 * (blk_run).  Reads up to BLK_EVENT_DATA_MAX bytes per event past the data
 * column if it lies, which BLK_SLACK allows for. */
static void blk_run_fast(const blk_shape_t *const *shapes, const blk_cols_t *c,
                         size_t *i, size_t stop, blk_state_t *st,
                         trace_event_t *out) {
  blk_state_t    cur = *st;
  const uint8_t *ops = c->ops;
  size_t         k = *i;
  for (; k + 4 <= stop; k += 4) { /* four at a time: a quarter of the
                                    loop's count and index updates */
    blk_common(&cur, shapes[ops[k]], &out[k]);
    blk_common(&cur, shapes[ops[k + 1]], &out[k + 1]);
    blk_common(&cur, shapes[ops[k + 2]], &out[k + 2]);
    blk_common(&cur, shapes[ops[k + 3]], &out[k + 3]);
  }
  for (; k < stop; k++)
    blk_common(&cur, shapes[ops[k]], &out[k]);
  *i = stop;
  *st = cur;
}

/* The same run as blk_run_fast, checking each event: stops at the first
 * that runs past the data column or takes the time past 2^64 ns. */
static as_status_t blk_run_checked(bin_src_t                *s,
                                   const blk_shape_t *const *shapes,
                                   const blk_cols_t *c, size_t *i,
                                   blk_state_t *st, trace_event_t *out,
                                   as_err_t *err) {
  for (size_t k = *i; k < c->n; k++) {
    const blk_shape_t *sh = shapes[c->ops[k]];
    if (sh->rare) {
      *i = k;
      return AS_OK;
    }
    uint64_t t = st->t;
    blk_common(st, sh, &out[k]);
    if (UNLIKELY((st->t < t) | (st->p > c->data_end)))
      return blk_fail(s, err,
                      st->t < t ? "byte offset %" PRIu64 ": event %zu of the "
                                  "block at byte offset %" PRIu64 ": time "
                                  "overflows 2^64 ns"
                                : "byte offset %" PRIu64 ": event %zu of the "
                                  "block at byte offset %" PRIu64 " runs past "
                                  "the block's data column",
                      offset_of(s, st->p - sh->len), k, s->blk_off);
  }
  *i = c->n;
  return AS_OK;
}

/* The common events from *i to the next rare one: unchecked, then checked
 * again only if the run as a whole went wrong.  The data pointer only
 * grows, so an event ran past the data column if and only if the run's
 * end did; and when no time delta takes 8 bytes, a run of at most
 * BLK_EVENTS_MAX deltas adds less than 2^58, so the time overflowed if and
 * only if it ended below where it started. */
static as_status_t blk_run(bin_src_t *s, const blk_shape_t *const *shapes,
                           const blk_cols_t *c, size_t *i, blk_state_t *st,
                           trace_event_t *out, as_err_t *err) {
  if (!c->wide_dt) {
    blk_state_t from = *st;
    size_t      i0 = *i;
    blk_run_fast(shapes, c, i, blk_next_rare(shapes, c, *i), st, out);
    if (LIKELY(st->p <= c->data_end && st->t >= from.t))
      return AS_OK;
    *st = from;
    *i = i0;
  }
  return blk_run_checked(s, shapes, c, i, st, out, err);
}

/* Decodes the block's events with its shapes into s->blk. */
static as_status_t blk_decode(bin_src_t *s, const blk_shape_t *const *shapes,
                              const blk_cols_t *c, as_err_t *err) {
  const uint8_t *rare = c->rare;
  blk_state_t    st = {.p = c->data,
                       .t = s->prev_t_ns,
                       .id = s->prev_id,
                       .word = s->prev_thread};
  for (size_t i = 0; i < c->n;) {
    if (shapes[c->ops[i]]->rare) {
      s->prev_t_ns = st.t;
      s->prev_id = st.id;
      s->prev_thread = (uint32_t)st.word;
      as_status_t rc = blk_rare(s, &s->blk[i], i, &rare, c, err);
      if (rc != AS_OK)
        return rc;
      st.t = s->prev_t_ns;
      st.id = s->prev_id;
      st.word = s->prev_thread;
      i++;
      continue;
    }
    as_status_t rc = blk_run(s, shapes, c, &i, &st, s->blk, err);
    if (rc != AS_OK)
      return rc;
  }
  if (st.p != c->data_end || rare != c->rare_end)
    return blk_fail(s, err,
                    "byte offset %" PRIu64 ": the block's events use %td of "
                    "its %td data bytes and %td of its %td rare bytes",
                    s->blk_off, st.p - c->data, c->data_end - c->data,
                    rare - c->rare, c->rare_end - c->rare);
  s->prev_t_ns = st.t;
  s->prev_id = st.id;
  s->prev_thread = (uint32_t)st.word;
  return AS_OK;
}

/* A varint of the block header at *p, below max: AS_OK, or the end of the
 * file inside the header (cut_short), or a format error naming what. */
static as_status_t blk_count(bin_src_t *s, const uint8_t **p, uint64_t min,
                             uint64_t max, const char *what, uint64_t *out,
                             as_err_t *err) {
  const uint8_t *at = *p;
  dec_rc_t       rc = get_varint(p, s->end, true, out);
  if (rc == DEC_TRUNCATED) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "byte offset %" PRIu64 ": end of file inside a block header "
             "after %" PRIu64 " events",
             s->blk_off, s->records);
    return cut_short(s, msg, err);
  }
  if (rc != DEC_OK || *out < min || *out > max)
    return blk_fail(s, err,
                    "byte offset %" PRIu64 ": expected %s %" PRIu64
                    " to %" PRIu64 "%s",
                    offset_of(s, at), what, min, max,
                    rc != DEC_OK ? ", got a varint overflow" : "");
  return AS_OK;
}

/* The block header at s->p: counts, lengths and shapes (into shapes), and
 * where the columns lie (into c). */
static as_status_t blk_header(bin_src_t *s, blk_table_t *shapes, blk_cols_t *c,
                              as_err_t *err) {
  const uint8_t *p = s->p;
  uint64_t       n = 0, k = 0, dlen = 0, rlen = 0; /* set by blk_count */
  as_status_t    rc;
  if ((rc = blk_count(s, &p, 1, BLK_EVENTS_MAX, "a block's event count", &n,
                      err)) != AS_OK ||
      (rc = blk_count(s, &p, 1, BLK_SHAPES_MAX, "a block's shape count", &k,
                      err)) != AS_OK ||
      (rc = blk_count(s, &p, 0, BLK_BYTES_MAX, "a block's data column length",
                      &dlen, err)) != AS_OK ||
      (rc = blk_count(s, &p, 0, BLK_BYTES_MAX, "a block's rare column length",
                      &rlen, err)) != AS_OK)
    return rc;
  uint64_t total = 2 * k + n + dlen + rlen;
  if (total > BLK_BYTES_MAX)
    return blk_fail(s, err,
                    "byte offset %" PRIu64 ": expected a block of at most %zu "
                    "bytes, got %" PRIu64,
                    s->blk_off, BLK_BYTES_MAX, total);
  if ((uint64_t)(s->end - p) < total) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "byte offset %" PRIu64 ": end of file inside a block of %" PRIu64
             " event%s after %" PRIu64 " events",
             s->blk_off, n, n == 1 ? "" : "s", s->records);
    return cut_short(s, msg, err);
  }
  bool     wide_dt = false;
  unsigned rare_shapes = 0, rare_shape = 0;
  for (unsigned j = 0; j < k; j++, p += 2) {
    const blk_shape_t *sh = shapes->at[j] =
        blk_shape_cached(s, p[0] | (unsigned)p[1] << 8, &shapes->own[j]);
    if (sh == NULL)
      return blk_fail(s, err,
                      "byte offset %" PRIu64 ": expected a shape (op, domain "
                      "0-2, field lengths; free without a size; or 0x000c), "
                      "got 0x%04x",
                      offset_of(s, p), p[0] | (unsigned)p[1] << 8);
    wide_dt |= sh->wide_dt;
    if (sh->rare && rare_shapes++ == 0)
      rare_shape = j;
  }
  uint8_t worst = 0; /* 8 bits: the compiler vectorises the maximum */
  for (size_t i = 0; i < n; i++)
    worst = p[i] > worst ? p[i] : worst;
  if (worst >= k)
    return blk_fail(s, err,
                    "byte offset %" PRIu64 ": an event names shape %u of the "
                    "block's %" PRIu64,
                    offset_of(s, p), worst, k);
  *c = (blk_cols_t){.ops = p,
                    .data = p + n,
                    .data_end = p + n + dlen,
                    .rare = p + n + dlen,
                    .rare_end = p + n + dlen + rlen,
                    .n = (size_t)n,
                    .wide_dt = wide_dt,
                    .rare_shapes = rare_shapes,
                    .rare_shape = (uint8_t)rare_shape};
  return AS_OK;
}

/* How many bytes the block at s->p takes, header included, as its header
 * says; the largest a block can take if the header does not parse or is
 * out of range (blk_header then says what is wrong). */
static size_t blk_extent(const bin_src_t *s) {
  static const uint64_t max[4] = {BLK_EVENTS_MAX, BLK_SHAPES_MAX, BLK_BYTES_MAX,
                                  BLK_BYTES_MAX};
  const uint8_t        *p = s->p;
  uint64_t              v[4];
  for (unsigned j = 0; j < 4; j++)
    if (get_varint(&p, s->end, true, &v[j]) != DEC_OK || v[j] > max[j])
      return BLK_HEADER_MAX + BLK_BYTES_MAX;
  uint64_t body = v[0] + 2 * v[1] + v[2] + v[3];
  return body > BLK_BYTES_MAX ? BLK_HEADER_MAX + BLK_BYTES_MAX
                              : (size_t)(p - s->p) + (size_t)body;
}

/* Makes the block at s->p whole in the window if the file has it.  Only
 * then is the window refilled: refilling whenever it held less than the
 * largest possible block moved 64 KiB of it per refill on average (2 % of
 * bench_trace_decode's time). */
static as_status_t blk_want(bin_src_t *s, size_t n, as_err_t *err) {
  as_status_t rc = want(s, n, &s->failure);
  if (rc != AS_OK) {
    s->failure.code = rc;
    return as_err_set(err, rc, "%s", s->failure.msg);
  }
  return AS_OK;
}

/* Zeroes, in the slots of the last block's rare events, the fields a common
 * event leaves as they are (BLK_EV_ZERO_A), and forgets those events. */
static void blk_clean_rare(bin_src_t *s) {
  for (size_t w = 0; w < sizeof s->blk_rare / sizeof s->blk_rare[0]; w++)
    for (uint64_t bits = s->blk_rare[w]; bits != 0; bits &= bits - 1) {
      uint8_t *e = (uint8_t *)&s->blk[w * 64 + (size_t)__builtin_ctzll(bits)];
      memset(e + BLK_EV_ZERO_A, 0, BLK_EV_WORD - BLK_EV_ZERO_A);
      memset(e + BLK_EV_ZERO_B, 0, sizeof *s->blk - BLK_EV_ZERO_B);
    }
  memset(s->blk_rare, 0, sizeof s->blk_rare);
}

/* Reads and decodes the next block into s->blk: AS_OK, AS_DONE after the
 * end byte and trailer, or an error. */
static as_status_t blk_next_block(bin_src_t *s, as_err_t *err) {
  s->blk_n = s->blk_next = 0;
  if (s->failure.code != AS_OK)
    return as_err_set(err, s->failure.code, "%s", s->failure.msg);
  if (s->done)
    return AS_DONE;
  as_status_t rc = blk_want(s, BLK_HEADER_MAX, err);
  if (rc != AS_OK)
    return rc;
  s->blk_off = offset_of(s, s->p);
  if (s->p == s->end) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "byte offset %" PRIu64 ": end of file after %" PRIu64
             " events, expected a block or the end byte",
             s->blk_off, s->records);
    return cut_short(s, msg, err);
  }
  if (*s->p == BLK_END)
    return finish(s, err);
  if ((rc = blk_want(s, blk_extent(s), err)) != AS_OK)
    return rc;
  blk_table_t shapes;
  blk_cols_t  c = {0};
  s->blocks++;
  if ((rc = blk_header(s, &shapes, &c, err)) != AS_OK)
    return rc;
  s->blk_ops_off = offset_of(s, c.ops);
  blk_clean_rare(s);
  if ((rc = blk_decode(s, shapes.at, &c, err)) != AS_OK)
    return rc;
  s->p = c.rare_end;
  s->records += c.n;
  s->blk_n = c.n;
  return AS_OK;
}

static as_status_t blk_batch(trace_source_t *src, trace_event_t **evs,
                             size_t *n, as_err_t *err) {
  bin_src_t  *s = (bin_src_t *)src;
  as_status_t rc = AS_OK;
  if (s->blk_next == s->blk_n)
    rc = blk_next_block(s, err);
  *evs = s->blk + s->blk_next;
  *n = rc == AS_OK ? s->blk_n - s->blk_next : 0;
  s->blk_next = s->blk_n;
  s->batched = true;
  return rc;
}

static as_status_t blk_next(trace_source_t *src, trace_event_t *ev,
                            as_err_t *err) {
  bin_src_t *s = (bin_src_t *)src;
  if (s->blk_next == s->blk_n) {
    as_status_t rc = blk_next_block(s, err);
    if (rc != AS_OK)
      return rc;
  }
  *ev = s->blk[s->blk_next++];
  s->batched = false;
  return AS_OK;
}

/* Event i of the block: a rare record's offset, or a common event's ops
 * byte (its fields are in the data column). */
static void blk_where_index(const bin_src_t *s, size_t i, char *buf,
                            size_t len) {
  bool rare = (s->blk_rare[i / 64] >> (i % 64)) & 1;
  snprintf(buf, len, "byte offset %" PRIu64,
           rare ? s->blk_rare_at[i] : s->blk_ops_off + i);
}

static void blk_where_event(const trace_source_t *src, const trace_event_t *ev,
                            char *buf, size_t len) {
  const bin_src_t *s = (const bin_src_t *)src;
  if (ev >= s->blk && ev < s->blk + s->blk_n)
    blk_where_index(s, (size_t)(ev - s->blk), buf, len);
  else if (s->blk_next > 0)
    blk_where_index(s, s->blk_next - 1, buf, len);
}

static void blk_where(const trace_source_t *src, char *buf, size_t len) {
  const bin_src_t *s = (const bin_src_t *)src;
  if (s->batched || s->blk_next == 0)
    snprintf(buf, len, "block at byte offset %" PRIu64, s->blk_off);
  else
    blk_where_index(s, s->blk_next - 1, buf, len);
}

static const trace_source_methods_t blk_source_methods = {
    .next = blk_next,
    .close = bin_close,
    .where = blk_where,
    .batch = blk_batch,
    .where_event = blk_where_event,
};

static bool is_binary(const trace_source_t *src) {
  return src != NULL && (src->methods == &bin_source_methods ||
                         src->methods == &blk_source_methods);
}

void trace_set_lenient(trace_source_t *src, bool lenient) {
  if (is_binary(src))
    ((bin_src_t *)src)->lenient = lenient;
}

const char *trace_truncated(const trace_source_t *src) {
  if (!is_binary(src))
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
      sum_init(&s->sum, s->version);
      s->sum_from = s->p; /* the records start here */
      return AS_OK;
    }
    const uint8_t *at = s->p;
    if ((rc = header_string(s, "provenance key", 31, key, err)) != AS_OK)
      return rc;
    if ((rc = header_string(s, "provenance value", 255, value, err)) != AS_OK)
      return rc;
    if (trace_meta_get(&s->base.meta, key) != NULL)
      return as_err_set(err, AS_EFORMAT,
                        "%s: byte offset %" PRIu64
                        ": provenance key '%s' given twice",
                        name, offset_of(s, at), key);
    if (!trace_meta_key_ok(key) || !trace_meta_value_ok(value))
      return as_err_set(err, AS_EFORMAT,
                        "%s: byte offset %" PRIu64
                        ": expected a provenance key without spaces, '=' or "
                        "control bytes and a value without control bytes",
                        name, offset_of(s, at));
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
  uint8_t   *buf = calloc(1, BIN_BUF_SIZE + BLK_SLACK);
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
  if (rc == AS_OK && s->version >= 3) {
    s->base.methods = &blk_source_methods;
    s->blk = calloc(BLK_EVENTS_MAX, sizeof *s->blk); /* blk_clean_rare */
    s->blk_rare_at = malloc(BLK_EVENTS_MAX * sizeof *s->blk_rare_at);
    s->shape_cache =
        aligned_alloc(_Alignof(blk_shape_t), BLK_CACHE * sizeof(blk_shape_t));
    s->shape_tag = calloc(BLK_CACHE, sizeof *s->shape_tag);
    if (s->blk == NULL || s->blk_rare_at == NULL || s->shape_cache == NULL ||
        s->shape_tag == NULL)
      rc = as_err_set(err, AS_ENOMEM, "%s: out of memory", name);
  }
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
  bin_sum_t         sum;   /* of the record bytes written */
  unsigned          version;
  struct blk_out_s *blk; /* version 3: the block being filled */
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

/* Writes ev (validated) as a version 2 record at p; returns its end. */
static uint8_t *encode_record(bin_writer_t *w, const trace_event_t *ev,
                              uint8_t *p) {
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
  return p;
}

/* ---- Writer, version 3: blocks ------------------------------------------ */

/* A block's rare column is closed once it holds this much, so that a block
 * stays within BLK_BYTES_MAX: BLK_EVENTS_MAX common events take at most
 * 28 data bytes each, and one more record at most BIN_DEF_MAX. */
#define BLK_RARE_FLUSH ((size_t)64 * 1024)
#define BLK_DATA_CAP   (BLK_EVENTS_MAX * 28 + 8) /* + an 8-byte store */
_Static_assert(2 * BLK_SHAPES_MAX + BLK_EVENTS_MAX * 29 + BLK_RARE_FLUSH +
                       BIN_DEF_MAX <=
                   BLK_BYTES_MAX,
               "a block the writer makes fits the reader's limit");
#define BLK_NO_SHAPE 0xFFFF

/* The block being filled. */
typedef struct blk_out_s blk_out_t;
struct blk_out_s {
  size_t   n, nshapes, data_len, rare_len;
  uint16_t shape[BLK_SHAPES_MAX]; /* the block's shapes, in order */
  uint16_t index[1u << 15];       /* by shape: its index, or NO_SHAPE */
  uint8_t  ops[BLK_EVENTS_MAX];
  uint8_t  data[BLK_DATA_CAP];
  uint8_t  rare[BLK_RARE_FLUSH + BIN_DEF_MAX];
};

/* The length code of v (0 for 0; 1-6 bytes as such; 7 for 8 bytes). */
static unsigned blk_code(uint64_t v) {
  unsigned bytes = v == 0 ? 0 : (unsigned)(71 - __builtin_clzll(v)) / 8;
  return bytes <= 6 ? bytes : 7;
}

/* Appends v's low bytes (of code's length) to the data column. */
static void blk_put(blk_out_t *o, uint64_t v, unsigned bytes) {
  memcpy(o->data + o->data_len, &v, 8); /* little-endian host */
  o->data_len += bytes;
}

/* Moves the block into the output buffer. */
static as_status_t blk_flush(bin_writer_t *w, as_err_t *err) {
  blk_out_t  *o = w->blk;
  as_status_t rc;
  if (o->n == 0)
    return AS_OK;
  if (BIN_BUF_SIZE - w->len < BLK_HEADER_MAX + BLK_BYTES_MAX &&
      (rc = flush(w, err)) != AS_OK)
    return rc;
  uint8_t *p = put_varint(w->buf + w->len, o->n);
  p = put_varint(p, o->nshapes);
  p = put_varint(p, o->data_len);
  p = put_varint(p, o->rare_len);
  for (size_t j = 0; j < o->nshapes; j++) {
    *p++ = (uint8_t)o->shape[j];
    *p++ = (uint8_t)(o->shape[j] >> 8);
    o->index[o->shape[j]] = BLK_NO_SHAPE;
  }
  memcpy(p, o->ops, o->n);
  memcpy(p + o->n, o->data, o->data_len);
  memcpy(p + o->n + o->data_len, o->rare, o->rare_len);
  w->len = (size_t)(p + o->n + o->data_len + o->rare_len - w->buf);
  o->n = o->nshapes = o->data_len = o->rare_len = 0;
  return AS_OK;
}

/* The index of shape v in the block, added if new: false when the block
 * has no room for another shape. */
static bool blk_shape_index(blk_out_t *o, unsigned v, uint8_t *out) {
  if (o->index[v] == BLK_NO_SHAPE) {
    if (o->nshapes == BLK_SHAPES_MAX)
      return false;
    o->index[v] = (uint16_t)o->nshapes;
    o->shape[o->nshapes++] = (uint16_t)v;
  }
  *out = (uint8_t)o->index[v];
  return true;
}

/* A common event's shape and data. */
static unsigned blk_common_shape(bin_writer_t *w, const trace_event_t *ev,
                                 uint64_t field[BLK_FIELDS],
                                 unsigned bytes[BLK_FIELDS]) {
  uint64_t d = ev->id - w->prev_id;
  field[0] = ev->t_ns - w->prev_t_ns;
  field[1] = ev->thread;
  field[2] = (d << 1) ^ (0 - (d >> 63));
  field[3] = ev->op == TRACE_FREE ? 0 : ev->size;
  unsigned thread = ev->thread == w->prev_thread ? 0
                    : ev->thread < 0x100         ? 1
                    : ev->thread < 0x10000       ? 2
                                                 : 3;
  unsigned code[BLK_FIELDS] = {blk_code(field[0]), thread, blk_code(field[2]),
                               blk_code(field[3])};
  for (unsigned k = 0; k < BLK_FIELDS; k++)
    bytes[k] = k == 1 ? blk_thread_len[code[k]] : blk_len_of_code[code[k]];
  unsigned op = ev->op == TRACE_FREE ? 3 : ev->op;
  return op | (unsigned)ev->domain << 2 | thread << 4 | code[0] << 6 |
         code[2] << 9 | code[3] << 12;
}

/* Appends ev (validated) to the block: a common event as its shape and
 * data, any other as a whole version 2 record in the rare column. */
static as_status_t blk_write(bin_writer_t *w, const trace_event_t *ev,
                             as_err_t *err) {
  blk_out_t *o = w->blk;
  unsigned   op = ev->op;
  bool       common =
      op < TRACE_MODULE && ((BLK_COMMON_OPS >> op) & 1) && ev->site == 0;
  uint64_t field[BLK_FIELDS];
  unsigned bytes[BLK_FIELDS];
  unsigned shape =
      common ? blk_common_shape(w, ev, field, bytes) : BLK_SHAPE_RARE;
  as_status_t rc;
  if (!blk_shape_index(o, shape, &o->ops[o->n])) {
    if ((rc = blk_flush(w, err)) != AS_OK)
      return rc;
    (void)blk_shape_index(o, shape, &o->ops[o->n]);
  }
  if (common) {
    for (unsigned k = 0; k < BLK_FIELDS; k++)
      blk_put(o, field[k], bytes[k]);
    w->prev_id = ev->id;
  } else {
    o->rare_len =
        (size_t)(encode_record(w, ev, o->rare + o->rare_len) - o->rare);
  }
  o->n++;
  w->prev_t_ns = ev->t_ns;
  w->prev_thread = ev->thread;
  bool labelled = op == TRACE_MARK || op == TRACE_OPTION ||
                  op == TRACE_MODULE || op == TRACE_SITE;
  if (o->n == BLK_EVENTS_MAX || o->rare_len >= BLK_RARE_FLUSH || labelled)
    return blk_flush(w, err);
  return AS_OK;
}

static as_status_t bin_write(trace_writer_t *tw, const trace_event_t *ev,
                             as_err_t *err) {
  bin_writer_t *w = (bin_writer_t *)tw;
  as_status_t   rc =
      trace_event_validate(ev, w->prev_t_ns, w->name, w->count, err);
  if (rc != AS_OK)
    return rc;
  if (ev->op < TRACE_FREE && ev->site >= TRACE_DEF_ID_MAX)
    return as_err_set(err, AS_EINVAL,
                      "%s: event %" PRIu64 ": call site %" PRIu64
                      " is not below %u",
                      w->name, w->count, ev->site, TRACE_DEF_ID_MAX);
  w->count++;
  if (w->version >= 3)
    return blk_write(w, ev, err);
  if (BIN_BUF_SIZE - w->len < BIN_DEF_MAX && (rc = flush(w, err)) != AS_OK)
    return rc;
  w->len = (size_t)(encode_record(w, ev, w->buf + w->len) - w->buf);
  w->prev_t_ns = ev->t_ns;
  w->prev_thread = ev->thread;
  return AS_OK;
}

static as_status_t bin_writer_close(trace_writer_t *tw, as_err_t *err) {
  bin_writer_t *w = (bin_writer_t *)tw;
  as_status_t   rc = AS_OK;
  if (!w->failed && (w->version < 3 || (rc = blk_flush(w, err)) == AS_OK) &&
      (rc = flush(w, err)) == AS_OK) {
    /* The end record (version 3: the end byte) and the trailer: what a
     * reader checks to know the trace is whole. */
    uint8_t *p = w->buf;
    *p++ = w->version >= 3 ? BLK_END : BIN_OP_END;
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
  free(w->blk);
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
  return trace_binary_writer_open_version(f, name, meta, BIN_VERSION, out, err);
}

as_status_t trace_binary_writer_open_version(FILE *f, const char *name,
                                             const trace_meta_t *meta,
                                             unsigned            version,
                                             trace_writer_t    **out,
                                             as_err_t           *err) {
  *out = NULL;
  if (version < 2 || version > BIN_VERSION) {
    if (f != stdout)
      fclose(f);
    return as_err_set(err, AS_EINVAL,
                      "%s: cannot write binary version %u, expected 2 or %d",
                      name, version, BIN_VERSION);
  }
  bin_writer_t *w = calloc(1, sizeof *w);
  uint8_t      *buf = malloc(BIN_BUF_SIZE);
  blk_out_t    *blk = version >= 3 ? calloc(1, sizeof *blk) : NULL;
  if (w == NULL || buf == NULL || (version >= 3 && blk == NULL)) {
    free(w);
    free(buf);
    free(blk);
    if (f != stdout)
      fclose(f);
    return as_err_set(err, AS_ENOMEM, "%s: out of memory", name);
  }
  w->version = version;
  w->blk = blk;
  if (blk != NULL)
    memset(blk->index, 0xFF, sizeof blk->index); /* BLK_NO_SHAPE */
  w->base.methods = &bin_writer_methods;
  w->f = f;
  w->own_f = f != stdout;
  w->buf = buf;
  snprintf(w->name, sizeof w->name, "%s", name);
  uint8_t *p = buf;
  memcpy(p, BIN_MAGIC, BIN_MAGIC_LEN);
  p += BIN_MAGIC_LEN;
  *p++ = (uint8_t)(version & 0xff);
  *p++ = (uint8_t)(version >> 8);
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
  sum_init(&w->sum, version);
  *out = &w->base;
  return AS_OK;
}
