/* models/idset.h -- a growable bit per object id, for compositions that
 * must know which child holds a live id (the cpython compositions: libc or
 * pymalloc, libc or mimalloc).  Ids are dense (traces/event.h), so a bitmap
 * costs one bit per id ever live at once and no hashing.
 */
#ifndef ALLOCSIM_IDSET_H
#define ALLOCSIM_IDSET_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct idset_s idset_t;
struct idset_s {
  uint64_t *bits;
  uint64_t  cap; /* ids covered, a multiple of 64 */
};

/* Adds id, growing the map; false when out of memory. */
static inline bool idset_add(idset_t *s, uint64_t id) {
  if (id >= s->cap) {
    uint64_t cap = s->cap ? s->cap : 4096;
    while (cap <= id)
      cap *= 2;
    uint64_t *bits = realloc(s->bits, cap / 8);
    if (bits == NULL)
      return false;
    memset((char *)bits + s->cap / 8, 0, (cap - s->cap) / 8);
    s->bits = bits;
    s->cap = cap;
  }
  s->bits[id / 64] |= UINT64_C(1) << (id % 64);
  return true;
}

static inline bool idset_has(const idset_t *s, uint64_t id) {
  return id < s->cap && (s->bits[id / 64] >> (id % 64)) & 1;
}

/* Removes id, which must be in the set's range. */
static inline void idset_del(idset_t *s, uint64_t id) {
  s->bits[id / 64] &= ~(UINT64_C(1) << (id % 64));
}

static inline void idset_free(idset_t *s) {
  free(s->bits);
  s->bits = NULL;
  s->cap = 0;
}

#endif
