/* traces/wl_churn_purge.h -- `churn-purge`: fragmentation after churn of
 * three small sizes, an idle stretch, then the explicit purges an
 * allocator offers (traces/wl_churn_purge.c).  The measurement programs
 * scripts/measure/jemalloc/je_churn.c and scripts/measure/mimalloc/churn.c
 * run the same sequence on a real machine.
 */
#ifndef ALLOCSIM_WL_CHURN_PURGE_H
#define ALLOCSIM_WL_CHURN_PURGE_H

#include "workload.h"

/* Registered in traces/workload.c. */
extern const workload_def_t workload_churn_purge;

#endif
