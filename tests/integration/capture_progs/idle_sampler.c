/* tests/integration/capture_progs/idle_sampler.c -- touches 8 MiB, sleeps
 * 200 ms so the sampler thread takes periodic RSS samples, then frees it. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allocsim_mark.h"

int main(void) {
  char *p = malloc(8u << 20);
  memset(p, 1, 8u << 20);
  ALLOCSIM_MARK("touched");
  struct timespec ts = {0, 200 * 1000 * 1000};
  nanosleep(&ts, NULL);
  free(p);
  ALLOCSIM_MARK("freed");
  return 0;
}
