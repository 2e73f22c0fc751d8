/* tests/integration/capture_progs/own_malloc.c -- an executable with an
 * allocator of its own, as rustc links jemalloc: it defines malloc, free,
 * calloc and realloc, so every call (libc's too) binds to these ahead of a
 * preloaded library.  A bump allocator over private mappings of 4 MiB; 16
 * MiB allocated and written between "begin" and "end". */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "allocsim_mark.h"

#define CHUNK_BYTES ((size_t)4 << 20)

static char  *g_cur;  /* the free end of the current mapping */
static size_t g_left; /* bytes left in it */

void *malloc(size_t n) {
  size_t need = (n + 16 + 15) & ~(size_t)15; /* a 16-byte header: the size */
  if (need < n)
    return NULL;
  if (need > g_left) { /* a new mapping, as an allocator grows */
    size_t len = need > CHUNK_BYTES ? need : CHUNK_BYTES;
    void  *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return NULL;
    g_cur = p;
    g_left = len;
  }
  char *p = g_cur;
  g_cur += need;
  g_left -= need;
  memcpy(p, &n, sizeof n);
  return p + 16;
}

void free(void *p) {
  (void)p;
}

void *calloc(size_t k, size_t n) {
  if (n != 0 && k > SIZE_MAX / n)
    return NULL;
  return malloc(k * n); /* fresh pages of the mapping read as zero */
}

void *realloc(void *p, size_t n) {
  void *q = malloc(n);
  if (p != NULL && q != NULL) {
    size_t old;
    memcpy(&old, (char *)p - 16, sizeof old);
    memcpy(q, p, old < n ? old : n);
  }
  return q;
}

int main(void) {
  ALLOCSIM_MARK("begin");
  for (int i = 0; i < 256; i++) {
    char *p = malloc((size_t)64 << 10);
    if (p == NULL)
      return 1;
    memset(p, 1, (size_t)64 << 10);
  }
  ALLOCSIM_MARK("end");
  return 0;
}
