/* tests/integration/test_outputs.c -- outputs are whole or absent, and no
 * write error goes unnoticed (issue 14, defects 1 and 2).
 *
 *   - A failed convert or import leaves its output path as it was: a
 *     regular file keeps its bytes and mode, a device or FIFO is still
 *     there (as root, the old code removed /dev/null), and no temporary
 *     file is left beside it.  A successful one replaces the file a
 *     symbolic link names and keeps the link.
 *   - Every command that prints to stdout exits 1 with a one-line message
 *     when stdout is full (/dev/full) or closed, instead of 0.
 *   - CSV is RFC 4180: a label with a comma or a quote is one quoted field.
 *   - JSON is valid UTF-8 whatever bytes a label holds.
 */
#include <dirent.h>
#include <sys/sysmacros.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../helpers/run_cli.h"
#include "../helpers/scratch.h"

#define EXAMPLE          ALLOCSIM_SOURCE_DIR "/data/example.trace"
#define MTRACE_UNMATCHED ALLOCSIM_SOURCE_DIR "/tests/data/mtrace_unmatched.log"

typedef struct fixture_s fixture_t;
struct fixture_s {
  char dir[64];
};

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  assert_non_null(f);
  scratch_make(f->dir, sizeof f->dir, "outputs");
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  scratch_remove(f->dir);
  free(f);
  return 0;
}

static void write_file(const fixture_t *f, const char *name, const char *text,
                       mode_t mode) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", f->dir, name);
  FILE *fp = fopen(path, "w");
  assert_non_null(fp);
  fputs(text, fp);
  assert_int_equal(fclose(fp), 0);
  assert_int_equal(chmod(path, mode), 0);
}

static void path_in(const fixture_t *f, const char *name, char *buf,
                    size_t len) {
  snprintf(buf, len, "%s/%s", f->dir, name);
}

static int entries(const fixture_t *f) {
  return scratch_entries(f->dir);
}

/* A trace whose second event has a misspelt op: fails on line 3. */
static const char bad_trace[] = "allocsim-trace 1\n"
                                "0 0 malloc 1 8\n"
                                "1 0 mallco 2 8\n";

static void assert_failed_on_line_3(const run_cli_t *r) {
  assert_int_equal(r->code, 1);
  if (strstr(r->err, "bad.trace:3:") == NULL || run_cli_lines(r->err) != 1)
    fail_msg("expected one line naming bad.trace:3:, got: %s", r->err);
}

static void failed_convert_keeps_an_existing_file(void **state) {
  fixture_t *f = *state;
  write_file(f, "bad.trace", bad_trace, 0644);
  write_file(f, "out.trace", "precious\n", 0640);
  run_cli_t r;
  run_cli(&r, f->dir, "allocsim convert bad.trace out.trace", 60);
  assert_failed_on_line_3(&r);
  char path[256], got[64];
  path_in(f, "out.trace", path, sizeof path);
  run_cli_slurp(path, got, sizeof got);
  assert_string_equal(got, "precious\n");
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0640);
  assert_int_equal(entries(f), 2); /* no temporary file left behind */
}

static void failed_convert_leaves_a_device_in_place(void **state) {
  fixture_t *f = *state;
  write_file(f, "bad.trace", bad_trace, 0644);
  char dev[256];
  path_in(f, "null", dev, sizeof dev);
  if (mknod(dev, S_IFCHR | 0666, makedev(1, 3)) != 0)
    skip(); /* not root, or no CAP_MKNOD: the FIFO test covers the rule */
  run_cli_t r;
  run_cli(&r, f->dir, "allocsim convert bad.trace null", 60);
  assert_failed_on_line_3(&r);
  struct stat st;
  assert_int_equal(stat(dev, &st), 0);
  assert_true(S_ISCHR(st.st_mode));
  assert_int_equal(entries(f), 2);
}

static void failed_convert_leaves_a_fifo_in_place(void **state) {
  fixture_t *f = *state;
  write_file(f, "bad.trace", bad_trace, 0644);
  char fifo[256];
  path_in(f, "pipe", fifo, sizeof fifo);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  /* A reader, so that allocsim's open for writing does not block. */
  int rd = open(fifo, O_RDONLY | O_NONBLOCK);
  assert_true(rd >= 0);
  run_cli_t r;
  run_cli(&r, f->dir, "allocsim convert bad.trace pipe", 60);
  close(rd);
  assert_failed_on_line_3(&r);
  struct stat st;
  assert_int_equal(stat(fifo, &st), 0);
  assert_true(S_ISFIFO(st.st_mode));
  assert_int_equal(entries(f), 2);
}

static void convert_replaces_the_file_a_link_names(void **state) {
  fixture_t *f = *state;
  write_file(f, "real.astrace", "old\n", 0604);
  char link[256], real[256];
  path_in(f, "link.astrace", link, sizeof link);
  path_in(f, "real.astrace", real, sizeof real);
  assert_int_equal(symlink("real.astrace", link), 0);
  run_cli_t r;
  run_cli(&r, f->dir, "allocsim convert " EXAMPLE " link.astrace", 60);
  assert_int_equal(r.code, 0);
  struct stat st;
  assert_int_equal(lstat(link, &st), 0);
  assert_true(S_ISLNK(st.st_mode));
  assert_int_equal(stat(real, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0604);
  char head[16];
  run_cli_slurp(real, head, sizeof head);
  assert_memory_equal(head, "ASTRACE", 8); /* the binary magic, NUL too */
  assert_int_equal(entries(f), 2);
  /* And the result reads back as the example's 18 events. */
  run_cli(&r, f->dir, "allocsim replay link.astrace --json", 60);
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "\"events\": 18"));
}

static void failed_import_keeps_an_existing_file(void **state) {
  fixture_t *f = *state;
  write_file(f, "out.astrace", "precious\n", 0600);
  run_cli_t r;
  run_cli(&r, f->dir,
          "allocsim import mtrace " MTRACE_UNMATCHED " -o out.astrace", 60);
  assert_int_equal(r.code, 1);
  assert_non_null(strstr(r.err, "mtrace_unmatched.log:3:"));
  char path[256], got[64];
  path_in(f, "out.astrace", path, sizeof path);
  run_cli_slurp(path, got, sizeof got);
  assert_string_equal(got, "precious\n");
  assert_int_equal(entries(f), 1);
}

/* Commands that print to stdout, each given a store to read where needed
 * (made by the first one). */
static const char *const printing[] = {
    "allocsim replay " EXAMPLE " --csv --sample-every 1ns --db s.db",
    "allocsim replay " EXAMPLE " --json",
    "allocsim run survivors --total 1",
    "allocsim runs --db s.db",
    "allocsim formula --size 64 --total 256 --fraction 1e-4",
    "allocsim sweep survivors --vary fraction=1e-4 --total 1 --db w.db",
    "allocsim models",
    "allocsim compare 2 --db ref.db",
    "allocsim convert " EXAMPLE " -",
    "allocsim --help",
};

static void stdout_write_errors_fail_every_command(void **state) {
  fixture_t *f = *state;
  /* compare stores its result: a copy of the reference store, whose runs
   * name their traces relative to the store's directory. */
  run_cli_t r;
  run_cli(&r, f->dir,
          "cp " ALLOCSIM_SOURCE_DIR "/data/reference.db ref.db && "
          "ln -s " ALLOCSIM_SOURCE_DIR "/data/captures captures",
          60);
  assert_int_equal(r.code, 0);
  for (size_t i = 0; i < sizeof printing / sizeof printing[0]; i++) {
    const char *how[] = {"> /dev/full", ">&-"};
    for (size_t h = 0; h < 2; h++) {
      char cmd[512];
      snprintf(cmd, sizeof cmd, "%s %s", printing[i], how[h]);
      run_cli(&r, f->dir, cmd, 120);
      if (r.code != 1 || strstr(r.err, "write error") == NULL)
        fail_msg("'%s' exited %d, stderr: %s", cmd, r.code, r.err);
    }
  }
}

/* The fields of the CSV record at s (RFC 4180: commas and newlines inside
 * double quotes are data, "" is a quote); *next receives the record after
 * it. */
static size_t csv_fields(const char *s, const char **next) {
  size_t n = 1;
  bool   quoted = false;
  for (; *s && (quoted || *s != '\n'); s++) {
    if (*s == '"')
      quoted = !quoted; /* "" toggles twice: a quote inside the field */
    else if (*s == ',' && !quoted)
      n++;
  }
  *next = *s ? s + 1 : s;
  return n;
}

/* replay --csv (one layout and the default four, which adds the range
 * columns; run prints through the same code) quotes a label holding a
 * comma or a quote, so every record has the header's fields. */
static void csv_labels_are_quoted(void **state) {
  fixture_t *f = *state;
  write_file(f, "c.trace",
             "allocsim-trace 1\n0 0 mark \"a,b\"\n1 0 malloc 1 10\n"
             "2 0 mark \"say \\\"hi\\\"\"\n",
             0644);
  const char *cmds[] = {"allocsim replay c.trace --csv --layouts 1",
                        "allocsim replay c.trace --csv"};
  for (size_t i = 0; i < 2; i++) {
    run_cli_t r;
    assert_int_equal(run_cli(&r, f->dir, cmds[i], 60), 0);
    assert_non_null(strstr(r.out, "\nmark,\"a,b\",0,"));
    assert_non_null(strstr(r.out, "\nmark,\"say \"\"hi\"\"\",2,"));
    const char *rec = r.out, *next;
    size_t      want = csv_fields(rec, &next);
    for (rec = next; *rec; rec = next)
      assert_int_equal(csv_fields(rec, &next), want);
  }
}

/* A Latin-1 label (any byte >= 0x80 is allowed in a trace) comes out as
 * \u00XX per byte, a UTF-8 one as it is: the JSON is valid UTF-8. */
static void json_labels_are_valid_utf8(void **state) {
  fixture_t *f = *state;
  write_file(f, "l.trace",
             "allocsim-trace 1\n0 0 mark caf\xe9\n1 0 malloc 1 10\n"
             "2 0 mark caf\xc3\xa9\n",
             0644);
  run_cli_t r;
  assert_int_equal(
      run_cli(&r, f->dir, "allocsim replay l.trace --json --layouts 1", 60), 0);
  assert_non_null(strstr(r.out, "{\"label\": \"caf\\u00e9\", "));
  assert_non_null(strstr(r.out, "{\"label\": \"caf\xc3\xa9\", "));
  assert_null(strstr(r.out, "caf\xe9"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(failed_convert_keeps_an_existing_file,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(failed_convert_leaves_a_device_in_place,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(failed_convert_leaves_a_fifo_in_place,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(convert_replaces_the_file_a_link_names,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(failed_import_keeps_an_existing_file,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(stdout_write_errors_fail_every_command,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(csv_labels_are_quoted, setup, teardown),
      cmocka_unit_test_setup_teardown(json_labels_are_valid_utf8, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
