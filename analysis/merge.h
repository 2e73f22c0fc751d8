/* analysis/merge.h -- merging stores: the runs, sweeps and points of one
 * store copied into another, idempotently, so the stores of sweep shards
 * (GNU parallel, a Slurm array) become one.
 *
 * A run or sweep already in the output (same uid) is not copied again; a
 * sweep point whose key a sweep of the same spec key in the output holds
 * with the same results is skipped, and with other results the merge is
 * refused before anything is written.
 */
#ifndef ALLOCSIM_MERGE_H
#define ALLOCSIM_MERGE_H

#include <stdint.h>

#include "store.h"

typedef struct store_merge_stats_s store_merge_stats_t;
struct store_merge_stats_s {
  uint64_t runs;   /* runs copied */
  uint64_t sweeps; /* sweeps copied */
  uint64_t points; /* sweep points copied */
};

/* Copies the store at in_path into s in one transaction.  AS_EINVAL for an
 * input that is not a store of this schema version or that conflicts with
 * s (nothing written then). */
as_status_t store_merge(store_t *s, const char *in_path,
                        store_merge_stats_t *st, as_err_t *err);

#endif
