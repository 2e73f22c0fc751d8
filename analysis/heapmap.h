/* analysis/heapmap.h -- a picture of the simulated address space: one row
 * per top-level unit of the allocator (pymalloc arena, glibc heap or
 * mmapped chunk, jemalloc extent, mimalloc segment, thread stack), split
 * into equal cells, each showing what most of its bytes are, or live
 * when the program's objects lie in it (they pin the rest).
 *
 * Cell classes, from the model's regions and the kernel's residency:
 *   LIVE      resident bytes holding the program's objects
 *   CACHED    resident, free in a per-thread or size-class cache
 *   FREE      resident, free, kept by the allocator
 *   META      resident allocator bookkeeping
 *   RELEASED  mapped but not resident (given back, or never written)
 * A cell shows the class with the most bytes in it.
 */
#ifndef ALLOCSIM_HEAPMAP_H
#define ALLOCSIM_HEAPMAP_H

#include <stddef.h>
#include <stdint.h>

#include "../engine/engine.h"

typedef enum heapmap_class_e {
  HEAPMAP_LIVE,
  HEAPMAP_CACHED,
  HEAPMAP_FREE,
  HEAPMAP_META,
  HEAPMAP_RELEASED,
  HEAPMAP_CLASSES
} heapmap_class_t;

#define HEAPMAP_MAX_CELLS 128

typedef struct heapmap_row_s heapmap_row_t;
struct heapmap_row_s {
  sim_addr_t addr;
  uint64_t   bytes;
  char       kind[24];
  uint64_t   live_objects;
  uint64_t   resident_bytes;
  uint8_t    cell[HEAPMAP_MAX_CELLS]; /* heapmap_class_t of each cell */
};

typedef struct heapmap_s heapmap_t;
struct heapmap_s {
  size_t         ncells; /* cells per row */
  size_t         nrows;
  heapmap_row_t *rows;                         /* in walk order */
  uint64_t       class_bytes[HEAPMAP_CLASSES]; /* over every row */
};

/* Builds the map of session s now, ncells (1..HEAPMAP_MAX_CELLS) per row.
 * Free with heapmap_free.  A model without a heap map gives no rows. */
as_status_t heapmap_build(const sim_session_t *s, size_t ncells, heapmap_t *out,
                          as_err_t *err);
void        heapmap_free(heapmap_t *m);

/* "live", "cached", "free", "meta", "released". */
const char *heapmap_class_name(heapmap_class_t c);

#endif
