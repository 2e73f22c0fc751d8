/* tests/unit/test_machine.c -- the zero-page probe (traces/machine.c)
 * against an independent measurement: the process's resident pages
 * (/proc/self/statm) before and after reading 16 MiB never written. */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "traces/machine.h"

static long resident_pages(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long  size = -1, resident = -1;
  if (f != NULL) {
    if (fscanf(f, "%ld %ld", &size, &resident) != 2)
      resident = -1;
    fclose(f);
  }
  return resident;
}

/* Reading 4096 fresh pages adds about 4096 resident pages where each read
 * fault gets a page of its own and about none under the zero page: the
 * probe must say which (the rest of the process moves by far less than
 * the 2048-page midpoint between the two). */
static void probe_agrees_with_rss(void **state) {
  (void)state;
  const size_t            page = (size_t)sysconf(_SC_PAGESIZE), n = 4096;
  volatile unsigned char *p = mmap(NULL, n * page, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(p != MAP_FAILED);
  long     before = resident_pages();
  unsigned sum = 0;
  for (size_t i = 0; i < n; i++)
    sum += p[i * page];
  long after = resident_pages();
  munmap((void *)p, n * page);
  assert_int_equal(sum, 0);
  assert_true(before > 0 && after > 0);
  bool private_pages = after - before > (long)n / 2;
  int  probe = machine_reads_map_zero_page();
  print_message("read of %zu fresh pages: %+ld resident; probe says %s\n", n,
                after - before,
                probe == 1   ? "zero page"
                : probe == 0 ? "a page each"
                             : "cannot tell");
  assert_int_equal(probe, private_pages ? 0 : 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(probe_agrees_with_rss),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
