/* tests/integration/capture_progs/bss_read.c -- static data read but never
 * written.  Between "begin" and "read" the program reads every byte of a
 * 4 MiB static array (.bss), which maps the shared zero page and adds
 * nothing to RSS; between "read" and "written" it writes 1 MiB of another,
 * which adds 1 MiB. */
#include <stdio.h>

#include "allocsim_mark.h"

#define MIB (1 << 20)

static volatile unsigned char looked_up[4 * MIB];
static volatile unsigned char filled[1 * MIB];

int main(void) {
  ALLOCSIM_MARK("begin");
  unsigned sum = 0;
  for (int i = 0; i < 4 * MIB; i += 64)
    sum += looked_up[i];
  ALLOCSIM_MARK("read");
  for (int i = 0; i < 1 * MIB; i += 64)
    filled[i] = (unsigned char)(i + 1);
  ALLOCSIM_MARK("written");
  return sum == 0 ? 0 : 1;
}
