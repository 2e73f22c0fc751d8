/* sim/idtable.c -- per-object record tables (see idtable.h). */
#include "idtable.h"

#include <inttypes.h>
#include <string.h>

as_status_t sim_idtable_init(sim_idtable_t *t, size_t elem) {
  memset(t, 0, sizeof *t);
  return as_reserve_init(&t->res, elem, SIM_IDTABLE_MAX_IDS);
}

bool sim_idtable_grow(sim_idtable_t *t, uint64_t id) {
  if (id >= SIM_IDTABLE_MAX_IDS ||
      as_reserve_need(&t->res, (size_t)id + 1) == NULL)
    return false;
  /* Ids come mostly in order (recycled, dense): their pages are made
   * resident a batch at a time rather than a fault at a time. */
  as_reserve_populate(&t->res, (size_t)id + 1);
  t->len = t->res.populated / t->res.elem;
  return true;
}

bool sim_idtable_reach_packed(sim_idtable_t *t, uint64_t n, size_t width,
                              uint64_t *len) {
  size_t   elem = t->res.elem;
  uint64_t units = (n * width + elem - 1) / elem;
  if (units > 0 && !sim_idtable_reach(t, units - 1))
    return false;
  *len = t->len * elem / width;
  return true;
}

as_status_t sim_idtable_reach_ids(sim_idtable_t *t, uint64_t id,
                                  as_err_t *err) {
  if (sim_idtable_reach(t, id))
    return AS_OK;
  if (id >= SIM_IDTABLE_MAX_IDS)
    return as_err_set(err, AS_EFORMAT,
                      "object id %" PRIu64 " is too large (ids must be dense "
                      "and recycled; max %" PRIu64 ")",
                      id, SIM_IDTABLE_MAX_IDS - 1);
  return as_err_set(err, AS_ENOMEM, "out of memory for %" PRIu64 " object ids",
                    id + 1);
}

void sim_idtable_free(sim_idtable_t *t) {
  as_reserve_free(&t->res);
  t->len = 0;
}
