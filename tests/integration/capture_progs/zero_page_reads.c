/* tests/integration/capture_progs/zero_page_reads.c -- memory read before
 * it is written, as a program scanning a zeroed buffer or looking up a
 * static table does.  Between "begin" and "read" it reads every page of a
 * 4 MiB static array (.bss) and of a 16 MiB calloc (fresh from mmap): each
 * read maps the shared zero page and RSS does not grow.  Before "written"
 * it writes 1 MiB of another static array and the calloc's first 4 MiB. */
#include <stdlib.h>

#include "allocsim_mark.h"

#define MIB ((size_t)1 << 20)

static volatile unsigned char looked_up[4 * MIB];
static volatile unsigned char filled[1 * MIB];

static unsigned read_pages(const volatile unsigned char *p, size_t len) {
  unsigned sum = 0;
  for (size_t i = 0; i < len; i += 4096)
    sum += p[i];
  return sum;
}

static void write_pages(volatile unsigned char *p, size_t len) {
  for (size_t i = 0; i < len; i += 64)
    p[i] = 1;
}

int main(void) {
  volatile unsigned char *zeroed = calloc(1, 16 * MIB);
  if (zeroed == NULL)
    return 1;
  ALLOCSIM_MARK("begin");
  unsigned sum =
      read_pages(looked_up, sizeof looked_up) + read_pages(zeroed, 16 * MIB);
  ALLOCSIM_MARK("read");
  write_pages(filled, sizeof filled);
  write_pages(zeroed, 4 * MIB);
  ALLOCSIM_MARK("written");
  free((void *)zeroed);
  return sum == 0 ? 0 : 1;
}
