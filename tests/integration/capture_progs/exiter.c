/* tests/integration/capture_progs/exiter.c -- leaves through _exit(3),
 * which skips destructors: the recorder must still send what it holds.
 * After the mark "begin" it mallocs 5005 bytes and never frees them. */
#include <stdlib.h>
#include <unistd.h>

#include "allocsim_mark.h"

int main(void) {
  ALLOCSIM_MARK("begin");
  volatile char *p = malloc(5005);
  p[0] = 1;
  _exit(3);
}
