/* sim/idtable.h -- a model's per-object records, indexed by the trace's
 * object id (dense and recycled: traces/event.h).
 *
 * The table lives in reserved address space (sim/reserve.h): it never moves
 * or is copied, entries read as zero until written, and only the pages the
 * ids reach are resident.  Grown by realloc and zeroed to its doubled
 * capacity, as the models' tables were, it was resident up to twice what
 * the ids needed: 64 MiB for jemalloc's 8-byte records of 4.2 M live
 * objects, which need 32.
 *
 *   sim_idtable_t t;
 *   if (sim_idtable_init(&t, sizeof(rec_t)) != AS_OK) ...   (no memory)
 *   rec_t *v = sim_idtable_base(&t);                        (stable)
 *   if (!sim_idtable_reach(&t, id)) ...   (id too large, or no memory)
 *   v[id] = ...;                          (entries [0, t.len) usable)
 *   sim_idtable_free(&t);
 */
#ifndef ALLOCSIM_IDTABLE_H
#define ALLOCSIM_IDTABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "reserve.h"
#include "status.h"

/* Ids at or above this are refused (the models keep 32-bit handles). */
#define SIM_IDTABLE_MAX_IDS (UINT64_C(1) << 32)

typedef struct sim_idtable_s sim_idtable_t;
struct sim_idtable_s {
  as_reserve_t res;
  uint64_t     len; /* ids [0, len) usable */
};

/* An empty table of elem-byte entries; AS_ENOMEM without address space. */
as_status_t sim_idtable_init(sim_idtable_t *t, size_t elem);

/* Makes ids [0, id] usable; false if id >= SIM_IDTABLE_MAX_IDS or the
 * memory cannot be committed (the caller says which: id >= the max). */
bool sim_idtable_grow(sim_idtable_t *t, uint64_t id);

static inline bool sim_idtable_reach(sim_idtable_t *t, uint64_t id) {
  return __builtin_expect(id < t->len, 1) || sim_idtable_grow(t, id);
}

/* sim_idtable_reach with the error every table of the trace's ids gives
 * (the caller prefixes where the event is): AS_EFORMAT for an id at or
 * above SIM_IDTABLE_MAX_IDS, AS_ENOMEM when memory runs out. */
as_status_t sim_idtable_reach_ids(sim_idtable_t *t, uint64_t id, as_err_t *err);

/* For a table whose entries are packed narrower than elem while they fit
 * (width bytes each, width <= elem; widened in place later): makes
 * entries [0, n) of that width usable and sets *len to how many are;
 * false, *len unchanged, when sim_idtable_reach would fail. */
bool sim_idtable_reach_packed(sim_idtable_t *t, uint64_t n, size_t width,
                              uint64_t *len);

static inline void *sim_idtable_base(const sim_idtable_t *t) {
  return t->res.base;
}

/* Releases the table; t may be zeroed or already freed. */
void sim_idtable_free(sim_idtable_t *t);

#endif
