/* models/pymalloc.h -- CPython's small-object allocator: geometry helpers,
 * statistics and the hook through which a composition receives pymalloc's
 * own raw allocations.
 *
 * Type map
 *   pymalloc_geometry_t  how many objects of one size an arena holds
 *   pymalloc_stats_t     arenas, pools and blocks, as sys._debugmallocstats
 *                        counts them (virtual, not RSS)
 *   pymalloc_raw_t       where pymalloc's PyMem_RawCalloc/Realloc go
 *
 * The model itself is model_pymalloc_methods (models/pymalloc.c); this header
 * exists for analysis/formula.c, which derives k in (1 - p)^k from the same
 * constants the model uses, and for models/cpython.c, which routes pymalloc's
 * bookkeeping allocations (the arenas[] vector and radix-tree nodes) to the
 * libc model.  Constants are identical in CPython 3.11 and 3.14 on 64-bit
 * (CPython 3.11.2 Objects/obmalloc.c:879-1064; 3.14.7
 * Include/internal/pycore_obmalloc.h:132-317).
 */
#ifndef ALLOCSIM_PYMALLOC_H
#define ALLOCSIM_PYMALLOC_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"

/* CPython 3.11 Objects/obmalloc.c:879-880; 3.14 pycore_obmalloc.h:132-133 */
#define PYMALLOC_ALIGNMENT 16
/* 3.11 obmalloc.c:904; 3.14 pycore_obmalloc.h:157 */
#define PYMALLOC_SMALL_REQUEST_THRESHOLD 512
/* 3.11 obmalloc.c:905; 3.14 pycore_obmalloc.h:158: 512/16 classes */
#define PYMALLOC_NB_SMALL_SIZE_CLASSES 32
/* 3.11 obmalloc.c:958,962; 3.14 pycore_obmalloc.h:211,215: 1 MiB */
#define PYMALLOC_ARENA_SIZE (UINT64_C(1) << 20)
/* 3.11 obmalloc.c:973,977; 3.14 pycore_obmalloc.h:226,230: 16 KiB */
#define PYMALLOC_POOL_SIZE (UINT64_C(1) << 14)
/* 3.11 obmalloc.c:986; 3.14 pycore_obmalloc.h:239 */
#define PYMALLOC_MAX_POOLS_IN_ARENA 64
/* 3.11 obmalloc.c:1001-1011,1056; 3.14 pycore_obmalloc.h:254-264,309:
 * sizeof(struct pool_header) = 48, rounded up to ALIGNMENT = 48 */
#define PYMALLOC_POOL_OVERHEAD 48

/* Raw-allocation handles: 0 is the arenas[] vector, 1.. are radix-tree
 * nodes in creation order.  A composition reserves this many ids. */
#define PYMALLOC_RAW_HANDLE_ARENAS 0
#define PYMALLOC_RAW_HANDLES       1024

/* Size class of a request of nbytes (1..512): (nbytes - 1) >> 4
 * (3.11 obmalloc.c:1966; 3.14 :2299). */
unsigned pymalloc_size_class(uint64_t nbytes);
/* Block size of class szidx (0..31): (szidx + 1) << 4, INDEX2SIZE. */
uint32_t pymalloc_class_size(unsigned szidx);
/* Blocks in one 16 KiB pool for requests of nbytes (1..512):
 * NUMBLOCKS = (16384 - 48) / block size.  0 if nbytes is out of range. */
uint32_t pymalloc_blocks_per_pool(uint64_t nbytes);
/* Pools a 1 MiB arena at arena_address yields: 64 if the address is 16 KiB
 * aligned, else 63 (new_arena, 3.11 obmalloc.c:1668-1675). */
uint32_t pymalloc_pools_per_arena(uint64_t arena_address);

typedef struct pymalloc_geometry_s pymalloc_geometry_t;
struct pymalloc_geometry_s {
  uint32_t block_size;       /* bytes: the size class of the request */
  uint32_t blocks_per_pool;  /* NUMBLOCKS */
  uint32_t pools_per_arena;  /* 64 aligned, 63 unaligned */
  uint32_t blocks_per_arena; /* k: blocks_per_pool * pools_per_arena */
  uint32_t pool_tail_bytes;  /* (16384 - 48) mod block_size, never used */
};

/* Geometry for requests of nbytes (1..512) in an arena that is (or is not)
 * 16 KiB aligned; false (and *out zeroed) if nbytes is out of range.
 * Example: 64 B unaligned gives k = 63 * 255 = 16065. */
bool pymalloc_geometry(uint64_t nbytes, bool arena_aligned,
                       pymalloc_geometry_t *out);

typedef struct pymalloc_stats_s pymalloc_stats_t;
struct pymalloc_stats_s {
  uint64_t arenas_allocated_total; /* ntimes_arena_allocated */
  uint64_t arenas_reclaimed;       /* arenas munmapped */
  uint64_t arenas_highwater;       /* narenas_highwater */
  uint64_t arenas_current;         /* narenas_currently_allocated */
  uint64_t arenas_unaligned;       /* current arenas with 63 pools */
  uint64_t arenas_pinned;          /* current arenas with a used pool */
  uint64_t arenas_empty;           /* current arenas with every pool free
                                      (kept by the bpo-37257 rule) */
  uint64_t pools_used;             /* pools holding blocks (incl. full) */
  uint64_t pools_full;             /* pools with no free block */
  uint64_t pools_free;             /* carved pools on arenas' freepools */
  uint64_t pools_uncarved;         /* never-carved pools of current arenas */
  uint64_t blocks_in_use;          /* sum of ref.count */
  uint64_t block_bytes_in_use;     /* blocks in use times their size */
  uint64_t raw_nodes;              /* radix-tree nodes allocated */
  uint64_t raw_arena_objects;      /* maxarenas: arenas[] vector length */
};

/* Fills *out from a model created by model_pymalloc_methods (asserted). */
void pymalloc_get_stats(const model_t *m, pymalloc_stats_t *out);

/* Block size (16..512) of the live object id, or 0 if id is not live in m.
 * The CPython composition uses it for _PyObject_Realloc's decision. */
uint32_t pymalloc_block_size_of(const model_t *m, uint64_t id);

/* Where pymalloc's own PyMem_Raw* requests go.  handle names one raw block
 * (PYMALLOC_RAW_HANDLE_ARENAS or a radix node).  Each callback returns a
 * status and fills err on failure.
 *   calloc:  PyMem_RawCalloc(1, nbytes): zeroed, written only by `write`.
 *   realloc: PyMem_RawRealloc to nbytes (old_nbytes 0: realloc(NULL)),
 *            after which every byte is written (the copy plus the loop that
 *            fills the new arena objects, 3.11 obmalloc.c:1610-1630), as a
 *            libc model assumes for any allocation; the backend counts it.
 *   write:   the bytes [offset, offset+len) of handle are written; may be
 *            NULL when the backend cannot locate them (then skipped). */
typedef struct pymalloc_raw_s pymalloc_raw_t;
struct pymalloc_raw_s {
  void *user; /* passed back to every callback */
  as_status_t (*calloc)(void *user, uint32_t handle, uint64_t nbytes,
                        as_err_t *err);
  as_status_t (*realloc)(void *user, uint32_t handle, uint64_t old_nbytes,
                         uint64_t nbytes, as_err_t *err);
  as_status_t (*write)(void *user, uint32_t handle, uint64_t offset,
                       uint64_t len, as_err_t *err);
};

/* The free event ev (ev->prev_size bytes) if m holds ev->id live: *held is
 * true and the result is the free's.  Else *held is false, nothing changes
 * and the result is AS_OK.  The CPython composition's free: one lookup
 * both routes the free and performs it. */
as_status_t pymalloc_free_if_held(model_t *m, const trace_event_t *ev,
                                  bool *held, as_err_t *err);

/* Address of the live object id's block in *addr (true), or false if id
 * is not live in m.  For tests and heap maps. */
bool pymalloc_block_address(const model_t *m, uint64_t id, uint64_t *addr);

/* For tests: 4-byte locations name arenas[] slots below n (a power of two,
 * 16 or more) instead of 65,536, so that a test reaches the rewrite to
 * 5-byte ones without simulating 64 GiB.  Before the first allocation. */
void pymalloc_narrow_arenas_for_tests(model_t *m, uint32_t n);

/* Routes m's raw allocations to raw (copied).  Must be called before the
 * first allocation.  Standalone (never called) they live in one
 * SIM_OWNER_METADATA reservation of a whole number of MiB (so arenas keep
 * the alignment the kernel's layout gives them), exactly located so every
 * write is counted. */
void pymalloc_set_raw(model_t *m, const pymalloc_raw_t *raw);

extern const model_methods_t model_pymalloc_methods;

/* ---- The CPython composition (models/cpython.c) ------------------------- */

extern const model_methods_t model_cpython_methods;

/* The children of a model created by model_cpython_methods (not owned by
 * the caller; valid until the composition is destroyed). */
model_t *cpython_pymalloc_child(const model_t *m);
model_t *cpython_libc_child(const model_t *m);

#endif
