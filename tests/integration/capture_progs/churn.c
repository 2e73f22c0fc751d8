/* tests/integration/capture_progs/churn.c -- a C program for the reference
 * database: N blocks (argv[1], default and at most 200000) of 16..2064
 * bytes, every 100th kept, the rest freed, then malloc_trim(0).  Marks:
 * start, peak, after_free, after_trim. */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "allocsim_mark.h"

#define N 200000

int main(int argc, char **argv) {
  static char *blocks[N];
  int          n = argc > 1 ? atoi(argv[1]) : N;
  if (n <= 0 || n > N)
    n = N;
  ALLOCSIM_MARK("start");
  for (int i = 0; i < n; i++) {
    size_t size = 16 + (size_t)(i * 37 % 2049);
    blocks[i] = malloc(size);
    memset(blocks[i], i & 0xff, size);
  }
  ALLOCSIM_MARK("peak");
  for (int i = 0; i < n; i++)
    if (i % 100 != 0)
      free(blocks[i]);
  ALLOCSIM_MARK("after_free");
  malloc_trim(0);
  ALLOCSIM_MARK("after_trim");
  for (int i = 0; i < n; i += 100)
    free(blocks[i]);
  return 0;
}
