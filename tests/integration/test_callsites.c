/* tests/integration/test_callsites.c -- call sites end to end, as a user
 * runs them: `allocsim capture --stacks 8` of capture_progs/two_sites (one
 * site frees every block, the other keeps one in 100), then `allocsim
 * explain --by-site` must name the keeping site's function first, with
 * the free memory its survivors pin, and the freeing site nowhere (it has
 * nothing live).  Also: the trace defines each of the program's two sites
 * once however many allocations came from them (the recorder's table
 * dedupes them), a C++ program's sites are demangled, and a capture
 * without --stacks records no site. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#define ALLOCSIM ALLOCSIM_BINARY_DIR "/cli/allocsim"
#define LIB      ALLOCSIM_BINARY_DIR "/traces/capture/liballocsim_capture.so"
#define PROGS    ALLOCSIM_BINARY_DIR "/tests/integration/capture_progs/"
#define PROG     PROGS "two_sites"

static char g_dir[128];

static int setup(void **state) {
  (void)state;
  snprintf(g_dir, sizeof g_dir, "/tmp/allocsim-test-callsites-XXXXXX");
  return mkdtemp(g_dir) == NULL ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* Runs the shell command built from fmt; its stdout (up to len - 1 bytes)
 * into out; returns its exit status. */
static int run(char *out, size_t len, const char *fmt, ...) {
  char    cmd[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t n = fread(out, 1, len - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void assert_contains(const char *text, const char *needle) {
  if (strstr(text, needle) == NULL)
    fail_msg("expected '%s' in:\n%s", needle, text);
}

static size_t count(const char *text, const char *needle) {
  size_t n = 0;
  for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
    n++;
  return n;
}

static void keeping_site_is_named_first(void **state) {
  (void)state;
  static char out[1 << 20];
  assert_int_equal(run(out, sizeof out,
                       "cd '%s' && ALLOCSIM_CAPTURE_LIB='%s' TMPDIR='%s' '%s' "
                       "capture --stacks 8 -o t.astrace -- '%s' 2>&1",
                       g_dir, LIB, g_dir, ALLOCSIM, PROG),
                   0);
  assert_contains(out, "call sites: ");

  /* Each site is defined once: the program's own two sites (innermost
   * frames in make_temp and make_kept) among the few the C runtime adds. */
  assert_int_equal(run(out, sizeof out,
                       "cd '%s' && '%s' convert t.astrace t.trace 2>/dev/null "
                       "&& grep -E ' (site|module) ' t.trace",
                       g_dir, ALLOCSIM),
                   0);
  assert_contains(out, "/two_sites\n");
  size_t sites = count(out, " site ");
  assert_true(sites >= 2 && sites < 20);

  assert_int_equal(run(out, sizeof out,
                       "cd '%s' && '%s' explain t.astrace --model glibc "
                       "--at after --by-site --top 3 --json",
                       g_dir, ALLOCSIM),
                   0);
  const char *sites_at = strstr(out, "\"sites\": [");
  assert_non_null(sites_at);
  const char *fn = strstr(sites_at, "\"function\": \"");
  assert_non_null(fn);
  if (strncmp(fn + 13, "make_kept", 9) != 0)
    fail_msg("expected make_kept first, got:\n%s", sites_at);
  assert_null(strstr(sites_at, "make_temp"));
  /* 200 survivors of 200 bytes pin about 7.9 MiB of free chunks (the
   * 40,000 blocks' heap): the keeping site's retained bytes. */
  const char *ret = strstr(fn, "\"retained_bytes\": ");
  assert_non_null(ret);
  unsigned long long kept = strtoull(ret + 18, NULL, 10);
  assert_true(kept > 7u << 20 && kept < 9u << 20);
  const char *live = strstr(fn, "\"live_objects\": ");
  assert_non_null(live);
  assert_int_equal(strtoull(live + 16, NULL, 10), 200);

  assert_int_equal(run(out, sizeof out,
                       "cd '%s' && '%s' explain t.astrace --model glibc "
                       "--at after --by-site --top 3",
                       g_dir, ALLOCSIM),
                   0);
  assert_contains(out, "by call site: ");
  assert_contains(out, "make_kept");
  assert_contains(out, "two_sites.c:");
}

/* A C++ program's sites are named as its source names them: the
 * demangled name of the std::map insert and std::string constructor that
 * called operator new, not the symbol table's _ZNSt... */
static void cxx_sites_are_demangled(void **state) {
  (void)state;
  static char out[1 << 20];
  assert_int_equal(run(out, sizeof out,
                       "cd '%s' && ALLOCSIM_CAPTURE_LIB='%s' TMPDIR='%s' '%s' "
                       "capture --stacks 8 -o cxx.astrace -- '%s' 2>&1 && "
                       "'%s' explain cxx.astrace --model glibc --at built "
                       "--by-site --top 3",
                       g_dir, LIB, g_dir, ALLOCSIM, PROGS "cxx_maps", ALLOCSIM),
                   0);
  assert_contains(out, "by call site: ");
  assert_contains(out, "std::__cxx11::basic_string<char");
  assert_null(strstr(out, " _ZN"));
}

static void no_stacks_no_sites(void **state) {
  (void)state;
  static char out[1 << 16];
  assert_int_equal(run(out, sizeof out,
                       "cd '%s' && ALLOCSIM_CAPTURE_LIB='%s' TMPDIR='%s' '%s' "
                       "capture -o n.astrace -- '%s' 2>&1",
                       g_dir, LIB, g_dir, ALLOCSIM, PROG),
                   0);
  assert_null(strstr(out, "call sites: "));
  assert_int_equal(run(out, sizeof out,
                       "cd '%s' && '%s' explain n.astrace --model glibc "
                       "--at after --by-site",
                       g_dir, ALLOCSIM),
                   0);
  assert_contains(out, "no call site recorded up to here");
  assert_contains(out, "(no call site recorded)");
}

/* The recorder's site table under contention: four threads allocate from
 * one site at once (--stacks 3 keeps alloc_here, worker, start_thread, the
 * same for all), so one thread defines it while the others wait for the
 * definition; a forked child's trace defines it again.  Readers refuse a
 * second definition, so reading the trace checks there is one; every
 * allocation must name it (a lost wait would record no site). */
static void one_site_under_contention_and_after_fork(void **state) {
  (void)state;
  static char out[1 << 16];
  assert_int_equal(run(out, sizeof out,
                       "cd '%s' && ALLOCSIM_CAPTURE_LIB='%s' TMPDIR='%s' '%s' "
                       "capture --stacks 3 -o th.astrace -- '%s' 2>&1",
                       g_dir, LIB, g_dir, ALLOCSIM, PROGS "sites_threads"),
                   0);
  /* The parent's trace (its threads) and the child's (th.PID.astrace). */
  assert_int_equal(run(out, sizeof out,
                       "cd '%s' && '%s' explain th.astrace --model glibc "
                       "--by-site --top 1 --json",
                       g_dir, ALLOCSIM),
                   0);
  const char *fn = strstr(out, "\"function\": \"alloc_here");
  if (fn == NULL)
    fail_msg("expected alloc_here first in:\n%s", out);
  const char *live = strstr(fn, "\"live_objects\": ");
  assert_non_null(live);
  assert_int_equal(strtoull(live + 16, NULL, 10), 40000);
  assert_int_equal(run(out, sizeof out,
                       "cd '%s' && for t in th.*.astrace; do '%s' explain "
                       "\"$t\" --model glibc --by-site --top 1 --json; done",
                       g_dir, ALLOCSIM),
                   0);
  fn = strstr(out, "\"function\": \"alloc_here");
  if (fn == NULL)
    fail_msg("expected alloc_here first in the child's trace:\n%s", out);
  live = strstr(fn, "\"live_objects\": ");
  assert_non_null(live);
  assert_int_equal(strtoull(live + 16, NULL, 10), 10000);
}

static void bad_stacks_option_is_refused(void **state) {
  (void)state;
  static char out[4096];
  assert_int_equal(run(out, sizeof out,
                       "cd '%s' && '%s' capture --stacks 33 -- true 2>&1",
                       g_dir, ALLOCSIM),
                   2);
  assert_contains(out, "--stacks expects a number of return addresses from "
                       "0 (off) to 32, got '33'");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(keeping_site_is_named_first),
      cmocka_unit_test(cxx_sites_are_demangled),
      cmocka_unit_test(no_stacks_no_sites),
      cmocka_unit_test(one_site_under_contention_and_after_fork),
      cmocka_unit_test(bad_stacks_option_is_refused),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
