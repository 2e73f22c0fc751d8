/* tests/unit/test_import_malloclab.c -- CS:APP malloc lab traces into
 * traces: the exact events of hand-written traces in the handout's format
 * (both header layouts), the Autolab driver's corner cases (free(NULL),
 * realloc of a NULL block, realloc to 0, 'a' over a live block), and one
 * exact message per kind of bad input.  The handout's own .rep files are
 * not redistributable, so the traces here are written for the test.
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

#include "traces/import_malloclab.h"
#include "traces/import_util.h"
#include "traces/trace_io.h"

#define HEADER "allocsim-trace 1\n"

/* Imports text (100 ns per event) and returns the status and the canonical
 * text written (malloc'd, provenance included) in *out. */
static as_status_t import_text(const char *text, size_t text_len,
                               import_malloclab_stats_t *st, as_err_t *err,
                               char **out) {
  size_t len = 0;
  *out = NULL;
  FILE *mem = open_memstream(out, &len);
  FILE *in = fmemopen((void *)text, text_len, "r");
  assert_non_null(mem);
  assert_non_null(in);
  trace_meta_t meta;
  memset(&meta, 0, sizeof meta);
  trace_writer_t *w;
  assert_int_equal(
      import_writer_open_stream(mem, "out", TRACE_FORMAT_TEXT, &meta, &w, err),
      AS_OK);
  import_malloclab_opts_t o = {.tick_ns = 100};
  memset(err, 0, sizeof *err);
  as_status_t rc = import_malloclab_stream(in, "t.rep", w, &meta, &o, st, err);
  as_err_t    cerr = {0};
  assert_int_equal(trace_writer_close(w, &cerr), AS_OK);
  fclose(in);
  return rc;
}

/* text_len bytes of text, which may hold a NUL. */
static void expect_error_len(const char *text, size_t text_len,
                             const char *msg) {
  import_malloclab_stats_t st;
  as_err_t                 err;
  char                    *out;
  assert_int_equal(import_text(text, text_len, &st, &err, &out), AS_EFORMAT);
  assert_string_equal(err.msg, msg);
  free(out);
}

static void expect_error(const char *text, const char *msg) {
  expect_error_len(text, strlen(text), msg);
}

/* The 2002 layout (heap hint, ids, ops, weight); ids recycled lowest
 * first; realloc keeps its object; line breaks mean nothing to fscanf. */
static void requests_import_to_exact_events(void **state) {
  (void)state;
  static const char        text[] = "20000\n3\n6\n1\n"
                                    "a 0 2040\na 1 2040\nf 1\n"
                                    "a 2 48 r 0 4072\n"
                                    "f 0\n";
  import_malloclab_stats_t st;
  as_err_t                 err;
  char                    *out;
  assert_int_equal(import_text(text, strlen(text), &st, &err, &out), AS_OK);
  assert_string_equal(out, HEADER "#@ source=malloclab\n"
                                  "#@ malloclab_header=20000 3 6 1\n"
                                  "#@ clock=synthetic, 100 ns per event\n"
                                  "#@ threads=1 (the driver's)\n"
                                  "0 0 malloc 0 2040\n"
                                  "100 0 malloc 1 2040\n"
                                  "200 0 free 1\n"
                                  "300 0 malloc 1 48\n"
                                  "400 0 realloc 0 4072\n"
                                  "500 0 free 0\n");
  assert_int_equal(st.requests, 6);
  assert_int_equal(st.num_ids, 3);
  assert_int_equal(st.mallocs, 3);
  assert_int_equal(st.reallocs, 1);
  assert_int_equal(st.frees, 2);
  assert_int_equal(st.live_at_end, 1);
  assert_int_equal(st.max_live_ids, 2);
  assert_int_equal(st.lines, 9);
  free(out);
}

/* The Autolab layout (weight, ids, ops, ignore-ranges) and the driver's
 * corners: f -1 is free(NULL); r of a block never allocated is
 * realloc(NULL) = malloc; r to 0 frees and leaves NULL, so a later f of it
 * is free(NULL); a over a live block leaks the old one. */
static void autolab_corners_follow_the_driver(void **state) {
  (void)state;
  static const char        text[] = "0 4 8 0\n"
                                    "f -1\n"
                                    "r 0 10\n"
                                    "r 0 0\n"
                                    "f 0\n"
                                    "a 1 100\n"
                                    "a 1 200\n"
                                    "a 3 16\n"
                                    "r 2 5\n";
  import_malloclab_stats_t st;
  as_err_t                 err;
  char                    *out;
  assert_int_equal(import_text(text, strlen(text), &st, &err, &out), AS_OK);
  const char *events = strstr(out, "\n0 0 ");
  assert_non_null(events);
  assert_string_equal(events + 1, "0 0 malloc 0 10\n"
                                  "100 0 free 0\n"
                                  "200 0 malloc 0 100\n"
                                  "300 0 malloc 1 200\n" /* 0 leaks */
                                  "400 0 malloc 2 16\n"
                                  "500 0 malloc 3 5\n");
  assert_int_equal(st.null_frees, 2);
  assert_int_equal(st.leaked, 1);
  assert_int_equal(st.mallocs, 5);
  assert_int_equal(st.frees, 1);
  assert_int_equal(st.live_at_end, 4);
  free(out);
}

static void bad_input_is_refused_with_place_and_expectation(void **state) {
  (void)state;
  expect_error("", "t.rep:1: expected the first header number (heap-size "
                   "hint or weight, -2147483648 to 2147483647), got end of "
                   "file");
  expect_error("1 x", "t.rep:1: expected the number of block ids (header "
                      "line 2, 0 to 2147483647), got 'x'");
  expect_error("1\n-2", "t.rep:2: expected the number of block ids (header "
                        "line 2, 0 to 2147483647), got '-2'");
  expect_error("1\n2147483648", "t.rep:2: expected the number of block ids "
                                "(header line 2, 0 to 2147483647), got "
                                "'2147483648'");
  expect_error("1 1 3000000000", "t.rep:1: expected the number of requests "
                                 "(header line 3, 0 to 2147483647), got "
                                 "'3000000000'");
  expect_error("1 1 1", "t.rep:1: expected the fourth header number (weight "
                        "or ignore-ranges flag, -2147483648 to 2147483647), "
                        "got end of file");
  expect_error("1 1 1 1\nm 0 4", "t.rep:2: expected a request 'a ID SIZE', "
                                 "'r ID SIZE' or 'f ID', got 'm'");
  expect_error("1 2 1 1\na 2 4", "t.rep:2: expected a block id from 0 to 1 "
                                 "(the header's 2 ids), got '2'");
  expect_error("1 2 1 1\nf -2", "t.rep:2: expected a block id from -1 or 0 "
                                "to 1 (the header's 2 ids), got '-2'");
  expect_error("1 1 1 1\na 0 4294967296",
               "t.rep:2: expected a size in bytes (0 to 4294967295), got "
               "'4294967296'");
  expect_error("1 1 1 1\na 0", "t.rep:2: expected a size in bytes (0 to "
                               "4294967295), got end of file");
  expect_error("1 1 1 1\na 0 8\nf 0",
               "t.rep:3: expected end of file after the header's 1 requests, "
               "got 'f'");
  expect_error("1 1 3 1\na 0 8\nf 0\n",
               "t.rep:4: expected 3 requests (header line 3), found 2, got "
               "end of file");
  expect_error("1 3 1 1\na 1 8\n",
               "t.rep: expected block ids up to 2 (header line 2 says 3 ids), "
               "got up to 1");
  expect_error("1 1 3 1\na 0 8\nf 0\nf 0\n",
               "t.rep:4: expected a free of a live block, got block 0, "
               "already freed (the driver would pass a dangling pointer)");
  expect_error("1 1 3 1\na 0 8\nf 0\nr 0 9\n",
               "t.rep:4: expected a realloc of a live block, got block 0, "
               "already freed (the driver would pass a dangling pointer)");
  /* A NUL is shown where it is, not as a '?' the file does not hold. */
  static const char nul_size[] = "1 1 1 1\na 0 1\0x\n";
  expect_error_len(nul_size, sizeof nul_size - 1,
                   "t.rep:2: expected a size in bytes (0 to 4294967295), got "
                   "'1\\x00x'");
  static const char nul_op[] = "1 1 1 1\na\0 0 8\n";
  expect_error_len(nul_op, sizeof nul_op - 1,
                   "t.rep:2: expected a request 'a ID SIZE', 'r ID SIZE' or "
                   "'f ID', got 'a\\x00'");
}

/* The file form: a compressed input is read, provenance names it, and a
 * failed import leaves no output behind. */
static void file_form_reads_gzip_and_leaves_nothing_on_failure(void **state) {
  (void)state;
  char dir[] = "/tmp/allocsim-malloclab-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char rep[128], gz[128], out[128], cmd[512];
  snprintf(rep, sizeof rep, "%s/t.rep", dir);
  snprintf(gz, sizeof gz, "%s/t.rep.gz", dir);
  snprintf(out, sizeof out, "%s/t.trace", dir);
  FILE *f = fopen(rep, "w");
  assert_non_null(f);
  fputs("1 1 2 1\na 0 64\nf 0\n", f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "gzip -c %s > %s", rep, gz);
  assert_int_equal(system(cmd), 0);
  import_malloclab_stats_t st;
  as_err_t                 err = {0};
  assert_int_equal(
      import_malloclab_file(gz, out, TRACE_FORMAT_TEXT, NULL, &st, &err),
      AS_OK);
  assert_int_equal(st.events, 2);
  trace_source_t *src;
  assert_int_equal(trace_open(out, &src, &err), AS_OK);
  assert_string_equal(trace_meta_get(&src->meta, "compression"), "gzip");
  assert_string_equal(trace_meta_get(&src->meta, "input"), gz);
  trace_source_close(src);
  remove(out);
  f = fopen(rep, "w");
  assert_non_null(f);
  fputs("1 1 2 1\na 0 64\nq 0\n", f);
  fclose(f);
  assert_int_equal(
      import_malloclab_file(rep, out, TRACE_FORMAT_TEXT, NULL, &st, &err),
      AS_EFORMAT);
  assert_int_equal(access(out, F_OK), -1);
  remove(rep);
  remove(gz);
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(requests_import_to_exact_events),
      cmocka_unit_test(autolab_corners_follow_the_driver),
      cmocka_unit_test(bad_input_is_refused_with_place_and_expectation),
      cmocka_unit_test(file_form_reads_gzip_and_leaves_nothing_on_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
