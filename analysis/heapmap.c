/* analysis/heapmap.c -- the heap map (see heapmap.h).
 *
 * The walk gives each top-level unit and then the regions inside it in
 * address order; the regions of the current unit are buffered and the
 * unit's row is filled when the next unit starts (or the walk ends).  A
 * cell's bytes are counted page by page against the kernel, so a free
 * chunk whose interior malloc_trim released shows as released there.
 */
#include "heapmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/grow.h"

static const char *const class_names[HEAPMAP_CLASSES] = {
    "live", "cached", "free", "meta", "released"};

const char *heapmap_class_name(heapmap_class_t c) {
  return (unsigned)c < HEAPMAP_CLASSES ? class_names[c] : "?";
}

typedef struct builder_s builder_t;
struct builder_s {
  const sim_kernel_t *k;
  uint64_t            page;
  heapmap_t          *m;
  size_t              rows_cap;
  model_region_t     *regs; /* level-1 regions of the current unit */
  size_t              nregs, regs_cap;
  bool                open; /* a unit is being collected */
};

static heapmap_class_t class_of(uint8_t state, bool resident) {
  if (!resident)
    return HEAPMAP_RELEASED;
  switch ((model_region_state_t)state) {
  case MODEL_REGION_LIVE:
    return HEAPMAP_LIVE;
  case MODEL_REGION_CACHED:
    return HEAPMAP_CACHED;
  case MODEL_REGION_FREE:
  case MODEL_REGION_RELEASED:
    return HEAPMAP_FREE;
  case MODEL_REGION_RESERVED:
    return HEAPMAP_RELEASED;
  case MODEL_REGION_METADATA:
    return HEAPMAP_META;
  }
  return HEAPMAP_META;
}

/* Adds the bytes of [lo, hi) of region r to the cell's class counts. */
static void count(builder_t *b, const model_region_t *r, sim_addr_t lo,
                  sim_addr_t hi, uint64_t *bytes, uint64_t *resident) {
  for (sim_addr_t p = lo & ~(b->page - 1); p < hi; p += b->page) {
    sim_addr_t a = p > lo ? p : lo;
    sim_addr_t e = p + b->page < hi ? p + b->page : hi;
    bool       res = sim_kernel_is_resident(b->k, p);
    bytes[class_of(r->state, res)] += e - a;
    if (res)
      *resident += e - a;
  }
}

/* Fills the last row from the buffered regions. */
static void finish_row(builder_t *b) {
  if (!b->open)
    return;
  heapmap_row_t *row = &b->m->rows[b->m->nrows - 1];
  uint64_t       cell = (row->bytes + b->m->ncells - 1) / b->m->ncells;
  size_t         r0 = 0; /* first region that may overlap the cell */
  for (size_t c = 0; c < b->m->ncells; c++) {
    sim_addr_t lo = row->addr + c * cell, hi = lo + cell;
    if (hi > row->addr + row->bytes)
      hi = row->addr + row->bytes;
    uint64_t bytes[HEAPMAP_CLASSES] = {0};
    bool     holds_objects = false;
    while (r0 < b->nregs && b->regs[r0].addr + b->regs[r0].bytes <= lo)
      r0++;
    for (size_t i = r0; i < b->nregs && b->regs[i].addr < hi; i++) {
      const model_region_t *r = &b->regs[i];
      sim_addr_t            a = r->addr > lo ? r->addr : lo;
      sim_addr_t e = r->addr + r->bytes < hi ? r->addr + r->bytes : hi;
      uint64_t   live_before = bytes[HEAPMAP_LIVE];
      if (a < e)
        count(b, r, a, e, bytes, &row->resident_bytes);
      holds_objects |= r->live_objects > 0 && bytes[HEAPMAP_LIVE] > live_before;
    }
    /* A cell where the program's objects lie is drawn live however much
     * free memory surrounds them: they are what pins it (one object in
     * an arena's pool keeps the whole arena). */
    heapmap_class_t best = holds_objects ? HEAPMAP_LIVE : HEAPMAP_RELEASED;
    for (int k = 0; k < HEAPMAP_CLASSES; k++) {
      if (!holds_objects && bytes[k] > bytes[best])
        best = (heapmap_class_t)k;
      b->m->class_bytes[k] += bytes[k];
    }
    row->cell[c] = (uint8_t)best;
  }
  b->open = false;
}

static as_status_t on_region(void *user, const model_region_t *r,
                             as_err_t *err) {
  builder_t *b = user;
  if (r->level == 0) {
    finish_row(b);
    heapmap_row_t *rows =
        as_grow(b->m->rows, &b->rows_cap, b->m->nrows + 1, sizeof *rows, 64);
    if (rows == NULL)
      return as_err_set(err, AS_ENOMEM, "heap map: out of memory");
    b->m->rows = rows;
    heapmap_row_t *row = &rows[b->m->nrows++];
    memset(row, 0, sizeof *row);
    row->addr = r->addr;
    row->bytes = r->bytes ? r->bytes : 1;
    row->live_objects = r->live_objects;
    snprintf(row->kind, sizeof row->kind, "%s", r->kind ? r->kind : "region");
    b->nregs = 0;
    b->open = true;
    return AS_OK;
  }
  if (!b->open)
    return AS_OK; /* a region outside any unit: not drawn */
  model_region_t *regs =
      as_grow(b->regs, &b->regs_cap, b->nregs + 1, sizeof *regs, 256);
  if (regs == NULL)
    return as_err_set(err, AS_ENOMEM, "heap map: out of memory");
  b->regs = regs;
  b->regs[b->nregs++] = *r;
  return AS_OK;
}

as_status_t heapmap_build(const sim_session_t *s, size_t ncells, heapmap_t *out,
                          as_err_t *err) {
  memset(out, 0, sizeof *out);
  if (ncells == 0 || ncells > HEAPMAP_MAX_CELLS)
    return as_err_set(err, AS_EUSAGE, "heap map: 1 to %d cells per row",
                      HEAPMAP_MAX_CELLS);
  out->ncells = ncells;
  builder_t b = {
      .k = s->kernel, .page = sim_kernel_page_size(s->kernel), .m = out};
  as_status_t rc = model_walk(s->model, on_region, &b, err);
  if (rc == AS_OK)
    finish_row(&b);
  free(b.regs);
  if (rc != AS_OK)
    heapmap_free(out);
  return rc;
}

void heapmap_free(heapmap_t *m) {
  free(m->rows);
  memset(m, 0, sizeof *m);
}
