/* sim/threadtab.h -- a model's per-thread records, indexed by the trace's
 * thread id.
 *
 * Captures and workloads number threads densely from 0 (the webworker uses
 * up to 64), so a table indexed by id is as large as the threads a trace
 * has.  A sparse id is not: thread 2^24 - 1 asked glibc's table for 8 GiB.
 * Such an id is refused against the simulator's memory bound, as the
 * engine refuses a sparse object id (engine.c ensure_id), before anything
 * is allocated.
 *
 *   rec_t *v = ...; size_t cap = ...;
 *   rc = sim_threadtab_reach((void **)&v, &cap, tid, sizeof *v, &blank,
 *                            sim_kernel_max_memory_bytes(k), err);
 *   v[tid] ...   (entries [0, cap) usable; new ones copies of blank)
 */
#ifndef ALLOCSIM_THREADTAB_H
#define ALLOCSIM_THREADTAB_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* Makes entry tid of *tab, an array of *cap entries of elem bytes, usable:
 * grows it (doubling, at most to max_bytes) and fills the new entries with
 * copies of blank (zeros if blank is NULL).  AS_ENOMEM, with *tab and *cap
 * untouched, if entries [0, tid] take more than max_bytes (0: no bound) or
 * memory runs out. */
as_status_t sim_threadtab_reach(void **tab, size_t *cap, uint32_t tid,
                                size_t elem, const void *blank,
                                uint64_t max_bytes, as_err_t *err);

#endif
