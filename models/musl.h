/* models/musl.h -- what the differential test reads of a musl model beyond
 * the model interface: the per-class state of struct malloc_context
 * (musl 1.2.3 src/malloc/mallocng/meta.h:41-58) that a static musl program
 * can read of the real one, and where an object sits in its slot; and the
 * object table's width, for the unit tests. */
#ifndef ALLOCSIM_MUSL_H
#define ALLOCSIM_MUSL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define MUSL_INSPECT_GROUPS 8 /* groups of one class listed, at most */

typedef struct musl_group_state_s {
  uint32_t slots; /* last_idx + 1 */
  uint32_t avail_mask;
  uint32_t freed_mask;
  uint32_t maplen;     /* pages of its own mapping; 0 = nested or donated */
  uint32_t active_idx; /* the group header's active_idx */
} musl_group_state_t;

/* One size class: usage_by_class, the bounce counter and the active list
 * from its head (ctx.active[sc]), first MUSL_INSPECT_GROUPS groups. */
typedef struct musl_class_state_s {
  int                sizeclass;
  uint64_t           usage;
  uint32_t           bounces;
  uint32_t           ngroups; /* on the list, all of them */
  musl_group_state_t group[MUSL_INSPECT_GROUPS];
} musl_class_state_t;

/* Fills up to cap entries for the classes that have slots, groups or a
 * bounce count, in class order; returns how many it filled. */
size_t musl_inspect(const model_t *m, musl_class_state_t *out, size_t cap);

/* The counters of struct malloc_context and its lists. */
typedef struct musl_context_s {
  uint32_t mmap_counter;
  uint32_t seq;
  uint32_t meta_areas; /* 4 KiB pages of meta records */
  uint32_t free_metas; /* records on the free_meta queue */
} musl_context_t;

void musl_context(const model_t *m, musl_context_t *out);

/* Where live object id sits: its slot's index in its group and its
 * distance from the slot's start in bytes (enframe's offset, or an
 * aligned object's); false if id is not live. */
bool musl_object_place(const model_t *m, uint64_t id, uint32_t *slot,
                       uint64_t *offset);

/* Bytes an object id takes in the model's table: 4 while every place fits
 * that, 8 once the table was rewritten to whole entries. */
size_t musl_object_entry_bytes(const model_t *m);

/* Lowers the group numbers the object table's 4-byte entries hold to n
 * (if fewer), so that a test reaches its rewrite to whole entries with a
 * small heap. */
void musl_narrow_metas_for_tests(model_t *m, uint32_t n);

#endif
