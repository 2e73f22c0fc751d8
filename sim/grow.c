/* sim/grow.c -- geometric array growth (see grow.h). */
#include "grow.h"

#include <stdint.h>
#include <stdlib.h>

void *as_grow(void *v, size_t *cap, size_t need, size_t elem, size_t min_cap) {
  if (need <= *cap)
    return v;
  size_t n = *cap > min_cap ? *cap : min_cap;
  while (n < need) {
    if (n > SIZE_MAX / 2)
      return NULL;
    n *= 2;
  }
  if (elem != 0 && n > SIZE_MAX / elem)
    return NULL;
  void *nv = realloc(v, n * elem);
  if (nv != NULL)
    *cap = n;
  return nv;
}
