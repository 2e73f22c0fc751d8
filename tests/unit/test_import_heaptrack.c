/* tests/unit/test_import_heaptrack.c -- heaptrack data files into traces:
 * the real files in tests/data/heaptrack/ (made by heaptrack 1.4.0 on
 * Debian 12 from tests/integration/capture_progs/heaptrack_steps.c; the
 * commands are in tests/data/heaptrack/README.md), hand-written files for
 * exact events of each line kind in both file formats, the signs of what
 * heaptrack does not record, inserted trims, and one exact message per kind
 * of bad input (not heaptrack, an unsupported format, truncated, malformed
 * lines, undefined indices, raw and interpreted lines mixed).  When
 * heaptrack is installed, one test runs it on the same program and checks
 * the import of what it writes.
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

#include "traces/compressed.h"
#include "traces/import_heaptrack.h"
#include "traces/trace_io.h"

#define HEADER "allocsim-trace 1\n"

/* ---- Helpers ------------------------------------------------------------ */

/* Imports text (a decompressed heaptrack file) with inserts (may be NULL);
 * returns the status and the canonical text written (malloc'd, provenance
 * removed) in *out. */
static as_status_t import_text(const char *text, size_t len,
                               import_inserts_t         *ins,
                               import_heaptrack_stats_t *st, as_err_t *err,
                               char **out) {
  size_t olen = 0;
  char  *raw = NULL;
  FILE  *mem = open_memstream(&raw, &olen);
  FILE  *in = len ? fmemopen((void *)text, len, "r") : fopen("/dev/null", "r");
  assert_non_null(mem);
  assert_non_null(in);
  trace_meta_t meta;
  memset(&meta, 0, sizeof meta);
  trace_writer_t *w;
  assert_int_equal(
      import_writer_open_stream(mem, "out", TRACE_FORMAT_TEXT, &meta, &w, err),
      AS_OK);
  import_heaptrack_opts_t o = {.inserts = ins};
  memset(err, 0, sizeof *err);
  as_status_t rc = import_heaptrack_stream(in, "h.txt", w, &meta, &o, st, err);
  as_err_t    cerr = {0};
  assert_int_equal(trace_writer_close(w, &cerr), AS_OK);
  fclose(in);
  /* Drop the provenance lines: the tests below check them separately. */
  *out = calloc(1, olen + 1);
  assert_non_null(*out);
  for (char *p = raw, *q = *out; *p;) {
    char  *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);
    if (strncmp(p, "#@ ", 3) != 0) {
      memcpy(q, p, n);
      q += n;
    }
    p += n;
  }
  free(raw);
  return rc;
}

static void expect_error(const char *text, const char *msg) {
  import_heaptrack_stats_t st;
  as_err_t                 err;
  char                    *out;
  assert_int_equal(import_text(text, strlen(text), NULL, &st, &err, &out),
                   AS_EFORMAT);
  assert_string_equal(err.msg, msg);
  free(out);
}

static void data_path(char *buf, size_t len, const char *file) {
  snprintf(buf, len, "%s/tests/data/heaptrack/%s", ALLOCSIM_SOURCE_DIR, file);
}

/* Imports a file into a new text trace and opens it; a failed import must
 * leave no file behind. */
static as_status_t import_path(const char *path, import_inserts_t *ins,
                               import_heaptrack_stats_t *st,
                               trace_source_t **src, as_err_t *err) {
  char dir[] = "/tmp/allocsim-ht-XXXXXX", out[64];
  assert_non_null(mkdtemp(dir));
  snprintf(out, sizeof out, "%s/out.trace", dir);
  import_heaptrack_opts_t o = {.inserts = ins};
  as_status_t             rc =
      import_heaptrack_file(path, out, TRACE_FORMAT_TEXT, &o, st, err);
  if (rc == AS_OK)
    assert_int_equal(trace_open(out, src, err), AS_OK);
  else
    assert_int_equal(access(out, F_OK), -1);
  unlink(out); /* an open source keeps reading it */
  rmdir(dir);
  return rc;
}

/* ---- Hand-written files ------------------------------------------------- */

/* An interpreted file of format 3: strings with their length, allocation
 * infos, timestamps to the clock, RSS samples, frees of the newest block
 * of an info. */
static void interpreted_file_imports_to_exact_events(void **state) {
  (void)state;
  static const char        text[] = "v 10400 3\n"
                                    "X ./prog arg\n"
                                    "I 1000 5e2921\n"
                                    "s 4 main\n"
                                    "i 55baa2edc1ae 1 1\n"
                                    "t 1 0\n"
                                    "a 3e8 1\n"
                                    "+ 0\n"
                                    "+ 0\n"
                                    "a 10 1\n"
                                    "+ 1\n"
                                    "c a\n"
                                    "R 3e8\n"
                                    "- 0\n"
                                    "c 14\n"
                                    "R 3e0\n"
                                    "- 1\n"
                                    "- 0\n"
                                    "# strings: 1\n"
                                    "# ips: 1\n";
  import_heaptrack_stats_t st;
  as_err_t                 err;
  char                    *out;
  assert_int_equal(import_text(text, strlen(text), NULL, &st, &err, &out),
                   AS_OK);
  assert_string_equal(out, HEADER "0 0 malloc 0 1000\n"
                                  "0 0 malloc 1 1000\n"
                                  "0 0 malloc 2 16\n"
                                  "10000000 0 rss 4096000\n"
                                  "10000000 0 free 1\n" /* the newest */
                                  "20000000 0 rss 4063232\n"
                                  "20000000 0 free 2\n"
                                  "20000000 0 free 0\n");
  assert_false(st.raw);
  assert_true(st.complete);
  assert_int_equal(st.file_version, 3);
  assert_int_equal(st.heaptrack_version, 0x010400);
  assert_int_equal(st.page_size, 4096);
  assert_int_equal(st.mallocs, 3);
  assert_int_equal(st.frees, 3);
  assert_int_equal(st.ambiguous_frees, 1);
  assert_int_equal(st.rss_samples, 2);
  assert_int_equal(st.peak_rss_bytes, 4096000);
  assert_int_equal(st.end_t_ns, 20000000);
  assert_string_equal(st.command, "./prog arg");
  assert_false(st.python);
  free(out);
}

/* A raw file: addresses to dense recycled ids, a free of an address
 * allocated before heaptrack started skipped, an address allocated again
 * while live freed first; format 2 strings without lengths. */
static void raw_file_imports_to_exact_events(void **state) {
  (void)state;
  static const char        text[] = "v 10200 2\n"
                                    "x /bin/prog with space\n"
                                    "X /bin/prog\n"
                                    "I 1000 100\n"
                                    "m 1 -\n"
                                    "m x 55f38ee60000 0 738\n"
                                    "t 7f53b35ecb9f 0\n"
                                    "+ 10 1 1000\n"
                                    "+ 20 1 2000\n"
                                    "- 9999\n"
                                    "- 1000\n"
                                    "+ 30 1 3000\n"
                                    "+ 40 1 2000\n"
                                    "c 5\n"
                                    "R 10\n";
  import_heaptrack_stats_t st;
  as_err_t                 err;
  char                    *out;
  assert_int_equal(import_text(text, strlen(text), NULL, &st, &err, &out),
                   AS_OK);
  assert_string_equal(out, HEADER "0 0 malloc 0 16\n"
                                  "0 0 malloc 1 32\n"
                                  "0 0 free 0\n"
                                  "0 0 malloc 0 48\n"
                                  "0 0 free 1\n" /* 0x2000 again */
                                  "0 0 malloc 1 64\n"
                                  "5000000 0 rss 65536\n");
  assert_true(st.raw);
  assert_int_equal(st.file_version, 2);
  assert_int_equal(st.unmatched_frees, 1);
  assert_int_equal(st.missed_frees, 1);
  assert_int_equal(st.live_at_end, 2);
  free(out);
}

/* The signs of what heaptrack misses: RSS falling with no free (the trim
 * goes unseen), a CPython command, pymalloc's functions in the stacks. */
static void unrecorded_calls_leave_signs(void **state) {
  (void)state;
  static const char text[] = "v 10400 3\n"
                             "X /usr/bin/python3 -c pass\n"
                             "I 1000 100\n"
                             "s 10 _PyObject_Malloc\n"
                             "a 100 1\n"
                             "+ 0\n"
                             "c a\nR 100\n" /* line 7, 8 */
                             "- 0\n"
                             "c 14\nR f0\n"  /* -64 KiB with a free */
                             "c 1e\nR e0\n"  /* -64 KiB, no free */
                             "c 28\nR df\n"; /* -4 KiB: too small */
  import_heaptrack_stats_t st;
  as_err_t                 err;
  char                    *out;
  assert_int_equal(import_text(text, strlen(text), NULL, &st, &err, &out),
                   AS_OK);
  assert_int_equal(st.rss_drops, 1);
  assert_int_equal(st.largest_drop_bytes, 65536);
  assert_int_equal(st.largest_drop_t_ns, 30000000);
  assert_int_equal(st.largest_drop_from_line, 11);
  assert_int_equal(st.largest_drop_line, 13);
  assert_true(st.python);
  assert_true(st.pymalloc_frames);
  assert_false(st.complete);
  free(out);
}

/* A command line heaptrack read from /proc/self/cmdline may hold any byte;
 * the provenance keeps what a trace can carry back (found by fuzzing). */
static void control_bytes_in_the_command_are_cleaned(void **state) {
  (void)state;
  static const char text[] = "v 10400 3\nX  ./p\x05q\x7f \t\nI 1000 1\n"
                             "a 10 1\n+ 0\n";
  size_t            len = 0;
  char             *out = NULL;
  FILE             *mem = open_memstream(&out, &len);
  FILE             *in = fmemopen((void *)text, sizeof text - 1, "r");
  trace_meta_t      meta;
  memset(&meta, 0, sizeof meta);
  trace_writer_t *w;
  as_err_t        err = {0};
  assert_int_equal(
      import_writer_open_stream(mem, "out", TRACE_FORMAT_TEXT, &meta, &w, &err),
      AS_OK);
  import_heaptrack_stats_t st;
  assert_int_equal(
      import_heaptrack_stream(in, "h.txt", w, &meta, NULL, &st, &err), AS_OK);
  assert_int_equal(trace_writer_close(w, &err), AS_OK);
  fclose(in);
  assert_string_equal(trace_meta_get(&meta, "command"), "./p?q?");
  assert_non_null(strstr(out, "#@ command=./p?q?\n"));
  free(out);
}

/* --assume-trim-at and a marks file put events after the input line they
 * name, at the clock reached there; "end" after the last; what follows an
 * idle comes when it ends. */
static void inserted_events_land_after_their_line(void **state) {
  (void)state;
  static const char text[] = "v 10400 3\n"
                             "a 100 1\n"
                             "+ 0\n"
                             "c a\n"
                             "- 0\n";
  import_inserts_t  ins = {0};
  as_err_t          err = {0};
  char              marks[] = "/tmp/allocsim-marks-XXXXXX";
  int               fd = mkstemp(marks);
  assert_true(fd >= 0);
  const char mtext[] = "# restored by hand\n"
                       "3 mark peak\n"
                       "end idle 2ms\n"
                       "  4   trim 128K\n";
  assert_int_equal(write(fd, mtext, sizeof mtext - 1),
                   (ssize_t)(sizeof mtext - 1));
  close(fd);
  assert_int_equal(import_inserts_read(&ins, marks, &err), AS_OK);
  unlink(marks);
  assert_int_equal(import_inserts_add_trim(&ins, IMPORT_AT_END, &err), AS_OK);
  import_inserts_sort(&ins);
  import_heaptrack_stats_t st;
  char                    *out;
  assert_int_equal(import_text(text, strlen(text), &ins, &st, &err, &out),
                   AS_OK);
  assert_string_equal(out, HEADER "0 0 malloc 0 256\n"
                                  "0 0 mark peak\n"
                                  "10000000 0 trim 131072\n"
                                  "10000000 0 free 0\n"
                                  "10000000 0 idle 2000000\n"
                                  "12000000 0 trim 0\n"); /* after it */
  assert_int_equal(st.inserted, 4);
  assert_int_equal(st.events, 6);
  import_inserts_free(&ins);
  free(out);
}

static void bad_marks_files_are_refused(void **state) {
  (void)state;
  static const struct {
    const char *text, *msg;
  } cases[] = {
      {"x mark a\n", ":1: expected an input line number or 'end', got 'x "
                     "mark a'"},
      {"3\n", ":1: expected 'mark', 'trim' or 'idle' after the line, got end "
              "of line"},
      {"3 jump\n", ":1: expected 'mark', 'trim' or 'idle', got 'jump'"},
      {"3 mark\n", ":1: expected a label of 1 to 63 printable bytes, bare "
                   "or double-quoted ('\\\"' and '\\\\' inside quotes), "
                   "got end of line"},
      {"\n3 trim lots\n", ":2: expected a pad in bytes ('0', '128K') or "
                          "nothing, got 'lots'"},
      {"3 idle\n", ":1: expected a duration ('10ms', '2s'), got end of line"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char path[] = "/tmp/allocsim-marks-XXXXXX";
    int  fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(cases[i].text);
    assert_int_equal(write(fd, cases[i].text, n), (ssize_t)n);
    close(fd);
    import_inserts_t ins = {0};
    as_err_t         err = {0};
    assert_int_equal(import_inserts_read(&ins, path, &err), AS_EFORMAT);
    char want[512];
    snprintf(want, sizeof want, "%s%s", path, cases[i].msg);
    assert_string_equal(err.msg, want);
    import_inserts_free(&ins);
    unlink(path);
  }
}

static void bad_input_is_refused_with_place_and_expectation(void **state) {
  (void)state;
  expect_error("", "h.txt:1: expected 'v VERSION FILE_FORMAT' (the first "
                   "line of a heaptrack data file), got end of file");
  expect_error("= Start\n", "h.txt:1: expected 'v VERSION FILE_FORMAT' (the "
                            "first line of a heaptrack data file), got '= "
                            "Start'");
  expect_error("v 10500 4\n", "h.txt:1: expected heaptrack file format 2 or "
                              "3 (heaptrack 1.1 to 1.5), got format 4 "
                              "(written by heaptrack 1.5.0)");
  expect_error("v 10000 1\n", "h.txt:1: expected heaptrack file format 2 or "
                              "3 (heaptrack 1.1 to 1.5), got format 1 "
                              "(written by heaptrack 1.0.0)");
  expect_error("v 10400 3\n+ 0", "h.txt:2: expected a line ending in a "
                                 "newline, got end of file (truncated "
                                 "file?)");
  expect_error("v 10400 3\nc zz\n", "h.txt:2: expected 'c MILLISECONDS' in "
                                    "hex, got 'c zz'");
  expect_error("v 10400 3\nR 1 2\n", "h.txt:2: expected 'R PAGES' in hex, "
                                     "got 'R 1 2'");
  expect_error("v 10400 3\na 10 0\n+ 1\n",
               "h.txt:3: expected an allocation index below 1 (defined by 'a' "
               "lines so far), got '+ 1'");
  expect_error("v 10400 3\na 10 0\n- 0\n",
               "h.txt:3: expected a '-' of an allocation index with a live "
               "block, got '- 0'");
  expect_error("v 10400 3\na 10 0\nx 4 prog\n",
               "h.txt:3: expected a line of an interpreted heaptrack file, got "
               "'x 4 prog'");
  expect_error("v 10400 3\n+ 10 0 1000\na 10 0\n",
               "h.txt:3: expected a line of a raw heaptrack file, got 'a 10 "
               "0'");
  expect_error("v 10400 3\n- 1000\n", "h.txt:2: expected an allocation ('+') "
                                      "before the first free, got '- 1000'");
  expect_error("v 10400 3\nv 10400 3\n", "h.txt:2: expected one 'v' line, the "
                                         "first, got 'v 10400 3'");
  expect_error("v 10400 3\nZ 1\n",
               "h.txt:2: expected a heaptrack line ('+', '-', 'a', 't', 'i', "
               "'s', 'c', 'R', 'X', 'I', 'x', 'm', 'A', 'S' or '#'), got 'Z "
               "1'");
  expect_error("v 10400 3\ns 20 short\n", "h.txt:2: expected 's LENGTH "
                                          "STRING', got 's 20 short'");
  expect_error("v 10400 3\nI 1001 5\n", "h.txt:2: expected a page size that "
                                        "is a power of two, got 'I 1001 5'");
  static const char        nul[] = "v 10400 3\nc \0\n";
  import_heaptrack_stats_t st;
  as_err_t                 err;
  char                    *out;
  assert_int_equal(import_text(nul, sizeof nul - 1, NULL, &st, &err, &out),
                   AS_EFORMAT);
  assert_string_equal(err.msg, "h.txt:2: expected text (a heaptrack data "
                               "file), got 'c \\x00'");
  free(out);
  /* Bytes a message would show as '?' (a tab, a CRLF's '\r') are shown as
   * they are in the file. */
  expect_error("v 10400 3\na 10 0\n+\t0\n",
               "h.txt:3: expected a record type of one character, then a "
               "space or the end of the line, got '+\\x090'");
  expect_error("v 10400 3\nc 1f\r\n", "h.txt:2: expected 'c MILLISECONDS' in "
                                      "hex, got 'c 1f\\x0d'");
}

/* ---- Real files --------------------------------------------------------- */

/* Counts the mallocs of size bytes in src and returns the events read. */
static uint64_t scan(trace_source_t *src, uint64_t size, uint64_t *n_size,
                     uint64_t *n_rss) {
  trace_event_t ev;
  as_err_t      err = {0};
  uint64_t      n = 0;
  *n_size = *n_rss = 0;
  while (trace_source_next(src, &ev, &err) == AS_OK) {
    n++;
    *n_size += ev.op == TRACE_MALLOC && ev.size == size;
    *n_rss += ev.op == TRACE_RSS;
  }
  return n;
}

/* The raw and interpreted files of one program: the same 203 allocations
 * (200 blocks of 3000 bytes, the realloc's 6000, the 2 MiB block, and the
 * 72704-byte pool libstdc++ allocates when heaptrack's library loads it),
 * provenance from the header, the unseen malloc_trim as an RSS fall. */
static void real_heaptrack_files_import(void **state) {
  (void)state;
  static const struct {
    const char *file;
    bool        raw;
    uint64_t    events, rss;
  } cases[] = {
      {"steps.zst", false, 421, 15},
      {"steps.raw.zst", true, 428, 22},
      {"steps.raw.gz", true, 428, 22},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char path[512];
    data_path(path, sizeof path, cases[i].file);
    import_heaptrack_stats_t st;
    trace_source_t          *src;
    as_err_t                 err = {0};
    assert_int_equal(import_path(path, NULL, &st, &src, &err), AS_OK);
    assert_int_equal(st.raw, cases[i].raw);
    assert_int_equal(st.mallocs, 203);
    assert_int_equal(st.frees, 203);
    assert_int_equal(st.live_at_end, 0);
    assert_int_equal(st.rss_samples, cases[i].rss);
    assert_int_equal(st.rss_drops, 1); /* the malloc_trim */
    assert_int_equal(st.largest_drop_bytes, 112 * 4096);
    assert_string_equal(trace_meta_get(&src->meta, "source"), "heaptrack");
    assert_string_equal(trace_meta_get(&src->meta, "heaptrack_version"),
                        "1.4.0");
    assert_string_equal(trace_meta_get(&src->meta, "page_size"), "4096");
    assert_string_equal(trace_meta_get(&src->meta, "heaptrack_data"),
                        cases[i].raw ? "raw" : "interpreted");
    assert_string_equal(trace_meta_get(&src->meta, "compression"),
                        strstr(cases[i].file, ".gz") ? "gzip" : "zstd");
    uint64_t n3000, nrss;
    assert_int_equal(scan(src, 3000, &n3000, &nrss), cases[i].events);
    assert_int_equal(n3000, 200);
    assert_int_equal(nrss, cases[i].rss);
    trace_source_close(src);
  }
}

/* A compressed file cut short is refused with the decompressor's reason
 * and where, not read as a shorter log. */
static void truncated_files_are_refused(void **state) {
  (void)state;
  static const char *const files[] = {"steps.zst", "steps.raw.gz"};
  for (size_t i = 0; i < 2; i++) {
    char path[512], cut[] = "/tmp/allocsim-cut-XXXXXX", cmd[1200];
    data_path(path, sizeof path, files[i]);
    int fd = mkstemp(cut);
    assert_true(fd >= 0);
    close(fd);
    snprintf(cmd, sizeof cmd, "head -c 400 %s > %s", path, cut);
    assert_int_equal(system(cmd), 0);
    import_heaptrack_stats_t st;
    trace_source_t          *src = NULL;
    as_err_t                 err = {0};
    assert_int_equal(import_path(cut, NULL, &st, &src, &err), AS_EFORMAT);
    char want[256];
    snprintf(want, sizeof want,
             "%s: %s stream cut short (truncated file?) "
             "at compressed byte 400",
             cut, i == 0 ? "zstd" : "gzip");
    assert_string_equal(err.msg, want);
    unlink(cut);
  }
}

/* heaptrack itself, when installed: the same program, both kinds of file. */
static void live_heaptrack_run_imports(void **state) {
  (void)state;
  if (system("command -v heaptrack >/dev/null 2>&1") != 0) {
    print_message("heaptrack not installed: live run skipped\n");
    skip();
  }
  char dir[] = "/tmp/allocsim-htlive-XXXXXX";
  assert_non_null(mkdtemp(dir));
  for (int raw = 0; raw < 2; raw++) {
    char cmd[1024], path[256];
    snprintf(cmd, sizeof cmd,
             "heaptrack %s -o %s/run %s/tests/integration/capture_progs/"
             "heaptrack_steps >/dev/null 2>&1",
             raw ? "--raw" : "", dir, ALLOCSIM_BINARY_DIR);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof path, "%s/run.%szst", dir, raw ? "raw." : "");
    import_heaptrack_stats_t st;
    trace_source_t          *src;
    as_err_t                 err = {0};
    assert_int_equal(import_path(path, NULL, &st, &src, &err), AS_OK);
    assert_int_equal(st.raw, raw);
    /* 160 ms of pauses and a 10 ms timer; a loaded machine delays the
     * timer thread, so only one sample is certain. */
    assert_true(st.rss_samples >= 1);
    uint64_t n3000, nrss;
    scan(src, 3000, &n3000, &nrss);
    assert_int_equal(n3000, 200);
    trace_source_close(src);
    unlink(path);
  }
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(interpreted_file_imports_to_exact_events),
      cmocka_unit_test(raw_file_imports_to_exact_events),
      cmocka_unit_test(unrecorded_calls_leave_signs),
      cmocka_unit_test(control_bytes_in_the_command_are_cleaned),
      cmocka_unit_test(inserted_events_land_after_their_line),
      cmocka_unit_test(bad_marks_files_are_refused),
      cmocka_unit_test(bad_input_is_refused_with_place_and_expectation),
      cmocka_unit_test(real_heaptrack_files_import),
      cmocka_unit_test(truncated_files_are_refused),
      cmocka_unit_test(live_heaptrack_run_imports),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
