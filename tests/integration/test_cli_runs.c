/* tests/integration/test_cli_runs.c -- the allocsim binary end to end with a
 * store: `replay --db` writes a simulated run that the store API reads back,
 * and `runs` lists it with the same numbers; `convert --workload` writes a
 * workload as a trace that replays like `run` of it; a sweep of several
 * traces names each row's trace; explain and advise name their layout; a
 * convert interrupted by SIGINT leaves its target and no temporary file;
 * a trace on stdin, a pipe or a FIFO is read like its file; report -o -
 * writes on stdout; no --help shows a printf escape; formula spells the
 * stride's ordinal and shows a fit it cannot make as "-".
 *
 * Runs the built binary (ALLOCSIM_BINARY_DIR/cli/allocsim), so build the
 * allocsim target before running this test.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "analysis/store.h"
#include "tests/helpers/asan.h"
#include "tests/helpers/scratch.h"

#define ALLOCSIM ALLOCSIM_BINARY_DIR "/cli/allocsim"
#define EXAMPLE  ALLOCSIM_SOURCE_DIR "/data/example.trace"
#define CHURN    ALLOCSIM_SOURCE_DIR "/data/captures/c-churn.astrace"
#define PY_SURVIVORS                                                           \
  ALLOCSIM_SOURCE_DIR "/data/captures/python-survivors.astrace"

typedef struct fixture_s {
  char dir[64];
  char db[128];
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  assert_non_null(f);
  snprintf(f->dir, sizeof f->dir, "/tmp/allocsim-test-cli-runs-XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  snprintf(f->db, sizeof f->db, "%s/runs.db", f->dir);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t  *f = *state;
  const char *suffixes[] = {"", "-wal", "-shm", ".out"};
  char        p[160];
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
    snprintf(p, sizeof p, "%s%s", f->db, suffixes[i]);
    unlink(p);
  }
  rmdir(f->dir);
  free(f);
  return 0;
}

/* Runs the shell command cmd with stdout in out (at most len - 1 bytes);
 * returns the exit code. */
static int run_sh(char *out, size_t len, const char *cmd) {
  if (access(ALLOCSIM, X_OK) != 0)
    fail_msg("%s is not built; build the allocsim target first", ALLOCSIM);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t n = fread(out, 1, len - 1, p);
  out[n] = '\0';
  int status = pclose(p);
  assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}

/* Runs "allocsim ARGS" with stdout in out (at most len - 1 bytes), stderr
 * discarded; returns the exit code. */
static int allocsim(char *out, size_t len, const char *args) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", ALLOCSIM, args);
  return run_sh(out, len, cmd);
}

static void replayed_run_is_stored_and_listed_with_its_peak(void **state) {
  fixture_t *f = *state;
  char       out[8192];
  char       args[512];
  snprintf(args, sizeof args, "replay %s --db %s", EXAMPLE, f->db);
  assert_int_equal(allocsim(out, sizeof out, args), 0);

  store_t *s = NULL;
  as_err_t err = {0};
  if (store_open(f->db, &s, &err) != AS_OK)
    fail_msg("%s", err.msg);
  store_run_record_t rec = {0};
  if (store_read_run(s, 1, &rec, &err) != AS_OK)
    fail_msg("%s", err.msg);
  assert_string_equal(rec.kind, "simulated");
  assert_non_null(strstr(rec.source, "example.trace"));
  assert_non_null(strstr(rec.command, "--db"));
  assert_true(rec.nsamples > 0);
  assert_true(rec.peak_rss_bytes > 0);
  store_sample_t *samples = NULL;
  size_t          n = 0;
  if (store_read_samples(s, 1, &samples, &n, &err) != AS_OK)
    fail_msg("%s", err.msg);
  assert_int_equal(n, rec.nsamples);
  uint64_t peak = 0;
  for (size_t i = 0; i < n; i++)
    peak = samples[i].rss_bytes > peak ? samples[i].rss_bytes : peak;
  assert_int_equal(peak, rec.peak_rss_bytes);
  free(samples);
  store_close(s);

  snprintf(args, sizeof args, "runs --db %s --json", f->db);
  assert_int_equal(allocsim(out, sizeof out, args), 0);
  char want[256];
  snprintf(want, sizeof want,
           "\"samples\": %" PRIu64 ", \"peak_rss_bytes\": %" PRIu64 ",",
           rec.nsamples, rec.peak_rss_bytes);
  if (strstr(out, want) == NULL)
    fail_msg("runs --json lacks '%s':\n%s", want, out);
  assert_non_null(strstr(out, "{\"id\": 1, \"kind\": \"simulated\""));
  assert_null(strstr(out, "\"id\": 2"));

  snprintf(args, sizeof args, "runs --db %s", f->db);
  assert_int_equal(allocsim(out, sizeof out, args), 0);
  assert_non_null(strstr(out, rec.created_at));
  store_run_record_free(&rec);
}

static void runs_refuses_a_missing_store_and_a_missing_db_option(void **state) {
  fixture_t *f = *state;
  char       out[1024];
  char       args[256];
  snprintf(args, sizeof args, "runs --db %s", f->db);
  assert_int_equal(allocsim(out, sizeof out, args), 1);
  assert_int_equal(access(f->db, F_OK), -1); /* not created */
  assert_int_equal(allocsim(out, sizeof out, "runs"), 2);
  assert_int_equal(allocsim(out, sizeof out, "runs --db"), 2);
}

/* Writes the measured-run text body beside the store (removed by teardown)
 * and records it as run 1. */
static void record_text(const fixture_t *f, const char *body) {
  char trace[160], args[512], out[4096];
  snprintf(trace, sizeof trace, "%s.out", f->db);
  FILE *t = fopen(trace, "w");
  assert_non_null(t);
  fputs(body, t);
  assert_int_equal(fclose(t), 0);
  snprintf(args, sizeof args, "record %s --db %s", trace, f->db);
  assert_int_equal(allocsim(out, sizeof out, args), 0);
}

/* A Python run that preloaded libjemalloc (its recorded environment):
 * runs shows the model compare replays it on, cpython over jemalloc with
 * the run's MALLOC_CONF, and compare picks that by itself; explain, map
 * and advise name that libc too (their model line, cpython's own
 * description, names none). */
static void
a_preloaded_run_is_listed_with_the_model_compare_uses(void **state) {
  fixture_t *f = *state;
  char       args[512], out[4096];
  record_text(f,
              "allocsim-trace 1\n"
              "#@ kind=measured\n"
              "#@ python=3.11.2\n"
              "#@ env.LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2\n"
              "#@ env.MALLOC_CONF=dirty_decay_ms:1000\n"
              "#@ workload=spike --count 1000\n"
              "0 0 mark start\n0 0 rss 14MiB\n0 0 mark peak\n0 0 rss 17MiB\n");
  snprintf(args, sizeof args, "runs --db %s", f->db);
  assert_int_equal(allocsim(out, sizeof out, args), 0);
  assert_non_null(
      strstr(out, "cpython:version=3.11 over jemalloc:dirty_decay_ms=1000"));
  snprintf(args, sizeof args, "compare 1 --db %s --no-store", f->db);
  assert_int_equal(allocsim(out, sizeof out, args), 0);
  assert_non_null(strstr(out, "libc          jemalloc:dirty_decay_ms=1000"));
  const char *const cmds[] = {"explain", "map", "advise"};
  static char       page[1 << 20]; /* the whole output: no SIGPIPE */
  for (size_t k = 0; k < 3; k++) {
    snprintf(args, sizeof args, "%s 1 --db %s", cmds[k], f->db);
    assert_int_equal(allocsim(page, sizeof page, args), 0);
    if (strstr(page, "\nlibc       jemalloc:dirty_decay_ms=1000\n") == NULL)
      fail_msg("%s names no libc:\n%.600s", cmds[k], page);
  }
}

/* A process of a multi-process capture cut short: runs names its image,
 * pid and parent run, and says it is truncated; --json carries every meta
 * pair; compare warns that the recording stopped early. */
static void a_truncated_child_capture_says_what_it_is(void **state) {
  fixture_t *f = *state;
  char       args[512], out[8192];
  record_text(f, "allocsim-trace 1\n"
                 "#@ kind=measured\n"
                 "#@ source=allocsim capture\n"
                 "#@ exe=/usr/bin/sort\n#@ pid=812\n"
                 "#@ capture_parent_run=3\n"
                 "#@ truncated=1\n#@ capture_end=max-trace-bytes\n"
                 "0 0 rss 1626112\n10 0 mark main\n10 0 rss 1626112\n"
                 "11 0 malloc 0 4096\n12 0 rss 1630208\n");
  snprintf(args, sizeof args, "runs --db %s", f->db);
  assert_int_equal(allocsim(out, sizeof out, args), 0);
  if (strstr(out, " (sort, pid 812, child of run 3) [truncated: "
                  "max-trace-bytes]\n") == NULL)
    fail_msg("runs lacks the process note:\n%s", out);
  snprintf(args, sizeof args, "runs --db %s --json", f->db);
  assert_int_equal(allocsim(out, sizeof out, args), 0);
  assert_non_null(strstr(out, "\"exe\": \"/usr/bin/sort\""));
  assert_non_null(strstr(out, "\"capture_parent_run\": \"3\""));
  snprintf(args, sizeof args, "compare 1 --db %s --no-store", f->db);
  assert_int_equal(allocsim(out, sizeof out, args), 0);
  assert_non_null(strstr(out, "warning       the recording stopped before "
                              "the program ended (max-trace-bytes;"));
}

/* A CPython run compared with --model jemalloc: every domain goes to
 * jemalloc, which compare says, with the composition meant most often. */
static void a_python_run_on_an_allocator_alone_is_warned(void **state) {
  fixture_t *f = *state;
  char       args[512], out[8192];
  record_text(f, "allocsim-trace 1\n"
                 "#@ kind=measured\n"
                 "#@ python=3.11.2\n"
                 "0 0 mark start\n0 0 rss 4096\n"
                 "1 0 malloc 0 64 obj\n2 0 mark end\n2 0 rss 8192\n");
  snprintf(args, sizeof args, "compare 1 --db %s --no-store --model jemalloc",
           f->db);
  assert_int_equal(allocsim(out, sizeof out, args), 0);
  assert_non_null(strstr(out, "libc          (the model: no composition)"));
  assert_non_null(strstr(out, "give --model cpython --libc jemalloc"));
  snprintf(args, sizeof args, "compare 1 --db %s --no-store", f->db);
  assert_int_equal(allocsim(out, sizeof out, args), 0);
  assert_null(strstr(out, "alone"));
}

/* Under ulimit -v the models' tables share the address space (as_reserve):
 * an 18-event trace replays with every layout at limits where the first
 * tables used to take it all (4 GB failed on the second layout). */
static void a_replay_fits_an_address_space_limit(void **state) {
  (void)state;
  if (DIFF_ASAN) /* ASan's shadow alone is terabytes of address space */
    skip();
  const char *models[] = {"glibc", "jemalloc", "cpython"};
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd,
             "ulimit -v 2000000 && %s replay %s --model %s >/dev/null 2>&1",
             ALLOCSIM, EXAMPLE, models[i]);
    if (run_sh(out, sizeof out, cmd) != 0)
      fail_msg("%s under ulimit -v 2000000 failed", models[i]);
  }
}

/* A capture of a program that allocated nothing the recorder saw (gzip
 * after main) still compares: its trace is kept, and the prediction is its
 * start-up RSS throughout. */
static void a_capture_without_allocations_compares(void **state) {
  fixture_t *f = *state;
  char       args[512], out[4096];
  record_text(f, "allocsim-trace 1\n"
                 "#@ kind=measured\n"
                 "#@ source=allocsim capture\n"
                 "0 0 rss 1626112\n10 0 mark main\n10 0 rss 1626112\n");
  snprintf(args, sizeof args, "compare 1 --db %s --no-store", f->db);
  assert_int_equal(allocsim(out, sizeof out, args), 0);
  assert_non_null(strstr(out, "main                             1.55         "
                              "1.55        +0.00     +0.00%"));
}

/* A model the user names takes the machine facts the run recorded for the
 * knobs its spec leaves unset: `--model cpython` on a CPython 3.11 capture
 * under glibc 2.39 replays 3.11 over glibc 2.39 (it replayed 3.14 over
 * 2.36, the defaults, without a word); a version given wins. */
static void a_named_model_takes_the_recorded_versions(void **state) {
  fixture_t *f = *state;
  char       args[512], out[8192];
  record_text(f, "allocsim-trace 1\n"
                 "#@ kind=measured\n"
                 "#@ python=3.11.2\n"
                 "#@ glibc_version=2.39\n"
                 "0 0 mark start\n0 0 rss 4MiB\n1 0 malloc 0 64\n"
                 "2 0 mark end\n2 0 rss 4MiB\n");
  const char *const cmds[][2] = {
      {"replay %s.out --model cpython --layouts 1",
       "model      cpython:version=3.11,"},
      {"explain %s.out --model cpython", "libc       glibc:version=2.39\n"},
      {"replay %s.out --model cpython:version=3.12 --libc glibc --layouts 1",
       "model      cpython:version=3.12,"},
      {"replay %s.out --model glibc --layouts 1", ",version=2.39,"},
      {"sweep %s.out --model cpython --vary cpython.pythonmalloc=pymalloc "
       "--layouts 1 --json",
       "\"model_spec\":\"cpython:version=3.11,"},
  };
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    snprintf(args, sizeof args, cmds[i][0], f->db);
    assert_int_equal(allocsim(out, sizeof out, args), 0);
    if (strstr(out, cmds[i][1]) == NULL)
      fail_msg("%s: want '%s' in:\n%.800s", args, cmds[i][1], out);
  }
  snprintf(args, sizeof args, "compare 1 --db %s --no-store --model cpython",
           f->db);
  assert_int_equal(allocsim(out, sizeof out, args), 0);
  if (strstr(out, "cpython:version=3.11") == NULL ||
      strstr(out, "glibc:version=2.39") == NULL)
    fail_msg("compare printed:\n%.800s", out);
}

/* The peak_rss_bytes figure of a --json output. */
static unsigned long long json_peak(const char *out) {
  const char *p = strstr(out, "\"peak_rss_bytes\": ");
  assert_non_null(p);
  return strtoull(p + strlen("\"peak_rss_bytes\": "), NULL, 10);
}

static void converted_workload_replays_like_run(void **state) {
  fixture_t *f = *state;
  char       out[1 << 16], args[512], trace[160];
  snprintf(trace, sizeof trace, "%s/churn.astrace", f->dir);
  snprintf(args, sizeof args,
           "convert --workload 'churn --live 500 --steps 4000' %s", trace);
  assert_int_equal(allocsim(out, sizeof out, args), 0);
  snprintf(args, sizeof args, "replay %s --model glibc --json", trace);
  assert_int_equal(allocsim(out, sizeof out, args), 0);
  unsigned long long replayed = json_peak(out);
  assert_non_null(strstr(out, "\"events\": 8253,")); /* 3+500+250+2*3750 */
  assert_int_equal(allocsim(out, sizeof out,
                            "run churn --live 500 --steps 4000 --model glibc "
                            "--json"),
                   0);
  assert_int_equal(json_peak(out), replayed);
  assert_true(replayed > 500 * 16);
  unlink(trace);
  /* IN and --workload together, no OUT, a bad workload: usage errors. */
  assert_int_equal(
      allocsim(out, sizeof out, "convert x.trace y.trace --workload churn"), 2);
  assert_int_equal(allocsim(out, sizeof out, "convert --workload churn"), 2);
  snprintf(args, sizeof args, "convert --workload 'churn --live 0' %s", trace);
  assert_int_equal(allocsim(out, sizeof out, args), 2);
  assert_int_equal(access(trace, F_OK), -1);
}

/* A sweep of several traces says which trace each row is, in the table,
 * the CSV and the JSON alike; a sweep of one trace has no such column. */
static void a_sweep_of_several_traces_names_each_rows_trace(void **state) {
  (void)state;
  char        out[1 << 16];
  const char *two = "sweep " EXAMPLE " " CHURN " --vary model=glibc --quiet";
  char        args[512];
  assert_int_equal(allocsim(out, sizeof out, two), 0);
  const char *row0 = strchr(out, '\n') + 1, *row1 = strchr(row0, '\n') + 1;
  assert_true(strncmp(out, "point trace ", 12) == 0);
  assert_non_null(strstr(row0, EXAMPLE));
  assert_non_null(strstr(row1, CHURN));
  snprintf(args, sizeof args, "%s --csv", two);
  assert_int_equal(allocsim(out, sizeof out, args), 0);
  assert_true(strncmp(out, "point,trace,model,", 18) == 0);
  assert_non_null(strstr(out, "\n1," CHURN ",glibc,"));
  snprintf(args, sizeof args, "%s --json", two);
  assert_int_equal(allocsim(out, sizeof out, args), 0);
  assert_non_null(strstr(out, "{\"point\":0,\"trace\":\"" EXAMPLE "\","));
  assert_non_null(strstr(out, "{\"point\":1,\"trace\":\"" CHURN "\","));
  assert_int_equal(
      allocsim(out, sizeof out, "sweep " EXAMPLE " --vary model=glibc --quiet"),
      0);
  assert_null(strstr(out, "trace"));
}

/* Makes the HTML report of `what` (a trace and options) and reads its
 * first len - 1 bytes, where the header is, into out (.out beside the
 * fixture's store: teardown removes it). */
static void report_head(const fixture_t *f, const char *what, char *out,
                        size_t len) {
  char args[512], html[160];
  snprintf(html, sizeof html, "%s.out", f->db);
  snprintf(args, sizeof args, "report %s -o %s", what, html);
  assert_int_equal(allocsim(out, len, args), 0);
  FILE *h = fopen(html, "r");
  assert_non_null(h);
  size_t n = fread(out, 1, len - 1, h);
  out[n] = '\0';
  fclose(h);
}

/* advise ranks two changes at once after every single one, whatever they
 * save; a heading says so, so that the last rank (PYTHONMALLOC=malloc +
 * malloc_trim, the largest saving of a CPython capture) does not read as
 * the least.  explain gives a capture's measured RSS at the mark. */
static void
advise_heads_its_combinations_and_both_give_measured_rss(void **state) {
  fixture_t *f = *state;
  char       out[1 << 16];
  assert_int_equal(allocsim(out, sizeof out, "advise " PY_SURVIVORS), 0);
  const char *head = strstr(out, "two changes at once, ranked after the "
                                 "single ones:\n");
  assert_non_null(head);
  assert_non_null(strstr(head, "PYTHONMALLOC=malloc + malloc_trim(0)"));
  assert_null(strstr(head + 1, "two changes at once"));
  assert_non_null(strstr(out, "\nmeasured   "));
  assert_int_equal(
      allocsim(out, sizeof out, "explain " PY_SURVIVORS " --at after_free"), 0);
  assert_non_null(strstr(out, "\nmeasured   "));
  assert_int_equal(allocsim(out, sizeof out,
                            "explain " PY_SURVIVORS " --at after_free --json"),
                   0);
  assert_non_null(strstr(out, "\"measured_rss_bytes\": "));
  assert_non_null(strstr(out, "\"libc\": \"glibc"));
  /* The HTML report names the libc model too. */
  report_head(f, PY_SURVIVORS, out, sizeof out);
  assert_non_null(strstr(out, "<br>libc <code>glibc"));
}

/* explain and advise replay one layout where replay averages four: both
 * say so, in the text and the JSON. */
static void explain_advise_and_map_name_their_one_layout(void **state) {
  fixture_t  *f = *state;
  char        out[1 << 16];
  const char *line = "\nlayout     the default one only; replay, run and "
                     "sweep average 4 by default";
  const char *cmds[] = {"explain " EXAMPLE " --model glibc",
                        "advise " EXAMPLE " --model glibc",
                        "map " EXAMPLE " --model glibc"};
  for (size_t i = 0; i < 3; i++) {
    char args[256];
    snprintf(args, sizeof args, "%s%s", cmds[i], i == 2 ? " --no-color" : "");
    assert_int_equal(allocsim(out, sizeof out, args), 0);
    assert_non_null(strstr(out, line));
    snprintf(args, sizeof args, "%s --json", cmds[i]);
    assert_int_equal(allocsim(out, sizeof out, args), 0);
    assert_non_null(strstr(out, "\"layouts\": 1,"));
  }
  /* The HTML report's header says it too. */
  report_head(f, EXAMPLE " --model glibc", out, sizeof out);
  assert_non_null(strstr(out, "<br>layout the default one only; replay,"));
}

/* A C trace's model is its libc: explain, advise and map take --libc alone
 * as the model, as compare does, instead of replaying glibc regardless. */
static void libc_alone_names_a_c_traces_model(void **state) {
  (void)state;
  char        out[1 << 16];
  const char *cmds[] = {"explain " EXAMPLE " --libc jemalloc",
                        "advise " EXAMPLE " --libc jemalloc --json",
                        "map " EXAMPLE " --libc jemalloc --json"};
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(allocsim(out, sizeof out, cmds[i]), 0);
    assert_true(strstr(out, "model      jemalloc") != NULL ||
                strstr(out, "\"model\": \"jemalloc") != NULL);
    assert_null(strstr(out, "glibc"));
  }
}

/* Starts "allocsim convert - out" with its stdin the read end of a pipe;
 * *to_stdin receives the write end. */
static pid_t convert_from_pipe(const char *out, FILE **to_stdin) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(fds[0], STDIN_FILENO);
    dup2(null, STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    execl(ALLOCSIM, "allocsim", "convert", "-", out, (char *)NULL);
    _exit(127);
  }
  close(fds[0]);
  *to_stdin = fdopen(fds[1], "w");
  assert_non_null(*to_stdin);
  return pid;
}

/* Ctrl-C mid-convert: the target keeps what it held, the temporary file
 * beside it is removed, and the process ends by SIGINT (status 130). */
static void an_interrupted_convert_leaves_no_temporary_file(void **state) {
  fixture_t *f = *state;
  char       out[160], buf[16];
  snprintf(out, sizeof out, "%s/out.astrace", f->dir);
  FILE *t = fopen(out, "w");
  assert_non_null(t);
  fputs("keep\n", t);
  assert_int_equal(fclose(t), 0);
  assert_int_equal(scratch_entries(f->dir), 1);

  FILE *in;
  pid_t pid = convert_from_pipe(out, &in);
  fputs("allocsim-trace 1\n", in);
  for (int i = 0; i < 20000; i++)
    fprintf(in, "%d 0 malloc %d 16\n", i, i);
  assert_int_equal(fflush(in), 0);
  /* convert now waits for more input with its temporary file open. */
  for (int ms = 0; ms < 10000 && scratch_entries(f->dir) < 2; ms += 10)
    usleep(10000);
  assert_int_equal(scratch_entries(f->dir), 2);
  kill(pid, SIGINT);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  fclose(in);
  assert_true(WIFSIGNALED(status));
  assert_int_equal(WTERMSIG(status), SIGINT);
  assert_int_equal(scratch_entries(f->dir), 1);
  t = fopen(out, "r");
  assert_non_null(t);
  buf[fread(buf, 1, sizeof buf - 1, t)] = '\0';
  fclose(t);
  assert_string_equal(buf, "keep\n");
  unlink(out);
}

/* Replaces every JSON string "name" in s with "": the one field in which
 * the same trace read from a pipe and from a file differ. */
static void blank_name(char *s, const char *name) {
  char quoted[256];
  snprintf(quoted, sizeof quoted, "\"%s\"", name);
  size_t n = strlen(quoted);
  for (char *p = strstr(s, quoted); p != NULL; p = strstr(p, quoted)) {
    memmove(p + 2, p + n, strlen(p + n) + 1);
    p[0] = p[1] = '"';
  }
}

/* A trace that gives its bytes once -- stdin, a pipe as /dev/fd/N
 * (/dev/stdin here, as a process substitution gives), a FIFO -- is read
 * like the file by every command that reads its trace more than once:
 * replay's layouts, explain, advise, map and report. */
static void a_trace_read_once_is_read_like_its_file(void **state) {
  fixture_t  *f = *state;
  const char *cmds[] = {
      "replay %s --model glibc --json", "explain %s --model glibc --json",
      "advise %s --model glibc --json", "map %s --model glibc --json"};
  char fifo[160], cmd[1536], args[512];
  snprintf(fifo, sizeof fifo, "%s/fifo", f->dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  static char want[1 << 16], got[1 << 16];
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    snprintf(args, sizeof args, cmds[i], EXAMPLE);
    assert_int_equal(allocsim(want, sizeof want, args), 0);
    blank_name(want, EXAMPLE);
    const char *reads[][2] = {{"-", "<stdin>"}, {"/dev/stdin", "/dev/stdin"}};
    for (size_t k = 0; k < 2; k++) {
      snprintf(args, sizeof args, cmds[i], reads[k][0]);
      snprintf(cmd, sizeof cmd, "cat %s | timeout 60 %s %s", EXAMPLE, ALLOCSIM,
               args);
      assert_int_equal(run_sh(got, sizeof got, cmd), 0);
      blank_name(got, reads[k][1]);
      blank_name(got, reads[k][0]);
      assert_string_equal(got, want);
    }
    snprintf(args, sizeof args, cmds[i], fifo);
    snprintf(cmd, sizeof cmd, "cat %s > %s & timeout 60 %s %s", EXAMPLE, fifo,
             ALLOCSIM, args);
    assert_int_equal(run_sh(got, sizeof got, cmd), 0);
    blank_name(got, fifo);
    assert_string_equal(got, want);
  }
  char html[160];
  snprintf(html, sizeof html, "%s.out", f->db); /* teardown removes it */
  snprintf(cmd, sizeof cmd,
           "cat %s | timeout 60 %s report - --model glibc -o %s 2>/dev/null",
           EXAMPLE, ALLOCSIM, html);
  assert_int_equal(run_sh(got, sizeof got, cmd), 0);
  assert_int_equal(access(html, F_OK), 0);
  unlink(fifo);
}

/* report -o - writes the page on stdout, as - is for every command, and
 * no file named "-". */
static void report_to_dash_writes_the_page_on_stdout(void **state) {
  fixture_t  *f = *state;
  static char page[1 << 20];
  char        cmd[1024], dash[160];
  snprintf(cmd, sizeof cmd,
           "cd %s && %s report %s --model glibc -o - 2>/dev/null", f->dir,
           ALLOCSIM, EXAMPLE);
  assert_int_equal(run_sh(page, sizeof page, cmd), 0);
  assert_true(strncmp(page, "<!DOCTYPE html>", 15) == 0);
  assert_non_null(strstr(page, "</html>"));
  snprintf(dash, sizeof dash, "%s/-", f->dir);
  assert_int_equal(access(dash, F_OK), -1);
}

/* Every command's --help is printed as is (fputs), so a printf escape in
 * it shows: formula's said "95%% confidence interval". */
static void help_texts_show_no_printf_escapes(void **state) {
  (void)state;
  char out[4096];
  assert_int_equal(
      run_sh(out, sizeof out,
             "n=0; for c in $(" ALLOCSIM " --help | awk '/^commands:/{on=1;"
             "next} on&&/^  /{print $1}'); do " ALLOCSIM " $c --help | grep "
             "-H --label=$c '%%'; n=$((n+1)); done; echo $n commands"),
      0);
  if (strchr(out, ':') != NULL || atoi(out) < 10)
    fail_msg("want no '%%%%' in any of 10 or more help texts:\n%s", out);
}

/* The stride's ordinal: "every 1st", not "every 1th". */
static void formula_spells_the_strides_ordinal(void **state) {
  (void)state;
  static const char *const every[][2] = {
      {"1", "every 1st "},    {"2", "every 2nd "},   {"3", "every 3rd "},
      {"11", "every 11th "},  {"12", "every 12th "}, {"22", "every 22nd "},
      {"113", "every 113th "}};
  char out[4096], args[128];
  for (size_t i = 0; i < sizeof every / sizeof every[0]; i++) {
    snprintf(args, sizeof args, "formula --pattern stride --every %s",
             every[i][0]);
    assert_int_equal(allocsim(out, sizeof out, args), 0);
    if (strstr(out, every[i][1]) == NULL)
      fail_msg("want '%s' in:\n%s", every[i][1], out);
  }
}

/* formula --validate on a store of one random run: no k can be fitted, and
 * the output says so with "-", not "nan". */
static void formula_validate_shows_a_missing_fit_as_a_dash(void **state) {
  fixture_t *f = *state;
  char       args[512], out[8192];
  record_text(f, "allocsim-trace 1\n"
                 "#@ kind=measured\n"
                 "#@ workload=survivors --size 512 --total 4 --pattern random "
                 "--fraction 1e-3 --seed 3\n"
                 "#@ model=cpython:version=3.11\n"
                 "#@ python=3.11.2\n"
                 "0 0 mark start\n0 0 rss 16MiB\n"
                 "1 0 mark peak\n1 0 rss 20MiB\n"
                 "2 0 mark after\n2 0 rss 19MiB\n");
  snprintf(args, sizeof args, "formula --validate --db %s", f->db);
  assert_int_equal(allocsim(out, sizeof out, args), 0);
  if (strstr(out, "nan") != NULL ||
      strstr(out, "4096-byte pages: 1 random point\n") == NULL ||
      strstr(out, "k fitted         - (needs two or more points)") == NULL ||
      strstr(out, "formula at fitted k -, simulation") == NULL ||
      strstr(out, "   at fit k ") == NULL)
    fail_msg("formula --validate printed:\n%s", out);
  /* The point's row ends: formula sd, no fitted value, two differences. */
  const char *row = strstr(out, "\n    1   512 random 0.001 ");
  assert_non_null(row);
  assert_non_null(strstr(row, "          -     "));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          replayed_run_is_stored_and_listed_with_its_peak, setup, teardown),
      cmocka_unit_test_setup_teardown(
          runs_refuses_a_missing_store_and_a_missing_db_option, setup,
          teardown),
      cmocka_unit_test_setup_teardown(a_named_model_takes_the_recorded_versions,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          a_preloaded_run_is_listed_with_the_model_compare_uses, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          a_python_run_on_an_allocator_alone_is_warned, setup, teardown),
      cmocka_unit_test(a_replay_fits_an_address_space_limit),
      cmocka_unit_test_setup_teardown(a_truncated_child_capture_says_what_it_is,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(a_capture_without_allocations_compares,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(converted_workload_replays_like_run,
                                      setup, teardown),
      cmocka_unit_test(a_sweep_of_several_traces_names_each_rows_trace),
      cmocka_unit_test_setup_teardown(
          advise_heads_its_combinations_and_both_give_measured_rss, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          explain_advise_and_map_name_their_one_layout, setup, teardown),
      cmocka_unit_test(libc_alone_names_a_c_traces_model),
      cmocka_unit_test_setup_teardown(
          an_interrupted_convert_leaves_no_temporary_file, setup, teardown),
      cmocka_unit_test_setup_teardown(a_trace_read_once_is_read_like_its_file,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(report_to_dash_writes_the_page_on_stdout,
                                      setup, teardown),
      cmocka_unit_test(help_texts_show_no_printf_escapes),
      cmocka_unit_test(formula_spells_the_strides_ordinal),
      cmocka_unit_test_setup_teardown(
          formula_validate_shows_a_missing_fit_as_a_dash, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
