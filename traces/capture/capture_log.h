/* traces/capture/capture_log.h -- the raw log liballocsim_capture.so writes
 * and `allocsim capture` converts into an allocsim trace.
 *
 * The preload library cannot use the trace writers (they use stdio and
 * malloc, the allocator being traced), so it appends fixed-size records with
 * write(2).  Each thread fills its own buffer and writes it as one chunk: a
 * chunk header followed by `count` records in increasing seq order.  Chunks
 * of different threads interleave in the file; the converter merges the
 * chunks by seq (a k-way merge over sorted runs) to recover the one total
 * order.
 *
 * Ordering rule (happens-before): seq comes from one global atomic counter.
 * Calls that create a pointer (malloc, calloc, memalign family, the second
 * half of realloc) take it after the real call returned; calls that release
 * one (free, the first half of realloc) take it before the real call.  So a
 * free always follows the allocation that produced its pointer, and an
 * allocation that reuses an address follows the release of that address.
 *
 * One file per process image: DIR/raw.PID.N (N counts execs within a pid,
 * 0 first), so forked children and exec'd images never share a file.
 */
#ifndef ALLOCSIM_CAPTURE_LOG_H
#define ALLOCSIM_CAPTURE_LOG_H

#include <stdint.h>

#define CAPTURE_LOG_MAGIC   0x31474F4C43534C41ull /* "ALSCLOG1" */
#define CAPTURE_CHUNK_MAGIC 0x4B4E484343534C41ull /* "ALSCCHNK" */

/* Record ops (capture_rec_t.op). */
enum capture_op_e {
  CAPTURE_OP_FILE_HEADER = 1, /* first record of the file; see below */
  CAPTURE_OP_MALLOC,          /* a = result, b = size */
  CAPTURE_OP_CALLOC,          /* a = result, b = nmemb * size */
  CAPTURE_OP_MEMALIGN,        /* a = result, b = size, c = alignment */
  CAPTURE_OP_REALLOC_BEGIN,   /* a = old pointer (released here) */
  CAPTURE_OP_REALLOC,         /* a = result, b = size, c = old pointer */
  CAPTURE_OP_FREE,            /* a = pointer */
  CAPTURE_OP_TRIM,            /* b = pad, c = malloc_trim's return value */
  CAPTURE_OP_MARK,            /* label in the next `extra` records; a = Rss
                                 bytes, b = capture overhead bytes, both
                                 read just before the mark; with
                                 CAPTURE_FLAG_META the label is key=value
                                 provenance, not a mark */
  CAPTURE_OP_RSS,             /* a = Rss bytes, b = capture overhead bytes */
  CAPTURE_OP_THREAD_EXIT,     /* the thread's last record */
  CAPTURE_OP_LABEL            /* continuation: 40 label bytes in a..c+ */
};

/* Record flags. */
#define CAPTURE_FLAG_FAILED 0x01u /* the call returned NULL / an error */
#define CAPTURE_FLAG_META   0x80u /* MARK record carrying key=value */

/* One record, 48 bytes.  Invariant: within a chunk seq increases. */
typedef struct capture_rec_s capture_rec_t;
struct capture_rec_s {
  uint64_t seq;    /* global order; 0 in headers */
  uint64_t t_ns;   /* CLOCK_MONOTONIC ns since the library's constructor */
  uint64_t a;      /* see capture_op_e */
  uint64_t b;      /* see capture_op_e */
  uint64_t c;      /* see capture_op_e */
  uint32_t tid;    /* gettid() of the calling thread */
  uint8_t  op;     /* capture_op_e */
  uint8_t  domain; /* trace_domain_t: raw, mem, obj */
  uint8_t  extra;  /* MARK: number of LABEL records that follow */
  uint8_t  flags;  /* CAPTURE_FLAG_* */
};

/* Bytes of label carried by one CAPTURE_OP_LABEL record. */
#define CAPTURE_LABEL_BYTES_PER_REC 40

/* Chunk header, the same size as a record:
 *   seq = CAPTURE_CHUNK_MAGIC, a = number of records that follow,
 *   tid = writer thread.
 * File header (first chunk holds exactly this one record, op FILE_HEADER):
 *   seq = CAPTURE_LOG_MAGIC, a = pid, b = parent pid, c = page size,
 *   t_ns = CLOCK_REALTIME ns at the constructor, extra = exec generation. */

#endif
