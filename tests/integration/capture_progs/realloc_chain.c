/* tests/integration/capture_progs/realloc_chain.c -- a realloc chain that
 * moves between bins, the heap and mmap, plus realloc's malloc and free
 * forms.  test_capture.c checks its trace event by event between the marks
 * "begin" and "end". */
#include <stdlib.h>
#include <string.h>

#include "allocsim_mark.h"

int main(void) {
  ALLOCSIM_MARK("begin");
  char *p = malloc(16);
  memset(p, 1, 16);
  p = realloc(p, 32);
  p = realloc(p, 1000);
  p = realloc(p, 300000); /* above the mmap threshold */
  memset(p, 2, 300000);
  p = realloc(p, 24);
  char *q = realloc(NULL, 40); /* a malloc */
  q = realloc(q, 0);           /* a free, returns NULL */
  free(p);
  free(q); /* NULL: nothing recorded */
  ALLOCSIM_MARK("end");
  return 0;
}
