/* tests/unit/test_compare_specs.c -- which model `compare` replays a
 * measured run with when the caller names none: the run's own provenance.
 *
 * A run of a C program is predicted by its libc model alone.  Its
 * measured-run file says "model=glibc" and carries the knobs in
 * "libc=glibc:...,mmap_threshold=131072" (scripts/measure/labs/run.sh
 * writes both); the replay must use those knobs.  The trace is lab 4 of the
 * allocator course notes in small: a 4 MiB buffer allocated and freed twice.
 * With MALLOC_MMAP_THRESHOLD_ set, glibc freezes the threshold (2.36
 * malloc.c:5308-5346 no_dyn_threshold), so the second buffer is mmapped
 * again and its free gives all 4 MiB back; with the dynamic threshold the
 * first free raises it to 4 MiB + a page (malloc.c:3364-3373) and the
 * second buffer stays in the heap after its free.
 *
 * Also here: what a measured trace says no allocator holds (an rss event's
 * "other", which captures write) reaches compare's allocator error.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "analysis/compare.h"
#include "analysis/record.h"
#include "analysis/store.h"

#define MIB      UINT64_C(1048576)
#define BUFFER   (4 * MIB)
#define MEASURED (1 * MIB) /* the measured rss at every mark; arbitrary */

static char g_dir[256];

static int setup_dir(void **state) {
  (void)state;
  snprintf(g_dir, sizeof g_dir, "/tmp/allocsim-test-specs-XXXXXX");
  return mkdtemp(g_dir) == NULL ? -1 : 0;
}

static int teardown_dir(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* Records the measured-run file at path in a new store db and compares it
 * with no model or libc named, one layout; the store stays open in *s. */
static void record_and_compare(const char *path, const char *db, store_t **s,
                               compare_result_t *r) {
  as_err_t      err = {0};
  record_info_t info;
  assert_int_equal(store_open(db, s, &err), AS_OK);
  if (record_trace_file(*s, path, "test", NULL, 0, &info, &err) != AS_OK)
    fail_msg("record: %s", err.msg);
  compare_opts_t o = {.layouts = 1};
  memset(r, 0, sizeof *r);
  if (compare_run(*s, info.run_id, &o, r, &err) != AS_OK)
    fail_msg("compare: %s", err.msg);
}

/* Records the two-buffer run with the given libc provenance and compares
 * it with no model or libc named; returns the predicted rss above start at
 * mark second_free and copies the model spec compare chose. */
static int64_t second_free_above_start(const char *libc, char *spec,
                                       size_t spec_len) {
  char path[300], db[300];
  snprintf(path, sizeof path, "%s/run.trace", g_dir);
  snprintf(db, sizeof db, "%s/run-%zu.db", g_dir, strlen(libc));
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f,
          "allocsim-trace 1\n#@ kind=measured\n#@ page_size=4096\n"
          "#@ model=glibc\n#@ libc=%s\n",
          libc);
  fprintf(f, "0 0 mark start\n0 0 rss %" PRIu64 "\n", MEASURED);
  fprintf(f, "1 0 malloc 1 %" PRIu64 "\n2 0 free 1\n", BUFFER);
  fprintf(f, "3 0 malloc 2 %" PRIu64 "\n4 0 free 2\n", BUFFER);
  fprintf(f, "5 0 mark second_free\n5 0 rss %" PRIu64 "\n", MEASURED);
  assert_int_equal(fclose(f), 0);

  store_t         *s = NULL;
  compare_result_t r;
  record_and_compare(path, db, &s, &r);
  assert_int_equal(r.nmarks, 2);
  assert_string_equal(r.marks[1].label, "second_free");
  int64_t above = (int64_t)r.marks[1].simulated_rss_bytes -
                  (int64_t)r.marks[0].simulated_rss_bytes;
  snprintf(spec, spec_len, "%s", r.model_spec);
  compare_result_free(&r);
  store_close(s);
  return above;
}

static void a_glibc_run_is_replayed_with_its_libc_knobs(void **state) {
  (void)state;
  char    spec[256];
  int64_t frozen = second_free_above_start(
      "glibc:ncpus=2,mmap_threshold=131072", spec, sizeof spec);
  assert_string_equal(spec, "glibc:ncpus=2,mmap_threshold=131072");
  /* The second buffer was its own mapping, unmapped by its free. */
  assert_true(frozen >= 0 && frozen < (int64_t)(64 * 1024));
}

static void without_knobs_the_threshold_is_dynamic(void **state) {
  (void)state;
  char    spec[256];
  int64_t dynamic = second_free_above_start("glibc:ncpus=2", spec, sizeof spec);
  assert_string_equal(spec, "glibc:ncpus=2");
  /* The second buffer came from the heap and its pages stay. */
  assert_true(dynamic >= (int64_t)BUFFER);
}

/* A trace recorded from its file, as `allocsim record` does, keeps each
 * sample's "other": the growth of what no allocator holds is reported and
 * added to the prediction for the allocator error. */
static void a_traces_other_bytes_reach_the_allocator_error(void **state) {
  (void)state;
  char path[300], db[300];
  snprintf(path, sizeof path, "%s/other.trace", g_dir);
  snprintf(db, sizeof db, "%s/other.db", g_dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "allocsim-trace 1\n#@ kind=measured\n#@ page_size=4096\n"
             "#@ model=glibc\n#@ libc=glibc:ncpus=2\n"
             "0 0 mark start\n0 0 rss 10MiB 3MiB\n"
             "1 0 malloc 1 64\n"
             "2 0 mark end\n2 0 rss 14MiB 5MiB\n");
  assert_int_equal(fclose(f), 0);
  store_t         *s = NULL;
  compare_result_t r;
  record_and_compare(path, db, &s, &r);
  assert_true(r.has_other);
  assert_int_equal(r.nmarks, 2);
  assert_int_equal(r.marks[1].other_growth_bytes, 2 * MIB);
  assert_int_equal(r.marks[1].allocator_error_bytes,
                   r.marks[1].error_bytes + (int64_t)(2 * MIB));
  compare_result_free(&r);
  store_close(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_glibc_run_is_replayed_with_its_libc_knobs),
      cmocka_unit_test(a_traces_other_bytes_reach_the_allocator_error),
      cmocka_unit_test(without_knobs_the_threshold_is_dynamic),
  };
  return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
