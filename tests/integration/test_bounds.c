/* tests/integration/test_bounds.c -- tiny inputs cannot exhaust the
 * machine or wrap the clock (issue 14, defect 4 and the clock of item 7).
 *
 * Each case is a one- or two-line input that used to grow the simulator
 * without bound (a malloc of 8 TiB, an object id of 2^32 - 1, a sample
 * every nanosecond up to 2^62 ns, a survivors run of 1 TiB), wrap the
 * clock past 2^64 ns, or stop with a model error that named no position.
 * Each must now end within seconds with exit 1 and one line naming the
 * file, the event and the limit or the option that raises it.  Every
 * command runs under a 60 s timeout: a hang fails the test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../helpers/run_cli.h"
#include "../helpers/scratch.h"

static char dir[64];

static int setup(void **state) {
  (void)state;
  scratch_make(dir, sizeof dir, "bounds");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  scratch_remove(dir);
  return 0;
}

static void write_trace(const char *name, const char *body) {
  char path[160];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "allocsim-trace 1\n%s", body);
  assert_int_equal(fclose(f), 0);
}

/* Runs cmd; expects exit code `code` and, for failures, one stderr line
 * holding every one of the NULL-terminated fragments. */
static void expect(const char *cmd, int code, ...) {
  run_cli_t r;
  run_cli(&r, dir, cmd, 60);
  if (r.timed_out)
    fail_msg("'%s' still ran after 60 s", cmd);
  if (r.code != code)
    fail_msg("'%s' exited %d, not %d; stderr: %s", cmd, r.code, code, r.err);
  if (code == 0)
    return;
  if (run_cli_lines(r.err) != 1)
    fail_msg("'%s': expected one line on stderr, got: %s", cmd, r.err);
  va_list ap;
  va_start(ap, code);
  for (const char *frag; (frag = va_arg(ap, const char *)) != NULL;)
    if (strstr(r.err, frag) == NULL)
      fail_msg("'%s': stderr lacks '%s': %s", cmd, frag, r.err);
  va_end(ap);
}

static void one_huge_malloc_is_refused_at_once(void **state) {
  (void)state;
  write_trace("huge.trace", "0 0 malloc 1 8192G\n");
  expect("allocsim replay huge.trace --max-memory 1GiB", 1,
         "huge.trace: line 2: event 0", "--max-memory", NULL);
  expect("allocsim replay huge.trace --model glibc --max-memory 1GiB", 1,
         "huge.trace: line 2: event 0", "--max-memory", NULL);
}

/* Layout 0's replay is kept for the report while the other layouts run:
 * all of them together stay within one --max-memory.  Each layout alone
 * needs about 400 MiB for a 1 TiB write (800 bytes per resident 2 MiB);
 * two at once were allowed 800 MiB under a 600 MiB limit. */
static void layouts_share_one_memory_bound(void **state) {
  (void)state;
  write_trace("tera.trace", "0 0 malloc 1 1T\n");
  expect("allocsim replay tera.trace --model glibc --max-memory 600MiB", 1,
         "--max-memory", NULL);
}

static void a_sparse_object_id_is_refused_at_once(void **state) {
  (void)state;
  write_trace("id.trace", "0 0 malloc 4294967295 8\n");
  expect("allocsim replay id.trace --max-memory 1GiB", 1,
         "id.trace: line 2: event 0", "object id 4294967295", "--max-memory",
         NULL);
}

static void
samples_beyond_the_bound_are_refused_before_they_are_taken(void **state) {
  (void)state;
  write_trace("long.trace", "0 0 malloc 1 8\n"
                            "4611686018427387904 0 free 1\n");
  expect("allocsim replay long.trace --csv --sample-every 1ns", 1,
         "long.trace: line 3: event 1", "--sample-every", "--max-memory", NULL);
}

static void a_terabyte_survivors_run_is_refused_up_front(void **state) {
  (void)state;
  expect("allocsim run survivors --total 1048576 --max-memory 4GiB", 1,
         "survivors", "17179869184 live objects", "--max-memory", NULL);
}

static void
an_allocation_larger_than_the_address_space_is_refused(void **state) {
  (void)state;
  write_trace("big.trace", "0 0 malloc 1 18446744073709551615\n");
  expect("allocsim replay big.trace --model ideal", 1,
         "big.trace: line 2: event 0",
         "larger than the simulated address space", NULL);
  write_trace("grow.trace", "0 0 malloc 1 8\n"
                            "1 0 realloc 1 18446744073709551615\n");
  expect("allocsim replay grow.trace --model glibc", 1,
         "grow.trace: line 3: event 1",
         "larger than the simulated address space", NULL);
}

static void the_clock_neither_wraps_nor_loops_at_its_end(void **state) {
  (void)state;
  /* An idle that would run past 2^64 - 1 ns (it used to wrap to 9 ns and
   * let the next event pass the "before the clock" check). */
  write_trace("clk.trace", "18446744073709551615 0 malloc 1 8\n"
                           "18446744073709551615 0 idle 10\n"
                           "18446744073709551615 0 mark x\n");
  expect("allocsim replay clk.trace", 1, "clk.trace: line 3: event 1",
         "past its end", NULL);
  /* Periodic samples stop at the end of the clock: one at 2^63 ns, then
   * the next would be 2^64 (it used to wrap to 0 and fire forever). */
  write_trace("end.trace", "18446744073709551610 0 malloc 1 8\n");
  run_cli_t r;
  run_cli(
      &r, dir,
      "allocsim replay end.trace --csv --sample-every 9223372036854775808ns",
      60);
  assert_false(r.timed_out);
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "\nperiodic,,9223372036854775808,"));
  assert_int_equal(run_cli_lines(r.out), 3); /* header, periodic, final */
}

static void a_model_error_names_the_file_and_event(void **state) {
  (void)state;
  /* pymalloc alone serves 1..512 bytes; its refusal used to carry no
   * position. */
  write_trace("pym.trace", "0 0 malloc 1 100\n"
                           "5 0 malloc 2 1000\n");
  expect(
      "allocsim replay pym.trace --model pymalloc", 1,
      "pym.trace: line 3: event 1 (t=5 ns, malloc): pymalloc: request of 1000",
      NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(one_huge_malloc_is_refused_at_once),
      cmocka_unit_test(layouts_share_one_memory_bound),
      cmocka_unit_test(a_sparse_object_id_is_refused_at_once),
      cmocka_unit_test(
          samples_beyond_the_bound_are_refused_before_they_are_taken),
      cmocka_unit_test(a_terabyte_survivors_run_is_refused_up_front),
      cmocka_unit_test(an_allocation_larger_than_the_address_space_is_refused),
      cmocka_unit_test(the_clock_neither_wraps_nor_loops_at_its_end),
      cmocka_unit_test(a_model_error_names_the_file_and_event),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
