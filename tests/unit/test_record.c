/* tests/unit/test_record.c -- record_trace_file on object ids far apart.
 *
 * A measured-run file whose ids are sparse (one id of 4e8 among small
 * ones) is valid: replay keeps its live table in reserved address space
 * and makes only the pages the ids reach resident.  record's table was an
 * array grown and zeroed up to the largest id: this file took 4.2 GB and
 * 27 s to record.  It must take about what the ids it uses need.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "analysis/record.h"
#include "analysis/store.h"
#include "tests/helpers/peak_rss.h"
#include "tests/helpers/scratch.h"

#define MIB       UINT64_C(1048576)
#define SPARSE_ID UINT64_C(400000000)

static char g_dir[64];

static int setup_dir(void **state) {
  (void)state;
  scratch_make(g_dir, sizeof g_dir, "record");
  return 0;
}

static int teardown_dir(void **state) {
  (void)state;
  scratch_remove(g_dir);
  return 0;
}

static void a_sparse_id_is_recorded_without_its_gap_resident(void **state) {
  (void)state;
  char path[300], db[300];
  snprintf(path, sizeof path, "%s/sparse.trace", g_dir);
  snprintf(db, sizeof db, "%s/sparse.db", g_dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f,
          "allocsim-trace 1\n"
          "0 0 malloc 1 100\n"
          "1 0 malloc %llu 4096\n"
          "2 0 mark peak\n"
          "2 0 rss 1M\n"
          "3 0 free %llu\n",
          (unsigned long long)SPARSE_ID, (unsigned long long)SPARSE_ID);
  assert_int_equal(fclose(f), 0);

  store_t      *s = NULL;
  as_err_t      err = {0};
  record_info_t info;
  assert_int_equal(store_open(db, &s, &err), AS_OK);
  uint64_t before = peak_rss_bytes();
  if (record_trace_file(s, path, "test", NULL, 0, &info, &err) != AS_OK)
    fail_msg("record: %s", err.msg);
  /* The ids' table up to 4e8 is 3.2 GB of 8-byte entries. */
  assert_peak_grew_at_most(before, 64 * MIB, "recording");
  store_close(s);
  assert_int_equal(info.marks, 1);
  assert_int_equal(info.alloc_events, 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_sparse_id_is_recorded_without_its_gap_resident),
  };
  return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
