/* tests/validation/musl/musl_snapshot.h -- the state of mallocng's struct
 * malloc_context (musl 1.2.3 src/malloc/mallocng/meta.h:41-58) that
 * test_musl_differential.c compares between the real allocator (read by
 * musl_replay.c, a static musl program) and the musl model. */
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

typedef struct msnap_s {
  uint32_t      mmap_counter;
  uint32_t      seq;
  uint32_t      meta_areas; /* pages on the meta_area list */
  uint32_t      free_metas; /* records on the free_meta queue */
  msnap_class_t cls[MSNAP_CLASSES];
} msnap_t;

#endif
