/* tests/unit/test_trace_text.c -- the text trace format: values, canonical
 * writing, provenance, and one exact message per kind of bad input.
 *
 * Inputs are fed through fmemopen and outputs captured with open_memstream,
 * so the tests touch no files except the trace_open detection tests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "traces/trace_io.h"

#define H "allocsim-trace 1\n"

/* ---- Helpers ------------------------------------------------------------ */

/* Opens text (a C string) as a stream named "t.trace", detecting the
 * format the way trace_open does. */
static as_status_t open_text(const char *text, trace_source_t **src,
                             as_err_t *err) {
  size_t len = strlen(text);
  /* fmemopen of a zero-length buffer fails with EINVAL on glibc. */
  FILE *f =
      len > 0 ? fmemopen((void *)text, len, "r") : fopen("/dev/null", "r");
  assert_non_null(f);
  return trace_open_stream(f, "t.trace", src, err);
}

/* Reads text to its end; returns the first non-OK status (AS_DONE when all
 * events parsed) and the number of events read before it. */
static as_status_t read_status(const char *text, size_t *n, as_err_t *err) {
  trace_source_t *src;
  *n = 0;
  memset(err, 0, sizeof *err);
  as_status_t rc = open_text(text, &src, err);
  if (rc != AS_OK) {
    assert_null(src);
    return rc;
  }
  trace_event_t ev;
  while ((rc = trace_source_next(src, &ev, err)) == AS_OK)
    (*n)++;
  trace_source_close(src);
  return rc;
}

/* Asserts that text fails with AS_EFORMAT and exactly message msg. */
static void expect_error(const char *text, const char *msg) {
  size_t   n;
  as_err_t err;
  assert_int_equal(read_status(text, &n, &err), AS_EFORMAT);
  assert_int_equal(err.code, AS_EFORMAT);
  assert_string_equal(err.msg, msg);
}

/* Parses text and writes it back as canonical text; returns a malloc'd
 * string. */
static char *canonical(const char *text) {
  trace_source_t *src;
  as_err_t        err = {0};
  assert_int_equal(open_text(text, &src, &err), AS_OK);
  char           *out = NULL;
  size_t          out_len = 0;
  FILE           *mem = open_memstream(&out, &out_len);
  trace_writer_t *w;
  assert_int_equal(trace_writer_open_stream(mem, "out.trace", TRACE_FORMAT_TEXT,
                                            &src->meta, &w, &err),
                   AS_OK);
  trace_event_t ev;
  as_status_t   rc;
  while ((rc = trace_source_next(src, &ev, &err)) == AS_OK)
    assert_int_equal(trace_writer_write(w, &ev, &err), AS_OK);
  assert_int_equal(rc, AS_DONE);
  assert_int_equal(trace_writer_close(w, &err), AS_OK);
  trace_source_close(src);
  return out;
}

/* ---- A file with every op, domain and label form ------------------------ */

static const char every_op[] =
    "allocsim-trace 1   # the header may carry a comment\n"
    "#@ machine=x86_64 debian 12\n"
    "# a comment between provenance lines\n"
    "  #@ page_size = 4096   \r\n"
    "\n"
    "0      0 mark start\n"
    "10     0 malloc 1 64                   # trailing comment\n"
    "20     0 calloc 2 4096 obj\n"
    "25     0 memalign 3 64 4096 mem\n"
    "30     0 realloc 1 128\n"
    "40     0 free 1\n"
    "1ms    1 thread_start\n"
    "2ms    0 idle 500ms\n"
    "3ms    0 trim 0\n"
    "3ms    0 rss 21MiB\n"
    "3ms    0 rss 22MiB 3MiB\n"
    "4ms    0 mark \"after free\"\n"
    "2.5s   1 thread_exit\n"
    "2.5s\t0\tmalloc 4 1.5K raw\n"
    "2500000us 0 free 2 obj\n"
    "2.5s 0 mark \"q\\\"uo\\\\te#\"\n"
    "3s 0 mark a#comment right after a bare label\n"
    "3s 7 mark \"\"\n"
    "3s 4294967295 memalign 18446744073709551615 4K 1G obj\n"
    "3s 0 realloc 5 2GiB mem\n"
    "3s 0 purge decay\n"
    "3s 0 purge all 3 # arena 3\n"
    "3s 2 option mmap_threshold 64K\n"
    "3s 0 option dirty_decay_ms -1\n"
    "3s 0 touch 5 4K 8K\n"
    "3s 0 free 3 mem\n";

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
    "3000000000 0 purge all 3\n"
    "3000000000 2 option mmap_threshold 65536\n"
    "3000000000 0 option dirty_decay_ms -1\n"
    "3000000000 0 touch 5 4096 8192\n"
    "3000000000 0 free 3 mem\n";

static void every_field_parses_to_its_exact_value(void **state) {
  (void)state;
  trace_source_t *src;
  as_err_t        err = {0};
  assert_int_equal(open_text(every_op, &src, &err), AS_OK);
  trace_event_t ev;
  struct {
    uint64_t    t, id, size, align;
    uint32_t    thread;
    trace_op_t  op;
    int         domain;
    const char *label;
  } want[] = {
      {0, 0, 0, 0, 0, TRACE_MARK, 0, "start"},
      {10, 1, 64, 0, 0, TRACE_MALLOC, 0, NULL},
      {20, 2, 4096, 0, 0, TRACE_CALLOC, TRACE_DOMAIN_OBJ, NULL},
      {25, 3, 4096, 64, 0, TRACE_MEMALIGN, TRACE_DOMAIN_MEM, NULL},
      {30, 1, 128, 0, 0, TRACE_REALLOC, 0, NULL},
      {40, 1, 0, 0, 0, TRACE_FREE, 0, NULL},
      {1000000, 0, 0, 0, 1, TRACE_THREAD_START, 0, NULL},
      {2000000, 0, 500000000, 0, 0, TRACE_IDLE, 0, NULL},
      {3000000, 0, 0, 0, 0, TRACE_TRIM, 0, NULL},
      {3000000, 0, 22020096, 0, 0, TRACE_RSS, 0, NULL},
      {3000000, 0, 23068672, 0, 0, TRACE_RSS, 0, NULL}, /* other 3 MiB */
      {4000000, 0, 0, 0, 0, TRACE_MARK, 0, "after free"},
      {2500000000u, 0, 0, 0, 1, TRACE_THREAD_EXIT, 0, NULL},
      {2500000000u, 4, 1536, 0, 0, TRACE_MALLOC, 0, NULL},
      {2500000000u, 2, 0, 0, 0, TRACE_FREE, TRACE_DOMAIN_OBJ, NULL},
      {2500000000u, 0, 0, 0, 0, TRACE_MARK, 0, "q\"uo\\te#"},
      {3000000000u, 0, 0, 0, 0, TRACE_MARK, 0, "a"},
      {3000000000u, 0, 0, 0, 7, TRACE_MARK, 0, ""},
      {3000000000u, UINT64_MAX, 1073741824, 4096, UINT32_MAX, TRACE_MEMALIGN,
       TRACE_DOMAIN_OBJ, NULL},
      {3000000000u, 5, 2147483648u, 0, 0, TRACE_REALLOC, TRACE_DOMAIN_MEM,
       NULL},
      {3000000000u, TRACE_ALL_ARENAS, TRACE_PURGE_DECAY, 0, 0, TRACE_PURGE, 0,
       NULL},
      {3000000000u, 3, TRACE_PURGE_ALL, 0, 0, TRACE_PURGE, 0, NULL},
      {3000000000u, 0, 65536, 0, 2, TRACE_OPTION, 0, "mmap_threshold"},
      {3000000000u, 0, (uint64_t)-1, 0, 0, TRACE_OPTION, 0, "dirty_decay_ms"},
      {3000000000u, 5, 8192, 0, 0, TRACE_TOUCH, 0, NULL}, /* offset 4096 */
      {3000000000u, 3, 0, 0, 0, TRACE_FREE, TRACE_DOMAIN_MEM, NULL},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    assert_int_equal(trace_source_next(src, &ev, &err), AS_OK);
    assert_int_equal(ev.t_ns, want[i].t);
    assert_int_equal(ev.thread, want[i].thread);
    assert_int_equal(ev.op, want[i].op);
    assert_int_equal(ev.id, want[i].id);
    assert_int_equal(ev.size, want[i].size);
    assert_int_equal(ev.align, want[i].align);
    uint64_t offset = want[i].op == TRACE_TOUCH  ? 4096
                      : want[i].size == 23068672 ? 3145728
                                                 : 0;
    assert_int_equal(ev.offset, offset);
    assert_int_equal(ev.domain, want[i].domain);
    if (want[i].label == NULL)
      assert_null(ev.label);
    else
      assert_string_equal(ev.label, want[i].label);
  }
  assert_int_equal(trace_source_next(src, &ev, &err), AS_DONE);
  assert_int_equal(trace_source_next(src, &ev, &err), AS_DONE);
  trace_source_close(src);
}

static void provenance_lands_in_meta_trimmed_and_in_order(void **state) {
  (void)state;
  trace_source_t *src;
  as_err_t        err = {0};
  assert_int_equal(open_text(every_op, &src, &err), AS_OK);
  assert_int_equal(src->meta.count, 2);
  assert_string_equal(src->meta.key[0], "machine");
  assert_string_equal(trace_meta_get(&src->meta, "machine"),
                      "x86_64 debian 12");
  assert_string_equal(trace_meta_get(&src->meta, "page_size"), "4096");
  assert_null(trace_meta_get(&src->meta, "kernel"));
  assert_string_equal(src->name, "t.trace");
  trace_source_close(src);
}

static void writer_emits_the_canonical_form(void **state) {
  (void)state;
  char *out = canonical(every_op);
  assert_string_equal(out, every_op_canonical);
  free(out);
}

static void canonical_text_rewrites_byte_identically(void **state) {
  (void)state;
  char *out = canonical(every_op_canonical);
  assert_string_equal(out, every_op_canonical);
  free(out);
}

/* What the reader takes in a provenance value the writer writes back (the
 * text fuzzer found DEL refused by the writer after the reader took it). */
static void an_accepted_provenance_value_is_written_back(void **state) {
  (void)state;
  const char text[] = "allocsim-trace 1\n#@ workload=a\x7f b\xe9\n"
                      "0 0 malloc 1 8\n";
  char      *out = canonical(text);
  assert_string_equal(out, text);
  free(out);
}

static void header_only_file_has_no_events(void **state) {
  (void)state;
  size_t   n = 99;
  as_err_t err;
  assert_int_equal(read_status(H, &n, &err), AS_DONE);
  assert_int_equal(n, 0);
  assert_int_equal(read_status("allocsim-trace 1", &n, &err), AS_DONE);
  assert_int_equal(read_status(H "#@ a=b\n# only comments\n\n", &n, &err),
                   AS_DONE);
  assert_int_equal(n, 0);
  assert_int_equal(read_status(H "5 0 thread_start", &n, &err), AS_DONE);
  assert_int_equal(n, 1);
}

static void equal_times_are_accepted(void **state) {
  (void)state;
  size_t   n;
  as_err_t err;
  assert_int_equal(
      read_status(H "7 0 malloc 1 1\n7 0 free 1\n7ns 0 idle 0\n", &n, &err),
      AS_DONE);
  assert_int_equal(n, 3);
}

/* ---- Bad input: one exact message per kind ------------------------------ */

static void missing_or_wrong_header_is_reported_on_line_1(void **state) {
  (void)state;
  expect_error("", "t.trace:1: expected header 'allocsim-trace 1', got end "
                   "of file");
  expect_error("hello world\n", "t.trace:1: expected header 'allocsim-trace "
                                "1', got 'hello world'");
  expect_error("0 0 malloc 1 64\n", "t.trace:1: expected header "
                                    "'allocsim-trace 1', got '0 0 malloc 1 "
                                    "64'");
  expect_error("allocsim-trace\n", "t.trace:1: expected a version after "
                                   "'allocsim-trace', got end of line");
  expect_error("allocsim-trace one\n",
               "t.trace:1: expected a version number, got 'one'");
  expect_error("allocsim-trace 1 extra\n",
               "t.trace:1: expected end of line, got 'extra'");
}

static void unsupported_version_names_both_versions(void **state) {
  (void)state;
  expect_error("allocsim-trace 2\n0 0 free 1\n",
               "t.trace:1: unsupported version 2, expected 1");
  expect_error("allocsim-trace 99999999999999999999999\n",
               "t.trace:1: unsupported version 99999999999999999999999, "
               "expected 1");
}

static void unknown_op_lists_the_known_ones(void **state) {
  (void)state;
  expect_error(H "# c\n\n0 0 mallco 1 64\n",
               "t.trace:4: expected an op (malloc, calloc, realloc, "
               "memalign, free, thread_start, thread_exit, mark, idle, trim, "
               "rss, purge, option, touch, module, site), got 'mallco'");
}

static void malformed_numbers_are_rejected(void **state) {
  (void)state;
  expect_error(H "0 0 malloc 1 6x4\n",
               "t.trace:2: expected SIZE (integer bytes, or a number with "
               "suffix K/KiB/M/MiB/G/GiB), got '6x4'");
  expect_error(H "0 0 malloc 1 64k\n",
               "t.trace:2: expected SIZE (integer bytes, or a number with "
               "suffix K/KiB/M/MiB/G/GiB), got '64k'");
  expect_error(H "0 0 malloc 1 1.5\n",
               "t.trace:2: expected SIZE (integer bytes, or a number with "
               "suffix K/KiB/M/MiB/G/GiB), got '1.5'");
  expect_error(H "0 0 malloc 1.0 64\n",
               "t.trace:2: expected ID (a decimal integer), got '1.0'");
  expect_error(H "-5 0 thread_start\n",
               "t.trace:2: expected TIME (integer ns, or a number with unit "
               "ns/us/ms/s), got '-5'");
  expect_error(H "1.5 0 thread_start\n",
               "t.trace:2: expected TIME (integer ns, or a number with unit "
               "ns/us/ms/s), got '1.5'");
  expect_error(H "1.s 0 thread_start\n",
               "t.trace:2: expected TIME (integer ns, or a number with unit "
               "ns/us/ms/s), got '1.s'");
  expect_error(H "1.5ns 0 thread_start\n",
               "t.trace:2: expected TIME to be a whole number of ns, got "
               "'1.5ns'");
  expect_error(H "0 0 malloc 1 0.1K\n",
               "t.trace:2: expected SIZE to be a whole number of bytes, got "
               "'0.1K'");
  expect_error(H "0 main thread_start\n",
               "t.trace:2: expected THREAD (a decimal integer), got 'main'");
  expect_error(H "0 0 idle 5h\n",
               "t.trace:2: expected DURATION (integer ns, or a number with "
               "unit ns/us/ms/s), got '5h'");
}

static void numbers_beyond_their_range_overflow(void **state) {
  (void)state;
  expect_error(H "0 0 malloc 1 18446744073709551616\n",
               "t.trace:2: expected SIZE no larger than "
               "18446744073709551615, got '18446744073709551616'");
  expect_error(H "0 0 malloc 1 17179869184G\n",
               "t.trace:2: expected SIZE no larger than "
               "18446744073709551615, got '17179869184G'");
  expect_error(H "18446744073709551616 0 thread_start\n",
               "t.trace:2: expected TIME below 2^64 ns, got "
               "'18446744073709551616'");
  expect_error(H "18446744074s 0 thread_start\n",
               "t.trace:2: expected TIME below 2^64 ns, got '18446744074s'");
  expect_error(H "0 4294967296 thread_start\n",
               "t.trace:2: expected THREAD no larger than 4294967295, got "
               "'4294967296'");
}

static void missing_fields_say_what_was_expected(void **state) {
  (void)state;
  expect_error(H "0 0 malloc 1\n", "t.trace:2: expected SIZE (integer "
                                   "bytes, or a number with suffix "
                                   "K/KiB/M/MiB/G/GiB), got end of line");
  expect_error(H "0 0 free # no id\n",
               "t.trace:2: expected ID (a decimal integer), got end of line");
  expect_error(H "0 0\n", "t.trace:2: expected an op (malloc, calloc, "
                          "realloc, memalign, free, thread_start, "
                          "thread_exit, mark, idle, trim, rss, purge, option, "
                          "touch, module, site), got end of "
                          "line");
  expect_error(H "0\n",
               "t.trace:2: expected THREAD (a decimal integer), got end of "
               "line");
  expect_error(H "0 0 memalign 3 64\n",
               "t.trace:2: expected SIZE (integer bytes, or a number with "
               "suffix K/KiB/M/MiB/G/GiB), got end of line");
  expect_error(H "0 0 mark\n", "t.trace:2: expected a label (a bare word or "
                               "a double-quoted string), got end of line");
  expect_error(H "0 0 idle\n", "t.trace:2: expected DURATION (integer ns, or "
                               "a number with unit ns/us/ms/s), got end of "
                               "line");
}

static void new_ops_reject_malformed_arguments(void **state) {
  (void)state;
  expect_error(H "0 0 purge soon\n",
               "t.trace:2: expected a purge KIND (all, decay, tcache), got "
               "'soon'");
  expect_error(H "0 0 option MMAP 5\n",
               "t.trace:2: expected an option NAME (1-63 bytes of a-z, 0-9, "
               "_ .), got 'MMAP'");
  expect_error(H "0 0 option mmap_threshold\n",
               "t.trace:2: expected VALUE (integer bytes, or a number with "
               "suffix K/KiB/M/MiB/G/GiB), got end of line");
  expect_error(H "0 0 touch 1 0 0\n",
               "t.trace:2: expected LENGTH above 0, got '0'");
  expect_error(H "0 0 touch 1 18446744073709551615 2\n",
               "t.trace:2: expected LENGTH no larger than 0, got '2'");
}

static void extra_fields_are_rejected(void **state) {
  (void)state;
  expect_error(H "0 0 free 1 raw junk\n",
               "t.trace:2: expected end of line, got 'junk'");
  expect_error(H "0 0 thread_start 3\n",
               "t.trace:2: expected end of line, got '3'");
  expect_error(H "0 0 mark a b\n", "t.trace:2: expected end of line, got 'b'");
  expect_error(H "0 0 rss 1 2 obj\n",
               "t.trace:2: expected end of line, got 'obj'");
  expect_error(H "0 0 rss 1 obj\n",
               "t.trace:2: expected OTHER (integer bytes, or a number with "
               "suffix K/KiB/M/MiB/G/GiB), got 'obj'");
  expect_error(H "0 0 rss 1 0\n", "t.trace:2: expected OTHER above 0, got '0'");
  expect_error(H "0 0 free 1 heap\n",
               "t.trace:2: expected a domain (raw, mem, obj) or end of line, "
               "got 'heap'");
}

static void time_going_backwards_is_an_error_on_its_line(void **state) {
  (void)state;
  expect_error(H "10 0 malloc 1 8\n# c\n5 0 free 1\n",
               "t.trace:4: expected TIME >= 10 ns (the previous event's), "
               "got '5'");
  expect_error(H "2ms 0 malloc 1 8\n1999us 0 free 1\n",
               "t.trace:3: expected TIME >= 2000000 ns (the previous "
               "event's), got '1999us'");
}

static void memalign_needs_a_power_of_two(void **state) {
  (void)state;
  expect_error(H "0 0 memalign 1 48 64\n",
               "t.trace:2: expected ALIGN to be a power of two, got '48'");
  expect_error(H "0 0 memalign 1 0 64\n",
               "t.trace:2: expected ALIGN to be a power of two, got '0'");
}

static void labels_longer_than_63_bytes_are_rejected(void **state) {
  (void)state;
  char in[256], msg[256];
  char l64[65];
  memset(l64, 'a', 64);
  l64[64] = '\0';
  snprintf(in, sizeof in, H "0 0 mark %s\n", l64);
  snprintf(msg, sizeof msg,
           "t.trace:2: expected a label of at most 63 bytes, got '%.60s...'",
           l64);
  expect_error(in, msg);
  snprintf(in, sizeof in, H "0 0 mark \"%.62s\\\\\"\n", l64); /* 63: fine */
  size_t   n;
  as_err_t err;
  assert_int_equal(read_status(in, &n, &err), AS_DONE);
  assert_int_equal(n, 1);
  snprintf(in, sizeof in, H "0 0 mark \"%.62s\\\\x\"\n", l64);
  snprintf(msg, sizeof msg,
           "t.trace:2: expected a label of at most 63 bytes, got "
           "'\"%.59s...'",
           l64);
  expect_error(in, msg);
}

static void malformed_labels_are_rejected(void **state) {
  (void)state;
  expect_error(H "0 0 mark \"abc\n",
               "t.trace:2: expected a closing '\"' after the label, got "
               "'\"abc'");
  expect_error(H "0 0 mark \"a\\nb\"\n",
               "t.trace:2: expected '\\\"' or '\\\\' in a quoted label, got "
               "'\\n'");
  expect_error(H "0 0 mark ab\"c\n",
               "t.trace:2: expected a label (a bare word or a double-quoted "
               "string), got 'ab\"c'");
  expect_error(H "0 0 mark \"a\x01\"\n",
               "t.trace:2: expected a printable byte in a label, got byte "
               "0x01");
}

static void provenance_errors_are_reported(void **state) {
  (void)state;
  expect_error(H "0 0 thread_start\n#@ late=1\n",
               "t.trace:3: expected provenance ('#@') only before the first "
               "event");
  expect_error(H "#@ novalue\n",
               "t.trace:2: expected '#@ key=value', got '#@ novalue'");
  expect_error(H "#@ =x\n",
               "t.trace:2: expected a provenance key before '=', got '#@ =x'");
  expect_error(H "#@ two words=x\n",
               "t.trace:2: expected a provenance key without spaces, got "
               "'two words'");
  expect_error(H "#@ k=v\x1a\n",
               "t.trace:2: expected a provenance value without control "
               "bytes, got byte 0x1a");
  expect_error(H "#@ aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa=x\n",
               "t.trace:2: expected a provenance key of at most 31 bytes, "
               "got 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'");
}

static void nul_bytes_are_rejected(void **state) {
  (void)state;
  static const char in[] = H "0 0 ma\0lloc 1 2\n";
  FILE             *f = fmemopen((void *)in, sizeof in - 1, "r");
  assert_non_null(f);
  trace_source_t *src;
  as_err_t        err = {0};
  assert_int_equal(trace_text_open_stream(f, "t.trace", NULL, 0, &src, &err),
                   AS_EFORMAT);
  assert_null(src);
  assert_string_equal(err.msg,
                      "t.trace:2: expected text, got a NUL byte at column 7");
}

static void control_and_binary_bytes_are_escaped_in_messages(void **state) {
  (void)state;
  /* Echoed raw, ESC would start a terminal control sequence. */
  expect_error(H "0 0 mall\x1b[31mco\x01\xff 1 8\n",
               "t.trace:2: expected an op (malloc, calloc, realloc, "
               "memalign, free, thread_start, thread_exit, mark, idle, trim, "
               "rss, purge, option, touch, module, site), got "
               "'mall\\x1b[31mco\\x01\\xff'");
  expect_error("allocsim-\x1b]0;x\x07trace 1\n",
               "t.trace:1: expected header 'allocsim-trace 1', got "
               "'allocsim-\\x1b]0;x\\x07trace 1'");
  expect_error("allocsim-trace 1\x9b\n",
               "t.trace:1: expected a version number, got '1\\x9b'");
}

static void errors_are_sticky(void **state) {
  (void)state;
  trace_source_t *src;
  as_err_t        err = {0};
  assert_int_equal(
      open_text(H "0 0 thread_start\n0 0 bogus\n0 0 free 1\n", &src, &err),
      AS_OK);
  trace_event_t ev;
  assert_int_equal(trace_source_next(src, &ev, &err), AS_OK);
  assert_int_equal(trace_source_next(src, &ev, &err), AS_EFORMAT);
  as_err_t again = {0};
  assert_int_equal(trace_source_next(src, &ev, &again), AS_EFORMAT);
  assert_string_equal(again.msg, err.msg);
  trace_source_close(src);
}

/* ---- Writer checks ------------------------------------------------------ */

static void writer_rejects_events_text_cannot_carry(void **state) {
  (void)state;
  char           *out = NULL;
  size_t          len = 0;
  FILE           *mem = open_memstream(&out, &len);
  trace_writer_t *w;
  as_err_t        err = {0};
  assert_int_equal(trace_writer_open_stream(mem, "w.trace", TRACE_FORMAT_TEXT,
                                            NULL, &w, &err),
                   AS_OK);
  trace_event_t ev = {.t_ns = 100, .op = TRACE_MALLOC, .id = 1, .size = 8};
  assert_int_equal(trace_writer_write(w, &ev, &err), AS_OK);
  ev.t_ns = 99;
  assert_int_equal(trace_writer_write(w, &ev, &err), AS_EINVAL);
  assert_string_equal(err.msg, "w.trace: event 1: time 99 ns is before the "
                               "previous event's 100 ns");
  ev = (trace_event_t){.t_ns = 100, .op = TRACE_MARK, .label = "a\nb"};
  assert_int_equal(trace_writer_write(w, &ev, &err), AS_EINVAL);
  assert_string_equal(err.msg,
                      "w.trace: event 1: label has control byte 0x0a at 1");
  ev = (trace_event_t){.t_ns = 100, .op = TRACE_MEMALIGN, .align = 24};
  assert_int_equal(trace_writer_write(w, &ev, &err), AS_EINVAL);
  assert_string_equal(err.msg, "w.trace: event 1: memalign align 24 is not a "
                               "power of two");
  ev = (trace_event_t){.t_ns = 100, .op = TRACE_FREE, .domain = 3};
  assert_int_equal(trace_writer_write(w, &ev, &err), AS_EINVAL);
  assert_string_equal(err.msg, "w.trace: event 1: unknown domain 3");
  /* Fields an op does not use are dropped, not written. */
  ev = (trace_event_t){
      .t_ns = 100, .op = TRACE_THREAD_START, .id = 9, .size = 9, .domain = 2};
  assert_int_equal(trace_writer_write(w, &ev, &err), AS_OK);
  assert_int_equal(trace_writer_close(w, &err), AS_OK);
  assert_string_equal(out, H "100 0 malloc 1 8\n100 0 thread_start\n");
  free(out);
}

static void writer_refuses_provenance_that_would_not_read_back(void **state) {
  (void)state;
  trace_meta_t meta = {0};
  assert_int_equal(trace_meta_set(&meta, "command", "a\nb", NULL), AS_OK);
  char           *out = NULL;
  size_t          len = 0;
  FILE           *mem = open_memstream(&out, &len);
  trace_writer_t *w = (trace_writer_t *)1;
  as_err_t        err = {0};
  assert_int_equal(trace_writer_open_stream(mem, "w.trace", TRACE_FORMAT_TEXT,
                                            &meta, &w, &err),
                   AS_EINVAL);
  assert_null(w);
  assert_string_equal(err.msg,
                      "w.trace: provenance 'command' cannot be written as "
                      "text (key with spaces, '=' or control bytes, or value "
                      "with control bytes or surrounding spaces)");
  free(out);
}

/* ---- Names and provenance table ---------------------------------------- */

static void op_and_domain_names_parse_back(void **state) {
  (void)state;
  for (int op = 0; op < TRACE_OP_COUNT; op++) {
    const char *name = trace_op_name((trace_op_t)op);
    trace_op_t  back;
    assert_true(trace_op_parse(name, strlen(name), &back));
    assert_int_equal(back, op);
  }
  trace_op_t op;
  assert_true(trace_op_parse("mallocx", 6, &op));
  assert_int_equal(op, TRACE_MALLOC);
  assert_false(trace_op_parse("malloc", 5, &op));
  assert_null(trace_op_name(TRACE_OP_COUNT));
  assert_string_equal(trace_op_name(TRACE_THREAD_EXIT), "thread_exit");
  trace_domain_t d;
  assert_true(trace_domain_parse("obj", 3, &d));
  assert_int_equal(d, TRACE_DOMAIN_OBJ);
  assert_false(trace_domain_parse("ob", 2, &d));
  assert_string_equal(trace_domain_name(TRACE_DOMAIN_MEM), "mem");
  assert_null(trace_domain_name(TRACE_DOMAIN_COUNT));
}

static void meta_set_replaces_and_enforces_limits(void **state) {
  (void)state;
  trace_meta_t m = {0};
  as_err_t     err = {0};
  assert_int_equal(trace_meta_set(&m, "k", "1", &err), AS_OK);
  assert_int_equal(trace_meta_set(&m, "k", "2", &err), AS_OK);
  assert_int_equal(m.count, 1);
  assert_string_equal(trace_meta_get(&m, "k"), "2");
  assert_int_equal(trace_meta_set(&m, "", "x", &err), AS_EINVAL);
  char big[300];
  memset(big, 'v', 256);
  big[256] = '\0';
  assert_int_equal(trace_meta_set(&m, "k", big, &err), AS_EINVAL);
  assert_string_equal(err.msg, "provenance value for 'k' is 256 bytes, "
                               "expected at most 255");
  big[255] = '\0';
  assert_int_equal(trace_meta_set(&m, "k", big, &err), AS_OK);
  for (int i = 1; i < TRACE_META_MAX; i++) {
    char key[16];
    snprintf(key, sizeof key, "k%d", i);
    assert_int_equal(trace_meta_set(&m, key, "v", &err), AS_OK);
  }
  assert_int_equal(trace_meta_set(&m, "one_more", "v", &err), AS_EINVAL);
  assert_string_equal(err.msg, "too many provenance keys: 'one_more' would be "
                               "number 49, expected at most 48");
  assert_int_equal(m.count, TRACE_META_MAX);
}

/* ---- Opening files ------------------------------------------------------ */

static void trace_open_detects_text_by_its_first_bytes(void **state) {
  (void)state;
  char path[] = "/tmp/allocsim-test-XXXXXX";
  int  fd = mkstemp(path);
  assert_true(fd >= 0);
  static const char body[] = H "5 0 malloc 1 16\n6 0 free 1\n";
  assert_int_equal(write(fd, body, sizeof body - 1), sizeof body - 1);
  close(fd);
  trace_source_t *src;
  as_err_t        err = {0};
  assert_int_equal(trace_open(path, &src, &err), AS_OK);
  assert_string_equal(src->name, path);
  trace_event_t ev;
  assert_int_equal(trace_source_next(src, &ev, &err), AS_OK);
  assert_int_equal(ev.size, 16);
  assert_int_equal(trace_source_next(src, &ev, &err), AS_OK);
  assert_int_equal(trace_source_next(src, &ev, &err), AS_DONE);
  trace_source_close(src);
  unlink(path);
  assert_int_equal(trace_open(path, &src, &err), AS_EIO);
  assert_null(src);
}

static void format_follows_the_file_name(void **state) {
  (void)state;
  assert_int_equal(trace_format_from_path("a.astrace"), TRACE_FORMAT_BINARY);
  assert_int_equal(trace_format_from_path("/x/y.trace"), TRACE_FORMAT_TEXT);
  assert_int_equal(trace_format_from_path("astrace"), TRACE_FORMAT_TEXT);
  assert_int_equal(trace_format_from_path("-"), TRACE_FORMAT_TEXT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_field_parses_to_its_exact_value),
      cmocka_unit_test(provenance_lands_in_meta_trimmed_and_in_order),
      cmocka_unit_test(writer_emits_the_canonical_form),
      cmocka_unit_test(canonical_text_rewrites_byte_identically),
      cmocka_unit_test(an_accepted_provenance_value_is_written_back),
      cmocka_unit_test(header_only_file_has_no_events),
      cmocka_unit_test(equal_times_are_accepted),
      cmocka_unit_test(missing_or_wrong_header_is_reported_on_line_1),
      cmocka_unit_test(unsupported_version_names_both_versions),
      cmocka_unit_test(unknown_op_lists_the_known_ones),
      cmocka_unit_test(malformed_numbers_are_rejected),
      cmocka_unit_test(numbers_beyond_their_range_overflow),
      cmocka_unit_test(missing_fields_say_what_was_expected),
      cmocka_unit_test(new_ops_reject_malformed_arguments),
      cmocka_unit_test(extra_fields_are_rejected),
      cmocka_unit_test(time_going_backwards_is_an_error_on_its_line),
      cmocka_unit_test(memalign_needs_a_power_of_two),
      cmocka_unit_test(labels_longer_than_63_bytes_are_rejected),
      cmocka_unit_test(malformed_labels_are_rejected),
      cmocka_unit_test(provenance_errors_are_reported),
      cmocka_unit_test(nul_bytes_are_rejected),
      cmocka_unit_test(control_and_binary_bytes_are_escaped_in_messages),
      cmocka_unit_test(errors_are_sticky),
      cmocka_unit_test(writer_rejects_events_text_cannot_carry),
      cmocka_unit_test(writer_refuses_provenance_that_would_not_read_back),
      cmocka_unit_test(op_and_domain_names_parse_back),
      cmocka_unit_test(meta_set_replaces_and_enforces_limits),
      cmocka_unit_test(trace_open_detects_text_by_its_first_bytes),
      cmocka_unit_test(format_follows_the_file_name),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
