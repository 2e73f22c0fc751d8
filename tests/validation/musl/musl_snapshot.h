/* tests/validation/musl/musl_snapshot.h -- the state of mallocng's struct
 * malloc_context (musl 1.2.3 src/malloc/mallocng/meta.h:41-58) that
 * test_musl_differential.c compares between the real allocator (read by
 * musl_replay.c, a static musl program) and the musl model, with where
 * each object came to sit in its slot (enframe's offset cycling, meta.h:
 * 196-218, which reads the header bytes a slot's earlier tenants left). */
#ifndef ALLOCSIM_MUSL_SNAPSHOT_H
#define ALLOCSIM_MUSL_SNAPSHOT_H

#include <stdint.h>

#define MSNAP_CLASSES 48
#define MSNAP_GROUPS  8 /* groups of a class's active list compared */

typedef struct msnap_group_s {
  uint32_t slots; /* last_idx + 1 */
  uint32_t avail_mask;
  uint32_t freed_mask;
  uint32_t maplen;     /* pages of its own mapping, 0 = inside a slot */
  uint32_t active_idx; /* from the group header */
} msnap_group_t;

typedef struct msnap_class_s {
  uint64_t      usage;               /* usage_by_class */
  uint32_t      bounces;             /* bounces[sc - 7] for sc 7..38, else 0 */
  uint32_t      ngroups;             /* on the active list */
  msnap_group_t group[MSNAP_GROUPS]; /* from the head; zero past ngroups */
} msnap_class_t;

/* Most calls between two snapshots (the tests' largest CHECK). */
#define MSNAP_PLACES 10000

typedef struct msnap_s {
  uint32_t      mmap_counter;
  uint32_t      seq;
  uint32_t      meta_areas; /* pages on the meta_area list */
  uint32_t      free_metas; /* records on the free_meta queue */
  msnap_class_t cls[MSNAP_CLASSES];
  uint32_t      nplaces; /* objects allocated or reallocated since the last
                            snapshot, in order: */
  uint32_t place[MSNAP_PLACES]; /* msnap_place */
} msnap_t;

/* Where an object came to sit: its slot's index in its group, and its
 * distance from the slot's start in units (below 2^27: alignments stop at
 * a page). */
static inline uint32_t msnap_place(uint32_t slot, uint64_t units) {
  return slot << 27 | (uint32_t)(units & ((UINT32_C(1) << 27) - 1));
}

#endif
