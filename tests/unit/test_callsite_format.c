/* tests/unit/test_callsite_format.c -- call sites in the trace formats
 * (docs/trace-format.md, "Call sites") and the site tracker
 * (traces/sites.h): round trips text -> binary -> text byte for byte,
 * including 32-frame sites that straddle the binary reader's window, the
 * errors for a site no earlier event defined, a frame of an undefined
 * module, a second definition and a cut site record, and which site each
 * live object belongs to after reallocs and frees. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "traces/sites.h"
#include "traces/trace_io.h"

static char g_dir[128];

static int setup(void **state) {
  (void)state;
  snprintf(g_dir, sizeof g_dir, "/tmp/allocsim-test-callsite-fmt-XXXXXX");
  return mkdtemp(g_dir) == NULL ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

static void path_of(char *buf, size_t len, const char *name) {
  snprintf(buf, len, "%s/%s", g_dir, name);
}

static void put_file(const char *name, const void *data, size_t len) {
  char p[256];
  path_of(p, sizeof p, name);
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, len, f), len);
  fclose(f);
}

static char *get_file(const char *name, size_t *len) {
  char p[256];
  path_of(p, sizeof p, name);
  FILE *f = fopen(p, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  assert_non_null(b);
  assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
  b[n] = '\0';
  fclose(f);
  *len = (size_t)n;
  return b;
}

/* Copies trace in to out (format from out's name); the status of the
 * first failure, its message in err. */
static as_status_t copy_as(const char *in, const char *out, trace_format_t fmt,
                           as_err_t *err) {
  char            pi[256], po[256];
  trace_source_t *src;
  trace_writer_t *w;
  path_of(pi, sizeof pi, in);
  path_of(po, sizeof po, out);
  as_status_t rc = trace_open(pi, &src, err);
  if (rc != AS_OK)
    return rc;
  rc = trace_writer_open(po, fmt, &src->meta, &w, err);
  if (rc != AS_OK) {
    trace_source_close(src);
    return rc;
  }
  trace_event_t ev;
  while ((rc = trace_source_next(src, &ev, err)) == AS_OK)
    if ((rc = trace_writer_write(w, &ev, err)) != AS_OK)
      break;
  if (rc == AS_DONE) {
    rc = trace_writer_close(w, err);
  } else {
    trace_writer_discard(w);
  }
  trace_source_close(src);
  return rc;
}

/* in copied to out in the format out's name implies. */
static as_status_t copy(const char *in, const char *out, as_err_t *err) {
  char po[256];
  path_of(po, sizeof po, out);
  return copy_as(in, out, trace_format_from_path(po), err);
}

/* Reads name to its end: AS_OK, or the error with its message in err. */
static as_status_t read_all(const char *name, as_err_t *err) {
  char            p[256];
  trace_source_t *src;
  path_of(p, sizeof p, name);
  as_status_t rc = trace_open(p, &src, err);
  if (rc != AS_OK)
    return rc;
  trace_event_t ev;
  while ((rc = trace_source_next(src, &ev, err)) == AS_OK) {
  }
  trace_source_close(src);
  return rc == AS_DONE ? AS_OK : rc;
}

static const char sample[] = "allocsim-trace 1\n"
                             "0 0 module 1 /usr/bin/prog\n"
                             "0 0 module 2 \"/opt/with space/lib.so\"\n"
                             "0 0 site 1 1+0x1139 2+0x23a90\n"
                             "5 0 malloc 0 64 @1\n"
                             "6 1 thread_start\n"
                             "6 1 site 2 1+0x0 2+0xffffffffffffffff\n"
                             "7 1 calloc 1 4096 obj @2\n"
                             "8 0 memalign 2 64 100 @1\n"
                             "9 0 realloc 0 128\n"
                             "10 0 free 1 obj\n"
                             "11 0 malloc 1 8\n";

static void text_and_binary_round_trip(void **state) {
  (void)state;
  as_err_t err = {0};
  put_file("a.trace", sample, sizeof sample - 1);
  assert_int_equal(copy("a.trace", "a.astrace", &err), AS_OK);
  assert_int_equal(copy("a.astrace", "b.trace", &err), AS_OK);
  size_t n;
  char  *back = get_file("b.trace", &n);
  assert_string_equal(back, sample);
  free(back);
}

/* Sites of 32 frames with 10-byte offsets are longer than the reader's
 * unchecked margin: many of them, so some straddle the 256 KiB window. */
static void long_sites_cross_the_window(void **state) {
  (void)state;
  enum { SITES = 3000 };
  size_t cap = (size_t)SITES * 32 * 30 + 4096, len = 0;
  char  *t = malloc(cap);
  assert_non_null(t);
  len += (size_t)snprintf(t + len, cap - len,
                          "allocsim-trace 1\n0 0 module 7 /lib/x.so\n");
  for (unsigned s = 1; s <= SITES; s++) {
    len += (size_t)snprintf(t + len, cap - len, "%u 0 site %u", s, s);
    for (unsigned f = 0; f < 32; f++)
      len += (size_t)snprintf(t + len, cap - len, " 7+0x%llx",
                              0xf000000000000000ull + s * 32 + f);
    len += (size_t)snprintf(t + len, cap - len, "\n%u 0 malloc %u 16 @%u\n", s,
                            s - 1, s);
  }
  put_file("long.trace", t, len);
  as_err_t err = {0};
  assert_int_equal(copy("long.trace", "long.astrace", &err), AS_OK);
  assert_int_equal(copy("long.astrace", "long2.trace", &err), AS_OK);
  size_t n;
  char  *back = get_file("long2.trace", &n);
  assert_int_equal(n, len);
  assert_memory_equal(back, t, len);
  free(back);
  free(t);
}

static void expect_text_error(const char *body, const char *msg) {
  char text[512];
  snprintf(text, sizeof text, "allocsim-trace 1\n%s", body);
  put_file("bad.trace", text, strlen(text));
  as_err_t err = {0};
  assert_int_equal(read_all("bad.trace", &err), AS_EFORMAT);
  char p[256];
  path_of(p, sizeof p, "bad.trace");
  char want[512];
  snprintf(want, sizeof want, "%s:%s", p, msg);
  assert_string_equal(err.msg, want);
}

static void undefined_and_repeated_definitions_are_refused(void **state) {
  (void)state;
  expect_text_error("0 0 malloc 1 64 @3\n",
                    "2: expected a site id defined by an earlier site "
                    "event, got @3");
  expect_text_error("0 0 site 1 4+0x10\n",
                    "2: expected frame 1's module to be defined by an "
                    "earlier module event, got module 4");
  expect_text_error("0 0 module 1 /a\n0 0 module 1 /b\n",
                    "3: expected a module id not defined before, got 1");
  expect_text_error("0 0 module 1 /a\n0 0 site 1 1+0x1\n0 0 site 1 1+0x2\n",
                    "4: expected a site id not defined before, got 1");
  expect_text_error("0 0 site 0 1+0x1\n",
                    "2: expected a site ID above 0, got '0'");
  expect_text_error("0 0 module 1 /a\n0 0 site 1 1+0x\n",
                    "3: expected a frame MODULE+0xOFFSET (a module id, an "
                    "offset in hex), got '1+0x'");
  expect_text_error("0 0 malloc 1 64 @0\n",
                    "2: expected a call site '@SITE' with SITE 1 to "
                    "16777215, got '@0'");
  expect_text_error("0 0 free 1 @1\n",
                    "2: expected a domain (raw, mem, obj) or end of line, "
                    "got '@1'");
}

static void binary_errors_name_the_offset(void **state) {
  (void)state;
  as_err_t err = {0};
  put_file("c.trace", sample, sizeof sample - 1);
  assert_int_equal(
      copy_as("c.trace", "c.astrace", TRACE_FORMAT_BINARY_V2, &err), AS_OK);
  size_t n;
  char  *b = get_file("c.astrace", &n);
  /* Cut inside the first site record (version 2, record after record):
   * header 11 bytes, two modules. */
  char *site = memchr(b + 11, 0x2F | 0xC0, n - 11);
  assert_non_null(site);
  size_t cut = (size_t)(site - b) + 4;
  put_file("cut.astrace", b, cut);
  assert_int_equal(read_all("cut.astrace", &err), AS_EFORMAT);
  char p[256], want[400];
  path_of(p, sizeof p, "cut.astrace");
  snprintf(want, sizeof want,
           "%s: truncated record at byte offset %zu: expected frame offset at "
           "byte offset %zu, got end of file",
           p, (size_t)(site - b), cut);
  assert_string_equal(err.msg, want);
  free(b);

  /* An allocation naming site 5, never defined. */
  static const uint8_t undefined[] = {'A',  'S',  'T',  'R', 'A', 'C',
                                      'E',  0,    1,    0,   0,   0xCE,
                                      0x16, 0x02, 0x40, 0x0F};
  put_file("u.astrace", undefined, sizeof undefined);
  assert_int_equal(read_all("u.astrace", &err), AS_EFORMAT);
  path_of(p, sizeof p, "u.astrace");
  snprintf(want, sizeof want,
           "%s: byte offset 11: expected a site id defined by an earlier "
           "site event, got @5",
           p);
  assert_string_equal(err.msg, want);
}

typedef struct live_s live_t;
struct live_s {
  uint64_t site[8], size[8];
  unsigned n;
};

static as_status_t note_live(void *user, uint64_t id, uint64_t site,
                             uint64_t size, as_err_t *err) {
  (void)err;
  live_t *l = user;
  assert_true(id < 8);
  l->site[id] = site;
  l->size[id] = size;
  l->n++;
  return AS_OK;
}

static void tracker_knows_each_live_objects_site(void **state) {
  (void)state;
  put_file("d.trace", sample, sizeof sample - 1);
  char            p[256];
  trace_source_t *src, *w;
  as_err_t        err = {0};
  path_of(p, sizeof p, "d.trace");
  assert_int_equal(trace_open(p, &src, &err), AS_OK);
  assert_int_equal(trace_sites_wrap(src, &w, &err), AS_OK);
  trace_event_t ev;
  while (trace_source_next(w, &ev, &err) == AS_OK) {
  }
  assert_true(trace_sites_any(w));
  live_t l = {0};
  assert_int_equal(trace_sites_each_live(w, note_live, &l, &err), AS_OK);
  assert_int_equal(l.n, 3);
  assert_int_equal(l.site[0], 1); /* a realloc without a site keeps it */
  assert_int_equal(l.size[0], 128);
  assert_int_equal(l.site[1], 0); /* reused id, allocated with no site */
  assert_int_equal(l.size[1], 8);
  assert_int_equal(l.site[2], 1);
  uint32_t             nf = 0;
  const trace_frame_t *f = trace_sites_frames(w, 2, &nf);
  assert_non_null(f);
  assert_int_equal(nf, 2);
  assert_int_equal(f[1].offset, UINT64_MAX);
  assert_string_equal(trace_sites_module(w, f[1].module),
                      "/opt/with space/lib.so");
  assert_null(trace_sites_frames(w, 3, &nf));
  trace_source_close(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(text_and_binary_round_trip),
      cmocka_unit_test(long_sites_cross_the_window),
      cmocka_unit_test(undefined_and_repeated_definitions_are_refused),
      cmocka_unit_test(binary_errors_name_the_offset),
      cmocka_unit_test(tracker_knows_each_live_objects_site),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
