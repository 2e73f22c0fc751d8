/* tests/integration/capture_progs/aligned.c -- the memalign family, calloc,
 * malloc_trim, and a calloc from a constructor that runs before main (after
 * the preloaded library's own constructor, which initialises it; calls that
 * come earlier still, from ld.so and libc start-up, resolve the real
 * functions on first use). */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "allocsim_mark.h"

static void *early;

__attribute__((constructor(101))) static void early_calloc(void) {
  early = calloc(3, 111); /* 333 bytes */
}

int main(void) {
  ALLOCSIM_MARK("begin");
  void *a = memalign(64, 100);
  void *b = NULL;
  if (posix_memalign(&b, 4096, 10) != 0)
    return 1;
  void *c = aligned_alloc(256, 512);
  void *d = valloc(100);
  void *e = pvalloc(5000);
  void *f = calloc(10, 10);
  memset(f, 1, 100);
  free(a);
  free(b);
  free(c);
  free(d);
  free(e);
  free(f);
  free(early);
  malloc_trim(4096);
  ALLOCSIM_MARK("end");
  return 0;
}
