/* tests/unit/test_capture_stream.c -- the capture stream converter on
 * hand-built wire messages: threads merged by seq under watermarks,
 * addresses to lowest free ids, realloc pairing, touch records checked
 * against their object, and malformed messages refused with their offset.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "traces/capture_stream.h"
#include "traces/allocator_version.h"

/* ---- Building messages ----------------------------------------------------
 */

typedef struct msg_s msg_t;
struct msg_s {
  uint8_t       b[CAPTURE_MSG_MAX];
  size_t        len;
  capture_enc_t enc;
};

static void msg_begin(msg_t *m, uint8_t type, uint32_t aux) {
  capture_msg_hdr_t h = {
      .type = type, .version = CAPTURE_WIRE_VERSION, .aux = aux};
  memcpy(m->b, &h, sizeof h);
  m->len = sizeof h;
  memset(&m->enc, 0, sizeof m->enc);
}

static void msg_rec(msg_t *m, uint8_t op, uint64_t seq, uint64_t addr,
                    uint64_t x, uint64_t y) {
  cap_rec_t r = {.op = op, .addr = addr, .x = x, .y = y};
  assert_true(m->len + CAPTURE_REC_MAX <= sizeof m->b);
  m->len = (size_t)(capture_encode(m->b + m->len, &m->enc, &r, seq, seq * 10) -
                    m->b);
}

static void msg_mark(msg_t *m, uint64_t seq, const char *label) {
  cap_rec_t r = {.op = CAPTURE_OP_MARK,
                 .x = 1 << 20,
                 .y = 4096,
                 .text = label,
                 .text_len = strlen(label)};
  m->len = (size_t)(capture_encode(m->b + m->len, &m->enc, &r, seq, seq * 10) -
                    m->b);
}

static void feed(capture_stream_t *s, const msg_t *m) {
  as_err_t err = {0};
  if (capture_stream_feed(s, m->b, m->len, &err) != AS_OK)
    fail_msg("%s", err.msg);
}

static void watermark(capture_stream_t *s, uint64_t w) {
  msg_t m;
  msg_begin(&m, CAPTURE_MSG_WATERMARK, 0);
  memcpy(m.b + m.len, &w, 8);
  m.len += 8;
  feed(s, &m);
}

/* ---- A converter writing text into memory -------------------------------- */

typedef struct conv_s conv_t;
struct conv_s {
  char             *text;
  size_t            len;
  FILE             *f;
  capture_stream_t *s;
};

static void open_conv(conv_t *c, uint32_t main_tid) {
  c->text = NULL;
  c->len = 0;
  c->f = open_memstream(&c->text, &c->len);
  assert_non_null(c->f);
  capture_hello_t h = {.pid = 77,
                       .main_tid = main_tid,
                       .page_size = 4096,
                       .touch_threshold = 4096,
                       .python_hex = 0x030B02F0};
  trace_meta_t    m = {0};
  as_err_t        err = {0};
  assert_int_equal(capture_stream_open(&h, c->f, "test stream",
                                       TRACE_FORMAT_TEXT, &m, &c->s, &err),
                   AS_OK);
}

/* Closes the converter; the text written lands in c->text. */
static void close_conv(conv_t *c, capture_stats_t *st) {
  as_err_t err = {0};
  if (capture_stream_close(c->s, st, &err) != AS_OK)
    fail_msg("%s", err.msg);
}

/* The event lines of the trace (header and provenance left out). */
static const char *events_of(const conv_t *c) {
  const char *p = c->text;
  while (*p == 'a' || *p == '#')
    p = strchr(p, '\n') + 1;
  return p;
}

/* ---- Tests ------------------------------------------------------------------
 */

/* Two threads' chunks arrive out of order; a watermark releases only what
 * is below it, and the close writes the rest, all in seq order. */
static void threads_merge_by_seq_under_watermarks(void **state) {
  (void)state;
  conv_t c;
  open_conv(&c, 10);
  msg_t a, b;
  msg_begin(&a, CAPTURE_MSG_CHUNK, 10);
  msg_rec(&a, CAPTURE_OP_MALLOC, 1, 0x1000, 16, 0);
  msg_rec(&a, CAPTURE_OP_FREE, 4, 0x2000, 0, 0); /* thread 11's block */
  msg_rec(&a, CAPTURE_OP_MALLOC, 6, 0x3000, 48, 0);
  msg_begin(&b, CAPTURE_MSG_CHUNK, 11);
  msg_rec(&b, CAPTURE_OP_MALLOC, 2, 0x2000, 32, 0);
  msg_rec(&b, CAPTURE_OP_FREE, 5, 0x1000, 0, 0);
  feed(c.s, &a);
  watermark(c.s, 2); /* every record below 2 was sent: seq 1 may go */
  fflush(c.f);
  assert_string_equal(events_of(&c), "10 0 malloc 0 16\n");
  feed(c.s, &b);
  watermark(c.s, 6);
  capture_stats_t st;
  close_conv(&c, &st);
  assert_string_equal(events_of(&c), "10 0 malloc 0 16\n"
                                     "20 1 thread_start\n"
                                     "20 1 malloc 1 32\n"
                                     "40 0 free 1\n"
                                     "50 1 free 0\n"
                                     "60 0 malloc 0 48\n");
  assert_int_equal(st.late_records, 0);
  assert_int_equal(st.threads, 1);
  assert_string_equal(st.python, "3.11.2");
  free(c.text);
}

/* A record below a watermark already released is written when it comes
 * and counted, never lost. */
static void late_records_are_counted_not_lost(void **state) {
  (void)state;
  conv_t c;
  open_conv(&c, 10);
  msg_t a;
  msg_begin(&a, CAPTURE_MSG_CHUNK, 10);
  msg_rec(&a, CAPTURE_OP_MALLOC, 5, 0x1000, 16, 0);
  feed(c.s, &a);
  watermark(c.s, 9);
  msg_begin(&a, CAPTURE_MSG_CHUNK, 10);
  msg_rec(&a, CAPTURE_OP_MALLOC, 3, 0x2000, 24, 0);
  feed(c.s, &a);
  capture_stats_t st;
  close_conv(&c, &st);
  assert_int_equal(st.late_records, 1);
  assert_string_equal(events_of(&c), "50 0 malloc 0 16\n"
                                     "50 0 malloc 1 24\n");
  free(c.text);
}

/* N mallocs at distinct addresses, all freed in a shuffled order, then N/2
 * mallocs reusing addresses: fresh ids in order, freed ids recycled lowest
 * first, whatever the address. */
static void addresses_become_lowest_free_ids(void **state) {
  (void)state;
  enum { N = 3000 };
  conv_t c;
  open_conv(&c, 5);
  static uint64_t perm[N];
  for (uint64_t i = 0; i < N; i++)
    perm[i] = i;
  uint64_t x = 88172645463325252ull; /* xorshift64, fixed seed */
  for (uint64_t i = N - 1; i > 0; i--) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    uint64_t j = x % (i + 1), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  static msg_t m;
  uint64_t     seq = 1;
  msg_begin(&m, CAPTURE_MSG_CHUNK, 5);
  for (uint64_t i = 0; i < N; i++) {
    if (m.len + CAPTURE_REC_MAX > sizeof m.b) {
      feed(c.s, &m);
      msg_begin(&m, CAPTURE_MSG_CHUNK, 5);
    }
    uint64_t a = 0x100000 + 64 * (i < N ? i : 0);
    msg_rec(&m, CAPTURE_OP_MALLOC, seq++, a, 32, 0);
  }
  for (uint64_t i = 0; i < N; i++) {
    if (m.len + CAPTURE_REC_MAX > sizeof m.b) {
      feed(c.s, &m);
      msg_begin(&m, CAPTURE_MSG_CHUNK, 5);
    }
    msg_rec(&m, CAPTURE_OP_FREE, seq++, 0x100000 + 64 * perm[i], 0, 0);
  }
  for (uint64_t i = 0; i < N / 2; i++) {
    if (m.len + CAPTURE_REC_MAX > sizeof m.b) {
      feed(c.s, &m);
      msg_begin(&m, CAPTURE_MSG_CHUNK, 5);
    }
    msg_rec(&m, CAPTURE_OP_MALLOC, seq++, 0x100000 + 64 * perm[N - 1 - i], 48,
            0);
  }
  feed(c.s, &m);
  capture_stats_t st;
  close_conv(&c, &st);
  assert_int_equal(st.max_live_ids, N);
  assert_int_equal(st.unmatched_frees, 0);
  const char *p = events_of(&c);
  char        line[64];
  for (uint64_t i = 0; i < N; i++) { /* fresh ids in order */
    snprintf(line, sizeof line, " 0 malloc %llu 32\n", (unsigned long long)i);
    p = strstr(p, line);
    assert_non_null(p);
  }
  for (uint64_t i = 0; i < N; i++) { /* the id of that address */
    snprintf(line, sizeof line, " 0 free %llu\n", (unsigned long long)perm[i]);
    p = strstr(p, line);
    assert_non_null(p);
  }
  for (uint64_t i = 0; i < N / 2; i++) { /* lowest free first */
    snprintf(line, sizeof line, " 0 malloc %llu 48\n", (unsigned long long)i);
    p = strstr(p, line);
    assert_non_null(p);
  }
  free(c.text);
}

/* realloc keeps the object's id; a failed one leaves the old block live;
 * touch records within a live object become touch events, others are
 * dropped and counted. */
static void realloc_and_touch_follow_the_object(void **state) {
  (void)state;
  conv_t c;
  open_conv(&c, 7);
  msg_t m;
  msg_begin(&m, CAPTURE_MSG_CHUNK, 7);
  msg_rec(&m, CAPTURE_OP_MALLOC, 1, 0x10000, 8192, 0);
  msg_rec(&m, CAPTURE_OP_TOUCH, 2, 0x10000, 4096, 4096);
  msg_rec(&m, CAPTURE_OP_REALLOC_BEGIN, 3, 0x10000, 0, 0);
  msg_rec(&m, CAPTURE_OP_REALLOC, 4, 0x40000, 20000, 0);
  msg_rec(&m, CAPTURE_OP_TOUCH, 5, 0x40000, 16384, 3616);
  msg_rec(&m, CAPTURE_OP_TOUCH, 6, 0x40000, 16384, 3617); /* past the end */
  msg_rec(&m, CAPTURE_OP_TOUCH, 7, 0x10000, 0, 100);      /* dead address */
  msg_rec(&m, CAPTURE_OP_REALLOC_BEGIN, 8, 0x40000, 0, 0);
  cap_rec_t fail = {
      .op = CAPTURE_OP_REALLOC, .addr = 0x40000, .x = 1 << 30, .failed = 1};
  m.len = (size_t)(capture_encode(m.b + m.len, &m.enc, &fail, 9, 90) - m.b);
  msg_rec(&m, CAPTURE_OP_FREE, 10, 0x40000, 0, 0);
  msg_mark(&m, 11, "end");
  feed(c.s, &m);
  capture_stats_t st;
  close_conv(&c, &st);
  assert_string_equal(events_of(&c), "10 0 malloc 0 8192\n"
                                     "20 0 touch 0 4096 4096\n"
                                     "40 0 realloc 0 20000\n"
                                     "50 0 touch 0 16384 3616\n"
                                     "100 0 free 0\n"
                                     "110 0 mark end\n"
                                     "110 0 rss 1044480\n");
  assert_int_equal(st.dropped_touches, 2);
  assert_int_equal(st.touch_events, 2);
  free(c.text);
}

/* Malformed messages are refused naming the stream, the message number and
 * the byte offset. */
/* Call sites on the wire: MODULE and SITE records (the site's frames a
 * blob of module and offset varints) become module and site events, bytes
 * a trace's path cannot carry become '?', module 0 (no loaded object held
 * the address) is defined as "[unknown]" before its first use, and
 * allocation records name their site. */
static void sites_and_modules_become_definitions(void **state) {
  (void)state;
  conv_t c;
  open_conv(&c, 7);
  msg_t m;
  msg_begin(&m, CAPTURE_MSG_CHUNK, 7);
  const char path[] = "/usr/lib/a\"b.so";
  cap_rec_t  mod = {.op = CAPTURE_OP_MODULE,
                    .x = 1,
                    .text = path,
                    .text_len = sizeof path - 1};
  m.len = (size_t)(capture_encode(m.b + m.len, &m.enc, &mod, 1, 10) - m.b);
  uint8_t blob[64], *p = blob;
  p = capture_put_varint(p, 1);
  p = capture_put_varint(p, 0x1234);
  p = capture_put_varint(p, 0);
  p = capture_put_varint(p, 0);
  cap_rec_t site = {.op = CAPTURE_OP_SITE,
                    .x = 3,
                    .text = (const char *)blob,
                    .text_len = (size_t)(p - blob)};
  m.len = (size_t)(capture_encode(m.b + m.len, &m.enc, &site, 2, 20) - m.b);
  cap_rec_t a = {.op = CAPTURE_OP_MALLOC, .addr = 0x5000, .x = 24, .site = 3};
  m.len = (size_t)(capture_encode(m.b + m.len, &m.enc, &a, 3, 30) - m.b);
  cap_rec_t al = {
      .op = CAPTURE_OP_MEMALIGN, .addr = 0x6000, .x = 64, .y = 32, .site = 3};
  m.len = (size_t)(capture_encode(m.b + m.len, &m.enc, &al, 4, 40) - m.b);
  feed(c.s, &m);
  capture_stats_t st;
  close_conv(&c, &st);
  assert_string_equal(events_of(&c), "10 0 module 1 /usr/lib/a?b.so\n"
                                     "20 0 module 0 [unknown]\n"
                                     "20 0 site 3 1+0x1234 0+0x0\n"
                                     "30 0 malloc 0 24 @3\n"
                                     "40 0 memalign 1 32 64 @3\n");
  assert_int_equal(st.sites, 1);
  assert_int_equal(st.modules, 1);
  free(c.text);
}

static void bad_messages_are_refused_with_their_offset(void **state) {
  (void)state;
  conv_t c;
  open_conv(&c, 7);
  msg_t    m;
  as_err_t err = {0};
  msg_begin(&m, CAPTURE_MSG_CHUNK, 7);
  msg_rec(&m, CAPTURE_OP_MALLOC, 1, 0x10000, 64, 0);
  m.b[m.len++] = 0x1F; /* no such op */
  assert_int_equal(capture_stream_feed(c.s, m.b, m.len, &err), AS_EFORMAT);
  assert_non_null(strstr(err.msg, "test stream: message 1"));
  assert_non_null(strstr(err.msg, "byte offset 16: bad op"));
  msg_begin(&m, CAPTURE_MSG_CHUNK, 7);
  msg_rec(&m, CAPTURE_OP_MALLOC, 1, 0x10000, 64, 0);
  m.len -= 2; /* cut before the size (and the site after it) */
  assert_int_equal(capture_stream_feed(c.s, m.b, m.len, &err), AS_EFORMAT);
  assert_non_null(strstr(err.msg, "byte offset 8: bad size"));
  msg_begin(&m, 99, 0);
  assert_int_equal(capture_stream_feed(c.s, m.b, m.len, &err), AS_EFORMAT);
  assert_non_null(strstr(err.msg, "unknown type 99"));
  assert_int_equal(capture_stream_feed(c.s, m.b, 3, &err), AS_EFORMAT);
  assert_non_null(strstr(err.msg, "shorter than a header"));
  capture_hello_t h;
  assert_int_equal(capture_hello_decode(m.b, 8, "conn", &h, &err), AS_EFORMAT);
  assert_non_null(strstr(err.msg, "conn: message 0: expected a HELLO"));
  capture_stats_t st;
  close_conv(&c, &st);
  free(c.text);
}

static void python_versions_read_like_python(void **state) {
  (void)state;
  char v[32];
  capture_python_version(0x030B02F0, v, sizeof v);
  assert_string_equal(v, "3.11.2");
  capture_python_version(0x030D00C1, v, sizeof v);
  assert_string_equal(v, "3.13.0rc1");
  capture_python_version(0x030E00A3, v, sizeof v);
  assert_string_equal(v, "3.14.0a3");
}

/* The numbers the recorder sends for each allocator, spelled as the
 * models' version options take them: MI_MALLOC_VERSION as the mimalloc tags
 * define it (include/mimalloc.h), tc_version()'s major * 100 + minor,
 * jemalloc's major * 10000 + minor * 100 + patch. */
static void allocator_versions_read_like_their_tags(void **state) {
  (void)state;
  static const struct {
    void (*spell)(uint32_t, char *, size_t);
    uint32_t    code;
    const char *want;
  } cases[] = {
      {capture_mimalloc_version, 209, "2.0.9"},
      {capture_mimalloc_version, 212, "2.1.2"},
      {capture_mimalloc_version, 3010, "3.0.10"},
      {capture_mimalloc_version, 3206, "3.2.6"},
      {capture_mimalloc_version, 30403, "3.4.3"},
      {capture_tcmalloc_version, 209, "2.9"},
      {capture_tcmalloc_version, 210, "2.10"},
      {capture_tcmalloc_version, 216, "2.16"},
      {capture_jemalloc_version, 50201, "5.2.1"},
      {capture_jemalloc_version, 50300, "5.3.0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char v[32];
    cases[i].spell(cases[i].code, v, sizeof v);
    assert_string_equal(v, cases[i].want);
  }
}

/* mallctl("version") strings as jemalloc's tags print them, to the number
 * the recorder and the replayer send. */
static void jemalloc_version_strings_read_like_their_tags(void **state) {
  (void)state;
  assert_int_equal(allocator_version_code(
                       "5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c"),
                   50300);
  assert_int_equal(allocator_version_code("5.2.1-0-gea6b3e973b47"), 50201);
  assert_int_equal(allocator_version_code("5.3"), 0);
  assert_int_equal(allocator_version_code("5.3.x"), 0);
  assert_int_equal(allocator_version_code("5.300.0"), 0);
  assert_int_equal(allocator_version_code(""), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(threads_merge_by_seq_under_watermarks),
      cmocka_unit_test(late_records_are_counted_not_lost),
      cmocka_unit_test(addresses_become_lowest_free_ids),
      cmocka_unit_test(realloc_and_touch_follow_the_object),
      cmocka_unit_test(sites_and_modules_become_definitions),
      cmocka_unit_test(bad_messages_are_refused_with_their_offset),
      cmocka_unit_test(python_versions_read_like_python),
      cmocka_unit_test(allocator_versions_read_like_their_tags),
      cmocka_unit_test(jemalloc_version_strings_read_like_their_tags),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
