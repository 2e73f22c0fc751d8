/* tests/unit/test_phases.c -- the phase tracker explain wraps a trace in
 * (traces/phases.h): each live object's phase, and the memory a sparse id
 * costs.
 *
 * Ids are dense in a good trace, but one far past the others is valid: the
 * engine keeps its live table in reserved address space, so replaying a
 * trace with one id of 4e9 takes 5 MB.  The tracker's table was an array
 * grown and zeroed up to the largest id, so explain on that trace took
 * 4.2 GB and 23 s.
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

#include "traces/phases.h"
#include "traces/trace_io.h"
#include "tests/helpers/peak_rss.h"

#define MIB UINT64_C(1048576)

typedef struct seen_s seen_t;
struct seen_s {
  uint64_t id[4];
  size_t   phase[4];
  size_t   n;
};

static as_status_t note_live(void *user, uint64_t id, size_t phase,
                             as_err_t *err) {
  (void)err;
  seen_t *s = user;
  if (s->n < 4) {
    s->id[s->n] = id;
    s->phase[s->n] = phase;
  }
  s->n++;
  return AS_OK;
}

static void a_sparse_id_costs_its_page_not_the_gap(void **state) {
  (void)state;
  char path[] = "/tmp/allocsim-test-phases-XXXXXX";
  int  fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "w");
  assert_non_null(f);
  fputs("allocsim-trace 1\n"
        "0 0 mark build\n"
        "1 0 malloc 1 100\n"
        "2 0 mark serve\n"
        "3 0 malloc 4000000000 100\n"
        "4 0 malloc 2 100\n"
        "5 0 free 4000000000\n"
        "6 0 mark end\n",
        f);
  assert_int_equal(fclose(f), 0);

  as_err_t        err = {0};
  trace_source_t *src = NULL, *tracker = NULL;
  assert_int_equal(trace_open(path, &src, &err), AS_OK);
  assert_int_equal(trace_phases_wrap(src, &tracker, &err), AS_OK);
  uint64_t      before = peak_rss_bytes();
  trace_event_t ev;
  as_status_t   rc;
  while ((rc = trace_source_next(tracker, &ev, &err)) == AS_OK)
    ;
  assert_int_equal(rc, AS_DONE);
  seen_t seen = {0};
  assert_int_equal(trace_phases_each_live(tracker, note_live, &seen, &err),
                   AS_OK);
  /* Up to id 4e9 the table is 4 GB of 1-byte entries. */
  assert_peak_grew_at_most(before, 64 * MIB, "tracking");
  assert_int_equal(seen.n, 2);
  assert_int_equal(seen.id[0], 1);
  assert_string_equal(trace_phases_label(tracker, seen.phase[0]), "build");
  assert_int_equal(seen.id[1], 2);
  assert_string_equal(trace_phases_label(tracker, seen.phase[1]), "serve");
  trace_source_close(tracker);
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_sparse_id_costs_its_page_not_the_gap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
