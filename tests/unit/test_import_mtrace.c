/* tests/unit/test_import_mtrace.c -- glibc mtrace logs into traces: the
 * exact events of a hand-written log and of a real one, unmatched frees
 * (an error naming the line, or with lenient counted and skipped), and one
 * exact message per kind of malformed line.
 *
 * tests/data/mtrace_small.log and mtrace_unmatched.log are real logs, from
 * glibc 2.36 (Debian 12) running small programs built with -rdynamic under
 * MALLOC_TRACE=... LD_PRELOAD=libc_malloc_debug.so.0 (the programs are in
 * the comments above the tests that read them).  Events are compared as
 * canonical text, which spells every field.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sim/cost.h"
#include "traces/import_mtrace.h"
#include "traces/trace_io.h"

#define HEADER "allocsim-trace 1\n"

/* ---- Helpers ------------------------------------------------------------ */

/* Imports the log in f (named name) with the given options; returns the
 * status and the canonical text written so far in *out (malloc'd). */
static as_status_t import_file(FILE *f, const char *name, bool lenient,
                               uint64_t tick_ns, import_mtrace_stats_t *st,
                               as_err_t *err, char **out) {
  size_t len = 0;
  *out = NULL;
  FILE *mem = open_memstream(out, &len);
  assert_non_null(mem);
  trace_meta_t meta;
  memset(&meta, 0, sizeof meta);
  trace_writer_t *w;
  assert_int_equal(
      trace_writer_open_stream(mem, "out", TRACE_FORMAT_TEXT, &meta, &w, err),
      AS_OK);
  import_mtrace_opts_t o = {.lenient = lenient, .tick_ns = tick_ns};
  memset(err, 0, sizeof *err);
  as_status_t rc = import_mtrace_stream(f, name, w, &o, st, err);
  as_err_t    cerr = {0};
  assert_int_equal(trace_writer_close(w, &cerr), AS_OK);
  fclose(f);
  return rc;
}

static as_status_t import_text(const char *log, size_t len, bool lenient,
                               import_mtrace_stats_t *st, as_err_t *err,
                               char **out) {
  FILE *f = len > 0 ? fmemopen((void *)log, len, "r") : fopen("/dev/null", "r");
  assert_non_null(f);
  /* 100 ns per event: these tests check the events, not the cost model */
  return import_file(f, "h.log", lenient, 100, st, err, out);
}

static FILE *open_data(const char *file) {
  char path[512];
  snprintf(path, sizeof path, "%s/tests/data/%s", ALLOCSIM_SOURCE_DIR, file);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  return f;
}

/* Asserts that log fails with AS_EFORMAT and exactly message msg, in both
 * strict and lenient mode (malformed lines are never skipped). */
static void expect_error_len(const char *log, size_t len, const char *msg) {
  for (int lenient = 0; lenient < 2; lenient++) {
    import_mtrace_stats_t st;
    as_err_t              err;
    char                 *out;
    assert_int_equal(import_text(log, len, lenient, &st, &err, &out),
                     AS_EFORMAT);
    assert_int_equal(err.code, AS_EFORMAT);
    assert_string_equal(err.msg, msg);
    free(out);
  }
}

static void expect_error(const char *log, const char *msg) {
  expect_error_len(log, strlen(log), msg);
}

/* ---- Tests -------------------------------------------------------------- */

/* Every form glibc 2.36's tr_where and the *_mtrace_after functions write:
 * no caller, "@ [%p] ", a file name with a space, a symbol offset either
 * side, malloc(0) ("0" from %#lx), a failed malloc ("(nil)"), a failed
 * realloc ('!'), realloc(NULL, 0) returning NULL ("- (nil)"), a moving and
 * an in-place realloc, and ids recycled lowest first. */
static void hand_written_log_imports_to_exact_events(void **state) {
  (void)state;
  static const char     log[] = "= Start\n"
                                "+ 0x1000 0x10\n"
                                "@ [0x7f0000001234] + 0x2000 0x20\n"
                                "@ ./my prog:(main+2d)[0x11a6] + 0x3000 0\n"
                                "@ ./p:(main+40)[0x11b0] < 0x1000\n"
                                "@ ./p:(main+40)[0x11b0] > 0x4000 0x1000\n"
                                "@ ./p:[0x11c0] + (nil) 0x100000000\n"
                                "@ ./p:[0x11c4] ! 0x2000 0x7fffffff\n"
                                "@ ./p:[0x11c8] - 0x3000\n"
                                "@ ./p:[0x11cc] - (nil)\n"
                                "@ /lib/libc.so.6:(f-10)[0x11d0] + 0x5000 0x30\n"
                                "< 0x4000\n"
                                "> 0x4000 0x800\n"
                                "- 0x2000\n"
                                "- 0x4000\n"
                                "+ 0x6000 0xA\n"
                                "= End\n";
  import_mtrace_stats_t st;
  as_err_t              err;
  char                 *out;
  assert_int_equal(import_text(log, strlen(log), false, &st, &err, &out),
                   AS_OK);
  assert_string_equal(out, HEADER "0 0 malloc 0 16\n"
                                  "100 0 malloc 1 32\n"
                                  "200 0 malloc 2 0\n"
                                  "300 0 realloc 0 4096\n"
                                  "400 0 free 2\n"
                                  "500 0 malloc 2 48\n"
                                  "600 0 realloc 0 2048\n"
                                  "700 0 free 1\n"
                                  "800 0 free 0\n"
                                  "900 0 malloc 0 10\n");
  assert_int_equal(st.lines, 17);
  assert_int_equal(st.events, 10);
  assert_int_equal(st.mallocs, 5);
  assert_int_equal(st.reallocs, 2);
  assert_int_equal(st.frees, 3);
  assert_int_equal(st.failed, 2);
  assert_int_equal(st.null_frees, 1);
  assert_int_equal(st.live_at_end, 2);
  assert_int_equal(st.max_live_ids, 3);
  assert_int_equal(st.unmatched_frees + st.unmatched_reallocs + st.reused_live,
                   0);
  assert_true(st.saw_end);
  free(out);
}

static void tick_sets_the_synthetic_clock(void **state) {
  (void)state;
  static const char     log[] = "= Start\n+ 0x10 0x8\n- 0x10\n";
  FILE                 *f = fmemopen((void *)log, strlen(log), "r");
  import_mtrace_stats_t st;
  as_err_t              err;
  char                 *out;
  assert_int_equal(import_file(f, "h.log", false, 1000, &st, &err, &out),
                   AS_OK);
  assert_string_equal(out, HEADER "0 0 malloc 0 8\n1000 0 free 0\n");
  assert_false(st.saw_end); /* a log cut short still imports */
  free(out);
}

/* tests/data/mtrace_small.log, from:
 *   mtrace(); a = malloc(100); b = calloc(4, 1000);
 *   posix_memalign(&c, 64, 200); a = realloc(a, 5000);
 *   d = realloc(NULL, 32); e = malloc(200000); free(b);
 *   d = realloc(d, 0); free(NULL); f = malloc(0);
 *   free(c); free(e); free(f); free(a); g = malloc(48); muntrace(); */
static void real_glibc_log_imports_to_exact_events(void **state) {
  (void)state;
  import_mtrace_stats_t st;
  as_err_t              err;
  char                 *out;
  assert_int_equal(import_file(open_data("mtrace_small.log"), "small.log",
                               false, 100, &st, &err, &out),
                   AS_OK);
  assert_string_equal(out,
                      HEADER "0 0 malloc 0 100\n"
                             "100 0 malloc 1 4000\n"  /* calloc */
                             "200 0 malloc 2 200\n"   /* posix_memalign */
                             "300 0 realloc 0 5000\n" /* the '<' '>' pair */
                             "400 0 malloc 3 32\n"    /* realloc(NULL) */
                             "500 0 malloc 4 200000\n"
                             "600 0 free 1\n"
                             "700 0 free 3\n" /* realloc(d, 0) */
                             "800 0 malloc 1 0\n"
                             "900 0 free 2\n"
                             "1000 0 free 4\n"
                             "1100 0 free 1\n"
                             "1200 0 free 0\n"
                             "1300 0 malloc 0 48\n");
  assert_int_equal(st.lines, 17);
  assert_int_equal(st.live_at_end, 1);
  assert_int_equal(st.max_live_ids, 5);
  assert_true(st.saw_end);
  free(out);
}

/* tests/data/mtrace_threads.log, from (built with -rdynamic -fno-builtin):
 *   static void *work(void *arg) { void *p = malloc(100); free(p);
 *                                  return malloc(200); }
 *   mtrace(); a = malloc(64); pthread_create(&t, NULL, work, NULL);
 *   pthread_join(t, &r); free(r); free(a); muntrace();
 * The thread's two blocks come from its own arena, a mapped heap far from
 * the brk heap: the sign that the log had threads it does not record (the
 * 288-byte block is ld.so's DTV for the new thread, from the main arena). */
static void blocks_of_other_arenas_are_counted(void **state) {
  (void)state;
  import_mtrace_stats_t st;
  as_err_t              err;
  char                 *out;
  assert_int_equal(import_file(open_data("mtrace_threads.log"), "t.log", false,
                               100, &st, &err, &out),
                   AS_OK);
  assert_int_equal(st.mallocs, 4);
  assert_int_equal(st.other_arena_blocks, 2);
  assert_int_equal(st.first_other_arena_line, 4);
  free(out);
  static const char one_arena[] = "= Start\n+ 0x55be165c84a0 0x64\n"
                                  "+ 0x7f74e8420010 0x30d40\n"; /* mmap'd */
  assert_int_equal(
      import_text(one_arena, strlen(one_arena), false, &st, &err, &out), AS_OK);
  assert_int_equal(st.other_arena_blocks, 0);
  free(out);
}

/* A trim the log cannot show, restored after a given line and at the end;
 * none lands between the two halves of a realloc pair. */
static void inserted_trims_follow_their_lines(void **state) {
  (void)state;
  static const char log[] = "= Start\n"
                            "+ 0x1000 0x10\n"
                            "< 0x1000\n"
                            "> 0x2000 0x20\n"
                            "- 0x2000\n"
                            "= End\n";
  import_inserts_t  ins = {0};
  as_err_t          err = {0};
  assert_int_equal(import_inserts_add_trim(&ins, 3, &err), AS_OK);
  assert_int_equal(import_inserts_add_trim(&ins, IMPORT_AT_END, &err), AS_OK);
  assert_int_equal(import_inserts_add_trim(&ins, 2, &err), AS_OK);
  import_inserts_sort(&ins);
  FILE *f = fmemopen((void *)log, strlen(log), "r");
  assert_non_null(f);
  size_t       len = 0;
  char        *out = NULL;
  FILE        *mem = open_memstream(&out, &len);
  trace_meta_t meta;
  memset(&meta, 0, sizeof meta);
  trace_writer_t *w;
  assert_int_equal(
      trace_writer_open_stream(mem, "out", TRACE_FORMAT_TEXT, &meta, &w, &err),
      AS_OK);
  import_mtrace_opts_t  o = {.tick_ns = 100, .inserts = &ins};
  import_mtrace_stats_t st;
  assert_int_equal(import_mtrace_stream(f, "h.log", w, &o, &st, &err), AS_OK);
  assert_int_equal(trace_writer_close(w, &err), AS_OK);
  fclose(f);
  assert_string_equal(out, HEADER "0 0 malloc 0 16\n"
                                  "100 0 trim 0\n" /* after line 2 */
                                  "100 0 realloc 0 32\n"
                                  "200 0 trim 0\n" /* line 3's, once the
                                                     pair is whole */
                                  "200 0 free 0\n"
                                  "300 0 trim 0\n");
  assert_int_equal(st.inserted, 3);
  assert_int_equal(st.events, 6);
  import_inserts_free(&ins);
  free(out);
}

/* Reads marks file text `marks` into *ins (zeroed first). */
static as_status_t read_marks(const char *marks, import_inserts_t *ins,
                              as_err_t *err) {
  char mpath[] = "/tmp/test_import_marks_XXXXXX";
  int  fd = mkstemp(mpath);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, marks, strlen(marks)), (ssize_t)strlen(marks));
  close(fd);
  memset(ins, 0, sizeof *ins);
  memset(err, 0, sizeof *err);
  as_status_t rc = import_inserts_read(ins, mpath, err);
  unlink(mpath);
  return rc;
}

/* Imports log with the inserts of marks file text `marks` through the
 * importers' own writer; returns the status, the text in *out. */
static as_status_t import_with_marks(const char *log, const char *marks,
                                     as_err_t *err, char **out) {
  import_inserts_t ins;
  assert_int_equal(read_marks(marks, &ins, err), AS_OK);
  import_inserts_sort(&ins);
  FILE  *f = fmemopen((void *)log, strlen(log), "r");
  size_t len = 0;
  FILE  *mem = open_memstream(out, &len);
  assert_true(f != NULL && mem != NULL);
  trace_meta_t meta;
  memset(&meta, 0, sizeof meta);
  trace_writer_t *w;
  assert_int_equal(
      import_writer_open_stream(mem, "out", TRACE_FORMAT_TEXT, &meta, &w, err),
      AS_OK);
  import_mtrace_opts_t  o = {.tick_ns = 100, .inserts = &ins};
  import_mtrace_stats_t st;
  as_status_t           rc = import_mtrace_stream(f, "h.log", w, &o, &st, err);
  as_err_t              cerr = {0};
  assert_int_equal(trace_writer_close(w, &cerr), AS_OK);
  fclose(f);
  import_inserts_free(&ins);
  return rc;
}

/* An inserted idle moves every later event by its length (the engine's
 * clock is past them otherwise); a line past the input's end, or idles
 * past 2^64 ns, are refused naming where they were asked for. */
static void inserted_idles_move_later_events(void **state) {
  (void)state;
  static const char log[] = "= Start\n"
                            "+ 0x1000 0x10\n"
                            "+ 0x2000 0x20\n"
                            "- 0x1000\n"
                            "= End\n";
  as_err_t          err;
  char             *out;
  assert_int_equal(import_with_marks(log,
                                     "2 idle 2s\n2 mark after\nend idle 1s\n",
                                     &err, &out),
                   AS_OK);
  assert_string_equal(out, HEADER "0 0 malloc 0 16\n"
                                  "100 0 idle 2000000000\n"
                                  "2000000100 0 mark after\n"
                                  "2000000100 0 malloc 1 32\n"
                                  "2000000200 0 free 0\n"
                                  "2000000300 0 idle 1000000000\n");
  free(out);
  assert_int_equal(import_with_marks(log, "# x\n99 mark far\n", &err, &out),
                   AS_EFORMAT);
  assert_non_null(strstr(err.msg, ":2: input line 99 is past the input's last "
                                  "line (5); expected a line of the "
                                  "decompressed input, or 'end'"));
  free(out);
  assert_int_equal(
      import_with_marks(log, "3 idle 18446744073709551615ns\n", &err, &out),
      AS_EFORMAT);
  assert_string_equal(err.msg, "the idles inserted by --marks run the clock "
                               "past 2^64 ns (18446744073709551615 ns of "
                               "idles up to an event at 200 ns)");
  free(out);
}

/* A '#' after an event starts a comment, as on a line of its own (the
 * label of "mark peak # x" was "peak # x", and a trim or idle refused it). */
static void comments_after_inserted_events_are_ignored(void **state) {
  (void)state;
  static const char log[] = "= Start\n"
                            "+ 0x1000 0x10\n"
                            "- 0x1000\n"
                            "= End\n";
  as_err_t          err;
  char             *out;
  assert_int_equal(import_with_marks(log,
                                     "2 mark peak   # the peak\n"
                                     "2 trim 0\t# give back\n"
                                     "3 mark a#b\n"
                                     "end idle 1s # pause\n",
                                     &err, &out),
                   AS_OK);
  assert_string_equal(out, HEADER "0 0 malloc 0 16\n"
                                  "100 0 mark peak\n"
                                  "100 0 trim 0\n"
                                  "100 0 free 0\n"
                                  "200 0 mark a\n"
                                  "200 0 idle 1000000000\n");
  free(out);
}

/* A double-quoted label is unquoted as in a text trace, '#' and all (it
 * kept its quotes, and a later writer quoted them again); a bare label
 * keeps its spaces; a stray quote is refused naming the line. */
static void quoted_mark_labels_read_as_in_text_traces(void **state) {
  (void)state;
  static const char log[] = "= Start\n"
                            "+ 0x1000 0x10\n"
                            "= End\n";
  as_err_t          err;
  char             *out;
  assert_int_equal(import_with_marks(log,
                                     "2 mark \"after # free\"  # comment\n"
                                     "2 mark \"say \\\"hi\\\" \\\\\"\n"
                                     "2 mark after free\n",
                                     &err, &out),
                   AS_OK);
  assert_string_equal(out, HEADER "0 0 malloc 0 16\n"
                                  "100 0 mark \"after # free\"\n"
                                  "100 0 mark \"say \\\"hi\\\" \\\\\"\n"
                                  "100 0 mark \"after free\"\n");
  free(out);
  static const char *const bad[] = {"2 mark \"open\n", "2 mark a\"b\n",
                                    "2 mark \"a\"b\"\n", "2 mark \"a\\q\"\n",
                                    "2 mark \"\"\n"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    import_inserts_t ins;
    assert_int_equal(read_marks(bad[i], &ins, &err), AS_EFORMAT);
    assert_non_null(strstr(err.msg, ":1: expected a label of 1 to 63 "
                                    "printable bytes, bare or double-quoted"));
    import_inserts_free(&ins);
  }
}

static void import_file_writes_provenance_and_binary(void **state) {
  (void)state;
  char in[512], out[] = "/tmp/test_import_mtrace_XXXXXX.astrace";
  snprintf(in, sizeof in, "%s/tests/data/mtrace_small.log",
           ALLOCSIM_SOURCE_DIR);
  int fd = mkstemps(out, 8);
  assert_true(fd >= 0);
  close(fd);
  import_mtrace_stats_t st;
  as_err_t              err = {0};
  assert_int_equal(
      import_mtrace_file(in, out, trace_format_from_path(out), NULL, &st, &err),
      AS_OK);
  trace_source_t *src;
  assert_int_equal(trace_open(out, &src, &err), AS_OK);
  assert_string_equal(trace_meta_get(&src->meta, "source"), "mtrace");
  assert_string_equal(trace_meta_get(&src->meta, "input"), in);
  assert_string_equal(trace_meta_get(&src->meta, "clock"),
                      "synthetic, the cost model's C malloc and free times");
  /* The clock advances by the cost model: a malloc and its writes, or a
   * free, per event. */
  trace_event_t ev;
  uint64_t      n = 0, want_t = 0;
  as_status_t   rc;
  while ((rc = trace_source_next(src, &ev, &err)) == AS_OK) {
    assert_int_equal(ev.thread, 0);
    assert_int_equal(ev.t_ns, want_t);
    want_t += ev.op == TRACE_FREE
                  ? sim_cost_measured.free_ns
                  : sim_cost_c_alloc_ns(&sim_cost_measured, ev.size);
    n++;
  }
  assert_int_equal(rc, AS_DONE);
  assert_int_equal(n, 14);
  trace_source_close(src);

  /* A failed import leaves the output as it was: here the trace above. */
  struct stat before, after;
  assert_int_equal(stat(out, &before), 0);
  static const char bad_log[] = "= Start\n- 0x10\n";
  char              bad_in[] = "/tmp/test_import_mtrace_XXXXXX.log";
  fd = mkstemps(bad_in, 4);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, bad_log, strlen(bad_log)),
                   (ssize_t)strlen(bad_log));
  close(fd);
  assert_int_equal(
      import_mtrace_file(bad_in, out, TRACE_FORMAT_BINARY, NULL, &st, &err),
      AS_EFORMAT);
  assert_int_equal(stat(out, &after), 0);
  assert_int_equal(after.st_size, before.st_size);
  assert_int_equal(after.st_ino, before.st_ino); /* not even rewritten */
  unlink(bad_in);
  unlink(out);
}

static void unmatched_free_is_an_error_naming_its_line(void **state) {
  (void)state;
  import_mtrace_stats_t st;
  as_err_t              err;
  char                 *out;
  static const char     log[] = "= Start\n+ 0x10 0x8\n@ [0x1] - 0x20\n";
  assert_int_equal(import_text(log, strlen(log), false, &st, &err, &out),
                   AS_EFORMAT);
  assert_string_equal(err.msg,
                      "h.log:3: expected a '-' (free) of an address "
                      "allocated since '= Start', got 0x20 (allocated before "
                      "mtrace() started? --lenient skips these)");
  free(out);

  /* A realloc's error names the '<' line, not the '>' after it. */
  static const char rlog[] = "= Start\n+ 0x10 0x8\n< 0x20\n> 0x30 0x8\n";
  assert_int_equal(import_text(rlog, strlen(rlog), false, &st, &err, &out),
                   AS_EFORMAT);
  assert_string_equal(err.msg,
                      "h.log:3: expected a '<' (realloc) of an address "
                      "allocated since '= Start', got 0x20 (allocated before "
                      "mtrace() started? --lenient skips these)");
  free(out);

  /* The real log fails at its realloc of a block from before mtrace(). */
  assert_int_equal(import_file(open_data("mtrace_unmatched.log"),
                               "unmatched.log", false, 100, &st, &err, &out),
                   AS_EFORMAT);
  assert_string_equal(err.msg,
                      "unmatched.log:3: expected a '<' (realloc) of an "
                      "address allocated since '= Start', got 0x55cba339d2c0 "
                      "(allocated before mtrace() started? --lenient skips "
                      "these)");
  free(out);
}

/* tests/data/mtrace_unmatched.log, from:
 *   early = malloc(300); early2 = malloc(40); mtrace();
 *   a = malloc(1000); early = realloc(early, 600); free(a); free(early2);
 *   late = malloc(50); free(early); free(late); muntrace(); */
static void lenient_counts_and_skips_unmatched_frees(void **state) {
  (void)state;
  import_mtrace_stats_t st;
  as_err_t              err;
  char                 *out;
  assert_int_equal(import_file(open_data("mtrace_unmatched.log"),
                               "unmatched.log", true, 100, &st, &err, &out),
                   AS_OK);
  assert_string_equal(out, HEADER "0 0 malloc 0 1000\n"
                                  "100 0 malloc 1 600\n" /* realloc(early) */
                                  "200 0 free 0\n"
                                  /* free(early2) skipped */
                                  "300 0 malloc 0 50\n"
                                  "400 0 free 1\n"
                                  "500 0 free 0\n");
  assert_int_equal(st.unmatched_frees, 1);
  assert_int_equal(st.unmatched_reallocs, 1);
  assert_int_equal(st.reused_live, 0);
  assert_int_equal(st.mallocs, 3);
  assert_int_equal(st.frees, 3);
  assert_int_equal(st.live_at_end, 0);
  free(out);
}

/* glibc logs a free after releasing the block, so a racing thread's malloc
 * can log the same address first. */
static void address_allocated_again_while_live(void **state) {
  (void)state;
  static const char     log[] = "= Start\n+ 0x10 0x8\n+ 0x20 0x8\n"
                                "+ 0x10 0x18\n< 0x20\n> 0x10 0x28\n";
  import_mtrace_stats_t st;
  as_err_t              err;
  char                 *out;
  assert_int_equal(import_text(log, strlen(log), false, &st, &err, &out),
                   AS_EFORMAT);
  assert_string_equal(err.msg,
                      "h.log:4: expected an address that is not live, got "
                      "0x10 allocated again without a '-' (a racing free? "
                      "--lenient frees the old object first)");
  free(out);
  assert_int_equal(import_text(log, strlen(log), true, &st, &err, &out), AS_OK);
  assert_string_equal(out, HEADER "0 0 malloc 0 8\n"
                                  "100 0 malloc 1 8\n"
                                  "200 0 free 0\n"
                                  "300 0 malloc 0 24\n"
                                  "400 0 free 0\n"
                                  "500 0 realloc 1 40\n");
  assert_int_equal(st.reused_live, 2);
  free(out);
}

static void malformed_lines_name_the_line_and_what_was_expected(void **state) {
  (void)state;
  expect_error("", "h.log:1: expected '= Start' (the first line of a glibc "
                   "mtrace log), got end of file");
  expect_error("hello\n", "h.log:1: expected '= Start' (the first line of a "
                          "glibc mtrace log), got 'hello'");
  expect_error("= Start\n@ [0x1] * 0x10 0x8\n",
               "h.log:2: expected '[@ CALLER] OP ...' with OP '+', '-', '<', "
               "'>' or '!' (an mtrace record), got '* 0x10 0x8'");
  expect_error("= Start\n+ 0xzz 0x8\n",
               "h.log:2: expected an address '0x...' or '(nil)', got "
               "'0xzz 0x8'");
  expect_error("= Start\n< (nil)\n",
               "h.log:2: expected an address '0x...', got '(nil)'");
  expect_error("= Start\n+ 0x10\n",
               "h.log:2: expected a size '0x...' or '0', got end of line");
  expect_error("= Start\n+ 0x10 16\n",
               "h.log:2: expected a size '0x...' or '0', got '16'");
  expect_error("= Start\n+ 0x10 0x10000000000000000\n",
               "h.log:2: expected a size '0x...' or '0', got "
               "'0x10000000000000000'");
  expect_error("= Start\n+ 0x10 0x8 \n",
               "h.log:2: expected end of line, got ' '");
  expect_error("= Start\n+ 0x10 0x8\n- 0x10 0x8\n",
               "h.log:3: expected end of line, got ' 0x8'");
  expect_error("= Start\n@ ./p:(main+1) + 0x10 0x8\n",
               "h.log:2: expected a caller '@ ...[0xADDR] ' before the op, "
               "got '@ ./p:(main+1) + 0x10 0x8'");
  expect_error("= Start\n+ 0x10 0x8\n< 0x10\n- 0x10\n",
               "h.log:4: expected '[@ CALLER] > 0xNEW 0xSIZE' completing "
               "the realloc on line 3, got '- 0x10'");
  expect_error("= Start\n+ 0x10 0x8\n< 0x10\n",
               "h.log:4: expected '[@ CALLER] > 0xNEW 0xSIZE' completing "
               "the realloc on line 3, got end of file");
  expect_error("= Start\n> 0x10 0x8\n",
               "h.log:2: expected '+', '-', '<' or '!' ('>' only right "
               "after '<'), got '> 0x10 0x8'");
  expect_error("= Start\n= Stop\n",
               "h.log:2: expected '= End' or an mtrace record, got '= Stop'");
  expect_error("= Start\n= End\n+ 0x10 0x8\n",
               "h.log:3: expected end of file after '= End', got "
               "'+ 0x10 0x8'");
  static const char nul[] = "= Start\n+ 0x10\0 0x8\n";
  expect_error_len(nul, sizeof nul - 1,
                   "h.log:2: expected text (an mtrace log), got "
                   "'+ 0x10\\x00 0x8'");
}

/* A marks file line holding a NUL is quoted whole, the NUL where it is. */
static void marks_line_with_a_nul_is_quoted_whole(void **state) {
  (void)state;
  static const char marks[] = "1 ma\0rk x\n";
  char              mpath[] = "/tmp/test_import_marks_XXXXXX";
  int               fd = mkstemp(mpath);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, marks, sizeof marks - 1),
                   (ssize_t)sizeof marks - 1);
  close(fd);
  import_inserts_t ins = {0};
  as_err_t         err = {0};
  assert_int_equal(import_inserts_read(&ins, mpath, &err), AS_EFORMAT);
  unlink(mpath);
  import_inserts_free(&ins);
  char want[160];
  snprintf(want, sizeof want, "%s:1: expected text, got '1 ma\\x00rk x'",
           mpath);
  assert_string_equal(err.msg, want);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hand_written_log_imports_to_exact_events),
      cmocka_unit_test(tick_sets_the_synthetic_clock),
      cmocka_unit_test(real_glibc_log_imports_to_exact_events),
      cmocka_unit_test(blocks_of_other_arenas_are_counted),
      cmocka_unit_test(inserted_trims_follow_their_lines),
      cmocka_unit_test(inserted_idles_move_later_events),
      cmocka_unit_test(comments_after_inserted_events_are_ignored),
      cmocka_unit_test(quoted_mark_labels_read_as_in_text_traces),
      cmocka_unit_test(import_file_writes_provenance_and_binary),
      cmocka_unit_test(unmatched_free_is_an_error_naming_its_line),
      cmocka_unit_test(lenient_counts_and_skips_unmatched_frees),
      cmocka_unit_test(address_allocated_again_while_live),
      cmocka_unit_test(malformed_lines_name_the_line_and_what_was_expected),
      cmocka_unit_test(marks_line_with_a_nul_is_quoted_whole),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
