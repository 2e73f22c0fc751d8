/* tests/integration/capture_progs/daemonizer.c -- daemon(): the process the
 * capture started exits at once and its child, reparented, allocates only
 * 300 ms later, when it first connects to the recorder (its fork came
 * through glibc's daemon, not the recorder's fork wrapper). */
#define _DEFAULT_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allocsim_mark.h"

int main(void) {
  if (daemon(1, 1) != 0)
    return 1;
  usleep(300000);
  char *p = malloc(70001);
  if (p == NULL)
    return 1;
  memset(p, 1, 70001);
  ALLOCSIM_MARK("daemon");
  free(p);
  return 0;
}
