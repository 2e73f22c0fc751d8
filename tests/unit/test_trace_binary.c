/* tests/unit/test_trace_binary.c -- the binary trace format: exact bytes,
 * text -> binary -> text round trips, every kind of bad input with its byte
 * offset, truncation at every cut (a trace cut on a record boundary is
 * refused, or read to there with lenient), the trailer's count and
 * checksum, a 1e6-event round trip through files, and traces compressed
 * with zstd or gzip.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zstd.h>

#include "traces/trace_io.h"

/* 8 magic bytes, version 1 (no trailer), no provenance: records start at
 * offset 11.  Hand-made inputs below use it so that their records need no
 * checksum; the writer writes version 3 unless asked for 2. */
#define HDR     "ASTRACE\0\x01\x00\x00"
#define HDR_LEN 11

/* The trailer's checksum as docs/trace-format.md defines it, written here
 * from the document, apart from traces/binary.c. */
static uint64_t rotl29_mul(uint64_t h, uint64_t w) {
  h ^= w;
  h = (h << 29) | (h >> 35);
  return h * UINT64_C(0x9E3779B97F4A7C15);
}

static uint64_t doc_checksum(const uint8_t *p, size_t n) {
  uint64_t h = UINT64_C(0x243F6A8885A308D3);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t w = 0;
    for (size_t k = 0; k < 8 && i + k < n; k++)
      w |= (uint64_t)p[i + k] << (8 * k);
    h = rotl29_mul(h, w);
  }
  return rotl29_mul(h, n);
}

/* Version 3's checksum: four such hashes, word i into hash i mod 4, mixed
 * in order into a fifth, then the byte count (docs/trace-format.md). */
static uint64_t doc_checksum_v3(const uint8_t *p, size_t n) {
  uint64_t lane[4], h = UINT64_C(0x243F6A8885A308D3);
  for (int l = 0; l < 4; l++)
    lane[l] = h;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t w = 0;
    for (size_t k = 0; k < 8 && i + k < n; k++)
      w |= (uint64_t)p[i + k] << (8 * k);
    lane[i / 8 % 4] = rotl29_mul(lane[i / 8 % 4], w);
  }
  for (int l = 0; l < 4; l++)
    h = rotl29_mul(h, lane[l]);
  return rotl29_mul(h, n);
}

/* ---- Helpers ------------------------------------------------------------ */

typedef struct buf_s {
  char  *data;
  size_t len;
} buf_t;

static FILE *mem_reader(const void *data, size_t len) {
  /* fmemopen of a zero-length buffer fails with EINVAL on glibc. */
  FILE *f =
      len > 0 ? fmemopen((void *)data, len, "r") : fopen("/dev/null", "r");
  assert_non_null(f);
  return f;
}

/* Copies every event of src to a new stream of format fmt; returns bytes. */
static buf_t convert(trace_source_t *src, trace_format_t fmt) {
  buf_t           out = {0};
  FILE           *mem = open_memstream(&out.data, &out.len);
  trace_writer_t *w;
  as_err_t        err = {0};
  assert_int_equal(
      trace_writer_open_stream(mem, "out", fmt, &src->meta, &w, &err), AS_OK);
  trace_event_t ev;
  as_status_t   rc;
  while ((rc = trace_source_next(src, &ev, &err)) == AS_OK)
    assert_int_equal(trace_writer_write(w, &ev, &err), AS_OK);
  assert_int_equal(rc, AS_DONE);
  assert_int_equal(trace_writer_close(w, &err), AS_OK);
  trace_source_close(src);
  return out;
}

static trace_source_t *open_bytes(const void *data, size_t len,
                                  const char *name) {
  trace_source_t *src;
  as_err_t        err = {0};
  assert_int_equal(trace_open_stream(mem_reader(data, len), name, &src, &err),
                   AS_OK);
  return src;
}

/* Encodes n events as binary of the given version with meta. */
static buf_t encode_version(const trace_event_t *evs, size_t n,
                            const trace_meta_t *meta, unsigned version) {
  buf_t           out = {0};
  FILE           *mem = open_memstream(&out.data, &out.len);
  trace_writer_t *w;
  as_err_t        err = {0};
  assert_int_equal(
      trace_binary_writer_open_version(mem, "out", meta, version, &w, &err),
      AS_OK);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(trace_writer_write(w, &evs[i], &err), AS_OK);
  assert_int_equal(trace_writer_close(w, &err), AS_OK);
  return out;
}

/* Version 2, whose bytes most tests below take apart. */
static buf_t encode(const trace_event_t *evs, size_t n,
                    const trace_meta_t *meta) {
  return encode_version(evs, n, meta, 2);
}

/* Reads binary bytes named "t.astrace" to the end (leniently or not): the
 * first non-OK status (from open or next), the events read before it and
 * the message; *cut receives trace_truncated's reason (or "") when not
 * NULL. */
static as_status_t read_bytes_as(const void *data, size_t len, bool lenient,
                                 size_t *n, as_err_t *err, char *cut) {
  trace_source_t *src;
  *n = 0;
  memset(err, 0, sizeof *err);
  as_status_t rc =
      trace_open_stream(mem_reader(data, len), "t.astrace", &src, err);
  if (rc != AS_OK)
    return rc;
  trace_set_lenient(src, lenient);
  trace_event_t ev;
  while ((rc = trace_source_next(src, &ev, err)) == AS_OK)
    (*n)++;
  if (cut != NULL)
    snprintf(cut, 200, "%s", trace_truncated(src) ? trace_truncated(src) : "");
  trace_source_close(src);
  return rc;
}

static as_status_t read_bytes(const void *data, size_t len, size_t *n,
                              as_err_t *err) {
  return read_bytes_as(data, len, false, n, err, NULL);
}

static void expect_error(const void *data, size_t len, const char *msg) {
  size_t   n;
  as_err_t err;
  assert_int_equal(read_bytes(data, len, &n, &err), AS_EFORMAT);
  assert_string_equal(err.msg, msg);
}

/* ---- Fixtures ----------------------------------------------------------- */

static const char every_op_canonical[] =
    "allocsim-trace 1\n"
    "#@ machine=x86_64 debian 12\n"
    "#@ page_size=4096\n"
    "0 0 mark start\n"
    "10 0 malloc 1 64\n"
    "20 0 calloc 2 4096 obj\n"
    "25 0 memalign 3 64 4096 mem\n"
    "30 0 realloc 1 128\n"
    "40 0 free 1\n"
    "1000000 1 thread_start\n"
    "2000000 0 idle 500000000\n"
    "3000000 0 trim 0\n"
    "3000000 0 rss 22020096\n"
    "3000000 0 rss 23068672 3145728\n"
    "4000000 0 mark \"after free\"\n"
    "2500000000 1 thread_exit\n"
    "2500000000 0 malloc 4 1536\n"
    "2500000000 0 free 2 obj\n"
    "2500000000 0 mark \"q\\\"uo\\\\te#\"\n"
    "3000000000 0 mark a\n"
    "3000000000 7 mark \"\"\n"
    "3000000000 4294967295 memalign 18446744073709551615 4096 1073741824 "
    "obj\n"
    "3000000000 0 realloc 5 2147483648 mem\n"
    "3000000000 0 purge decay\n"
    "3000000000 0 purge tcache 4294967295\n"
    "3000000000 2 option mmap_threshold 65536\n"
    "3000000000 0 option dirty_decay_ms -9223372036854775808\n"
    "3000000000 0 touch 5 4096 8192\n"
    "3000000000 0 touch 18446744073709551615 0 1\n"
    "3000000000 0 free 0 mem\n"
    "3000000000 0 mark \"tab\there\"\n"
    "18446744073709551615 4294967295 rss 18446744073709551615\n";

/* ---- Layout and round trips --------------------------------------------- */

static void writer_emits_the_documented_bytes(void **state) {
  (void)state;
  trace_meta_t meta = {0};
  assert_int_equal(trace_meta_set(&meta, "k", "v", NULL), AS_OK);
  const trace_event_t evs[] = {
      {.t_ns = 0, .op = TRACE_MALLOC, .id = 1, .size = 64},
      {.t_ns = 10, .op = TRACE_FREE, .id = 1, .domain = TRACE_DOMAIN_OBJ},
      {.t_ns = 10,
       .thread = 3,
       .op = TRACE_MEMALIGN,
       .id = 0,
       .align = 4096,
       .size = 100,
       .domain = TRACE_DOMAIN_MEM},
      {.t_ns = 300, .thread = 3, .op = TRACE_MARK, .label = "p"},
      {.t_ns = 300, .thread = 3, .op = TRACE_RSS, .size = 5, .offset = 7},
  };
  buf_t                b = encode(evs, 5, &meta);
  static const uint8_t want[] = {
      'A',  'S',  'T',  'R',  'A',  'C', 'E', 0, 2, 0, /* header */
      1,    'k',  1,    'v',  0,                       /* k=v */
      0xC0, 0x02, 0x40,             /* malloc: zero dt, same thread, +1, 64 */
      0x64, 0x0A, 0x00,             /* free obj: dt 10, id +0 */
      0x93, 0x03, 0x01, 0x0C, 0x64, /* memalign mem: thread 3, id -1, 2^12 */
      0x47, 0xA2, 0x02, 0x01, 'p',  /* mark: dt 290, "p" */
      0xDA, 0x05, 0x07,             /* rss 5 with other 7: domain bits 1 */
      0x0F,                         /* end record */
      0x05};                        /* trailer: 5 events, then checksum */
  assert_int_equal(b.len, sizeof want + 8);
  assert_memory_equal(b.data, want, sizeof want);
  uint64_t sum = doc_checksum(want + 15, sizeof want - 15 - 2);
  for (int k = 0; k < 8; k++)
    assert_int_equal((uint8_t)b.data[sizeof want + (size_t)k],
                     (uint8_t)(sum >> (8 * k)));
  free(b.data);
}

static void text_to_binary_to_text_is_byte_identical(void **state) {
  (void)state;
  buf_t bin = convert(
      open_bytes(every_op_canonical, sizeof every_op_canonical - 1, "a.trace"),
      TRACE_FORMAT_BINARY);
  assert_memory_equal(bin.data, "ASTRACE", 8);
  buf_t text =
      convert(open_bytes(bin.data, bin.len, "a.astrace"), TRACE_FORMAT_TEXT);
  assert_int_equal(text.len, sizeof every_op_canonical - 1);
  assert_memory_equal(text.data, every_op_canonical, text.len);
  buf_t bin2 =
      convert(open_bytes(text.data, text.len, "b.trace"), TRACE_FORMAT_BINARY);
  assert_int_equal(bin2.len, bin.len);
  assert_memory_equal(bin2.data, bin.data, bin.len);
  free(bin.data);
  free(text.data);
  free(bin2.data);
}

static void provenance_survives_the_binary_header(void **state) {
  (void)state;
  buf_t bin = convert(
      open_bytes(every_op_canonical, sizeof every_op_canonical - 1, "a.trace"),
      TRACE_FORMAT_BINARY);
  trace_source_t *src = open_bytes(bin.data, bin.len, "x");
  assert_int_equal(src->meta.count, 2);
  assert_string_equal(src->meta.key[1], "page_size");
  assert_string_equal(trace_meta_get(&src->meta, "machine"),
                      "x86_64 debian 12");
  trace_source_close(src);
  free(bin.data);
}

/* Issue 14 defect 7: a file cut on a record boundary looked whole.  Every
 * writer ends a trace with an end record, so a file without one was cut:
 * an error naming the offset, or with lenient the events read so far and
 * a reason. */
static void end_of_file_without_end_record_is_a_cut(void **state) {
  (void)state;
  static const uint8_t in[] = HDR "\xC5\xC6"; /* thread_start, exit */
  size_t               n;
  as_err_t             err;
  char                 cut[200];
  assert_int_equal(read_bytes(in, sizeof in - 1, &n, &err), AS_EFORMAT);
  assert_int_equal(n, 2);
  assert_string_equal(err.msg,
                      "t.astrace: byte offset 13: end of file after 2 "
                      "events, expected an end record: the trace was cut "
                      "short (`allocsim convert --lenient` copies it up to "
                      "its last whole record)");
  assert_int_equal(read_bytes_as(in, sizeof in - 1, true, &n, &err, cut),
                   AS_DONE);
  assert_int_equal(n, 2);
  assert_string_equal(cut, "byte offset 13: end of file after 2 events, "
                           "expected an end record");
  static const uint8_t after_end[] = HDR "\xC5\x0F\xFF\xFF";
  assert_int_equal(
      read_bytes_as(after_end, sizeof after_end - 1, true, &n, &err, cut),
      AS_DONE);
  assert_int_equal(n, 1);
  assert_string_equal(cut, ""); /* whole: version 1 has no trailer */
  assert_int_equal(read_bytes(HDR, HDR_LEN, &n, &err), AS_EFORMAT);
  assert_int_equal(n, 0);
}

/* Version 2's trailer: the event count and the checksum must agree with
 * what was read; bytes after the trailer are ignored. */
static void the_trailer_must_agree_with_the_records(void **state) {
  (void)state;
  const trace_event_t evs[] = {
      {.t_ns = 5, .op = TRACE_MALLOC, .id = 1, .size = 64},
      {.t_ns = 9, .op = TRACE_FREE, .id = 1},
  };
  buf_t    b = encode(evs, 2, NULL);
  size_t   n;
  as_err_t err;
  size_t   trailer = b.len - 9; /* count byte, then 8 checksum bytes */
  assert_int_equal((uint8_t)b.data[trailer - 1], 0x0F);
  assert_int_equal(b.data[trailer], 2);
  b.data[trailer] = 3; /* the count says 3 */
  assert_int_equal(read_bytes(b.data, b.len, &n, &err), AS_EFORMAT);
  assert_non_null(strstr(err.msg, "the trailer says 3 events"));
  b.data[trailer] = 2;
  b.data[trailer - 2] ^= 0x01; /* a bit of the free record flips */
  assert_int_equal(read_bytes(b.data, b.len, &n, &err), AS_EFORMAT);
  assert_non_null(strstr(err.msg, "the trace is damaged"));
  b.data[trailer - 2] ^= 0x01;
  char *more = malloc(b.len + 3);
  memcpy(more, b.data, b.len);
  memcpy(more + b.len, "xyz", 3);
  assert_int_equal(read_bytes(more, b.len + 3, &n, &err), AS_DONE);
  assert_int_equal(n, 2);
  free(more);
  free(b.data);
}

/* ---- Bad input ---------------------------------------------------------- */

static void bad_magic_is_not_an_allocsim_binary_trace(void **state) {
  (void)state;
  static const char msg[] = "t.astrace: byte offset 0: not an allocsim "
                            "binary trace (expected magic 'ASTRACE\\0')";
  expect_error("ASTRACX\0\x01\x00\x00", 11, msg);
  expect_error("AST", 3, msg);
  expect_error("", 0, msg);
}

static void unsupported_version_is_reported_at_offset_8(void **state) {
  (void)state;
  expect_error("ASTRACE\0\x04\x00\x00", 11,
               "t.astrace: byte offset 8: unsupported version 4, expected 1 "
               "to 3");
  expect_error("ASTRACE\0\x00\x00\x00", 11,
               "t.astrace: byte offset 8: unsupported version 0, expected 1 "
               "to 3");
  expect_error("ASTRACE\0\x01", 9,
               "t.astrace: truncated header at byte offset 8: expected the "
               "version, got end of file");
}

static void malformed_headers_name_their_offset(void **state) {
  (void)state;
  expect_error("ASTRACE\0\x01\x00\x03ke", 13,
               "t.astrace: truncated header at byte offset 11: expected 3 "
               "bytes of a provenance key, got end of file");
  expect_error("ASTRACE\0\x01\x00\x01k", 12,
               "t.astrace: truncated header at byte offset 12: expected the "
               "length of a provenance value, got end of file");
  expect_error("ASTRACE\0\x01\x00\x20", 11,
               "t.astrace: byte offset 10: expected a provenance key of at "
               "most 31 bytes, got length 32");
  expect_error("ASTRACE\0\x01\x00\x01k\x01\x00\x00", 15,
               "t.astrace: byte offset 13: expected a provenance value "
               "without NUL bytes");
}

static void unknown_op_bytes_are_rejected(void **state) {
  (void)state;
  expect_error(
      HDR "\xC5\x3E", HDR_LEN + 2, /* op 14 with domain 3 */
      "t.astrace: byte offset 12: unknown op byte 0x3e, expected an "
      "op 0-14 with domain bits only on ops 0-4 and 14 (or 1 on op 10), "
      "0x1f, 0x2f or 0x0f");
  expect_error(
      HDR "\x17", HDR_LEN + 1, /* domain bits on a mark */
      "t.astrace: byte offset 11: unknown op byte 0x17, expected an "
      "op 0-14 with domain bits only on ops 0-4 and 14 (or 1 on op 10), "
      "0x1f, 0x2f or 0x0f");
  expect_error(
      HDR "\x30", HDR_LEN + 1, /* domain 3 */
      "t.astrace: byte offset 11: unknown op byte 0x30, expected an "
      "op 0-14 with domain bits only on ops 0-4 and 14 (or 1 on op 10), "
      "0x1f, 0x2f or 0x0f");
  expect_error(
      HDR "\x4F", HDR_LEN + 1, /* end with a flag */
      "t.astrace: byte offset 11: unknown op byte 0x4f, expected an "
      "op 0-14 with domain bits only on ops 0-4 and 14 (or 1 on op 10), "
      "0x1f, 0x2f or 0x0f");
}

static void new_op_fields_out_of_range_are_rejected(void **state) {
  (void)state;
  expect_error(HDR "\xCB\x00\x03", HDR_LEN + 3, /* purge kind 3 */
               "t.astrace: byte offset 13: expected a purge kind 0-2, got 3");
  expect_error(HDR "\xCD\x02\x00\x00", HDR_LEN + 4, /* touch length 0 */
               "t.astrace: byte offset 14: expected a touch length above 0 "
               "ending below 2^64, got 0 at offset 0");
  expect_error(HDR "\xCC\x01X\x02", HDR_LEN + 4, /* option "X" */
               "t.astrace: byte offset 13: expected an option name of 1-63 "
               "bytes of [a-z0-9_.]");
  expect_error(HDR "\xDA\x05\x00", HDR_LEN + 3, /* rss "other" 0 */
               "t.astrace: byte offset 13: expected bytes no allocator holds "
               "above 0, got 0");
}

static void varint_overflow_names_the_field(void **state) {
  (void)state;
  static const char in[] = HDR "\x45\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x02";
  expect_error(in, sizeof in - 1,
               "t.astrace: byte offset 12: varint overflow in time delta, "
               "expected at most 10 bytes encoding a value below 2^64");
  static const char eleven[] =
      HDR "\xC4\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x81\x00";
  expect_error(eleven, sizeof eleven - 1,
               "t.astrace: byte offset 12: varint overflow in id, expected "
               "at most 10 bytes encoding a value below 2^64");
}

static void out_of_range_fields_are_rejected(void **state) {
  (void)state;
  expect_error(HDR "\x85\x80\x80\x80\x80\x10", HDR_LEN + 6,
               "t.astrace: byte offset 12: expected a thread id below 2^32, "
               "got 4294967296");
  expect_error(HDR "\xC3\x02\x40\x01", HDR_LEN + 4,
               "t.astrace: byte offset 13: expected log2(align) below 64, "
               "got 64");
  expect_error(HDR "\xC7\x40", HDR_LEN + 2,
               "t.astrace: byte offset 12: expected a label of at most 63 "
               "bytes, got 64");
  expect_error(HDR "\xC7\x02"
                   "a\n",
               HDR_LEN + 4,
               "t.astrace: byte offset 14: expected a printable label byte, "
               "got 0x0a");
  static const char wrap[] =
      HDR "\x45\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x01\x45\x01";
  expect_error(wrap, sizeof wrap - 1,
               "t.astrace: byte offset 23: time overflows 2^64 ns (previous "
               "18446744073709551615 + delta 1)");
}

static void truncated_record_names_record_and_field_offsets(void **state) {
  (void)state;
  expect_error(HDR "\xC0\x02", HDR_LEN + 2,
               "t.astrace: truncated record at byte offset 11: expected size "
               "at byte offset 13, got end of file");
  expect_error(HDR "\xC5\xC7\x05"
                   "ab",
               HDR_LEN + 5,
               "t.astrace: truncated record at byte offset 12: expected label "
               "at byte offset 14, got end of file");
}

/* Record boundaries of the every-op fixture, from encoding its prefixes. */
static void truncation_at_every_cut_errors_cleanly(void **state) {
  (void)state;
  trace_event_t   evs[64];
  char            labels[64][TRACE_LABEL_MAX + 1];
  size_t          n = 0;
  trace_source_t *src =
      open_bytes(every_op_canonical, sizeof every_op_canonical - 1, "a.trace");
  as_err_t err = {0};
  while (trace_source_next(src, &evs[n], &err) == AS_OK) {
    if (evs[n].label != NULL) {
      snprintf(labels[n], sizeof labels[n], "%s", evs[n].label);
      evs[n].label = labels[n];
    }
    n++;
  }
  trace_meta_t meta = src->meta;
  trace_source_close(src);
  /* bound[k]: where record k starts; bound[n]: the end record, which the
   * trailer (count and checksum, 9 bytes for these counts) follows. */
  size_t bound[65];
  for (size_t k = 0; k <= n; k++) {
    buf_t b = encode(evs, k, &meta);
    bound[k] = b.len - 1 - 9;
    free(b.data);
  }
  buf_t  full = encode(evs, n, &meta);
  size_t header_len = bound[0];
  for (size_t cut = 0; cut < full.len; cut++) {
    size_t      got, lgot;
    char        why[200];
    as_status_t rc = read_bytes(full.data, cut, &got, &err);
    if (cut < header_len) {
      assert_int_equal(rc, AS_EFORMAT);
      continue;
    }
    /* Leniently, every cut after the header reads the whole records. */
    assert_int_equal(read_bytes_as(full.data, cut, true, &lgot, &err, why),
                     AS_DONE);
    assert_true(why[0] != '\0');
    size_t k = 0;
    while (k < n && bound[k + 1] <= cut)
      k++;
    assert_int_equal(lgot, k);
    rc = read_bytes(full.data, cut, &got, &err);
    if (cut > bound[n]) {
      assert_int_equal(rc, AS_EFORMAT); /* inside the trailer */
      assert_int_equal(got, n);
      assert_non_null(strstr(err.msg, "the trailer (event count and "
                                      "checksum) is incomplete"));
    } else if (cut == bound[k]) {
      /* On a record boundary: it used to read as a whole trace. */
      char want[160];
      snprintf(want, sizeof want,
               "t.astrace: byte offset %zu: end of file after %zu events, "
               "expected an end record: the trace was cut short",
               cut, k);
      assert_int_equal(rc, AS_EFORMAT);
      assert_int_equal(got, k);
      assert_memory_equal(err.msg, want, strlen(want));
    } else {
      char prefix[96];
      snprintf(prefix, sizeof prefix,
               "t.astrace: truncated record at byte offset %zu: ", bound[k]);
      assert_int_equal(rc, AS_EFORMAT);
      assert_int_equal(got, k);
      assert_memory_equal(err.msg, prefix, strlen(prefix));
    }
  }
  free(full.data);
}

/* ---- Volume -------------------------------------------------------------- */

/* A deterministic malloc/free/realloc mix over a few threads, with ids
 * recycled lowest-first as real writers do. */
typedef struct gen_s {
  uint64_t state, t_ns;
  uint64_t live[4096];
  size_t   nlive;
  uint64_t next_id;
} gen_t;

static uint64_t rnd(gen_t *g) {
  g->state = g->state * 6364136223846793005u + 1442695040888963407u;
  return g->state >> 33;
}

static void gen_event(gen_t *g, uint64_t i, trace_event_t *ev) {
  memset(ev, 0, sizeof *ev);
  g->t_ns += rnd(g) % 3 == 0 ? 0 : rnd(g) % 2000;
  ev->t_ns = g->t_ns;
  ev->thread = (uint32_t)(rnd(g) % 8 < 6 ? 0 : rnd(g) % 4);
  uint64_t r = rnd(g) % 100;
  if (i % 100000 == 0) {
    ev->op = TRACE_MARK;
    ev->label = i % 200000 == 0 ? "phase two" : "p";
  } else if (g->nlive > 0 && (r < 45 || g->nlive == 4096)) {
    size_t k = rnd(g) % g->nlive;
    ev->op = TRACE_FREE;
    ev->id = g->live[k];
    ev->domain = (uint8_t)(ev->id % 3);
    g->live[k] = g->live[--g->nlive];
  } else if (g->nlive > 0 && r < 50) {
    ev->op = TRACE_REALLOC;
    ev->id = g->live[rnd(g) % g->nlive];
    ev->size = rnd(g) % 100000;
  } else if (r < 52) {
    ev->op = TRACE_RSS;
    ev->size = rnd(g) << 12;
  } else {
    ev->op = r < 55 ? TRACE_MEMALIGN : r < 60 ? TRACE_CALLOC : TRACE_MALLOC;
    ev->id = g->next_id++;
    ev->domain = (uint8_t)(ev->id % 3);
    ev->size = r < 90 ? 8 + rnd(g) % 512 : rnd(g) % (1u << 20);
    if (ev->op == TRACE_MEMALIGN)
      ev->align = (uint64_t)1 << (rnd(g) % 13);
    g->live[g->nlive++] = ev->id;
  }
}

/* Writes the first n events of the generator (seed 42) to path. */
static void write_generated(const char *path, trace_format_t format,
                            uint64_t n) {
  trace_meta_t meta = {0};
  assert_int_equal(trace_meta_set(&meta, "generator", "test", NULL), AS_OK);
  trace_writer_t *w;
  as_err_t        err = {0};
  assert_int_equal(trace_writer_open(path, format, &meta, &w, &err), AS_OK);
  gen_t         g = {.state = 42};
  trace_event_t ev;
  for (uint64_t i = 0; i < n; i++) {
    gen_event(&g, i, &ev);
    assert_int_equal(trace_writer_write(w, &ev, &err), AS_OK);
  }
  assert_int_equal(trace_writer_close(w, &err), AS_OK);
}

/* Every event of path reads back exactly as the generator made it. */
static void expect_generated(const char *path, uint64_t n) {
  trace_source_t *src;
  as_err_t        err = {0};
  assert_int_equal(trace_open(path, &src, &err), AS_OK);
  gen_t         g = {.state = 42};
  trace_event_t ev, back;
  uint64_t      count = 0;
  as_status_t   rc;
  while ((rc = trace_source_next(src, &back, &err)) == AS_OK) {
    gen_event(&g, count, &ev);
    if (ev.op == TRACE_MARK)
      assert_string_equal(back.label, ev.label);
    else
      assert_null(back.label);
    assert_int_equal(back.t_ns, ev.t_ns);
    assert_int_equal(back.thread, ev.thread);
    assert_int_equal(back.op, ev.op);
    assert_int_equal(back.id, ev.id);
    assert_int_equal(back.size, ev.size);
    assert_int_equal(back.align, ev.align);
    assert_int_equal(back.domain, ev.domain);
    count++;
  }
  assert_int_equal(rc, AS_DONE);
  assert_int_equal(count, n);
  trace_source_close(src);
}

static void million_events_round_trip_through_files(void **state) {
  (void)state;
  enum { N = 1000000 };
  char bin_path[] = "/tmp/allocsim-bin-XXXXXX";
  char txt_path[] = "/tmp/allocsim-txt-XXXXXX";
  char bin2_path[] = "/tmp/allocsim-bi2-XXXXXX";
  close(mkstemp(bin_path));
  close(mkstemp(txt_path));
  close(mkstemp(bin2_path));
  write_generated(bin_path, TRACE_FORMAT_BINARY, N);
  expect_generated(bin_path, N);
  trace_source_t *src;
  trace_writer_t *w;
  trace_event_t   ev;
  as_err_t        err = {0};
  uint64_t        count;
  as_status_t     rc;

  /* binary -> text -> binary reproduces the file and the count. */
  assert_int_equal(trace_open(bin_path, &src, &err), AS_OK);
  assert_int_equal(
      trace_writer_open(txt_path, TRACE_FORMAT_TEXT, &src->meta, &w, &err),
      AS_OK);
  count = 0;
  while ((rc = trace_source_next(src, &ev, &err)) == AS_OK) {
    assert_int_equal(trace_writer_write(w, &ev, &err), AS_OK);
    count++;
  }
  assert_int_equal(rc, AS_DONE);
  assert_int_equal(count, N);
  assert_int_equal(trace_writer_close(w, &err), AS_OK);
  trace_source_close(src);
  assert_int_equal(trace_open(txt_path, &src, &err), AS_OK);
  assert_string_equal(trace_meta_get(&src->meta, "generator"), "test");
  assert_int_equal(
      trace_writer_open(bin2_path, TRACE_FORMAT_BINARY, &src->meta, &w, &err),
      AS_OK);
  count = 0;
  while ((rc = trace_source_next(src, &ev, &err)) == AS_OK) {
    assert_int_equal(trace_writer_write(w, &ev, &err), AS_OK);
    count++;
  }
  assert_int_equal(rc, AS_DONE);
  assert_int_equal(count, N);
  assert_int_equal(trace_writer_close(w, &err), AS_OK);
  trace_source_close(src);

  FILE *a = fopen(bin_path, "rb"), *b = fopen(bin2_path, "rb");
  assert_non_null(a);
  assert_non_null(b);
  int ca, cb;
  do {
    ca = getc(a);
    cb = getc(b);
    assert_int_equal(ca, cb);
  } while (ca != EOF);
  fclose(a);
  fclose(b);
  unlink(bin_path);
  unlink(txt_path);
  unlink(bin2_path);
}

/* Writes n bytes of data to path. */
static void put_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

/* path compressed by libzstd into zst_path: the whole frame, or its first
 * half. */
static void zstd_file(const char *path, const char *zst_path, bool half) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  size_t n = (size_t)ftell(f);
  rewind(f);
  char *raw = malloc(n), *z = malloc(ZSTD_compressBound(n));
  assert_int_equal(fread(raw, 1, n, f), n);
  fclose(f);
  size_t zn = ZSTD_compress(z, ZSTD_compressBound(n), raw, n, 3);
  assert_false(ZSTD_isError(zn));
  put_file(zst_path, z, half ? zn / 2 : zn);
  free(raw);
  free(z);
}

/* A trace compressed with zstd or gzip reads as the trace itself, in either
 * format; one cut short is an error naming the file, never a shorter
 * trace. */
static void compressed_traces_read_as_written(void **state) {
  (void)state;
  enum { N = 300000 };
  char bin[] = "/tmp/allocsim-cbin-XXXXXX", txt[] = "/tmp/allocsim-ctxt-XXXXXX";
  char zst[64], gz[64], cmd[256];
  close(mkstemp(bin));
  close(mkstemp(txt));
  write_generated(bin, TRACE_FORMAT_BINARY, N);
  write_generated(txt, TRACE_FORMAT_TEXT, N);
  snprintf(zst, sizeof zst, "%s.zst", bin);
  zstd_file(bin, zst, false);
  expect_generated(zst, N);
  snprintf(gz, sizeof gz, "%s.gz", txt);
  snprintf(cmd, sizeof cmd, "gzip -c %s > %s", txt, gz);
  assert_int_equal(system(cmd), 0);
  expect_generated(gz, N);

  zstd_file(bin, zst, true);
  trace_source_t *src;
  trace_event_t   ev;
  as_err_t        err = {0};
  as_status_t     rc;
  assert_int_equal(trace_open(zst, &src, &err), AS_OK);
  while ((rc = trace_source_next(src, &ev, &err)) == AS_OK)
    ;
  assert_int_equal(rc, AS_EIO);
  char want[128];
  snprintf(want, sizeof want, "%s: read error at byte offset ", zst);
  assert_memory_equal(err.msg, want, strlen(want));
  trace_source_close(src);
  unlink(bin);
  unlink(txt);
  unlink(zst);
  unlink(gz);
}

/* An error deep in a big file goes through the unchecked decoder; its
 * offset must be as exact as at the end of a file. */
static void errors_past_the_first_window_name_the_right_offset(void **state) {
  (void)state;
  enum { N = 200000 };
  trace_event_t *evs = calloc(N, sizeof *evs);
  assert_non_null(evs);
  gen_t g = {.state = 7};
  for (size_t i = 0; i < N; i++) {
    gen_event(&g, i, &evs[i]);
  }
  buf_t b = encode(evs, N, NULL);
  free(evs);
  size_t bad = b.len - 1 - 11; /* overwrite the end record and trailer
                                   (count 200000: 3 bytes; checksum 8) */
  b.data = realloc(b.data, b.len + 300);
  assert_non_null(b.data);
  memset(b.data + bad, 0x45, 300); /* thread_start, same thread */
  b.data[bad] = 0x3F;
  b.len = bad + 300;
  assert_true(bad > 256 * 1024);
  char msg[160];
  snprintf(msg, sizeof msg,
           "t.astrace: byte offset %zu: unknown op byte 0x3f, expected an op "
           "0-14 with domain bits only on ops 0-4 and 14 (or 1 on op 10), "
           "0x1f, 0x2f or 0x0f",
           bad);
  size_t   n;
  as_err_t err;
  assert_int_equal(read_bytes(b.data, b.len, &n, &err), AS_EFORMAT);
  assert_int_equal(n, N);
  assert_string_equal(err.msg, msg);
  free(b.data);
}

/* Values at every varint length boundary, decoded once with plenty of
 * bytes after them (the unchecked fast path) and once at the end of the
 * file (the checked path): both must give back exactly what was written. */
static void boundary_values_decode_identically_on_both_paths(void **state) {
  (void)state;
  /* Varint boundaries (version 2) and byte-length ones (version 3). */
  static const uint64_t vals[] = {0,
                                  1,
                                  127,
                                  128,
                                  255,
                                  256,
                                  16383,
                                  16384,
                                  65535,
                                  65536,
                                  2097151,
                                  2097152,
                                  16777215,
                                  16777216,
                                  268435455,
                                  268435456,
                                  UINT32_MAX,
                                  (uint64_t)1 << 32,
                                  ((uint64_t)1 << 40) - 1,
                                  (uint64_t)1 << 40,
                                  ((uint64_t)1 << 48) - 1,
                                  (uint64_t)1 << 48,
                                  ((uint64_t)1 << 56) - 1,
                                  (uint64_t)1 << 56,
                                  UINT64_MAX / 2,
                                  UINT64_MAX};
  enum { NV = sizeof vals / sizeof vals[0], NE = NV * 6, PAD = 100 };
  trace_event_t evs[NE + PAD];
  size_t        n = 0;
  uint64_t      t = 0;
  for (size_t i = 0; i < NV; i++) {
    uint64_t v = vals[i];
    uint32_t th = (uint32_t)(v > UINT32_MAX ? i : v);
    evs[n++] = (trace_event_t){
        .t_ns = t, .thread = th, .op = TRACE_MALLOC, .id = v, .size = v};
    evs[n++] = (trace_event_t){.t_ns = t,
                               .thread = th,
                               .op = TRACE_FREE,
                               .id = v,
                               .domain = TRACE_DOMAIN_MEM};
    evs[n++] = (trace_event_t){.t_ns = t,
                               .op = TRACE_MEMALIGN,
                               .id = 0,
                               .align = (uint64_t)1 << (i % 64),
                               .size = v};
    evs[n++] =
        (trace_event_t){.t_ns = t, .thread = 1, .op = TRACE_RSS, .size = v};
    evs[n++] = (trace_event_t){
        .t_ns = t, .op = TRACE_REALLOC, .id = UINT64_MAX - v, .size = v};
    t += v < UINT64_MAX / 64 ? v : 1;
    evs[n++] =
        (trace_event_t){.t_ns = t, .thread = th, .op = TRACE_IDLE, .size = v};
  }
  for (size_t i = 0; i < PAD; i++)
    evs[n++] = (trace_event_t){.t_ns = t, .op = TRACE_THREAD_START};
  for (int run = 0; run < 4; run++) {
    /* tail 0: edge records first, padding after; tail 1: the reverse;
     * versions 2 and 3. */
    int                  tail = run & 1;
    unsigned             version = run < 2 ? 2 : 3;
    const trace_event_t *order[NE + PAD];
    for (size_t i = 0; i < NE + PAD; i++)
      order[i] = tail ? &evs[(i + NE) % (NE + PAD)] : &evs[i];
    trace_event_t seq[NE + PAD];
    uint64_t      tt = 0;
    for (size_t i = 0; i < NE + PAD; i++) {
      seq[i] = *order[i];
      if (seq[i].t_ns < tt)
        seq[i].t_ns = tt; /* keep time non-decreasing after reordering */
      tt = seq[i].t_ns;
    }
    buf_t           b = encode_version(seq, NE + PAD, NULL, version);
    trace_source_t *src = open_bytes(b.data, b.len, "edge.astrace");
    as_err_t        err = {0};
    trace_event_t   ev;
    for (size_t i = 0; i < NE + PAD; i++) {
      assert_int_equal(trace_source_next(src, &ev, &err), AS_OK);
      assert_int_equal(ev.t_ns, seq[i].t_ns);
      assert_int_equal(ev.thread, seq[i].thread);
      assert_int_equal(ev.op, seq[i].op);
      assert_int_equal(ev.domain, seq[i].domain);
      assert_int_equal(ev.id, seq[i].op <= TRACE_FREE ? seq[i].id : 0);
      assert_int_equal(ev.size, seq[i].op == TRACE_FREE ||
                                        seq[i].op == TRACE_THREAD_START
                                    ? 0
                                    : seq[i].size);
      assert_int_equal(ev.align, seq[i].align);
    }
    assert_int_equal(trace_source_next(src, &ev, &err), AS_DONE);
    trace_source_close(src);
    free(b.data);
  }
}

/* ---- Version 3: blocks -------------------------------------------------- */

/* 8 magic bytes, version 3, no provenance: the first block at offset 11. */
#define HDR3 "ASTRACE\0\x03\x00\x00"

static void version3_writer_emits_the_documented_bytes(void **state) {
  (void)state;
  const trace_event_t evs[] = {
      {.t_ns = 0, .op = TRACE_MALLOC, .id = 1, .size = 64},
      {.t_ns = 10, .op = TRACE_FREE, .id = 1, .domain = TRACE_DOMAIN_OBJ},
      {.t_ns = 300, .thread = 3, .op = TRACE_MARK, .label = "p"},
  };
  buf_t                b = encode_version(evs, 3, NULL, 3);
  static const uint8_t want[] = {
      'A',  'S',  'T',  'R',  'A',  'C', 'E', 0, 3, 0, 0, /* header, no pairs */
      3,    3,    3,    6, /* 3 events, 3 shapes, 3 data bytes, 6 rare bytes */
      0x00, 0x12,    /* malloc raw, same thread, no dt, 1-byte id and size */
      0x4B, 0x00,    /* free obj, same thread, 1-byte dt, id +0 */
      0x0C, 0x00,    /* rare */
      0,    1,    2, /* ops: each event's shape */
      0x02, 0x40,    /* malloc: zigzag(+1), 64 */
      0x0A,          /* free: dt 10 */
      0x07, 0xA2, 0x02, 0x03, 0x01, 'p', /* mark: dt 290, thread 3, "p" */
      0x00,                              /* end byte */
      0x03};                             /* trailer: 3 events, checksum */
  assert_int_equal(b.len, sizeof want + 8);
  assert_memory_equal(b.data, want, sizeof want);
  uint64_t sum = doc_checksum_v3(want + 11, sizeof want - 11 - 2);
  for (int k = 0; k < 8; k++)
    assert_int_equal((uint8_t)b.data[sizeof want + (size_t)k],
                     (uint8_t)(sum >> (8 * k)));
  free(b.data);
}

/* got has want's fields (labels compared as strings). */
static void assert_same_event(const trace_event_t *got,
                              const trace_event_t *want) {
  if (want->label != NULL)
    assert_string_equal(got->label, want->label);
  else
    assert_null(got->label);
  assert_int_equal(got->t_ns, want->t_ns);
  assert_int_equal(got->thread, want->thread);
  assert_int_equal(got->op, want->op);
  assert_int_equal(got->id, want->id);
  assert_int_equal(got->size, want->size);
  assert_int_equal(got->align, want->align);
  assert_int_equal(got->domain, want->domain);
}

/* Events of the test generator, as next() and as batches give them. */
static void expect_gen_events(const trace_event_t *got, size_t n,
                              uint64_t first, gen_t *g) {
  trace_event_t ev;
  for (size_t i = 0; i < n; i++) {
    gen_event(g, first + i, &ev);
    assert_same_event(&got[i], &ev);
  }
}

/* Batches and single events, alternating, read the same events; a batch
 * after some single events hands out the rest of its block. */
static void version3_batches_and_single_events_agree(void **state) {
  (void)state;
  enum { N = 250000 };
  trace_event_t *evs = calloc(N, sizeof *evs);
  assert_non_null(evs);
  gen_t g = {.state = 11};
  for (size_t i = 0; i < N; i++)
    gen_event(&g, i, &evs[i]);
  buf_t b = encode_version(evs, N, NULL, 3);
  free(evs);
  trace_source_t *src = open_bytes(b.data, b.len, "b.astrace");
  assert_non_null(src->methods->batch);
  gen_t         check = {.state = 11};
  trace_event_t one, *batch;
  size_t        got, seen = 0, batches = 0;
  as_err_t      err = {0};
  as_status_t   rc = AS_OK;
  while (rc == AS_OK) {
    for (int k = 0; k < 3 && (rc = trace_source_next(src, &one, &err)) == AS_OK;
         k++) {
      expect_gen_events(&one, 1, seen, &check);
      seen++;
    }
    if (rc == AS_OK &&
        (rc = trace_source_batch(src, &one, &batch, &got, &err)) == AS_OK) {
      assert_true(got >= 1 && got <= 1024);
      expect_gen_events(batch, got, seen, &check);
      seen += got;
      batches++;
    }
  }
  assert_int_equal(rc, AS_DONE);
  assert_int_equal(seen, N);
  assert_true(batches >= N / 1024);
  trace_source_close(src);
  assert_true(b.len < (size_t)N * 6); /* smaller than version 2's varints */
  free(b.data);
}

/* More shapes than a block's table holds: the writer starts a new block,
 * and every event reads back. */
static void version3_more_than_256_shapes_split_the_block(void **state) {
  (void)state;
  enum { N = 4 * 3 * 8 * 8 };
  static const uint64_t len_vals[8] = {0,
                                       1,
                                       300,
                                       70000,
                                       1u << 25,
                                       (uint64_t)1 << 33,
                                       (uint64_t)1 << 41,
                                       (uint64_t)1 << 60};
  static const uint8_t  ops[4] = {TRACE_MALLOC, TRACE_CALLOC, TRACE_REALLOC,
                                  TRACE_FREE};
  trace_event_t         evs[N];
  uint64_t              t = 0;
  for (size_t i = 0; i < N; i++) {
    t += len_vals[i % 8] >> 8; /* time deltas of every length */
    evs[i] = (trace_event_t){
        .t_ns = t,
        .op = ops[i / 192],
        .domain = (uint8_t)(i / 64 % 3),
        .id = i,
        .size = ops[i / 192] == TRACE_FREE ? 0 : len_vals[i / 8 % 8]};
  }
  buf_t           b = encode_version(evs, N, NULL, 3);
  trace_source_t *src = open_bytes(b.data, b.len, "s.astrace");
  trace_event_t   ev;
  as_err_t        err = {0};
  for (size_t i = 0; i < N; i++) {
    assert_int_equal(trace_source_next(src, &ev, &err), AS_OK);
    assert_same_event(&ev, &evs[i]);
  }
  assert_int_equal(trace_source_next(src, &ev, &err), AS_DONE);
  trace_source_close(src);
  assert_true(b.data[11] != (char)0x80); /* the first block is not whole */
  free(b.data);
}

/* Cut anywhere, a version 3 file is an error; leniently, it reads the
 * events of its whole blocks. */
static void version3_cuts_read_to_the_last_whole_block(void **state) {
  (void)state;
  enum { N = 3000 };
  trace_event_t *evs = calloc(N, sizeof *evs);
  assert_non_null(evs);
  gen_t g = {.state = 5};
  for (size_t i = 0; i < N; i++)
    gen_event(&g, i, &evs[i]);
  evs[0].op = TRACE_FREE; /* no mark: blocks of 1,024 events */
  evs[0].label = NULL;
  evs[0].id = 0;
  buf_t  full = encode_version(evs, N, NULL, 3);
  size_t ends[3]; /* where the blocks end: before the end byte */
  for (size_t k = 1; k <= 2; k++) {
    buf_t part = encode_version(evs, 1024 * k, NULL, 3);
    ends[k] = part.len - 1 - 1 - 8 - 1; /* end byte, count, sum; 2 bytes of
                                           count for 1024 and 2048 */
    free(part.data);
  }
  ends[0] = 11;
  for (size_t cut = 11; cut < full.len; cut += 7) {
    size_t   n;
    as_err_t err;
    char     why[200];
    assert_int_equal(read_bytes(full.data, cut, &n, &err), AS_EFORMAT);
    assert_int_equal(read_bytes_as(full.data, cut, true, &n, &err, why),
                     AS_DONE);
    size_t whole = cut >= ends[2] ? 2048 : cut >= ends[1] ? 1024 : 0;
    if (cut + 12 > full.len)
      whole = N; /* only the end byte or trailer is cut */
    assert_int_equal(n, whole);
    assert_true(why[0] != '\0');
  }
  free(full.data);
  free(evs);
}

/* The reader refills its window (256 KiB) only when the next block is not
 * whole in it: cuts far past the first window still read leniently to the
 * last whole block, and are errors otherwise. */
static void version3_cuts_past_the_first_window(void **state) {
  (void)state;
  enum { N = 80 * 1024, FIRST = 70 };
  trace_event_t *evs = calloc(N, sizeof *evs);
  assert_non_null(evs);
  gen_t g = {.state = 9};
  for (size_t i = 0; i < N; i++) {
    gen_event(&g, i, &evs[i]);
    if (evs[i].op == TRACE_MARK) { /* no mark: blocks of 1,024 events */
      evs[i].op = TRACE_FREE;
      evs[i].label = NULL;
      evs[i].id = 0;
    }
  }
  buf_t full = encode_version(evs, N, NULL, 3);
  for (size_t k = FIRST; k < FIRST + 2; k++) {
    buf_t  part = encode_version(evs, 1024 * k, NULL, 3);
    size_t end = part.len - 1 - 3 - 8; /* end byte, 3-byte count, sum */
    free(part.data);
    assert_true(end > 256 * 1024);
    const size_t cuts[][2] = {
        {end - 1, 1024 * (k - 1)}, {end, 1024 * k}, {end + 1, 1024 * k}};
    for (size_t j = 0; j < 3; j++) {
      size_t   n;
      as_err_t err;
      char     why[200];
      assert_int_equal(read_bytes(full.data, cuts[j][0], &n, &err), AS_EFORMAT);
      assert_int_equal(
          read_bytes_as(full.data, cuts[j][0], true, &n, &err, why), AS_DONE);
      assert_int_equal(n, cuts[j][1]);
    }
  }
  free(full.data);
  free(evs);
}

/* Appends a version 3 block of n mallocs whose fields take w bytes (time
 * delta, id and size of 1 byte, size 2 bytes when w is 4), its counts
 * written as 3-byte varints (the reader takes them), so that it takes
 * exactly 14 + n * (1 + w) bytes. */
static size_t put_malloc_block(uint8_t *at, unsigned n, unsigned w) {
  const unsigned counts[4] = {n, 1, n * w, 0};
  uint8_t       *p = at;
  for (unsigned k = 0; k < 4; k++) {
    *p++ = (uint8_t)(counts[k] | 0x80);
    *p++ = (uint8_t)((counts[k] >> 7) | 0x80);
    *p++ = (uint8_t)(counts[k] >> 14);
  }
  unsigned shape = 1u << 6 | 1u << 9 | (w - 2) << 12;
  *p++ = (uint8_t)shape;
  *p++ = (uint8_t)(shape >> 8);
  memset(p, 0, n); /* ops: shape 0 */
  p += n;
  for (unsigned i = 0; i < n; i++, p += w) {
    memset(p, 0, w);
    p[0] = 1, p[1] = 2, p[2] = 16; /* 1 ns later, the next id, 16 bytes */
  }
  return (size_t)(p - at);
}

/* A block whose events claim far more data than its column holds, ending
 * exactly where the reader's first 256 KiB window ends: refused at its
 * first event, reading nothing outside the window's buffer (valgrind or
 * ASan would say so). */
static void version3_lying_block_at_the_window_end(void **state) {
  (void)state;
  enum { WINDOW = 256 * 1024, LIE = 12 + 2 + 1024 };
  uint8_t *b = calloc(1, WINDOW + 14 + 1024 * 4); /* + the last block's */
  assert_non_null(b);
  memcpy(b, HDR3, 11);
  size_t len = 11;
  while (WINDOW - LIE - len > 14 + 4000 + 60)
    len += put_malloc_block(b + len, 1000, 3);
  size_t rest = WINDOW - LIE - len - 2 * 14; /* = 4a + 5b, a, b >= 1 */
  size_t fives = 1;
  while ((rest - 5 * fives) % 4 != 0)
    fives++;
  len += put_malloc_block(b + len, (unsigned)((rest - 5 * fives) / 4), 3);
  len += put_malloc_block(b + len, (unsigned)fives, 4);
  /* 1,024 events of 26 bytes each (6-byte time delta, 4-byte thread,
   * 8-byte id and size) and a data column of 0 bytes. */
  size_t   at = len;
  unsigned lie = 3u << 4 | 6u << 6 | 7u << 9 | 7u << 12;
  put_malloc_block(b + len, 1024, 3);          /* its data is cut below */
  b[at + 6] = b[at + 7] = 0x80, b[at + 8] = 0; /* data column: 0 bytes */
  b[at + 12] = (uint8_t)lie, b[at + 13] = (uint8_t)(lie >> 8);
  len = at + LIE;
  assert_int_equal(len, WINDOW);
  char msg[200];
  snprintf(msg, sizeof msg,
           "t.astrace: byte offset %d: event 0 of the block at byte offset "
           "%zu runs past the block's data column",
           WINDOW, at);
  expect_error(b, WINDOW + 100, msg);
  free(b);
}

/* Each kind of bad block is refused with its offset. */
static void version3_bad_blocks_name_their_offset(void **state) {
  (void)state;
  static const struct {
    const char *bytes;
    size_t      len;
    const char *msg;
  } cases[] = {
#define CASE(s, m) {HDR3 s, sizeof(HDR3 s) - 1, m}
      CASE("\x01\x01\x00\x00\x0F\x00\x00",
           "t.astrace: byte offset 15: expected a shape (op, domain 0-2, "
           "field lengths; free without a size; or 0x000c), got 0x000f"),
      CASE("\x01\x01\x00\x00\x03\x10\x00",
           "t.astrace: byte offset 15: expected a shape (op, domain 0-2, "
           "field lengths; free without a size; or 0x000c), got 0x1003"),
      CASE("\x01\x01\x00\x00\x00\x00\x01",
           "t.astrace: byte offset 17: an event names shape 1 of the "
           "block's 1"),
      CASE("\x01\x01\x00\x00\x00\x10\x00",
           "t.astrace: byte offset 18: event 0 of the block at byte offset "
           "11 runs past the block's data column"),
      CASE("\x01\x01\x01\x00\x00\x00\x00\x07",
           "t.astrace: byte offset 11: the block's events use 0 of its 1 "
           "data bytes and 0 of its 0 rare bytes"),
      CASE("\x02\x01\x00\x04\x0C\x00\x00\x00\x87\x01\x01p\x87",
           "t.astrace: byte offset 19: a mark must be the last event of its "
           "block (event 1 of 2)"),
      CASE("\x01\x01\x00\x01\x0C\x00\x00\x0F",
           "t.astrace: byte offset 18: unknown op byte 0x0f, expected an op "
           "0-14 with domain bits only on ops 0-4 and 14 (or 1 on op 10), "
           "0x1f, 0x2f or 0x0f"),
      CASE("\x01\x01\x00\x01\x0C\x00\x00\x07",
           "t.astrace: byte offset 18: event 0 of the block at byte offset "
           "11 runs past the block's rare column"),
      CASE("\x81\x08\x01\x00\x00",
           "t.astrace: byte offset 11: expected a block's event count 1 to "
           "1024"),
      CASE("\x01\x81\x02\x00\x00",
           "t.astrace: byte offset 12: expected a block's shape count 1 to "
           "256"),
      CASE("\x01\x01\x81\x80\x08\x00",
           "t.astrace: byte offset 13: expected a block's data column length "
           "0 to 131072"),
      CASE("\x01\x01\x80\x80\x08\x00",
           "t.astrace: byte offset 11: expected a block of at most 131072 "
           "bytes, got 131075"),
      CASE("\x02\x01\x10\x00\xC0\x01\x00\x00"
           "\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x01\x00\x00\x00\x00\x00\x00\x00",
           "t.astrace: byte offset 27: event 1 of the block at byte offset "
           "11: time overflows 2^64 ns"),
      /* The decoder checks a run of common events as a whole: these
       * name the event all the same.  A rare event takes the time to
       * 2^64 - 3 ns, then 1-byte deltas of 1 ns overflow at event 3. */
      CASE("\x04\x02\x03\x0C\x0C\x00\x40\x00\x00\x01\x01\x01"
           "\x01\x01\x01\x4A\xFD\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x01\x01",
           "t.astrace: byte offset 25: event 3 of the block at byte offset "
           "11: time overflows 2^64 ns"),
      /* Event 2 runs past a 2-byte data column; the bad rare event after
       * it is not reached. */
      CASE("\x04\x02\x02\x01\x0C\x00\x40\x00\x01\x01\x01\x00"
           "\x01\x01\x0F",
           "t.astrace: byte offset 25: event 2 of the block at byte offset "
           "11 runs past the block's data column"),
#undef CASE
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    expect_error(cases[i].bytes, cases[i].len, cases[i].msg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(writer_emits_the_documented_bytes),
      cmocka_unit_test(text_to_binary_to_text_is_byte_identical),
      cmocka_unit_test(provenance_survives_the_binary_header),
      cmocka_unit_test(end_of_file_without_end_record_is_a_cut),
      cmocka_unit_test(the_trailer_must_agree_with_the_records),
      cmocka_unit_test(bad_magic_is_not_an_allocsim_binary_trace),
      cmocka_unit_test(unsupported_version_is_reported_at_offset_8),
      cmocka_unit_test(malformed_headers_name_their_offset),
      cmocka_unit_test(unknown_op_bytes_are_rejected),
      cmocka_unit_test(new_op_fields_out_of_range_are_rejected),
      cmocka_unit_test(varint_overflow_names_the_field),
      cmocka_unit_test(out_of_range_fields_are_rejected),
      cmocka_unit_test(truncated_record_names_record_and_field_offsets),
      cmocka_unit_test(truncation_at_every_cut_errors_cleanly),
      cmocka_unit_test(boundary_values_decode_identically_on_both_paths),
      cmocka_unit_test(million_events_round_trip_through_files),
      cmocka_unit_test(compressed_traces_read_as_written),
      cmocka_unit_test(errors_past_the_first_window_name_the_right_offset),
      cmocka_unit_test(version3_writer_emits_the_documented_bytes),
      cmocka_unit_test(version3_batches_and_single_events_agree),
      cmocka_unit_test(version3_more_than_256_shapes_split_the_block),
      cmocka_unit_test(version3_cuts_read_to_the_last_whole_block),
      cmocka_unit_test(version3_cuts_past_the_first_window),
      cmocka_unit_test(version3_lying_block_at_the_window_end),
      cmocka_unit_test(version3_bad_blocks_name_their_offset),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
