/* tests/integration/capture_progs/allocx.c -- jemalloc's own API, called
 * the way programs written for jemalloc call it (weak references, used when
 * they resolve).  Between "begin" and "end": mallocx of 1,000 bytes, of
 * 4,096 aligned to 4,096 (MALLOCX_LG_ALIGN(12)) and of 100 zeroed
 * (MALLOCX_ZERO); rallocx of the first to 5,000; xallocx of the second to
 * 8,192 in place (which jemalloc refuses for a slab-sized block); sdallocx
 * of the first, dallocx of the other two.  Exits 2 where mallocx does not
 * resolve. */
#include <stddef.h>

#include "allocsim_mark.h"

void  *mallocx(size_t size, int flags) __attribute__((weak));
void  *rallocx(void *ptr, size_t size, int flags) __attribute__((weak));
size_t xallocx(void *ptr, size_t size, size_t extra, int flags)
    __attribute__((weak));
void sdallocx(void *ptr, size_t size, int flags) __attribute__((weak));
void dallocx(void *ptr, int flags) __attribute__((weak));

#define MALLOCX_LG_ALIGN(la) ((int)(la))
#define MALLOCX_ZERO         ((int)0x40)

int main(void) {
  if (!mallocx || !rallocx || !xallocx || !sdallocx || !dallocx)
    return 2;
  ALLOCSIM_MARK("begin");
  char *a = mallocx(1000, 0);
  char *b = mallocx(4096, MALLOCX_LG_ALIGN(12));
  char *c = mallocx(100, MALLOCX_ZERO);
  if (a == NULL || b == NULL || c == NULL || ((size_t)b & 4095) != 0 ||
      c[99] != 0)
    return 1;
  a = rallocx(a, 5000, 0);
  if (a == NULL)
    return 1;
  xallocx(b, 8192, 0, 0);
  sdallocx(a, 5000, 0);
  dallocx(b, 0);
  dallocx(c, 0);
  ALLOCSIM_MARK("end");
  return 0;
}
