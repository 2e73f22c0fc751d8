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

/* Past its first HUGE_FROM_BYTES a table is large, and read at random (a
 * chunk record per free): transparent huge pages there save most of the
 * TLB misses and page faults (glibc survivors, 64 B objects: 0.63 s CPU
 * with 4 KiB pages, 0.41 s with 2 MiB ones), while a small table keeps its
 * 4 KiB pages and costs no 2 MiB granule.  Advice only: it works where
 * /sys/kernel/mm/transparent_hugepage/enabled says madvise or always. */
#define HUGE_FROM_BYTES ((size_t)8 << 20)

static void advise_huge_beyond_start(unsigned char *base, size_t bytes) {
  if (bytes > HUGE_FROM_BYTES)
    (void)madvise(base + HUGE_FROM_BYTES, bytes - HUGE_FROM_BYTES,
                  MADV_HUGEPAGE);
}

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
      advise_huge_beyond_start(p, bytes);
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
