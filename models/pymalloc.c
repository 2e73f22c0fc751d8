/* models/pymalloc.c -- CPython's pymalloc (Objects/obmalloc.c, 3.11 and 3.14
 * default builds): arenas, pools, size classes and the order in which they
 * are reused, kept exactly as obmalloc keeps them, minus the payload.
 *
 * Why: a process's pymalloc RSS is decided by which arenas stay mapped and
 * which pages of their pools were ever written: pool pages are never given
 * back, and an arena is munmapped only when all its pools are empty
 * (CPython 3.11.2 Objects/obmalloc.c:2096-2140).
 * Both follow deterministically from the request sequence, so this file
 * replays obmalloc's bookkeeping step for step -- usedpools front insertion,
 * pool free lists LIFO then bump carving, arenas' freepools LIFO then
 * ascending carving, usable_arenas sorted by nfreepools with nfp2lasta, and
 * the bpo-37257 rule for releasing an arena -- and tells the simulated kernel
 * about every byte obmalloc (or the program) writes.
 *
 * What it leaves out, deliberately:
 *   - Payload bytes.  A block's free-list link is a uint16 in a host-side
 *     array per pool (or implied by a run: Free lists) instead of the
 *     block's first word.
 *   - The radix tree's root.  It is a static array (BSS in 3.11; a member of
 *     the static obmalloc_state_main in 3.14, obmalloc.c:1555), i.e. part of
 *     the program's baseline, which no model maps; its one-entry writes are
 *     not counted.  Mid and bottom nodes are PyMem_RawCalloc'd and counted.
 *   - Requests of 0 or more than 512 bytes: obmalloc forwards them to
 *     PyMem_RawMalloc.  Standalone they are an error; models/cpython.c routes
 *     them to the libc model.
 * 3.11 and 3.14 run the same algorithms byte for byte (a normalised diff of
 * new_arena .. _PyObject_Realloc of 3.11.2 and 3.14.7 shows only the OMState
 * parameter), so for them `version` selects citations and provenance, not
 * behaviour.  So does 3.13 (3.13.5, Debian 13's python3.13_3.13.5.orig.tar.xz:
 * the same diff against 3.11.2 shows only OMState, the arenas -> allarenas
 * and block -> pymem_block renames, and the constants are the same lines of
 * Include/internal/pycore_obmalloc.h:132-239), and 3.12 (3.12.6, whose
 * tarball's sha256 matches python.org's: the same algorithms once the
 * per-interpreter state parameter is set aside, the constants and radix
 * tree of pycore_obmalloc.h:132-317 and 510-604 as 3.11's).  3.10 (3.10.12,
 * Ubuntu 22.04's; obmalloc.c identical from 3.10.9 to 3.10.15) places
 * blocks, pools and arenas as 3.11 does (the diff against 3.11.2 has one
 * behavioural hunk) but keeps a 48-bit radix tree with small nodes
 * (radix_geom_t below), whose callocs the raw domain serves and whose
 * entries are written where 3.11's are.
 *
 * Page touches (3.11.2 obmalloc.c:1881-1936 carve and init, :1790-1806
 * pymalloc_pool_extend, :2241-2243 free):
 *   - carving a pool writes its 48-byte header (arenaindex, szidx, links);
 *   - the program writes every byte it asked for, so a block handed out is
 *     written over [block, block + nbytes); calloc's memset is the same;
 *   - initialising a pool and bump-extending it write the next virgin
 *     block's first 8 bytes (the NULL link), one block beyond;
 *   - free writes the freed block's first 8 bytes (the LIFO link).
 * Within a pool these writes always cover a prefix with gaps shorter than
 * any OS page (a block's start is written when it is linked, and blocks are
 * at most 512 bytes), and obmalloc never gives pool pages back while the
 * arena lives, so each pool remembers how far it is known written and skips
 * the kernel call below that mark (rounded up to the end of the OS page
 * last written).  The kernel sees exactly the same set of pages; the hot
 * path makes about one kernel call per OS page, not per event.
 *
 * Sections
 *   Constants and types
 *   Raw allocations (arenas[] vector, radix tree, standalone backend)
 *   Free lists (a pool's list as a run or a links array)
 *   Object locations (the per-id table: 4-byte slots, then 5)
 *   Arenas (new_arena, release)
 *   Pools (allocate_from_new_pool, pymalloc_pool_extend, free transitions)
 *   Model methods (general and fast alloc/free paths)
 *   Exported helpers
 */
#include "pymalloc.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/idtable.h"

/* ---- Constants and types ------------------------------------------------ */

/* 3.11 obmalloc.c:887; 3.14 pycore_obmalloc.h:140: INDEX2SIZE(I) */
#define INDEX2SIZE(i) (((uint32_t)(i) + 1u) << 4)
/* 3.11 obmalloc.c:1064; 3.14 pycore_obmalloc.h:317: NUMBLOCKS(I) */
#define NUMBLOCKS(i)                                                           \
  ((uint32_t)(PYMALLOC_POOL_SIZE - PYMALLOC_POOL_OVERHEAD) / INDEX2SIZE(i))
/* 3.11 obmalloc.c:978; 3.14 pycore_obmalloc.h:231: POOL_SIZE_MASK */
#define POOL_SIZE_MASK (PYMALLOC_POOL_SIZE - 1)
/* 3.11 obmalloc.c:963; 3.14 pycore_obmalloc.h:216: ARENA_SIZE_MASK */
#define ARENA_SIZE_MASK (PYMALLOC_ARENA_SIZE - 1)
/* 3.11 obmalloc.c:1058; 3.14 pycore_obmalloc.h:311: szidx of a fresh pool */
#define DUMMY_SIZE_IDX 0xffff
/* 3.11 obmalloc.c:1264; 3.14 pycore_obmalloc.h:475 */
#define INITIAL_ARENA_OBJECTS 16
/* 3.11 obmalloc.c:1016-1054; 3.14 pycore_obmalloc.h:269-307: struct
 * arena_object = address, pool_address (8+8), nfreepools, ntotalpools
 * (4+4), freepools, nextarena, prevarena (3*8) = 48 bytes on 64-bit */
#define ARENA_OBJECT_BYTES 48

/* Radix tree geometry.  3.11 and later (3.11 obmalloc.c:1332-1395; 3.14
 * pycore_obmalloc.h:541-604): POINTER_BITS 64, IGNORE_BITS 0,
 * INTERIOR_BITS (64-20+2)/3 = 15, MAP_BOT_BITS 64-20-30 = 14: mid nodes of
 * 2^15 pointers (256 KiB) and bottom nodes of 2^14 arena_coverage_t
 * {int32 tail_hi, tail_lo} (128 KiB) (3.11 :1410-1430; 3.14
 * pycore_obmalloc.h:619-639).  3.10 keeps ADDRESS_BITS 48 (3.10.12
 * obmalloc.c:1300; bpo-45526 changed it in 3.11.0a2): INTERIOR_BITS
 * (48-20+2)/3 = 10, MAP_BOT_BITS 8, so 8 KiB mid nodes (:1423) and 2 KiB
 * bottom nodes (:1435), one per 256 MiB of address space. */
#define MAP_BOT_SHIFT 20u /* ARENA_BITS */
typedef struct radix_geom_s {
  uint8_t bot_bits, mid_bits, top_bits;
} radix_geom_t;
static const radix_geom_t RADIX_311 = {14, 15, 15}, RADIX_310 = {8, 10, 10};

#define NO_BLOCK UINT16_MAX /* a NULL block pointer in a pool's free list */

typedef struct pym_pool_s  pym_pool_t;
typedef struct pym_arena_s pym_arena_t;

/* Host-side twin of struct pool_header (3.11 obmalloc.c:1001-1011).
 * Invariants: a pool with ref_count > 0 and freeblock != NO_BLOCK is in
 * usedpools[szidx]; a full pool (freeblock == NO_BLOCK) is in no list; an
 * empty carved pool is on its arena's freepools (singly linked by
 * nextpool).  Blocks are named by index; block b lives at
 * pool + 48 + b * INDEX2SIZE(szidx).  All bytes of the pool below
 * touched_end lie in pages the kernel already counts as written. */
struct pym_pool_s {
  pym_pool_t *nextpool;  /* next pool of this size class / free pool */
  pym_pool_t *prevpool;  /* previous pool of this size class */
  uint16_t   *links;     /* by block index: next free block, the block's
                            first word in obmalloc; NULL while the free
                            list is a run (see Free lists) */
  sim_addr_t addr;       /* pool address in the simulated space */
  uint32_t   ref_count;  /* number of allocated blocks */
  uint32_t   arenaindex; /* index into arenas of the owning arena */
  uint16_t   szidx;      /* size class, DUMMY_SIZE_IDX when fresh */
  uint16_t   freeblock;  /* head of the free list, NO_BLOCK = NULL */
  uint16_t   nextblock;  /* index of the virgin block: nextoffset is
                            48 + nextblock * size */
  uint16_t nblocks;      /* NUMBLOCKS(szidx); nextoffset <= maxnextoffset
                            is nextblock < nblocks */
  uint16_t links_cap;    /* entries allocated in links (0: none) */
  uint16_t touched_end;  /* bytes from the pool start lying in pages
                            known written (a multiple of the page) */
  uint8_t index;         /* position in its arena's pools (0..63) */
};

/* Host-side twin of struct arena_object (3.11 obmalloc.c:1016-1054), plus
 * the 64 host pool headers that live inside the arena in CPython.  A slot
 * keeps its pools when its arena is released, the way obmalloc keeps the
 * slot on unused_arena_objects (their links arrays go back to the spares). */
struct pym_arena_s {
  sim_addr_t address;       /* arena base; 0 = unassociated */
  sim_addr_t first_pool;    /* first 16 KiB-aligned address in the arena */
  uint32_t   ncarved;       /* pools carved: pool_address is first_pool +
                               ncarved * POOL_SIZE */
  uint32_t     nfreepools;  /* free pools + never-carved pools */
  uint32_t     ntotalpools; /* 64, or 63 when the arena is unaligned */
  pym_pool_t  *freepools;   /* singly linked LIFO of emptied pools */
  pym_arena_t *nextarena;   /* usable_arenas or unused_arena_objects */
  pym_arena_t *prevarena;   /* usable_arenas only */
  pym_pool_t  *pools;       /* MAX_POOLS_IN_ARENA host headers, or NULL */
};

/* Per object id: where its block is, arena index << 16 | pool index << 10
 * | block index, packed little-endian in slot_bytes bytes: 4 while every
 * arenas[] slot has a 16-bit index (65,536 slots: 64 GiB of 1 MiB arenas,
 * 16 GiB of 3.10-3.12's 256 KiB ones), 5 from the new_arena that needs
 * more (widen_ids rewrites the table once).  A pool has at most
 * NUMBLOCKS(0) = 1020 blocks and an arena 64 pools, so no location has a
 * block field of 1023 and SLOT_DEAD (all ones) means "not live".  The
 * requested size is not kept: the engine passes it as ev->prev_size.  Four
 * bytes, not a struct of 12, because this table is most of the simulator's
 * memory: one entry per live object (4.2 M for 256 MiB of 64 B objects; the
 * fifth byte was 4 MiB of its 37).  Stored XORed with SLOT_DEAD, so that
 * the id table's fresh entries (zero: sim/idtable.h) read as not live
 * without being written. */
#define SLOT_MAX_BYTES 5
#define SLOT_DEAD      ((UINT64_C(1) << (8 * SLOT_MAX_BYTES)) - 1)
/* arenas[] slots 4-byte locations name: a 16-bit arena index. */
#define SLOT_NARROW_ARENAS (UINT32_C(1) << 16)
/* arenas[] slots a location can name: a 24-bit arena index (16 TiB). */
#define SLOT_MAX_ARENAS (UINT32_C(1) << 24)

/* A radix-tree node: which (top, mid) key it serves and its raw handle. */
typedef struct pym_node_s pym_node_t;
struct pym_node_s {
  uint32_t top;    /* map_top_index */
  uint32_t mid;    /* map_mid_index for a bottom node; UINT32_MAX: mid node */
  uint32_t handle; /* raw handle (1..PYMALLOC_RAW_HANDLES-1) */
};

/* Standalone raw backend: a fresh mapping per raw block. */
typedef struct pym_rawblk_s pym_rawblk_t;
struct pym_rawblk_s {
  sim_addr_t addr;   /* 0 = none */
  uint64_t   nbytes; /* requested size */
};

/* The most blocks a pool holds: those of the smallest size class. */
#define LINKS_MAX_BLOCKS NUMBLOCKS(0)

/* Memory that pools' links arrays are carved from, in order. */
typedef struct links_slab_s links_slab_t;
struct links_slab_s {
  links_slab_t *prev; /* the slab carved before, or NULL */
  size_t        used; /* bytes of data carved */
  uint64_t      data[];
};
/* Of data, per slab: below glibc's mmap threshold (128 KiB, malloc.c
 * DEFAULT_MMAP_THRESHOLD_MIN), so that slabs come from the heap and a
 * sweep's next point reuses its pages instead of faulting fresh ones. */
#define LINKS_SLAB_BYTES ((size_t)64 << 10)

typedef struct pymalloc_model_s pymalloc_model_t;
struct pymalloc_model_s {
  model_t        base; /* must be first */
  sim_kernel_t  *kernel;
  uint32_t       page_mask; /* OS page size - 1 (at most 64 KiB - 1) */
  int            version;   /* 310 to 314 (see header) */
  radix_geom_t   radix;     /* the radix tree's node sizes (3.10 or later) */
  pymalloc_raw_t raw;       /* where PyMem_Raw* requests go */

  /* obmalloc's globals (3.11 obmalloc.c:1167-1258; 3.14 struct
   * _obmalloc_pools / _obmalloc_mgmt, pycore_obmalloc.h:419-500). */
  pym_pool_t   usedpools[PYMALLOC_NB_SMALL_SIZE_CLASSES]; /* sentinels */
  pym_arena_t *arenas;               /* the arenas[] vector */
  uint32_t     maxarenas;            /* slots in arenas */
  pym_arena_t *unused_arena_objects; /* LIFO of unassociated slots */
  pym_arena_t *usable_arenas;        /* sorted by nfreepools ascending */
  pym_arena_t *nfp2lasta[PYMALLOC_MAX_POOLS_IN_ARENA + 1];
  uint64_t     narenas_currently_allocated;
  uint64_t     ntimes_arena_allocated;
  uint64_t     narenas_highwater;
  uint64_t     narenas_reclaimed;

  /* Radix tree nodes (few: one mid, one bottom per 16 GiB of space). */
  pym_node_t   nodes[PYMALLOC_RAW_HANDLES];
  uint32_t     nnodes;
  pym_rawblk_t rawblk[PYMALLOC_RAW_HANDLES]; /* standalone backend */
  sim_addr_t   raw_base;         /* standalone: the reservation, or 0 */
  uint64_t     raw_nodes_used;   /* standalone: bytes of nodes opened */
  uint64_t     raw_mapped_bytes; /* standalone: RW bytes opened */

  /* The pools' links arrays (see Links below). */
  links_slab_t *slab;                              /* newest slab, or NULL */
  uint16_t     *spare_links[LINKS_MAX_BLOCKS + 1]; /* by length: let go */

  /* Objects. */
  uint8_t *ids;           /* by object id: slot_bytes-byte locations */
  uint64_t ids_len;       /* ids usable at slot_bytes; ids beyond are not
                             live */
  uint32_t slot_bytes;    /* 4 or 5 */
  uint32_t narrow_arenas; /* arenas[] slots 4-byte locations name:
                             SLOT_NARROW_ARENAS (tests lower it) */
  sim_idtable_t ids_tab;  /* ids' memory, in SLOT_MAX_BYTES units */
  uint64_t      live_bytes;
  uint64_t      live_objects;
  uint64_t      block_bytes; /* sum of block sizes in use */
};

static inline uint64_t map_bot_index(const pymalloc_model_t *pm, sim_addr_t p) {
  return (p >> MAP_BOT_SHIFT) & ((UINT64_C(1) << pm->radix.bot_bits) - 1);
}
static inline uint64_t map_mid_index(const pymalloc_model_t *pm, sim_addr_t p) {
  unsigned shift = MAP_BOT_SHIFT + (unsigned)pm->radix.bot_bits;
  return (p >> shift) & ((UINT64_C(1) << pm->radix.mid_bits) - 1);
}
static inline uint64_t map_top_index(const pymalloc_model_t *pm, sim_addr_t p) {
  unsigned shift =
      MAP_BOT_SHIFT + (unsigned)pm->radix.bot_bits + pm->radix.mid_bits;
  return (p >> shift) & ((UINT64_C(1) << pm->radix.top_bits) - 1);
}

#define PYMALLOC_OPTIONS(X)                                                    \
  X(PO_VERSION, "version", OPT_ENUM, "3.14", "", "3.10|3.11|3.12|3.13|3.14",   \
    "meta:python",                                                             \
    "CPython 3.10.12 / 3.11.2 / 3.12.6 / 3.13.5 / 3.14.7 Objects/obmalloc.c "  \
    "(identical algorithms; 3.10's radix tree nodes are smaller)",             \
    "CPython version whose obmalloc is modelled")

enum pymalloc_option_e { PYMALLOC_OPTIONS(MODEL_OPTION_KEY) PO_COUNT };
_Static_assert(PO_COUNT <= MODEL_OPTS_MAX, "model_opts_t holds the rows");

static const model_option_t pymalloc_options[] = {
    PYMALLOC_OPTIONS(MODEL_OPTION_ROW){0}};

/* Marks [off, off+len) of pool written.  Below touched_end nothing new can
 * become resident (see the file comment), so the kernel is not called. */
static inline as_status_t pool_write(pymalloc_model_t *pm, pym_pool_t *pool,
                                     uint32_t off, uint32_t len,
                                     as_err_t *err) {
  uint32_t end = off + len;
  if (end <= pool->touched_end)
    return AS_OK;
  /* The whole OS page holding the last byte is resident now (pools are
   * 16 KiB aligned, so page ends relative to the pool are multiples of the
   * page size, capped at the pool's end for pages of 16 KiB and more). */
  uint32_t page_end = (end + pm->page_mask) & ~pm->page_mask;
  pool->touched_end =
      (uint16_t)(page_end < PYMALLOC_POOL_SIZE ? page_end : PYMALLOC_POOL_SIZE);
  return sim_kernel_touch(pm->kernel, pool->addr + off, len, err);
}

static inline sim_addr_t block_addr(const pym_pool_t *pool, uint32_t b) {
  return pool->addr + PYMALLOC_POOL_OVERHEAD +
         (sim_addr_t)b * INDEX2SIZE(pool->szidx);
}

static inline uint32_t block_off(const pym_pool_t *pool, uint32_t b) {
  return PYMALLOC_POOL_OVERHEAD + b * INDEX2SIZE(pool->szidx);
}

/* ---- Raw allocations ---------------------------------------------------- */

/* Standalone backend.  In CPython these blocks come from malloc: the
 * vector from the brk heap and the nodes as glibc mmapped chunks.  Without
 * a libc model they live in one PROT_NONE reservation made at creation and
 * opened (mprotect RW) as needed: the vector at its start, the nodes from
 * STANDALONE_NODES_AT up.  The reservation is a whole number of MiB, so it
 * moves arenas down without changing their alignment (the kernel's default
 * layout gives unaligned arenas, as measured; 3.11.2 obmalloc.c:1670-1674);
 * mapping each block separately would have shifted every arena by a page. */
#define STANDALONE_RESERVE  (UINT64_C(1) << 30)
#define STANDALONE_NODES_AT (UINT64_C(1) << 29)

static uint64_t page_up(const pymalloc_model_t *pm, uint64_t n) {
  uint64_t ps = sim_kernel_page_size(pm->kernel);
  return (n + ps - 1) / ps * ps;
}

/* Makes the reservation on first use (the vector's first realloc, before
 * the first arena is mapped), so a composition that replaces this backend
 * never reserves anything. */
static as_status_t standalone_reserve(pymalloc_model_t *pm, as_err_t *err) {
  if (pm->raw_base != 0)
    return AS_OK;
  return sim_kernel_mmap(pm->kernel, STANDALONE_RESERVE, 0, SIM_PROT_NONE,
                         SIM_OWNER_METADATA, &pm->raw_base, err);
}

/* PyMem_RawCalloc of a radix node: fresh zero memory, untouched until
 * written (as glibc's mmapped calloc chunks are: glibc 2.36
 * malloc/malloc.c:3707-3712 returns them without a memset). */
static as_status_t standalone_calloc(void *user, uint32_t handle,
                                     uint64_t nbytes, as_err_t *err) {
  pymalloc_model_t *pm = user;
  pym_rawblk_t     *rb = &pm->rawblk[handle];
  uint64_t          len = page_up(pm, nbytes);
  assert(rb->addr == 0);
  as_status_t rc = standalone_reserve(pm, err);
  if (rc != AS_OK)
    return rc;
  if (pm->raw_nodes_used + len > STANDALONE_RESERVE - STANDALONE_NODES_AT)
    return as_err_set(err, AS_ENOMEM,
                      "pymalloc: radix nodes exceed %llu "
                      "bytes",
                      (unsigned long long)STANDALONE_NODES_AT);
  sim_addr_t at = pm->raw_base + STANDALONE_NODES_AT + pm->raw_nodes_used;
  rc = sim_kernel_mprotect(pm->kernel, at, len, SIM_PROT_RW, err);
  if (rc != AS_OK)
    return rc;
  rb->addr = at;
  rb->nbytes = nbytes;
  pm->raw_nodes_used += len;
  pm->raw_mapped_bytes += len;
  return AS_OK;
}

/* PyMem_RawRealloc of the arenas[] vector: it grows in place at the start
 * of the reservation, and every byte of the new size is written. */
static as_status_t standalone_realloc(void *user, uint32_t handle,
                                      uint64_t old_nbytes, uint64_t nbytes,
                                      as_err_t *err) {
  pymalloc_model_t *pm = user;
  pym_rawblk_t     *rb = &pm->rawblk[handle];
  assert(handle == PYMALLOC_RAW_HANDLE_ARENAS && rb->nbytes == old_nbytes);
  (void)old_nbytes;
  uint64_t old_len = page_up(pm, rb->nbytes), len = page_up(pm, nbytes);
  if (len > STANDALONE_NODES_AT)
    return as_err_set(err, AS_ENOMEM, "pymalloc: arenas[] exceeds %llu bytes",
                      (unsigned long long)STANDALONE_NODES_AT);
  as_status_t rc = standalone_reserve(pm, err);
  if (rc == AS_OK && len > old_len)
    rc = sim_kernel_mprotect(pm->kernel, pm->raw_base + old_len, len - old_len,
                             SIM_PROT_RW, err);
  if (rc == AS_OK)
    rc = sim_kernel_touch(pm->kernel, pm->raw_base, nbytes, err);
  if (rc != AS_OK)
    return rc;
  pm->raw_mapped_bytes += len - old_len;
  rb->addr = pm->raw_base;
  rb->nbytes = nbytes;
  return AS_OK;
}

static as_status_t standalone_write(void *user, uint32_t handle,
                                    uint64_t offset, uint64_t len,
                                    as_err_t *err) {
  pymalloc_model_t *pm = user;
  assert(pm->rawblk[handle].addr != 0);
  return sim_kernel_touch(pm->kernel, pm->rawblk[handle].addr + offset, len,
                          err);
}

/* The raw handle of node (top, mid), or 0 if it does not exist. */
static uint32_t node_find(const pymalloc_model_t *pm, uint32_t top,
                          uint32_t mid) {
  for (uint32_t i = 0; i < pm->nnodes; i++)
    if (pm->nodes[i].top == top && pm->nodes[i].mid == mid)
      return pm->nodes[i].handle;
  return 0;
}

static as_status_t node_create(pymalloc_model_t *pm, uint32_t top, uint32_t mid,
                               uint64_t nbytes, uint32_t *handle,
                               as_err_t *err) {
  if (pm->nnodes + 1 >= PYMALLOC_RAW_HANDLES)
    return as_err_set(err, AS_ENOMEM,
                      "pymalloc: radix tree needs more than %d nodes",
                      PYMALLOC_RAW_HANDLES - 1);
  uint32_t    h = pm->nnodes + 1; /* handle 0 is the arenas[] vector */
  as_status_t rc = pm->raw.calloc(pm->raw.user, h, nbytes, err);
  if (rc != AS_OK)
    return rc;
  pm->nodes[pm->nnodes++] = (pym_node_t){top, mid, h};
  *handle = h;
  return AS_OK;
}

static inline as_status_t raw_write(pymalloc_model_t *pm, uint32_t handle,
                                    uint64_t offset, uint64_t len,
                                    as_err_t *err) {
  return pm->raw.write ? pm->raw.write(pm->raw.user, handle, offset, len, err)
                       : AS_OK;
}

/* arena_map_get(p, create) (3.11 obmalloc.c:1449-1483; 3.14 :1779-1812):
 * the bottom node for address p, creating the mid node (256 KiB
 * PyMem_RawCalloc, 3.11 :1459 / 3.14 :1789) and bottom node (128 KiB,
 * 3.11 :1471 / 3.14 :1801) on first use.  The root entry written on mid
 * creation is in static memory (see the file comment) and not counted; the
 * mid entry pointing at a new bottom node is. */
static as_status_t arena_map_get(pymalloc_model_t *pm, sim_addr_t p,
                                 uint32_t *bot, as_err_t *err) {
  uint32_t    i1 = (uint32_t)map_top_index(pm, p);
  uint32_t    i2 = (uint32_t)map_mid_index(pm, p);
  uint32_t    mid = node_find(pm, i1, UINT32_MAX);
  as_status_t rc;
  if (mid == 0) {
    rc = node_create(pm, i1, UINT32_MAX, (UINT64_C(8) << pm->radix.mid_bits),
                     &mid, err);
    if (rc != AS_OK)
      return rc;
  }
  *bot = node_find(pm, i1, i2);
  if (*bot == 0) {
    rc = node_create(pm, i1, i2, (UINT64_C(8) << pm->radix.bot_bits), bot, err);
    if (rc != AS_OK)
      return rc;
    /* arena_map_root.ptrs[i1]->ptrs[i2] = n: 8 bytes of the mid node */
    rc = raw_write(pm, mid, (uint64_t)i2 * 8, 8, err);
    if (rc != AS_OK)
      return rc;
  }
  return AS_OK;
}

/* arena_map_mark_used(arena_base, is_used) (3.11 obmalloc.c:1510-1549;
 * 3.14 :1840-1880): an aligned arena writes tail_hi of its entry; an
 * unaligned one writes tail_hi of its entry and tail_lo of the next one
 * (which may be in another bottom node).  Nodes are never freed. */
static as_status_t arena_map_mark_used(pymalloc_model_t *pm,
                                       sim_addr_t arena_base, as_err_t *err) {
  uint32_t    n_hi, n_lo;
  as_status_t rc = arena_map_get(pm, arena_base, &n_hi, err);
  if (rc != AS_OK)
    return rc;
  uint64_t i3 = map_bot_index(pm, arena_base);
  uint64_t tail = arena_base & ARENA_SIZE_MASK;
  rc = raw_write(pm, n_hi, i3 * 8, 4, err); /* tail_hi */
  if (rc != AS_OK || tail == 0)
    return rc;
  sim_addr_t next = arena_base + PYMALLOC_ARENA_SIZE;
  rc = arena_map_get(pm, next, &n_lo, err);
  if (rc != AS_OK)
    return rc;
  return raw_write(pm, n_lo, map_bot_index(pm, next) * 8 + 4, 4, err); /* lo */
}

/* ---- Free lists --------------------------------------------------------- */

/* A pool's free list is obmalloc's chain through the first word of each
 * free block (freeblock, 3.11 obmalloc.c:1003).  The model keeps it in one
 * of two forms, which hand out the same blocks in the same order:
 *   - a run: the list is freeblock, freeblock + 1, ..., nextblock - 1 (or
 *     empty: freeblock is NO_BLOCK), and links is NULL.  A pool being
 *     carved is one (its list is the virgin block alone), and so is a pool
 *     whose blocks were freed last first, each freed block pushed just
 *     below the head, as CPython frees a list's or a tuple's items
 *     (CPython 3.14 Objects/listobject.c list_dealloc, "Do it backwards",
 *     and Objects/tupleobject.c tupledealloc walk ob_item from the end, as
 *     every release since 2.x has).  It costs nothing per block.
 *   - a links array: a uint16 per block holding the next free block,
 *     taken when a free breaks the run and kept while the pool serves its
 *     size class.
 * The links arrays were 2 bytes per block of every carved pool: 8 MiB of
 * the simulator's 44 MiB replaying 256 MiB of 64 B objects.
 *
 * Host-side bookkeeping, not obmalloc's: the arrays are carved from slabs
 * the model frees at once, not malloc'd one per pool (16,000 mallocs and
 * frees per 64 B survivors run, 4 % of its cycles in perf).  An array a
 * pool lets go of waits in spare_links for the next pool of that length. */

/* An array of n entries (8-byte aligned, uninitialized), or NULL. */
static uint16_t *links_take(pymalloc_model_t *pm, uint32_t n) {
  uint16_t *l = pm->spare_links[n];
  if (l != NULL) {
    memcpy(&pm->spare_links[n], l,
           sizeof pm->spare_links[n]); /* the next spare */
    return l;
  }
  size_t bytes = ((size_t)n * sizeof *l + 7) & ~(size_t)7;
  if (pm->slab == NULL || pm->slab->used + bytes > LINKS_SLAB_BYTES) {
    links_slab_t *slab = malloc(sizeof *slab + LINKS_SLAB_BYTES);
    if (slab == NULL)
      return NULL;
    slab->prev = pm->slab;
    slab->used = 0;
    pm->slab = slab;
  }
  l = (uint16_t *)((char *)pm->slab->data + pm->slab->used);
  pm->slab->used += bytes;
  return l;
}

/* Returns the pool's links array, if any, to the spares: its free list must
 * be a run from here on, or the pool is being set up afresh. */
static void links_drop(pymalloc_model_t *pm, pym_pool_t *pool) {
  if (pool->links == NULL)
    return;
  memcpy(pool->links, &pm->spare_links[pool->links_cap],
         sizeof pm->spare_links[pool->links_cap]);
  pm->spare_links[pool->links_cap] = pool->links;
  pool->links = NULL;
  pool->links_cap = 0;
}

/* The block after b in the pool's free list (b on it), or NO_BLOCK. */
static inline uint32_t free_next(const pym_pool_t *pool, uint32_t b) {
  if (pool->links != NULL)
    return pool->links[b];
  return b + 1 < pool->nextblock ? b + 1 : NO_BLOCK;
}

/* Pushes b on a run: true if the list stays a run (b sits just below its
 * head, or just below the carve point of a full pool). */
static inline bool run_push(pym_pool_t *pool, uint32_t b) {
  uint32_t head =
      pool->freeblock == NO_BLOCK ? pool->nextblock : pool->freeblock;
  if (b + 1 != head)
    return false;
  pool->freeblock = (uint16_t)b;
  return true;
}

/* Pushes freed block b on the pool's list: false, changing nothing, when
 * the list is a run that b would break (the pool needs links_from_run). */
static inline bool list_push(pym_pool_t *pool, uint32_t b) {
  if (pool->links == NULL)
    return run_push(pool, b);
  pool->links[b] = pool->freeblock;
  pool->freeblock = (uint16_t)b;
  return true;
}

/* An emptied pool whose list is 0, 1, ..., nextblock - 1 (its blocks
 * freed last first, however the list was kept before) lets its links
 * array go: the run says the same.  The walk costs one step per block, as
 * many as the frees that emptied the pool. */
static void links_drop_if_run(pymalloc_model_t *pm, pym_pool_t *pool) {
  if (pool->links == NULL || pool->freeblock != 0)
    return;
  for (uint32_t b = 0; b + 1 < pool->nextblock; b++)
    if (pool->links[b] != b + 1)
      return;
  if (pool->links[pool->nextblock - 1] == NO_BLOCK)
    links_drop(pm, pool);
}

/* Gives a pool whose list is a run a links array holding that run. */
static as_status_t links_from_run(pymalloc_model_t *pm, pym_pool_t *pool,
                                  as_err_t *err) {
  uint16_t *l = links_take(pm, pool->nblocks);
  if (l == NULL)
    return as_err_set(err, AS_ENOMEM, "pymalloc: out of host memory");
  if (pool->freeblock != NO_BLOCK) {
    for (uint32_t b = pool->freeblock; b + 1 < pool->nextblock; b++)
      l[b] = (uint16_t)(b + 1);
    l[pool->nextblock - 1] = NO_BLOCK;
  }
  pool->links = l;
  pool->links_cap = pool->nblocks;
  return AS_OK;
}

/* ---- Object locations --------------------------------------------------- */

/* Makes ids [0, n) of the table usable at the current width: the id
 * table counts SLOT_MAX_BYTES units, so it is reached by bytes. */
static bool reach_ids(pymalloc_model_t *pm, uint64_t n) {
  return sim_idtable_reach_packed(&pm->ids_tab, n, pm->slot_bytes,
                                  &pm->ids_len);
}

/* Makes id addressable in ids[]. */
static as_status_t grow_ids(pymalloc_model_t *pm, uint64_t id, as_err_t *err) {
  if (reach_ids(pm, id + 1))
    return AS_OK;
  return as_err_set(err, AS_ENOMEM, "pymalloc: out of memory for %llu ids",
                    (unsigned long long)id + 1);
}

/* The location of id, or SLOT_DEAD.  A 4-byte slot drops the fifth byte,
 * which is all ones (SLOT_DEAD's) for a live location and zero for a dead
 * one, whose other bytes are zero too. */
static inline uint64_t slot_get(const pymalloc_model_t *pm, uint64_t id) {
  if (id >= pm->ids_len)
    return SLOT_DEAD;
  const uint8_t *p = pm->ids + id * pm->slot_bytes;
  uint32_t       lo;
  memcpy(&lo, p, sizeof lo);
  uint64_t hi = pm->slot_bytes == SLOT_MAX_BYTES ? p[4] : lo != 0 ? 0xFF : 0;
  return ((uint64_t)lo | hi << 32) ^ SLOT_DEAD;
}

/* Records loc for id (id < ids_len). */
static inline void slot_set(pymalloc_model_t *pm, uint64_t id, uint64_t loc) {
  uint8_t *p = pm->ids + id * pm->slot_bytes;
  loc ^= SLOT_DEAD;
  uint32_t lo = (uint32_t)loc;
  memcpy(p, &lo, sizeof lo);
  if (pm->slot_bytes == SLOT_MAX_BYTES)
    p[4] = (uint8_t)(loc >> 32);
}

/* Rewrites ids[] from 4-byte to 5-byte slots, in place and last first
 * (slot i's five bytes overlap only 4-byte slots i and above, already
 * moved), before new_arena makes an arenas[] slot 4 bytes cannot name. */
static as_status_t widen_ids(pymalloc_model_t *pm, as_err_t *err) {
  uint64_t n = pm->ids_len;
  if (n > 0 && !sim_idtable_reach(&pm->ids_tab, n - 1))
    return as_err_set(err, AS_ENOMEM, "pymalloc: out of memory for %llu ids",
                      (unsigned long long)n);
  for (uint64_t i = n; i-- > 0;) {
    uint32_t lo;
    memcpy(&lo, pm->ids + i * 4, sizeof lo);
    memcpy(pm->ids + i * SLOT_MAX_BYTES, &lo, sizeof lo);
    pm->ids[i * SLOT_MAX_BYTES + 4] = lo != 0 ? 0xFF : 0;
  }
  pm->slot_bytes = SLOT_MAX_BYTES;
  pm->ids_len = pm->ids_tab.len;
  return AS_OK;
}

static inline uint64_t slot_of(const pym_pool_t *pool, uint32_t b) {
  return (uint64_t)pool->arenaindex << 16 | (uint64_t)pool->index << 10 | b;
}

static inline pym_pool_t *slot_pool(const pymalloc_model_t *pm, uint64_t loc) {
  return &pm->arenas[loc >> 16].pools[(loc >> 10) & 63];
}

static inline uint32_t slot_block(uint64_t loc) {
  return (uint32_t)(loc & 1023);
}

/* ---- Arenas ------------------------------------------------------------- */

/* new_arena() (3.11 obmalloc.c:1579-1676; 3.14 :1911-2009). */
static as_status_t new_arena(pymalloc_model_t *pm, pym_arena_t **out,
                             as_err_t *err) {
  as_status_t rc;
  *out = NULL;
  if (pm->unused_arena_objects == NULL) {
    /* Double the vector (3.11 obmalloc.c:1594-1634; 3.14 :1927-1967); only
     * called when every arena is full, so no list points into it. */
    assert(pm->usable_arenas == NULL);
    uint32_t numarenas =
        pm->maxarenas ? pm->maxarenas << 1 : INITIAL_ARENA_OBJECTS;
    if (numarenas <= pm->maxarenas || numarenas > SLOT_MAX_ARENAS)
      return as_err_set(err, AS_ENOMEM,
                        "pymalloc: more than %lu arenas (the model's limit)",
                        (unsigned long)SLOT_MAX_ARENAS);
    if (numarenas > pm->narrow_arenas && pm->slot_bytes < SLOT_MAX_BYTES &&
        (rc = widen_ids(pm, err)) != AS_OK)
      return rc;
    rc = pm->raw.realloc(pm->raw.user, PYMALLOC_RAW_HANDLE_ARENAS,
                         (uint64_t)pm->maxarenas * ARENA_OBJECT_BYTES,
                         (uint64_t)numarenas * ARENA_OBJECT_BYTES, err);
    if (rc != AS_OK)
      return rc;
    pym_arena_t *a = realloc(pm->arenas, numarenas * sizeof *a);
    if (a == NULL)
      return as_err_set(err, AS_ENOMEM, "pymalloc: out of host memory");
    pm->arenas = a;
    for (uint32_t i = pm->maxarenas; i < numarenas; i++) {
      memset(&a[i], 0, sizeof a[i]);
      a[i].nextarena = i < numarenas - 1 ? &a[i + 1] : NULL;
    }
    pm->unused_arena_objects = &a[pm->maxarenas];
    pm->maxarenas = numarenas;
  }

  /* Take the next slot off the head of the list (3.11 :1636-1640; 3.14
   * :1969-1973). */
  pym_arena_t *ao = pm->unused_arena_objects;
  assert(ao->address == 0);
  if (ao->pools == NULL) {
    ao->pools = calloc(PYMALLOC_MAX_POOLS_IN_ARENA, sizeof *ao->pools);
    if (ao->pools == NULL)
      return as_err_set(err, AS_ENOMEM, "pymalloc: out of host memory");
  }
  /* _PyObject_ArenaMmap: mmap(NULL, 1 MiB, RW, PRIVATE|ANONYMOUS)
   * (3.11 obmalloc.c:149-159; 3.14 _PyMem_ArenaAlloc :477-494).  Placement is
   * the kernel's, which is what decides the pool alignment below. */
  sim_addr_t address;
  rc = sim_kernel_mmap(pm->kernel, PYMALLOC_ARENA_SIZE, 0, SIM_PROT_RW,
                       SIM_OWNER_PYMALLOC, &address, err);
  if (rc != AS_OK)
    return rc;
  /* Radix tree (3.11 :1642-1649; 3.14 :1975-1982). */
  rc = arena_map_mark_used(pm, address, err);
  if (rc != AS_OK)
    return rc;
  pm->unused_arena_objects = ao->nextarena;
  ao->address = address;

  ++pm->narenas_currently_allocated;
  ++pm->ntimes_arena_allocated;
  if (pm->narenas_currently_allocated > pm->narenas_highwater)
    pm->narenas_highwater = pm->narenas_currently_allocated;
  ao->freepools = NULL;
  /* An arena that is not 16 KiB aligned loses one pool
   * (3.11 obmalloc.c:1668-1675; 3.14 :2001-2008). */
  ao->first_pool = address;
  ao->nfreepools = PYMALLOC_MAX_POOLS_IN_ARENA;
  uint64_t excess = address & POOL_SIZE_MASK;
  if (excess != 0) {
    --ao->nfreepools;
    ao->first_pool += PYMALLOC_POOL_SIZE - excess;
  }
  ao->ntotalpools = ao->nfreepools;
  ao->ncarved = 0;
  uint32_t index = (uint32_t)(ao - pm->arenas);
  for (uint32_t i = 0; i < PYMALLOC_MAX_POOLS_IN_ARENA; i++) {
    pym_pool_t *p = &ao->pools[i];
    p->addr = ao->first_pool + (sim_addr_t)i * PYMALLOC_POOL_SIZE;
    p->arenaindex = index;
    p->index = (uint8_t)i;
    p->touched_end = 0; /* fresh mapping: nothing written */
    p->szidx = DUMMY_SIZE_IDX;
    p->ref_count = 0;
  }
  *out = ao;
  return AS_OK;
}

/* Case 1 of insert_to_freepool (3.11 obmalloc.c:2096-2141; 3.14
 * :2431-2476): unlink ao from usable_arenas, return the slot to
 * unused_arena_objects, unmark the radix tree and munmap the arena. */
static as_status_t release_arena(pymalloc_model_t *pm, pym_arena_t *ao,
                                 as_err_t *err) {
  if (ao->prevarena == NULL)
    pm->usable_arenas = ao->nextarena;
  else
    ao->prevarena->nextarena = ao->nextarena;
  if (ao->nextarena != NULL)
    ao->nextarena->prevarena = ao->prevarena;
  ao->nextarena = pm->unused_arena_objects;
  pm->unused_arena_objects = ao;
  /* arena_map_mark_used(ao->address, 0) writes the same entries again;
   * their pages are already written, but say so to the backend anyway. */
  uint32_t    n_hi, n_lo;
  as_status_t rc = arena_map_get(pm, ao->address, &n_hi, err);
  if (rc != AS_OK)
    return rc;
  rc = raw_write(pm, n_hi, map_bot_index(pm, ao->address) * 8, 4, err);
  if (rc != AS_OK)
    return rc;
  if ((ao->address & ARENA_SIZE_MASK) != 0) {
    sim_addr_t next = ao->address + PYMALLOC_ARENA_SIZE;
    rc = arena_map_get(pm, next, &n_lo, err);
    if (rc == AS_OK)
      rc = raw_write(pm, n_lo, map_bot_index(pm, next) * 8 + 4, 4, err);
    if (rc != AS_OK)
      return rc;
  }
  /* _PyObject_ArenaMunmap (3.11 obmalloc.c:161-164; 3.14 _PyMem_ArenaFree
   * :496-518). */
  rc = sim_kernel_munmap(pm->kernel, ao->address, PYMALLOC_ARENA_SIZE, err);
  if (rc != AS_OK)
    return rc;
  for (uint32_t i = 0; i < ao->ncarved; i++)
    links_drop(pm, &ao->pools[i]); /* new_arena sets them up afresh */
  ao->address = 0;
  --pm->narenas_currently_allocated;
  ++pm->narenas_reclaimed;
  return AS_OK;
}

/* ---- Pools -------------------------------------------------------------- */

/* pymalloc_pool_extend (3.11 obmalloc.c:1790-1807; 3.14 :2123-2140): the
 * free list ran empty; link the next virgin block, writing its first word,
 * or unlink the now full pool from usedpools. */
static inline as_status_t pool_extend(pymalloc_model_t *pm, pym_pool_t *pool,
                                      as_err_t *err) {
  if (pool->nextblock < pool->nblocks) {
    uint32_t b = pool->nextblock++;
    pool->freeblock = (uint16_t)b;
    if (pool->links != NULL)
      pool->links[b] = NO_BLOCK;
    return pool_write(pm, pool, block_off(pool, b), 8, err);
  }
  pym_pool_t *next = pool->nextpool;
  pym_pool_t *prev = pool->prevpool;
  next->prevpool = prev;
  prev->nextpool = next;
  return AS_OK;
}

/* allocate_from_new_pool (3.11 obmalloc.c:1812-1938; 3.14 :2145-2271): no
 * used pool of class szidx; take one from the most-full usable arena
 * (its freepools LIFO first, else carve ascending) and hand out a block. */
static as_status_t allocate_from_new_pool(pymalloc_model_t *pm, uint32_t szidx,
                                          pym_pool_t **pool_out,
                                          uint32_t *block_out, as_err_t *err) {
  as_status_t rc;
  if (pm->usable_arenas == NULL) {
    /* Only when no arena has a free pool (3.11 :1817-1831; 3.14 :2150-2164) */
    pym_arena_t *ao;
    rc = new_arena(pm, &ao, err);
    if (rc != AS_OK)
      return rc;
    pm->usable_arenas = ao;
    ao->nextarena = ao->prevarena = NULL;
    assert(pm->nfp2lasta[ao->nfreepools] == NULL);
    pm->nfp2lasta[ao->nfreepools] = ao;
  }
  pym_arena_t *ua = pm->usable_arenas;
  assert(ua->address != 0 && ua->nfreepools > 0);
  /* The head keeps the smallest count (3.11 :1834-1849; 3.14 :2167-2182). */
  if (pm->nfp2lasta[ua->nfreepools] == ua)
    pm->nfp2lasta[ua->nfreepools] = NULL;
  if (ua->nfreepools > 1) {
    assert(pm->nfp2lasta[ua->nfreepools - 1] == NULL);
    pm->nfp2lasta[ua->nfreepools - 1] = ua;
  }

  pym_pool_t *pool = ua->freepools;
  if (pool != NULL) {
    /* A cached free pool, LIFO (3.11 :1850-1879; 3.14 :2183-2212). */
    ua->freepools = pool->nextpool;
    if (--ua->nfreepools == 0) {
      pm->usable_arenas = ua->nextarena;
      if (pm->usable_arenas != NULL)
        pm->usable_arenas->prevarena = NULL;
    }
  } else {
    /* Carve at pool_address, ascending (3.11 :1880-1903; 3.14 :2213-2236);
     * writing arenaindex and szidx touches the pool header. */
    assert(ua->ncarved < ua->ntotalpools);
    pool = &ua->pools[ua->ncarved++];
    pool->szidx = DUMMY_SIZE_IDX;
    rc = pool_write(pm, pool, 0, PYMALLOC_POOL_OVERHEAD, err);
    if (rc != AS_OK)
      return rc;
    if (--ua->nfreepools == 0) {
      pm->usable_arenas = ua->nextarena;
      if (pm->usable_arenas != NULL)
        pm->usable_arenas->prevarena = NULL;
    }
  }

  /* Frontlink to used pools (3.11 :1906-1913; 3.14 :2239-2246). */
  pym_pool_t *next = &pm->usedpools[szidx];
  pool->nextpool = next;
  pool->prevpool = next;
  next->nextpool = pool;
  next->prevpool = pool;
  pool->ref_count = 1;
  if (pool->szidx == szidx) {
    /* Same class as before: reuse its free list (3.11 :1914-1923). */
    uint32_t b = pool->freeblock;
    assert(b != NO_BLOCK);
    pool->freeblock = (uint16_t)free_next(pool, b);
    *pool_out = pool;
    *block_out = b;
    return AS_OK;
  }
  /* Initialise the header, hand out block 0, link block 1 (3.11
   * :1924-1937; 3.14 :2257-2270): the list is the run of block 1. */
  links_drop(pm, pool);
  pool->szidx = (uint16_t)szidx;
  pool->nblocks = (uint16_t)NUMBLOCKS(szidx);
  pool->nextblock = 2; /* nextoffset = POOL_OVERHEAD + (size << 1) */
  pool->freeblock = 1; /* freeblock = bp + size */
  rc = pool_write(pm, pool, 0, PYMALLOC_POOL_OVERHEAD, err);
  if (rc == AS_OK)
    rc = pool_write(pm, pool, block_off(pool, 1), 8, err);
  *pool_out = pool;
  *block_out = 0;
  return rc;
}

/* pymalloc_alloc (3.11 obmalloc.c:1948-1988; 3.14 :2281-2321) for
 * 1 <= nbytes <= 512: the head pool of usedpools[class], its free list
 * head, extending the free list when it runs out. */
static inline as_status_t pym_malloc(pymalloc_model_t *pm, uint64_t nbytes,
                                     pym_pool_t **pool_out, uint32_t *block_out,
                                     as_err_t *err) {
  /* 3.11 :1966; 3.14 :2299: size = (nbytes - 1) >> ALIGNMENT_SHIFT */
  uint32_t    szidx = (uint32_t)(nbytes - 1) >> 4;
  pym_pool_t *pool = pm->usedpools[szidx].nextpool;
  if (pool != &pm->usedpools[szidx]) {
    ++pool->ref_count;
    uint32_t b = pool->freeblock;
    assert(b != NO_BLOCK);
    pool->freeblock = (uint16_t)free_next(pool, b);
    *pool_out = pool;
    *block_out = b;
    if (pool->freeblock == NO_BLOCK)
      return pool_extend(pm, pool, err);
    return AS_OK;
  }
  return allocate_from_new_pool(pm, szidx, pool_out, block_out, err);
}

/* insert_to_usedpool (3.11 obmalloc.c:2032-2045; 3.14 :2367-2380): a full
 * pool got a free block; link it at the front of its class list. */
static inline void insert_to_usedpool(pymalloc_model_t *pm, pym_pool_t *pool) {
  pym_pool_t *next = pm->usedpools[pool->szidx].nextpool;
  pym_pool_t *prev = next->prevpool;
  pool->nextpool = next;
  pool->prevpool = prev;
  next->prevpool = pool;
  prev->nextpool = pool;
}

/* insert_to_freepool (3.11 obmalloc.c:2048-2211; 3.14 :2383-2546): the pool
 * emptied; push it on its arena's freepools and re-sort usable_arenas,
 * releasing the arena if wholly free and not last (bpo-37257). */
static as_status_t insert_to_freepool(pymalloc_model_t *pm, pym_pool_t *pool,
                                      as_err_t *err) {
  pym_pool_t *next = pool->nextpool;
  pym_pool_t *prev = pool->prevpool;
  next->prevpool = prev;
  prev->nextpool = next;

  pym_arena_t *ao = &pm->arenas[pool->arenaindex];
  pool->nextpool = ao->freepools;
  ao->freepools = pool;
  uint32_t     nf = ao->nfreepools;
  pym_arena_t *lastnf = pm->nfp2lasta[nf];
  assert((nf == 0 && lastnf == NULL) ||
         (nf > 0 && lastnf != NULL && lastnf->nfreepools == nf &&
          (lastnf->nextarena == NULL || nf < lastnf->nextarena->nfreepools)));
  if (lastnf == ao) { /* rightmost (3.11 :2073-2076; 3.14 :2408-2411) */
    pym_arena_t *p = ao->prevarena;
    pm->nfp2lasta[nf] = (p != NULL && p->nfreepools == nf) ? p : NULL;
  }
  ao->nfreepools = ++nf;

  /* Case 1: all pools free and some arena follows: free it
   * (3.11 :2096; 3.14 :2431; bpo-37257 keeps the last one). */
  if (nf == ao->ntotalpools && ao->nextarena != NULL)
    return release_arena(pm, ao, err);

  if (nf == 1) {
    /* Case 2: was full; push at the head (3.11 :2143-2157; 3.14
     * :2478-2492). */
    ao->nextarena = pm->usable_arenas;
    ao->prevarena = NULL;
    if (pm->usable_arenas)
      pm->usable_arenas->prevarena = ao;
    pm->usable_arenas = ao;
    if (pm->nfp2lasta[1] == NULL)
      pm->nfp2lasta[1] = ao;
    return AS_OK;
  }

  /* 3.11 :2167-2176; 3.14 :2502-2511 */
  if (pm->nfp2lasta[nf] == NULL)
    pm->nfp2lasta[nf] = ao;
  if (ao == lastnf) /* Case 4: nothing to do */
    return AS_OK;

  /* Case 3: slide right, to just after lastnf (3.11 :2183-2210; 3.14
   * :2518-2545). */
  assert(ao->nextarena != NULL);
  if (ao->prevarena != NULL)
    ao->prevarena->nextarena = ao->nextarena;
  else
    pm->usable_arenas = ao->nextarena;
  ao->nextarena->prevarena = ao->prevarena;
  ao->prevarena = lastnf;
  ao->nextarena = lastnf->nextarena;
  if (ao->nextarena != NULL)
    ao->nextarena->prevarena = ao;
  lastnf->nextarena = ao;
  return AS_OK;
}

/* pymalloc_free (3.11 obmalloc.c:2218-2270; 3.14 :2553-2605). */
static inline as_status_t pym_free_block(pymalloc_model_t *pm, pym_pool_t *pool,
                                         uint32_t b, as_err_t *err) {
  assert(pool->ref_count > 0);
  uint32_t lastfree = pool->freeblock;
  if (!list_push(pool, b)) {
    as_status_t rc = links_from_run(pm, pool, err);
    if (rc != AS_OK)
      return rc;
    (void)list_push(pool, b);
  }
  pool->ref_count--;
  /* *(block **)p = lastfree (3.11 :2242; 3.14 :2577) */
  as_status_t rc = pool_write(pm, pool, block_off(pool, b), 8, err);
  if (rc != AS_OK)
    return rc;
  if (lastfree == NO_BLOCK) { /* was full (3.11 :2246-2255; 3.14 :2581) */
    insert_to_usedpool(pm, pool);
    return AS_OK;
  }
  if (pool->ref_count != 0)
    return AS_OK;
  links_drop_if_run(pm, pool);
  return insert_to_freepool(pm, pool, err); /* 3.11 :2270; 3.14 :2605 */
}

/* ---- Model methods ------------------------------------------------------ */

static as_status_t pymalloc_create(const model_opts_t *opts,
                                   const model_ctx_t *ctx, model_t **out,
                                   as_err_t *err) {
  *out = NULL;
  pymalloc_model_t *pm = calloc(1, sizeof *pm);
  if (pm == NULL)
    return as_err_set(err, AS_ENOMEM, "pymalloc: out of memory");
  pm->base.methods = &model_pymalloc_methods;
  pm->base.opts = *opts;
  pm->kernel = ctx->kernel;
  pm->page_mask = (uint32_t)(sim_kernel_page_size(ctx->kernel) - 1);
  pm->version = 310 + (int)model_opt_i64(opts, PO_VERSION);
  pm->radix = pm->version == 310 ? RADIX_310 : RADIX_311;
  pm->slot_bytes = 4;
  pm->narrow_arenas = SLOT_NARROW_ARENAS;
  if (sim_idtable_init(&pm->ids_tab, SLOT_MAX_BYTES) != AS_OK) {
    free(pm);
    return as_err_set(err, AS_ENOMEM, "pymalloc: no address space for ids");
  }
  pm->ids = sim_idtable_base(&pm->ids_tab);
  for (uint32_t i = 0; i < PYMALLOC_NB_SMALL_SIZE_CLASSES; i++) {
    /* usedpools[] starts as empty circular lists (3.11 :1164-1195). */
    pm->usedpools[i].nextpool = &pm->usedpools[i];
    pm->usedpools[i].prevpool = &pm->usedpools[i];
    pm->usedpools[i].szidx = (uint16_t)i;
  }
  pm->raw = (pymalloc_raw_t){
      .user = pm,
      .calloc = standalone_calloc,
      .realloc = standalone_realloc,
      .write = standalone_write,
  };
  *out = &pm->base;
  return AS_OK;
}

static void pymalloc_destroy(model_t *m) {
  pymalloc_model_t *pm = (pymalloc_model_t *)m;
  for (uint32_t i = 0; i < pm->maxarenas; i++)
    free(pm->arenas[i].pools);
  for (links_slab_t *slab = pm->slab, *prev; slab != NULL; slab = prev) {
    prev = slab->prev;
    free(slab);
  }
  free(pm->arenas);
  sim_idtable_free(&pm->ids_tab);
  free(pm);
}

static as_status_t out_of_range(uint64_t nbytes, as_err_t *err) {
  return as_err_set(err, AS_EINVAL,
                    "pymalloc: request of %llu bytes; pymalloc serves 1..%d "
                    "(use the cpython model to route the rest to libc)",
                    (unsigned long long)nbytes,
                    PYMALLOC_SMALL_REQUEST_THRESHOLD);
}

/* malloc / calloc (PyObject_Malloc, PyObject_Calloc), every case.  calloc's
 * memset (3.11 obmalloc.c:2019; 3.14 :2354) writes the same bytes the
 * program is assumed to write anyway.  pymalloc_alloc below takes the
 * common case without calls and sends the rest here. */
static __attribute__((noinline)) as_status_t
alloc_any(pymalloc_model_t *pm, const trace_event_t *ev, as_err_t *err) {
  uint64_t nbytes = ev->size;
  /* 3.11 obmalloc.c:1959-1964; 3.14 :2292-2297 */
  if (nbytes == 0 || nbytes > PYMALLOC_SMALL_REQUEST_THRESHOLD ||
      ev->op == TRACE_MEMALIGN)
    return out_of_range(nbytes, err);
  if (ev->id >= pm->ids_len) {
    as_status_t rc = grow_ids(pm, ev->id, err);
    if (rc != AS_OK)
      return rc;
  }
  if (slot_get(pm, ev->id) != SLOT_DEAD)
    return as_err_set(err, AS_EINVAL, "pymalloc: alloc of live id %llu",
                      (unsigned long long)ev->id);
  pym_pool_t *pool;
  uint32_t    b;
  as_status_t rc = pym_malloc(pm, nbytes, &pool, &b, err);
  if (rc != AS_OK)
    return rc;
  slot_set(pm, ev->id, slot_of(pool, b));
  pm->live_bytes += nbytes;
  pm->live_objects++;
  pm->block_bytes += INDEX2SIZE(pool->szidx);
  return pool_write(pm, pool, block_off(pool, b), (uint32_t)nbytes, err);
}

/* The free of held id at loc, every case. */
static __attribute__((noinline)) as_status_t free_any(pymalloc_model_t    *pm,
                                                      const trace_event_t *ev,
                                                      uint64_t             loc,
                                                      as_err_t *err) {
  pym_pool_t *pool = slot_pool(pm, loc);
  pm->live_bytes -= ev->prev_size;
  pm->live_objects--;
  pm->block_bytes -= INDEX2SIZE(pool->szidx);
  slot_set(pm, ev->id, SLOT_DEAD);
  return pym_free_block(pm, pool, slot_block(loc), err);
}

/* Fast paths.  Nearly every allocation pops the head pool of its class
 * and writes only pages the pool already knows written, and nearly every
 * free leaves its pool in use.  pymalloc_alloc and free_held do exactly
 * what alloc_any and free_any do in those cases, with no calls, so they
 * need no stack frame; they test every condition before changing any state
 * and hand anything else (errors, a new pool, an emptied pool, a kernel
 * call) to the general path. */

static as_status_t pymalloc_alloc(model_t *m, const trace_event_t *ev,
                                  as_err_t *err) {
  pymalloc_model_t *pm = (pymalloc_model_t *)m;
  uint64_t          nbytes = ev->size;
  if (nbytes - 1 >= PYMALLOC_SMALL_REQUEST_THRESHOLD ||
      ev->op == TRACE_MEMALIGN || ev->id >= pm->ids_len ||
      slot_get(pm, ev->id) != SLOT_DEAD)
    return alloc_any(pm, ev, err); /* errors; ids not yet in ids[] */
  uint32_t    szidx = (uint32_t)(nbytes - 1) >> 4;
  pym_pool_t *pool = pm->usedpools[szidx].nextpool;
  if (pool == &pm->usedpools[szidx])
    return alloc_any(pm, ev, err); /* allocate_from_new_pool */
  /* pymalloc_alloc's pop of the free list head, then pymalloc_pool_extend
   * when the list runs empty (as pym_malloc and pool_extend). */
  uint32_t b = pool->freeblock;
  uint32_t next = free_next(pool, b);
  uint32_t off = block_off(pool, b);
  uint32_t end = off + (uint32_t)nbytes; /* the program's write */
  bool     extend = next == NO_BLOCK && pool->nextblock < pool->nblocks;
  if (extend) {
    next = pool->nextblock;
    /* the virgin block's link word */
    uint32_t link_end = block_off(pool, next) + 8;
    end = link_end > end ? link_end : end;
  }
  if (end > pool->touched_end)
    return alloc_any(pm, ev, err); /* a write the kernel must see */
  pool->ref_count++;
  pool->freeblock = (uint16_t)next;
  if (extend) {
    pool->nextblock = (uint16_t)(next + 1);
    if (pool->links != NULL)
      pool->links[next] = NO_BLOCK;
  } else if (next == NO_BLOCK) { /* full: unlink from usedpools */
    pool->nextpool->prevpool = pool->prevpool;
    pool->prevpool->nextpool = pool->nextpool;
  }
  slot_set(pm, ev->id, slot_of(pool, b));
  pm->live_bytes += nbytes;
  pm->live_objects++;
  pm->block_bytes += INDEX2SIZE(szidx);
  return AS_OK;
}

/* The free of held id at loc. */
static inline as_status_t free_held(pymalloc_model_t    *pm,
                                    const trace_event_t *ev, uint64_t loc,
                                    as_err_t *err) {
  pym_pool_t *pool = slot_pool(pm, loc);
  uint32_t    b = slot_block(loc);
  if (pool->ref_count == 1 || block_off(pool, b) + 8 > pool->touched_end)
    return free_any(pm, ev, loc, err); /* emptied pool; a kernel call */
  /* pymalloc_free (as pym_free_block) for a pool that stays in use. */
  uint32_t lastfree = pool->freeblock;
  if (!list_push(pool, b))
    return free_any(pm, ev, loc, err); /* the run breaks: links taken */
  pool->ref_count--;
  if (lastfree == NO_BLOCK)
    insert_to_usedpool(pm, pool);
  slot_set(pm, ev->id, SLOT_DEAD);
  pm->live_bytes -= ev->prev_size;
  pm->live_objects--;
  pm->block_bytes -= INDEX2SIZE(pool->szidx);
  return AS_OK;
}

static as_status_t pymalloc_free(model_t *m, const trace_event_t *ev,
                                 as_err_t *err) {
  pymalloc_model_t *pm = (pymalloc_model_t *)m;
  uint64_t          loc = slot_get(pm, ev->id);
  if (loc == SLOT_DEAD)
    return as_err_set(err, AS_EINVAL, "pymalloc: free of dead id %llu",
                      (unsigned long long)ev->id);
  return free_held(pm, ev, loc, err);
}

/* pymalloc_realloc (3.11 obmalloc.c:2301-2358; 3.14 :2637-2696): keep the
 * block when the new size fits and 4*nbytes > 3*size; otherwise malloc a
 * new block, copy, free the old one.  Sizes outside 1..512 leave pymalloc
 * (the composition handles that); standalone they are an error. */
static as_status_t pymalloc_realloc(model_t *m, const trace_event_t *ev,
                                    as_err_t *err) {
  pymalloc_model_t *pm = (pymalloc_model_t *)m;
  uint64_t          loc = slot_get(pm, ev->id);
  if (loc == SLOT_DEAD)
    return as_err_set(err, AS_EINVAL, "pymalloc: realloc of dead id %llu",
                      (unsigned long long)ev->id);
  pym_pool_t *pool = slot_pool(pm, loc);
  uint64_t    nbytes = ev->size;
  uint64_t    size = INDEX2SIZE(pool->szidx);
  /* 3.11 :2335-2347; 3.14 :2672-2684 */
  if (nbytes <= size && 4 * nbytes > 3 * size) {
    pm->live_bytes = pm->live_bytes - ev->prev_size + nbytes;
    return pool_write(pm, pool, block_off(pool, slot_block(loc)),
                      (uint32_t)nbytes, err);
  }
  if (nbytes == 0 || nbytes > PYMALLOC_SMALL_REQUEST_THRESHOLD)
    return out_of_range(nbytes, err);
  /* bp = _PyObject_Malloc(nbytes); memcpy; _PyObject_Free(p)
   * (3.11 :2351-2355; 3.14 :2688-2692) */
  pym_pool_t *npool;
  uint32_t    nb;
  as_status_t rc = pym_malloc(pm, nbytes, &npool, &nb, err);
  if (rc != AS_OK)
    return rc;
  rc = pool_write(pm, npool, block_off(npool, nb), (uint32_t)nbytes, err);
  if (rc != AS_OK)
    return rc;
  pm->block_bytes += INDEX2SIZE(npool->szidx);
  pm->block_bytes -= size;
  pm->live_bytes = pm->live_bytes - ev->prev_size + nbytes;
  slot_set(pm, ev->id, slot_of(npool, nb));
  return pym_free_block(pm, pool, slot_block(loc), err);
}

static void pymalloc_model_stats(const model_t *m, model_stats_t *out) {
  const pymalloc_model_t *pm = (const pymalloc_model_t *)m;
  memset(out, 0, sizeof *out);
  out->live_bytes = pm->live_bytes;
  out->live_objects = pm->live_objects;
  out->arenas = pm->narenas_currently_allocated;
  uint64_t arena_b = pm->narenas_currently_allocated * PYMALLOC_ARENA_SIZE;
  out->mapped_bytes = arena_b + pm->raw_mapped_bytes;
  out->free_bytes = arena_b - pm->block_bytes;
}

/* A free or realloc reads the object's location first: a random free
 * order misses the cache on it (4 bytes per id, 16 MiB for 4.2 M objects). */
static void pymalloc_prefetch(const model_t *m, const trace_event_t *ev) {
  const pymalloc_model_t *pm = (const pymalloc_model_t *)m;
  if ((ev->op == TRACE_FREE || ev->op == TRACE_REALLOC) && ev->id < pm->ids_len)
    __builtin_prefetch(pm->ids + ev->id * pm->slot_bytes);
}

static bool pymalloc_locate(const model_t *m, uint64_t id, sim_addr_t *addr) {
  return pymalloc_block_address(m, id, addr);
}

/* Why obmalloc holds each kind of region (explain). */
static const model_mechanism_t pymalloc_mechanisms[] = {
    {"pymalloc.used_pool", "pools holding live objects",
     "Each object takes a whole block of its size class (3.11 "
     "obmalloc.c:1966), and each 16 KiB pool starts with a 48-byte header "
     "and ends with the bytes no whole block fits in (POOL_OVERHEAD, "
     "NUMBLOCKS).",
     "freeing every object in the pool", true},
    {"pymalloc.free_blocks", "free blocks in pools that hold live objects",
     "A pool goes back to its arena only when every block in it is free "
     "(pymalloc_free); until then its free blocks serve only objects of "
     "its size class (pymalloc_alloc).",
     "nothing short of freeing the other objects in those pools "
     "(malloc_trim cannot release pymalloc memory)",
     false},
    {"pymalloc.pinned_arena", "empty pools in arenas that still hold objects",
     "obmalloc returns a 1 MiB arena to the kernel only when every pool in "
     "it is empty (pymalloc_free), so one live object pins a whole arena.",
     "nothing short of freeing the last objects in each arena "
     "(malloc_trim cannot release pymalloc arenas; PYTHONMALLOC=malloc "
     "avoids arenas altogether)",
     false},
    {"pymalloc.empty_arena", "an empty arena kept for reuse",
     "obmalloc keeps one wholly empty arena when it is the only usable one "
     "instead of unmapping it (bpo-37257).",
     "nothing: the next arena needed reuses it", false},
    {"pymalloc.header", "arena space outside the pools",
     "An arena that mmap does not align to 16 KiB loses the partial pool at "
     "its start (new_arena).",
     "nothing", false},
    {NULL, NULL, NULL, NULL, false},
};

/* Marks the blocks of pool that hold no object: its free list (3.11
 * obmalloc.c:1003 freeblock, linked through the blocks) and the blocks
 * never carved (nextoffset onwards). */
static void free_blocks(const pym_pool_t *pool, uint64_t *bits) {
  memset(bits, 0, (size_t)(pool->nblocks + 63) / 64 * sizeof *bits);
  for (uint32_t b = pool->freeblock; b != NO_BLOCK; b = free_next(pool, b))
    bits[b / 64] |= UINT64_C(1) << (b % 64);
  for (uint32_t b = pool->nextblock; b < pool->nblocks; b++)
    bits[b / 64] |= UINT64_C(1) << (b % 64);
}

/* A pool holding objects, as runs of blocks: live ones (with the pool's
 * header before the first block and the tail no block fits in, overhead
 * of its objects) and free ones, so that explain and the heap map see
 * its free blocks as free, not as the live objects' overhead. */
static as_status_t walk_used_pool(const pym_pool_t *pool, model_region_fn fn,
                                  void *user, as_err_t *err) {
  uint64_t bits[(PYMALLOC_POOL_SIZE / 16 + 63) / 64];
  uint32_t size = INDEX2SIZE(pool->szidx);
  free_blocks(pool, bits);
  model_region_t run = {.addr = pool->addr,
                        .kind = "blocks",
                        .mechanism = "pymalloc.used_pool",
                        .level = 1,
                        .state = MODEL_REGION_LIVE};
  sim_addr_t     at = pool->addr + PYMALLOC_POOL_OVERHEAD;
  as_status_t    rc = AS_OK;
  for (uint32_t b = 0; b < pool->nblocks && rc == AS_OK; b++, at += size) {
    bool is_free = (bits[b / 64] >> (b % 64)) & 1;
    bool run_free = run.state == MODEL_REGION_FREE;
    if (is_free != run_free && at > run.addr) {
      run.bytes = at - run.addr;
      rc = fn(user, &run, err);
      run = (model_region_t){.addr = at, .kind = "blocks", .level = 1};
    }
    run.mechanism = is_free ? "pymalloc.free_blocks" : "pymalloc.used_pool";
    run.state = is_free ? MODEL_REGION_FREE : MODEL_REGION_LIVE;
    run.live_objects += !is_free;
    run.live_bytes += is_free ? 0 : size;
  }
  sim_addr_t end = pool->addr + PYMALLOC_POOL_SIZE;
  if (rc == AS_OK && run.state == MODEL_REGION_FREE && at < end) {
    run.bytes = at - run.addr; /* the tail is the objects' overhead */
    rc = fn(user, &run, err);
    run = (model_region_t){.addr = at,
                           .kind = "blocks",
                           .mechanism = "pymalloc.used_pool",
                           .level = 1,
                           .state = MODEL_REGION_LIVE};
  }
  run.bytes = end - run.addr;
  return rc == AS_OK ? fn(user, &run, err) : rc;
}

/* One arena: its region, the unaligned head, then its pools in order. */
static as_status_t walk_arena(const pym_arena_t *ao, model_region_fn fn,
                              void *user, as_err_t *err) {
  model_region_t r = {
      .addr = ao->address, .bytes = PYMALLOC_ARENA_SIZE, .kind = "arena"};
  uint32_t used = 0;
  for (uint32_t j = 0; j < ao->ncarved; j++)
    if (ao->pools[j].ref_count > 0) {
      used++;
      r.live_objects += ao->pools[j].ref_count;
      r.live_bytes +=
          (uint64_t)ao->pools[j].ref_count * INDEX2SIZE(ao->pools[j].szidx);
    }
  as_status_t rc = fn(user, &r, err);
  if (rc == AS_OK && ao->first_pool > ao->address)
    rc = fn(user,
            &(model_region_t){.addr = ao->address,
                              .bytes = ao->first_pool - ao->address,
                              .kind = "unaligned head",
                              .mechanism = "pymalloc.header",
                              .level = 1,
                              .state = MODEL_REGION_METADATA},
            err);
  for (uint32_t j = 0; j < ao->ntotalpools && rc == AS_OK; j++) {
    const pym_pool_t *pool = j < ao->ncarved ? &ao->pools[j] : NULL;
    bool              in_use = pool != NULL && pool->ref_count > 0;
    model_region_t    q = {.addr =
                               ao->first_pool + (uint64_t)j * PYMALLOC_POOL_SIZE,
                           .bytes = PYMALLOC_POOL_SIZE,
                           .kind = pool == NULL ? "uncarved pool" : "pool",
                           .level = 1};
    if (in_use) {
      rc = walk_used_pool(pool, fn, user, err);
      continue;
    }
    q.mechanism = used > 0 ? "pymalloc.pinned_arena" : "pymalloc.empty_arena";
    q.state = MODEL_REGION_FREE;
    rc = fn(user, &q, err);
  }
  return rc;
}

static as_status_t pymalloc_walk(const model_t *m, model_region_fn fn,
                                 void *user, as_err_t *err) {
  const pymalloc_model_t *pm = (const pymalloc_model_t *)m;
  as_status_t             rc = AS_OK;
  for (uint32_t i = 0; i < pm->maxarenas && rc == AS_OK; i++)
    if (pm->arenas[i].address != 0)
      rc = walk_arena(&pm->arenas[i], fn, user, err);
  return rc;
}

/* The block a request of 1..512 bytes gets: its size class (3.11
 * obmalloc.c:1966 size = (nbytes - 1) >> ALIGNMENT_SHIFT, INDEX2SIZE);
 * 0 for what pymalloc declines (0 bytes, above 512: libc's). */
static uint64_t pymalloc_usable_size(const model_t *m, uint64_t size,
                                     uint8_t domain) {
  (void)m, (void)domain;
  if (size == 0 || size > PYMALLOC_SMALL_REQUEST_THRESHOLD)
    return 0;
  return INDEX2SIZE(pymalloc_size_class(size));
}

static size_t pymalloc_counters(const model_t *m, model_counter_t *out,
                                size_t cap) {
  pymalloc_stats_t st;
  pymalloc_get_stats(m, &st);
  size_t n = 0;
#define PUT(name, v, unit, help)                                               \
  n = model_counter_put(out, n, cap, "pymalloc", name, v, unit, help)
  PUT("arenas", st.arenas_current, "count", "1 MiB arenas mapped now");
  PUT("arenas_pinned", st.arenas_pinned, "count",
      "arenas kept mapped by at least one used pool");
  PUT("arenas_empty", st.arenas_empty, "count",
      "arenas with every pool free, kept by the release rule");
  PUT("arenas_unaligned", st.arenas_unaligned, "count",
      "arenas with 63 usable pools (not 16 KiB aligned)");
  PUT("arenas_reclaimed", st.arenas_reclaimed, "count", "arenas munmapped");
  PUT("arenas_highwater", st.arenas_highwater, "count", "most arenas at once");
  PUT("pools_used", st.pools_used, "count", "pools holding blocks");
  PUT("pools_full", st.pools_full, "count", "pools with no free block");
  PUT("pools_free", st.pools_free, "count", "carved pools now empty");
  PUT("pools_uncarved", st.pools_uncarved, "count",
      "pools of mapped arenas never used");
  PUT("blocks_in_use", st.blocks_in_use, "count", "live blocks");
  PUT("block_bytes_in_use", st.block_bytes_in_use, "bytes",
      "live blocks times their size class");
#undef PUT
  return n;
}

const model_methods_t model_pymalloc_methods = {
    .name = "pymalloc",
    .summary = "CPython obmalloc: 1 MiB arenas, 16 KiB pools, 32 classes",
    .options = pymalloc_options,
    .create = pymalloc_create,
    .destroy = pymalloc_destroy,
    .alloc = pymalloc_alloc,
    .realloc = pymalloc_realloc,
    .free = pymalloc_free,
    .thread = NULL, /* obmalloc has no per-thread state (GIL build) */
    .trim = NULL,   /* malloc_trim is glibc's; obmalloc never trims */
    .stats = pymalloc_model_stats,
    .locate = pymalloc_locate,
    .counters = pymalloc_counters,
    .usable_size = pymalloc_usable_size,
    .walk = pymalloc_walk,
    .mechanisms = pymalloc_mechanisms,
    .prefetch = pymalloc_prefetch,
};

/* ---- Exported helpers --------------------------------------------------- */

unsigned pymalloc_size_class(uint64_t nbytes) {
  assert(nbytes >= 1 && nbytes <= PYMALLOC_SMALL_REQUEST_THRESHOLD);
  return (unsigned)((nbytes - 1) >> 4);
}

uint32_t pymalloc_class_size(unsigned szidx) {
  assert(szidx < PYMALLOC_NB_SMALL_SIZE_CLASSES);
  return INDEX2SIZE(szidx);
}

uint32_t pymalloc_blocks_per_pool(uint64_t nbytes) {
  if (nbytes == 0 || nbytes > PYMALLOC_SMALL_REQUEST_THRESHOLD)
    return 0;
  return NUMBLOCKS((nbytes - 1) >> 4);
}

uint32_t pymalloc_pools_per_arena(uint64_t arena_address) {
  return (arena_address & POOL_SIZE_MASK) ? PYMALLOC_MAX_POOLS_IN_ARENA - 1
                                          : PYMALLOC_MAX_POOLS_IN_ARENA;
}

bool pymalloc_geometry(uint64_t nbytes, bool arena_aligned,
                       pymalloc_geometry_t *out) {
  memset(out, 0, sizeof *out);
  if (nbytes == 0 || nbytes > PYMALLOC_SMALL_REQUEST_THRESHOLD)
    return false;
  unsigned szidx = (unsigned)((nbytes - 1) >> 4);
  out->block_size = INDEX2SIZE(szidx);
  out->blocks_per_pool = NUMBLOCKS(szidx);
  out->pools_per_arena = arena_aligned ? PYMALLOC_MAX_POOLS_IN_ARENA
                                       : PYMALLOC_MAX_POOLS_IN_ARENA - 1;
  out->blocks_per_arena = out->blocks_per_pool * out->pools_per_arena;
  out->pool_tail_bytes =
      (uint32_t)(PYMALLOC_POOL_SIZE - PYMALLOC_POOL_OVERHEAD) % out->block_size;
  return true;
}

void pymalloc_get_stats(const model_t *m, pymalloc_stats_t *out) {
  assert(m->methods == &model_pymalloc_methods);
  const pymalloc_model_t *pm = (const pymalloc_model_t *)m;
  memset(out, 0, sizeof *out);
  out->arenas_allocated_total = pm->ntimes_arena_allocated;
  out->arenas_reclaimed = pm->narenas_reclaimed;
  out->arenas_highwater = pm->narenas_highwater;
  out->arenas_current = pm->narenas_currently_allocated;
  out->raw_nodes = pm->nnodes;
  out->raw_arena_objects = pm->maxarenas;
  for (uint32_t i = 0; i < pm->maxarenas; i++) {
    const pym_arena_t *ao = &pm->arenas[i];
    if (ao->address == 0)
      continue;
    if (ao->ntotalpools < PYMALLOC_MAX_POOLS_IN_ARENA)
      out->arenas_unaligned++;
    uint64_t used = 0;
    for (uint32_t j = 0; j < ao->ncarved; j++) {
      const pym_pool_t *p = &ao->pools[j];
      if (p->ref_count == 0)
        continue;
      used++;
      out->blocks_in_use += p->ref_count;
      out->block_bytes_in_use += (uint64_t)p->ref_count * INDEX2SIZE(p->szidx);
      if (p->freeblock == NO_BLOCK)
        out->pools_full++;
    }
    out->pools_used += used;
    out->pools_free += ao->ncarved - used;
    out->pools_uncarved += ao->ntotalpools - ao->ncarved;
    if (used > 0)
      out->arenas_pinned++;
    else
      out->arenas_empty++;
  }
}

uint32_t pymalloc_block_size_of(const model_t *m, uint64_t id) {
  assert(m->methods == &model_pymalloc_methods);
  const pymalloc_model_t *pm = (const pymalloc_model_t *)m;
  uint64_t                loc = slot_get(pm, id);
  if (loc == SLOT_DEAD)
    return 0;
  return INDEX2SIZE(slot_pool(pm, loc)->szidx);
}

bool pymalloc_block_address(const model_t *m, uint64_t id, uint64_t *addr) {
  assert(m->methods == &model_pymalloc_methods);
  const pymalloc_model_t *pm = (const pymalloc_model_t *)m;
  uint64_t                loc = slot_get(pm, id);
  if (loc == SLOT_DEAD)
    return false;
  *addr = block_addr(slot_pool(pm, loc), slot_block(loc));
  return true;
}

as_status_t pymalloc_free_if_held(model_t *m, const trace_event_t *ev,
                                  bool *held, as_err_t *err) {
  assert(m->methods == &model_pymalloc_methods);
  pymalloc_model_t *pm = (pymalloc_model_t *)m;
  uint64_t          loc = slot_get(pm, ev->id);
  *held = loc != SLOT_DEAD;
  return *held ? free_held(pm, ev, loc, err) : AS_OK;
}

void pymalloc_narrow_arenas_for_tests(model_t *m, uint32_t n) {
  ((pymalloc_model_t *)m)->narrow_arenas = n;
}

void pymalloc_set_raw(model_t *m, const pymalloc_raw_t *raw) {
  assert(m->methods == &model_pymalloc_methods);
  pymalloc_model_t *pm = (pymalloc_model_t *)m;
  assert(pm->ntimes_arena_allocated == 0 && pm->maxarenas == 0);
  pm->raw = *raw;
}
