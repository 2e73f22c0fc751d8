/* traces/wl_jemalloc.h -- the jemalloc measurement programs as workloads:
 *
 *   decay        COUNT objects of SIZE bytes allocated, written and freed,
 *                then SECONDS of nothing / one tiny malloc every 100 ms /
 *                allocation bursts, sampled every 100 ms (marks s1, s2, ...)
 *                -- when does jemalloc give freed pages back?
 *   lab-decay    the decay trade-off lab of the allocator course notes: a
 *                service's request bursts with a periodic spike
 *
 * Each emits the exact allocation sequence of its C program under
 * scripts/measure/jemalloc/ (je_decay.c, je_lab_decay.c; je_churn.c's
 * sequence is the workload churn-purge, traces/wl_churn_purge.c), which
 * records the same marks on a real machine under jemalloc.  Times come from
 * the measured phase durations when the run recorded them (--alloc-time,
 * --free-time, --batch-every), else from the cost model (sim/cost.h).
 */
#ifndef ALLOCSIM_WL_JEMALLOC_H
#define ALLOCSIM_WL_JEMALLOC_H

#include "workload.h"

/* The workloads, registered in traces/workload.c. */
extern const workload_def_t workload_decay;
extern const workload_def_t workload_lab_decay;

#endif
