/* tests/integration/capture_progs/touch.c -- allocations written in part
 * or not at all.  Between "begin" and "written": a 64 MiB malloc (mmap'd)
 * of which only [8 MiB, 16 MiB) is written.  Before "calloc": a 16 MiB
 * calloc never written and a 100-byte malloc (below the touch threshold).
 * Then everything is freed before "end". */
#include <stdlib.h>
#include <string.h>

#include "allocsim_mark.h"

#define MIB ((size_t)1 << 20)

int main(void) {
  ALLOCSIM_MARK("begin");
  char *big = malloc(64 * MIB);
  memset(big + 8 * MIB, 1, 8 * MIB);
  ALLOCSIM_MARK("written");
  char *zero = calloc(1, 16 * MIB);
  char *small = malloc(100);
  small[0] = 1;
  ALLOCSIM_MARK("calloc");
  free(big);
  free(zero);
  free(small);
  ALLOCSIM_MARK("end");
  return 0;
}
