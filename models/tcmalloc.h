/* models/tcmalloc.h -- what tests and the size-class lab read of a tcmalloc
 * model beyond the model interface (models/model.h).  Everything else is
 * in its counters ("tcmalloc.pageheap_free_bytes", ...). */
#ifndef ALLOCSIM_TCMALLOC_H
#define ALLOCSIM_TCMALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* One size class of SizeMap (gperftools 2.10 src/common.cc:122-234). */
typedef struct tcmalloc_class_s {
  uint32_t size;  /* object bytes (class_to_size) */
  uint32_t pages; /* tcmalloc pages per span (class_to_pages) */
  uint32_t batch; /* objects moved at once (num_objects_to_move) */
} tcmalloc_class_t;

/* Fills up to cap classes (1, 2, ... in order) of a tcmalloc model and
 * returns how many there are (85 with the defaults). */
size_t tcmalloc_classes(const model_t *m, tcmalloc_class_t *out, size_t cap);

/* Lowers the span numbers the object table's 4-byte entries hold to n (if
 * fewer), so that a test reaches its rewrite to 6 bytes with a small
 * heap. */
void tcmalloc_narrow_spans_for_tests(model_t *m, uint32_t n);

#endif
