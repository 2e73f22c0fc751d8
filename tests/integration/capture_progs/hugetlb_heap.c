/* tests/integration/capture_progs/hugetlb_heap.c -- glibc's
 * glibc.malloc.hugetlb=1 at work: a brk heap grown in 2 MiB steps and
 * advised MADV_HUGEPAGE, trimmed in 2 MiB steps, and an 8 MiB mmapped chunk
 * written once in its middle (one 2 MiB block wherever it lies), grown by
 * mremap to 16 MiB and written once more.  Each step ends with a mark. */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "allocsim_mark.h"

#define N 100000

static char *objs[N];

int main(void) {
  for (int i = 0; i < N; i++) {
    objs[i] = malloc(100);
    memset(objs[i], 1, 100);
  }
  ALLOCSIM_MARK("grown");
  for (int i = N - 1; i >= N / 2; i--)
    free(objs[i]);
  ALLOCSIM_MARK("half_freed");
  for (int i = 0; i < N / 2; i++)
    if (i % 4096 != 0)
      free(objs[i]);
  malloc_trim(0);
  ALLOCSIM_MARK("trimmed");
  char *big = malloc((size_t)8 << 20);
  big[(size_t)4 << 20] = 1;
  ALLOCSIM_MARK("mapped");
  big = realloc(big, (size_t)16 << 20);
  big[(size_t)12 << 20] = 1;
  ALLOCSIM_MARK("remapped");
  free(big);
  ALLOCSIM_MARK("end");
  return 0;
}
