/* sim/reserve.c -- reserved, commit-as-needed arrays (see reserve.h). */
#include "reserve.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

/* Smallest reservation init settles for, and the least it commits at a
 * time (so a table growing one entry at a time makes few mprotect calls;
 * committed pages cost nothing until written). */
#define RESERVE_MIN_BYTES ((size_t)64 << 20)
#define COMMIT_STEP_BYTES ((size_t)1 << 20)
/* The most as_reserve_populate makes resident per call: 64 faults become
 * one call, and at most 256 KiB is resident before it is used. */
#define POPULATE_STEP_BYTES ((size_t)256 << 10)

/* A table that grows past HUGE_ADVISE_BYTES gets MADV_HUGEPAGE: on this
 * kind of VM the first write to each fresh 4 KiB page costs far more user
 * time than writing it again (a 134 MB array of 32-byte records written in
 * order: 41-50 ns per record the first time, 6-9 ns the second, with or
 * without MADV_POPULATE_WRITE; 7-10 ns in huge pages).  Measured on the
 * glibc model's survivors replay (64 B objects, 128 MiB of chunk records;
 * 8 alternating runs): 0.36-0.38 s user + 0.03-0.05 s system without, 0.23-
 * 0.26 s user + 0.01-0.15 s system with; each run right after a jemalloc
 * replay of the same trace (as scripts/bench.sh interleaves them), 0.42-
 * 0.43 s in all without and 0.28-0.42 s with (0.03-0.20 s of it system:
 * finding free 2 MiB blocks).  The system time varies with how readily the
 * host backs a free 2 MiB block (an earlier measurement, with the VM's
 * balloon holding them, had 0.32-0.39 s of it).
 * The price is the last huge page: the table's end falls inside it, and
 * the whole 2 MiB is resident.  Below the threshold a table keeps 4 KiB
 * pages; at 64 MiB that rounding is at most 3 % of the table.  With the
 * threshold at 16 MiB, the survivors benchmark trace's 16.8 MB object
 * tables took 1.7-1.9 MB more of the simulator's max RSS for cpython,
 * jemalloc, mimalloc, musl and tcmalloc (mimalloc 29.8 against 28.0 MB),
 * for the same CPU time (10 alternating runs, medians: cpython 0.174 s
 * against 0.173, mimalloc 0.204 against 0.203; glibc, whose records pass
 * 64 MiB, 0.31-0.47 s against 0.33-0.39). */
#define HUGE_ADVISE_BYTES ((size_t)64 << 20)
#define HUGE_PAGE_BYTES   ((size_t)2 << 20) /* x86-64's PMD size */

/* Reservations a thread keeps between as_reserve_reuse_begin and _end:
 * at most KEPT_SLOTS, each of at most KEPT_MAX_COMMITTED committed bytes
 * (a bigger one goes back to the system rather than stay resident while
 * smaller points run).  Zeroing what was written costs about what the
 * kernel's zeroing of fresh pages would; the faults are what is saved.
 * Its elem and wanted identify its shape. */
#define KEPT_SLOTS         4
#define KEPT_MAX_COMMITTED ((size_t)1 << 30)
static _Thread_local unsigned     reuse_depth; /* begin calls not ended */
static _Thread_local as_reserve_t kept[KEPT_SLOTS];
static _Thread_local size_t       kept_resident[KEPT_SLOTS]; /* bytes */
static _Atomic size_t             kept_total; /* kept_resident, all threads */

static size_t page_bytes(void) {
  return (size_t)sysconf(_SC_PAGESIZE);
}

static size_t wanted_bytes(size_t elem, size_t max_elems) {
  size_t bytes = max_elems > SIZE_MAX / elem ? SIZE_MAX : max_elems * elem;
  size_t page = page_bytes();
  return bytes > SIZE_MAX - page ? SIZE_MAX / page * page
                                 : (bytes + page - 1) / page * page;
}

/* Takes a kept reservation of this shape into r, if the thread has one. */
static bool take_kept(as_reserve_t *r, size_t elem, size_t wanted) {
  for (size_t i = 0; i < KEPT_SLOTS; i++)
    if (kept[i].base != NULL && kept[i].elem == elem &&
        kept[i].wanted == wanted) {
      *r = kept[i];
      memset(&kept[i], 0, sizeof kept[i]);
      atomic_fetch_sub(&kept_total, kept_resident[i]);
      kept_resident[i] = 0;
      return true;
    }
  return false;
}

/* Zeroes the resident pages of r's committed bytes (mincore says which:
 * writing the others would fault them in), so that r reads as fresh, and
 * counts them into *resident.  False if mincore fails. */
static bool zero_resident(as_reserve_t *r, size_t *resident) {
  size_t         page = page_bytes(), npages = r->committed / page;
  unsigned char *vec = malloc(npages ? npages : 1);
  if (vec == NULL || mincore(r->base, r->committed, vec) != 0) {
    free(vec);
    return false;
  }
  for (size_t i = 0; i < npages;) {
    size_t j = i;
    while (j < npages && (vec[j] & 1))
      j++;
    if (j > i)
      memset(r->base + i * page, 0, (j - i) * page);
    *resident += (j - i) * page;
    i = j + 1;
  }
  free(vec);
  return true;
}

/* Keeps r for this thread's next init of its shape, if reuse is on and a
 * slot is free.  False: the caller unmaps it. */
static bool keep(as_reserve_t *r) {
  if (reuse_depth == 0 || r->committed > KEPT_MAX_COMMITTED)
    return false;
  for (size_t i = 0; i < KEPT_SLOTS; i++)
    if (kept[i].base == NULL) {
      kept_resident[i] = 0;
      if (!zero_resident(r, &kept_resident[i]))
        return false;
      kept[i] = *r;
      atomic_fetch_add(&kept_total, kept_resident[i]);
      return true;
    }
  return false;
}

void as_reserve_reuse_begin(void) {
  reuse_depth++;
}

size_t as_reserve_kept_bytes(void) {
  return atomic_load(&kept_total);
}

void as_reserve_reuse_trim(void) {
  for (size_t i = 0; i < KEPT_SLOTS; i++) {
    if (kept[i].base == NULL)
      continue;
    atomic_fetch_sub(&kept_total, kept_resident[i]);
    munmap(kept[i].base, kept[i].reserved); /* as_reserve_free would keep it */
    memset(&kept[i], 0, sizeof kept[i]);
    kept_resident[i] = 0;
  }
}

void as_reserve_reuse_end(void) {
  if (reuse_depth > 0 && --reuse_depth == 0)
    as_reserve_reuse_trim();
}

/* Address space left under a finite RLIMIT_AS (ulimit -v), or SIZE_MAX.
 * The process's size is VmSize, the first field of /proc/self/statm. */
static size_t address_space_left(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return SIZE_MAX;
  unsigned long long pages = 0;
  FILE              *f = fopen("/proc/self/statm", "r");
  if (f != NULL) {
    if (fscanf(f, "%llu", &pages) != 1)
      pages = 0;
    fclose(f);
  }
  size_t used = (size_t)pages * page_bytes();
  return rl.rlim_cur > used ? (size_t)rl.rlim_cur - used : 0;
}

/* Under RLIMIT_AS the tables share a budget: a table takes at most an
 * eighth of what is left (halving what it wants), down to
 * RESERVE_MIN_LIMITED_BYTES, so that the first tables do not starve the
 * rest.  Greedy, a 4 GB limit failed an 18-event replay on its second
 * layout, and 20 GB failed where 16 GB passed. */
#define RESERVE_MIN_LIMITED_BYTES ((size_t)1 << 20)
static size_t share_of_limit(size_t bytes, size_t page) {
  size_t left = address_space_left();
  if (left == SIZE_MAX)
    return bytes;
  while (bytes > left / 8 && bytes > RESERVE_MIN_LIMITED_BYTES)
    bytes = bytes / 2 / page * page;
  return bytes;
}

as_status_t as_reserve_init(as_reserve_t *r, size_t elem, size_t max_elems) {
  memset(r, 0, sizeof *r);
  if (elem == 0)
    return AS_EINVAL;
  size_t wanted = wanted_bytes(elem, max_elems);
  if (take_kept(r, elem, wanted))
    return AS_OK;
  size_t page = page_bytes(), bytes = share_of_limit(wanted, page);
  size_t floor = bytes < wanted ? RESERVE_MIN_LIMITED_BYTES : RESERVE_MIN_BYTES;
  for (;;) {
    void *p = mmap(NULL, bytes, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
      r->base = p;
      r->elem = elem;
      r->max = bytes / elem;
      r->reserved = bytes;
      r->wanted = wanted;
      return AS_OK;
    }
    if (bytes <= floor)
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
  size_t page = page_bytes();
  want =
      want > r->reserved - page ? r->reserved : (want + page - 1) / page * page;
  if (mprotect(r->base + r->committed, want - r->committed,
               PROT_READ | PROT_WRITE) != 0)
    return NULL;
  /* Failure (a kernel without THP) only leaves 4 KiB pages. */
  if (r->committed < HUGE_ADVISE_BYTES && want >= HUGE_ADVISE_BYTES)
    (void)madvise(r->base, r->reserved, MADV_HUGEPAGE);
  r->committed = want;
  return r->base;
}

void as_reserve_populate(as_reserve_t *r, size_t n) {
  size_t bytes = n * r->elem;
  if (bytes <= r->populated)
    return;
  size_t page = page_bytes();
  size_t from = r->populated;
  if (bytes - from > POPULATE_STEP_BYTES) /* a jump: the gap faults lazily */
    from = (bytes - 1) / page * page;
  /* The batch doubles up to POPULATE_STEP_BYTES: a small table (a test's,
   * a short sweep point's) gets about what it uses, not 256 KiB. */
  size_t step = from < page ? page : from;
  if (step > POPULATE_STEP_BYTES)
    step = POPULATE_STEP_BYTES;
  size_t want = from + step;
  if (want < bytes)
    want = (bytes + page - 1) / page * page; /* madvise takes whole pages */
  /* Not into a 2 MiB granule the entries do not reach: where the system
   * backs a table with huge pages (transparent_hugepage=always) that would
   * make a whole huge page resident early. */
  size_t granule_end =
      (bytes + HUGE_PAGE_BYTES - 1) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
  if (want > granule_end)
    want = granule_end;
  if (want > r->committed)
    want = r->committed;
  as_prefault(r->base + from, want - from);
  r->populated = want;
}

void as_prefault(void *p, size_t bytes) {
  uintptr_t page = page_bytes(), from = ((uintptr_t)p + page - 1) / page * page;
  uintptr_t to = ((uintptr_t)p + bytes) / page * page;
  /* A failure (an old kernel) is harmless: the pages fault when written. */
  if (to > from)
    (void)madvise((void *)from, to - from, MADV_POPULATE_WRITE);
}

void as_reserve_free(as_reserve_t *r) {
  if (r->base != NULL && !keep(r))
    munmap(r->base, r->reserved);
  memset(r, 0, sizeof *r);
}
