/* tests/integration/capture_progs/read_only.c -- a large calloc read
 * before it is written, as a program scanning a zeroed buffer does.  After
 * "read" every page of a 16 MiB calloc (fresh from mmap) has been read and
 * none written: each maps the shared zero page, and RSS has not grown.
 * Before "written" its first 4 MiB are written. */
#include <stdlib.h>

#include "allocsim_mark.h"

#define MIB ((size_t)1 << 20)

int main(void) {
  volatile unsigned char *zeroed = calloc(1, 16 * MIB);
  if (zeroed == NULL)
    return 1;
  ALLOCSIM_MARK("begin");
  unsigned sum = 0;
  for (size_t i = 0; i < 16 * MIB; i += 4096)
    sum += zeroed[i];
  ALLOCSIM_MARK("read");
  for (size_t i = 0; i < 4 * MIB; i += 64)
    zeroed[i] = 1;
  ALLOCSIM_MARK("written");
  free((void *)zeroed);
  return sum == 0 ? 0 : 1;
}
