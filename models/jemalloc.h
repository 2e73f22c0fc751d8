/* models/jemalloc.h -- introspection of the jemalloc model for tests (the
 * differential test reads the same statistics from the real library through
 * mallctl), heap maps and reports.  The model itself is used through
 * model_jemalloc_methods (models/model.h); nothing here changes its state.
 *
 * Type map
 *   jemalloc_arena_info_t  one arena's statistics, named as mallctl names
 *                          them (stats.arenas.<i>.*)
 */
#ifndef ALLOCSIM_JEMALLOC_H
#define ALLOCSIM_JEMALLOC_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"

extern const model_methods_t model_jemalloc_methods;

typedef struct jemalloc_arena_info_s jemalloc_arena_info_t;
struct jemalloc_arena_info_s {
  uint32_t nthreads; /* .nthreads */
  uint64_t pactive;  /* .pactive (pages) */
  uint64_t pdirty;   /* .pdirty */
  uint64_t pmuzzy;   /* .pmuzzy */
  uint64_t retained; /* .retained (bytes) */
  uint64_t mapped;   /* .mapped: base + extents handed out */
  uint64_t resident; /* .resident: base + (pactive + pdirty) pages */
  uint64_t base;     /* .base: bytes of base allocations */
  uint64_t internal; /* .internal */
  uint64_t dirty_npurge, dirty_nmadvise, dirty_purged;
  uint64_t muzzy_npurge, muzzy_nmadvise, muzzy_purged;
  int64_t  dirty_decay_ms, muzzy_decay_ms;
  uint64_t large_allocated; /* .large.allocated: usable bytes of active
                               large extents (thread-cached ones too) */
};

/* Arena indexes in use (arenas.narenas: the automatic arenas plus the huge
 * arena's index). */
uint32_t jemalloc_inspect_narenas(const model_t *m);
/* Fills *out for arena ind; false if that arena was never created. */
bool jemalloc_inspect_arena(const model_t *m, uint32_t ind,
                            jemalloc_arena_info_t *out);
/* stats.active / resident / mapped / retained / metadata over all arenas
 * (ctl_refresh, src/ctl.c:1331-1342). */
typedef struct jemalloc_totals_s jemalloc_totals_t;
struct jemalloc_totals_s {
  uint64_t active, resident, mapped, retained, metadata;
};
void jemalloc_inspect_totals(const model_t *m, jemalloc_totals_t *out);
/* Where a live object is: its address, usable size and arena; false if id
 * is not live. */
bool jemalloc_inspect_object(const model_t *m, uint64_t id, uint64_t *addr,
                             uint64_t *usize, uint32_t *arena);
/* The arena thread tid is bound to, or -1. */
int32_t jemalloc_inspect_thread_arena(const model_t *m, uint32_t tid);
/* Regions of usable size usize in thread tid's cache. */
uint32_t jemalloc_inspect_tcache_count(const model_t *m, uint32_t tid,
                                       uint64_t usize);
/* Slab geometry of the size class of usize: pages per slab and regions
 * per slab (0 for a large class), and its cache bin's slots (0 above
 * tcache_max). */
void jemalloc_inspect_bin(const model_t *m, uint64_t usize, uint32_t *pages,
                          uint32_t *nregs, uint32_t *ncached_max);
/* Slabs of size class binind in arena: stats.arenas.<i>.bins.<j>.curslabs
 * (slabs), curregs (regions handed out, thread-cached ones included) and
 * nonfull_slabs (in the non-full heap; slabcur not counted).  false if the
 * arena or bin does not exist. */
bool jemalloc_inspect_bin_stats(const model_t *m, uint32_t arena,
                                unsigned binind, uint64_t *curslabs,
                                uint64_t *curregs, uint64_t *nonfull_slabs);
/* Whether background thread ind exists and, if so, when it wakes (ns;
 * UINT64_MAX = sleeps until woken). */
bool jemalloc_inspect_bg(const model_t *m, uint32_t ind, uint64_t *wakeup_ns,
                         uint64_t *runs);

/* Walks every arena, extent, slab and cache: extents tile nothing twice,
 * counters add up, heaps are ordered.  AS_OK or AS_EINVAL naming the first
 * inconsistency.  Expensive: tests only. */
as_status_t jemalloc_check_invariants(const model_t *m, as_err_t *err);

/* Lowers the extent numbers the object table's 4-byte entries hold to n
 * (if fewer), so that a test reaches its rewrite to whole entries with a
 * small heap. */
void jemalloc_narrow_exts_for_tests(model_t *m, uint32_t n);

#endif
