/* sim/grow.h -- the one growth rule for arrays that grow by appending:
 * double the capacity (from a minimum) until it holds need elements.
 *
 * Returns the (possibly moved) array with *cap updated, or NULL when the
 * size overflows or memory runs out -- then v and *cap are untouched and
 * still valid, so callers report AS_ENOMEM without losing what they had:
 *
 *   store_sample_t *v = as_grow(s->v, &s->cap, s->n + 1, sizeof *v, 256);
 *   if (v == NULL)
 *     return as_err_set(err, AS_ENOMEM, "out of memory for samples");
 *   s->v = v;
 *
 * New elements are uninitialised.  Large tables that must not be copied
 * (the models' record pools) reserve address space instead; this is for
 * the many small vectors. */
#ifndef ALLOCSIM_GROW_H
#define ALLOCSIM_GROW_H

#include <stddef.h>

void *as_grow(void *v, size_t *cap, size_t need, size_t elem, size_t min_cap);

#endif
