/* analysis/sweep_rows.h -- a stored sweep as a table: one row per point,
 * its varied parameters as columns (`allocsim db points`).
 *
 * SQL cannot turn the parameters of sweep_points.params_json into columns
 * whose names depend on the sweep, so the query is built per sweep from
 * the axes its sweeps.params records ($.vary), each column
 * json_extract(params_json, '$."NAME"'), then seed, page size, model and
 * the results (kept and formula bytes, pinned arenas, the run and key).
 */
#ifndef ALLOCSIM_SWEEP_ROWS_H
#define ALLOCSIM_SWEEP_ROWS_H

#include <stdint.h>

#include "../sim/status.h"
#include "store.h"

struct sqlite3_stmt;

/* Prepares the query for the points of sweep sweep_id (0: the latest
 * sweep) and of every sweep of the same spec (its shards, merged in, and
 * its resumed parts), one row per point key; the caller steps and
 * finalizes *st, reading column names from it.  AS_EINVAL when the store
 * has no such sweep. */
as_status_t sweep_rows_prepare(store_t *s, int64_t sweep_id,
                               struct sqlite3_stmt **st, as_err_t *err);

/* Checks that sweep *id is in the store, or sets *id to the latest sweep
 * when it is 0; AS_EINVAL ("no sweep 99", "no sweeps") otherwise. */
as_status_t sweep_rows_find(store_t *s, int64_t *id, as_err_t *err);

#endif
