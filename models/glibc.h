/* models/glibc.h -- introspection of the glibc model for tests, heap maps
 * and reports.  The model itself is used through model_glibc_methods
 * (models/model.h); nothing here changes its state.
 *
 * Type map
 *   glibc_chunk_info_t  where an object's chunk lies and how big it is
 */
#ifndef ALLOCSIM_GLIBC_H
#define ALLOCSIM_GLIBC_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"

extern const model_methods_t model_glibc_methods;

typedef struct glibc_chunk_info_s glibc_chunk_info_t;
struct glibc_chunk_info_s {
  uint64_t addr;    /* chunk start (mem - 16) */
  uint64_t size;    /* chunksize() */
  uint32_t arena;   /* arena_for_chunk: 0 = main_arena */
  bool     mmapped; /* its own mapping (IS_MMAPPED) */
};

/* Fills *out for the live object id; false if id is not live.  m must be a
 * glibc model (asserted by name). */
bool glibc_inspect_object(const model_t *m, uint64_t id,
                          glibc_chunk_info_t *out);

/* Size of arena's top chunk (0 before the main arena's first sysmalloc). */
uint64_t glibc_inspect_top_size(const model_t *m, uint32_t arena);
/* Start address of arena's top chunk (0 if none). */
uint64_t glibc_inspect_top_addr(const model_t *m, uint32_t arena);
/* Number of arenas ever created, main included (arena.c narenas). */
uint32_t glibc_inspect_narenas(const model_t *m);
/* The arena thread tid is attached to, or -1. */
int32_t glibc_inspect_thread_arena(const model_t *m, uint32_t tid);
/* Chunks of chunk size csize in thread tid's tcache. */
uint32_t glibc_inspect_tcache_count(const model_t *m, uint32_t tid,
                                    uint64_t csize);
/* Chunks of chunk size csize in arena's fastbin. */
uint32_t glibc_inspect_fastbin_count(const model_t *m, uint32_t arena,
                                     uint64_t csize);
/* Free chunks in arena's unsorted list and small/large bins. */
uint32_t glibc_inspect_binned_count(const model_t *m, uint32_t arena);
/* The current dynamic thresholds (mp_.mmap_threshold, trim_threshold). */
uint64_t glibc_inspect_mmap_threshold(const model_t *m);
uint64_t glibc_inspect_trim_threshold(const model_t *m);
/* h->size and h->mprotect_size of arena's newest heap (0 for main). */
uint64_t glibc_inspect_heap_size(const model_t *m, uint32_t arena);
uint64_t glibc_inspect_heap_mprotect_size(const model_t *m, uint32_t arena);
/* Heaps (64 MiB reservations) currently mapped by arena. */
uint32_t glibc_inspect_heap_count(const model_t *m, uint32_t arena);

/* Walks every region, bin and list: chunks tile their regions, no two free
 * chunks touch, bins hold the right sizes (large bins sorted, skip list
 * consistent), binmap covers non-empty bins, counters add up.  AS_OK or
 * AS_EINVAL naming the first inconsistency.  Expensive: tests only. */
as_status_t glibc_check_invariants(const model_t *m, as_err_t *err);

#endif
