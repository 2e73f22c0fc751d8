/* sim/reserve.c -- reserved, commit-as-needed arrays (see reserve.h). */
#include "reserve.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Smallest reservation init settles for, and the least it commits at a
 * time (so a table growing one entry at a time makes few mprotect calls;
 * committed pages cost nothing until written). */
#define RESERVE_MIN_BYTES ((size_t)64 << 20)
#define COMMIT_STEP_BYTES ((size_t)1 << 20)
/* Pages as_reserve_populate makes resident per call: 64 faults become one
 * call, and at most 256 KiB is resident before it is used. */
#define POPULATE_STEP_BYTES ((size_t)256 << 10)

as_status_t as_reserve_init(as_reserve_t *r, size_t elem, size_t max_elems) {
  memset(r, 0, sizeof *r);
  if (elem == 0)
    return AS_EINVAL;
  size_t bytes = max_elems > SIZE_MAX / elem ? SIZE_MAX : max_elems * elem;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  bytes = (bytes + page - 1) / page * page;
  for (;;) {
    void *p = mmap(NULL, bytes, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
      r->base = p;
      r->elem = elem;
      r->max = bytes / elem;
      r->reserved = bytes;
      return AS_OK;
    }
    if (bytes <= RESERVE_MIN_BYTES)
      return AS_ENOMEM;
    bytes = bytes / 2 / page * page;
  }
}

void *as_reserve_need(as_reserve_t *r, size_t n) {
  if (n > r->max)
    return NULL;
  size_t bytes = n * r->elem;
  if (bytes <= r->committed)
    return r->base;
  size_t want = r->committed + r->committed / 2; /* few calls for big tables */
  if (want < r->committed + COMMIT_STEP_BYTES)
    want = r->committed + COMMIT_STEP_BYTES;
  if (want < bytes)
    want = bytes;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  want =
      want > r->reserved - page ? r->reserved : (want + page - 1) / page * page;
  if (mprotect(r->base + r->committed, want - r->committed,
               PROT_READ | PROT_WRITE) != 0)
    return NULL;
  r->committed = want;
  return r->base;
}

void as_reserve_populate(as_reserve_t *r, size_t n) {
  size_t bytes = n * r->elem;
  if (bytes <= r->populated)
    return;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t want = r->populated + POPULATE_STEP_BYTES;
  if (want < bytes)
    want = (bytes + page - 1) / page * page; /* madvise takes whole pages */
  if (want > r->committed)
    want = r->committed;
  /* A failure (an old kernel) is harmless: the pages fault when written. */
  (void)madvise(r->base + r->populated, want - r->populated,
                MADV_POPULATE_WRITE);
  r->populated = want;
}

void as_reserve_free(as_reserve_t *r) {
  if (r->base != NULL)
    munmap(r->base, r->reserved);
  memset(r, 0, sizeof *r);
}
