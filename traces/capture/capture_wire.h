/* traces/capture/capture_wire.h -- the stream liballocsim_capture.so sends
 * to `allocsim capture`, one SOCK_SEQPACKET connection per process image.
 *
 * Why a stream and not a log file: a full-size capture makes tens of
 * millions of events a second; a 48-byte raw record per event filled a disk
 * with 75 GB in 5.5 minutes.  So each thread encodes its records compactly
 * into a small buffer (8-12 bytes an event), sends the buffer as one message
 * when it is full, and `allocsim capture` merges the threads by sequence
 * number in a bounded window and writes the trace itself (traces/binary.c:
 * about 4-6 bytes an event).  Nothing is written to disk but the trace.
 *
 * Ordering rule (happens-before): seq comes from one global atomic counter.
 * Calls that create a pointer (malloc, calloc, memalign family, the second
 * half of realloc) take it after the real call returned; calls that release
 * one (free, the first half of realloc) take it before the real call.  So a
 * free always follows the allocation that produced its pointer, and an
 * allocation that reuses an address follows the release of that address.
 *
 * Window rule: a thread takes its buffer's busy flag before it takes a seq
 * and drops it after the record is in the buffer.  The library's flusher
 * thread reads the counter (W), then takes every buffer's flag in turn and
 * sends what it holds, then waits until no record is being written outside
 * a buffer, then sends WATERMARK W: every record with seq < W has been sent
 * on the connection.  `allocsim capture` releases records below the
 * watermark in seq order and holds the rest.
 *
 * Message layout: an 8-byte header (type, version, 0, aux), then a body.
 *   HELLO      body capture_hello_t
 *   CHUNK      aux = kernel tid of the writer; body = records, each
 *              B [dseq] [dt] fields...   (below)
 *   WATERMARK  body u64 W
 *   BYE        clean end: the destructor or _exit ran, no records follow
 *   EXEC       the image is about to exec: a close after it is clean too
 *   FLUSHED    answer to CTL_FLUSH, after its WATERMARK
 * and back, from `allocsim capture` to the library (8-byte header only):
 *   CTL_FLUSH  flush every buffer now (sent before a signal is forwarded)
 *   CTL_DETACH stop recording and close (disk guard, or the command ended)
 * A closed connection with no DETACH means `allocsim capture` died: the
 * library kills its process (what PR_SET_PDEATHSIG does for the command).
 *
 * Record: B = op (bits 0-4) | domain << 5 (bits 5-6) | FAILED (bit 7), then
 * varint dseq = seq - previous seq of the chunk (the first: seq itself),
 * varint dt = t - previous t of the chunk (the first: t itself), then the
 * op's fields.  Addresses are zigzag varints of the difference to the
 * previous address field of the chunk (0 at its start).  Varints are
 * unsigned LEB128, at most 10 bytes.
 */
#ifndef ALLOCSIM_CAPTURE_WIRE_H
#define ALLOCSIM_CAPTURE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define CAPTURE_WIRE_VERSION 11

enum capture_msg_e {
  CAPTURE_MSG_HELLO = 1,
  CAPTURE_MSG_CHUNK,
  CAPTURE_MSG_WATERMARK,
  CAPTURE_MSG_BYE,
  CAPTURE_MSG_EXEC,
  CAPTURE_MSG_FLUSHED,
  CAPTURE_CTL_FLUSH = 0x40,
  CAPTURE_CTL_DETACH
};

typedef struct capture_msg_hdr_s capture_msg_hdr_t;
struct capture_msg_hdr_s {
  uint8_t  type;    /* capture_msg_e */
  uint8_t  version; /* CAPTURE_WIRE_VERSION */
  uint16_t zero;
  uint32_t aux; /* CHUNK: writer's kernel tid */
};

#define CAPTURE_HELLO_ENV 1024

/* First message of every connection. */
typedef struct capture_hello_s capture_hello_t;
struct capture_hello_s {
  uint64_t realtime_ns;     /* CLOCK_REALTIME at the library's start */
  uint64_t monotonic_ns;    /* CLOCK_MONOTONIC at the trace's t = 0 */
  uint64_t python_hex;      /* CPython's Py_Version (3.11+), else 0 */
  uint64_t touch_threshold; /* bytes; 0 = no touch records */
  uint64_t sample_ns;       /* RSS sampling period; 0 = marks only */
  uint64_t mmap_top;        /* end of where the next anonymous mmap of
                               2 MiB lands (probed), or 0: the top of the
                               simulated mmap area, so that mappings sit
                               where they did modulo 2 MiB (THP blocks) */
  uint32_t pid, ppid;
  uint32_t main_tid; /* the thread that loaded the library */
  uint32_t page_size;
  uint32_t mimalloc_version; /* mi_version() when libmimalloc is loaded
                                (MI_MALLOC_VERSION: 209 = 2.0.9), else 0 */
  uint32_t stacks;           /* return addresses kept per allocation, 0 = off */
  uint32_t tcmalloc_version; /* gperftools' tc_version() as major * 100 +
                                minor when it is loaded (216 = 2.16), else 0 */
  uint32_t jemalloc_version; /* mallctl("version") as major * 10000 + minor
                                * 100 + patch when jemalloc is loaded
                                (50300 = 5.3.0), else 0 */
  uint32_t before_main;      /* 1: sent before the program's main() ran, so
                                the trace has the calls made before it */
  uint32_t pad;

  /* jemalloc's seeds and clock (traces/je_seeds.h, trace_je_state_t), 0
   * where unknown: the tsd address of the thread that loaded the library,
   * arena 0's dirty decay_t address, and CLOCK_MONOTONIC_COARSE just after
   * mallctl("version") and just before monotonic_ns, with its resolution */
  uint64_t je_prng_seed, je_jitter_seed;
  uint64_t je_res_ns, je_coarse_origin_ns, je_coarse_init_ns;

  char exe[128];        /* /proc/self/exe, cut */
  char own_malloc[128]; /* the object whose malloc the program's calls
                           bind to ahead of the recorder's, or "" */
  /* The image's own allocator settings (capture_wire_env_knob) as it started:
   * "NAME=VALUE" strings, each ending in NUL, then an empty one;
   * LD_PRELOAD without the recorder.  An exec'd image may have been given
   * other ones than `allocsim capture` started with (`env
   * LD_PRELOAD=libjemalloc.so.2 CMD`), and its trace's provenance must
   * name the allocator that ran. */
  char env[CAPTURE_HELLO_ENV];
};

/* The environment variables that choose or tune the allocator, recorded as
 * env.NAME provenance: MALLOC_*, MIMALLOC_*, TCMALLOC_*, GLIBC_TUNABLES,
 * LD_PRELOAD, MALLOC_CONF, JE_MALLOC_CONF, PYTHONMALLOC, PYTHONHASHSEED.
 * name is n bytes long.  Here because both ends use it. */
static inline bool capture_wire_env_knob(const char *name, size_t n) {
  static const char *const prefixes[] = {"MALLOC_", "MIMALLOC_", "TCMALLOC_",
                                         NULL};
  static const char *const exact[] = {
      "GLIBC_TUNABLES", "LD_PRELOAD",     "MALLOC_CONF", "PYTHONMALLOC",
      "PYTHONHASHSEED", "JE_MALLOC_CONF", NULL};
  for (size_t i = 0; exact[i] != NULL; i++)
    if (strlen(exact[i]) == n && memcmp(name, exact[i], n) == 0)
      return true;
  for (size_t i = 0; prefixes[i] != NULL; i++)
    if (n >= strlen(prefixes[i]) &&
        memcmp(name, prefixes[i], strlen(prefixes[i])) == 0)
      return true;
  return false;
}

/* Record ops (bits 0-4 of B) and their fields after dseq and dt. */
enum capture_op_e {
  CAPTURE_OP_MALLOC = 1,    /* addr, size, site */
  CAPTURE_OP_CALLOC,        /* addr, size (nmemb * size), site */
  CAPTURE_OP_MEMALIGN,      /* addr, size, alignment, site */
  CAPTURE_OP_REALLOC_BEGIN, /* addr: the old pointer, released here */
  CAPTURE_OP_REALLOC,       /* addr: the result (FAILED: the old pointer,
                               which stays the program's), size, site */
  CAPTURE_OP_FREE,          /* addr */
  CAPTURE_OP_TRIM,          /* pad, malloc_trim's return value */
  CAPTURE_OP_MARK,          /* rss, own, other, label length, label bytes */
  CAPTURE_OP_META,          /* length, "key=value" bytes: provenance */
  CAPTURE_OP_RSS,           /* rss, own, other: a periodic sample.  rss is
                               smaps_rollup's Rss; own the recorder's resident
                               bytes; other those no allocator holds
                               (memmap.c) */
  CAPTURE_OP_THREAD_EXIT,   /* none: the thread's last record */
  CAPTURE_OP_TOUCH,         /* addr: the allocation, offset, length: pages
                               found resident that were not reported before */
  CAPTURE_OP_OPTION,        /* zigzag param, zigzag value: mallopt() */
  CAPTURE_OP_PURGE,         /* kind (capture_purge_e), arena (varint;
                               CAPTURE_ALL_ARENAS = every arena) */
  CAPTURE_OP_MODULE,        /* id, blob: the module's path */
  CAPTURE_OP_SITE,          /* id, blob: frames, each the varints module id
                               and offset from the module's base */
  CAPTURE_OP_COUNT
};

/* Purge kinds: jemalloc arena.<i>.purge / mi_collect(true) /
 * MallocExtension_ReleaseFreeMemory; jemalloc arena.<i>.decay /
 * mi_collect(false); jemalloc thread.tcache.flush. */
enum capture_purge_e {
  CAPTURE_PURGE_ALL,
  CAPTURE_PURGE_DECAY,
  CAPTURE_PURGE_TCACHE
};
#define CAPTURE_ALL_ARENAS 0xFFFFFFFFu

/* Domains (bits 5-6 of B): CPython's PYMEM_DOMAIN_RAW, MEM, OBJ, as in
 * traces/event.h's trace_domain_t. */
#define CAPTURE_DOMAIN_RAW 0
#define CAPTURE_DOMAIN_MEM 1
#define CAPTURE_DOMAIN_OBJ 2

#define CAPTURE_B_OP_MASK      0x1Fu
#define CAPTURE_B_DOMAIN_SHIFT 5
#define CAPTURE_B_FAILED       0x80u

/* Longest label or META text a record carries. */
#define CAPTURE_LABEL_MAX 63
/* Call sites: at most this many frames a site, and bytes of a MODULE or
 * SITE record's blob (a path of up to 255 bytes; frames of two varints). */
#define CAPTURE_FRAMES_MAX 32
#define CAPTURE_BLOB_MAX   (CAPTURE_FRAMES_MAX * 20)
/* Longest encoded record: B, dseq, dt, an id and the blob's length, the
 * blob (longer than any other record's fields). */
#define CAPTURE_REC_MAX (1 + 4 * 10 + CAPTURE_BLOB_MAX)
/* Largest message either side sends (a chunk: header and buffer). */
#define CAPTURE_MSG_MAX ((size_t)32 * 1024)

/* ---- Varints (both sides) ---------------------------------------------- */

static inline uint8_t *capture_put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

static inline uint64_t capture_zigzag(int64_t d) {
  return ((uint64_t)d << 1) ^ (uint64_t)(d >> 63);
}

static inline int64_t capture_unzigzag(uint64_t v) {
  return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Decodes a varint at *pp below end: 0 on success (advancing *pp), -1 if
 * it runs past end or is longer than 10 bytes. */
static inline int capture_get_varint(const uint8_t **pp, const uint8_t *end,
                                     uint64_t *out) {
  const uint8_t *p = *pp;
  uint64_t       v = 0;
  for (unsigned shift = 0; shift < 70; shift += 7) {
    if (p == end)
      return -1;
    uint8_t b = *p++;
    if (shift == 63 && b > 1)
      return -1;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (b < 0x80) {
      *out = v;
      *pp = p;
      return 0;
    }
  }
  return -1;
}

/* ---- Encoding (the recorder; tests) -------------------------------------- */

/* One record before encoding.  Fields by op (capture_op_e): addr for the
 * allocation ops, FREE and TOUCH, and "other" for RSS and MARK; x = size /
 * pad / rss / offset / purge kind; y = alignment / trim result / own bytes
 * / length / arena / option value; text = MARK label, META "key=value",
 * OPTION name. */
typedef struct cap_rec_s cap_rec_t;
struct cap_rec_s {
  uint8_t     op, domain, failed;
  uint64_t    addr;
  uint64_t    x, y;
  const char *text;
  size_t      text_len; /* at most CAPTURE_LABEL_MAX; MODULE and SITE: the
                           blob, at most CAPTURE_BLOB_MAX */
  uint32_t site;        /* allocation ops: the call site, 0 = none */
};

/* The deltas of one chunk; all zero at its start. */
typedef struct capture_enc_s capture_enc_t;
struct capture_enc_s {
  uint64_t prev_seq, prev_t, prev_addr;
};

static inline uint8_t *capture_put_addr(uint8_t *p, capture_enc_t *e,
                                        uint64_t a) {
  p = capture_put_varint(p, capture_zigzag((int64_t)(a - e->prev_addr)));
  e->prev_addr = a;
  return p;
}

static inline uint8_t *capture_put_text(uint8_t *p, const char *s, size_t n) {
  if (n > CAPTURE_LABEL_MAX)
    n = CAPTURE_LABEL_MAX;
  *p++ = (uint8_t)n;
  memcpy(p, s, n);
  return p + n;
}

/* Encodes r, taken at seq and t, at p (CAPTURE_REC_MAX bytes free); returns
 * the end.  seq must exceed the chunk's previous one. */
static inline uint8_t *capture_encode(uint8_t *p, capture_enc_t *e,
                                      const cap_rec_t *r, uint64_t seq,
                                      uint64_t t) {
  *p++ = (uint8_t)((r->op & CAPTURE_B_OP_MASK) |
                   (unsigned)(r->domain & 3) << CAPTURE_B_DOMAIN_SHIFT |
                   (r->failed ? CAPTURE_B_FAILED : 0));
  p = capture_put_varint(p, seq - e->prev_seq);
  e->prev_seq = seq;
  if (t < e->prev_t)
    t = e->prev_t;
  p = capture_put_varint(p, t - e->prev_t);
  e->prev_t = t;
  switch (r->op) {
  case CAPTURE_OP_MALLOC:
  case CAPTURE_OP_CALLOC:
  case CAPTURE_OP_REALLOC:
    p = capture_put_addr(p, e, r->addr);
    p = capture_put_varint(p, r->x);
    return capture_put_varint(p, r->site);
  case CAPTURE_OP_MEMALIGN:
    p = capture_put_addr(p, e, r->addr);
    p = capture_put_varint(p, r->x);
    p = capture_put_varint(p, r->y);
    return capture_put_varint(p, r->site);
  case CAPTURE_OP_MODULE:
  case CAPTURE_OP_SITE: {
    size_t n = r->text_len < CAPTURE_BLOB_MAX ? r->text_len : CAPTURE_BLOB_MAX;
    p = capture_put_varint(p, r->x);
    p = capture_put_varint(p, n);
    memcpy(p, r->text, n);
    return p + n;
  }
  case CAPTURE_OP_TOUCH:
    p = capture_put_addr(p, e, r->addr);
    p = capture_put_varint(p, r->x);
    return capture_put_varint(p, r->y);
  case CAPTURE_OP_REALLOC_BEGIN:
  case CAPTURE_OP_FREE:
    return capture_put_addr(p, e, r->addr);
  case CAPTURE_OP_TRIM:
  case CAPTURE_OP_PURGE:
    p = capture_put_varint(p, r->x);
    return capture_put_varint(p, r->y);
  case CAPTURE_OP_RSS:
    p = capture_put_varint(p, r->x);
    p = capture_put_varint(p, r->y);
    return capture_put_varint(p, r->addr);
  case CAPTURE_OP_MARK:
    p = capture_put_varint(p, r->x);
    p = capture_put_varint(p, r->y);
    p = capture_put_varint(p, r->addr);
    return capture_put_text(p, r->text, r->text_len);
  case CAPTURE_OP_META:
    return capture_put_text(p, r->text, r->text_len);
  case CAPTURE_OP_OPTION:
    p = capture_put_text(p, r->text, r->text_len);
    return capture_put_varint(p, capture_zigzag((int64_t)r->y));
  default:
    return p; /* THREAD_EXIT */
  }
}

#endif
