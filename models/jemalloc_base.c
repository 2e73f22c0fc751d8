/* models/jemalloc_base.c -- jemalloc 5.3.0's own memory: the base allocator
 * (src/base.c), the edata_t cache (src/edata_cache.c) and the rtree leaves
 * (src/rtree.c) that map pages to extents.
 *
 * Every arena has a base: bump allocation inside blocks mapped 2 MiB-aligned
 * (the first 2 MiB, later ones growing through the page-size classes), from
 * which the arena struct, one 128-byte edata_t per extent record (recycled
 * through the edata_cache, never returned) and, in arena 0's base (b0), the
 * rtree leaves come.  base_alloc returns demand-zero memory: the structures
 * jemalloc initialises at once (arena, edata, tables) are written in full,
 * an rtree leaf (2^18 8-byte entries for 1 GiB of address space) only where
 * an extent's pages are registered -- so a leaf costs one resident OS page
 * per 2 MiB of heap, while stats.resident counts it whole (base.c:207-209
 * adds every page a bump allocation crosses).
 */
#include "jemalloc_internal.h"

#include <stdlib.h>
#include <string.h>

#include "../sim/grow.h"

#define RTREE_LEAF_BITS 18 /* rtree.h:116-122: RTREE_NSB / 2 of 36 bits */
#define RTREE_LEAF_ELM  8  /* sizeof (rtree_leaf_elm_t), RTREE_LEAF_COMPACT */

static uint64_t ceil_to(uint64_t x, uint64_t a) {
  return (x + a - 1) & ~(a - 1);
}

/* The size class index of the largest class <= size (base.c:197-201:
 * sz_size2index(bsize + 1) - 1). */
static unsigned index_floor(const jemalloc_model_t *jm, uint64_t size) {
  return je_size2index(jm, size + 1) - 1;
}

static as_status_t base_touch(jemalloc_model_t *jm, uint64_t addr,
                              uint64_t size, as_err_t *err) {
  return size ? sim_kernel_touch(jm->kernel, addr, size, err) : AS_OK;
}

static as_status_t list_push(je_base_free_t **list, uint32_t *n, uint32_t *cap,
                             je_base_free_t f, as_err_t *err) {
  if (*n == *cap) {
    size_t          c = *cap;
    je_base_free_t *v = as_grow(*list, &c, (size_t)*n + 1, sizeof *v, 4);
    if (v == NULL)
      return as_err_set(err, AS_ENOMEM, "jemalloc: out of memory (base)");
    *list = v;
    *cap = (uint32_t)c;
  }
  (*list)[(*n)++] = f;
  return AS_OK;
}

static as_status_t avail_push(je_base_t *b, uint64_t addr, uint64_t size,
                              uint64_t sn, as_err_t *err) {
  return list_push(&b->avail, &b->navail, &b->avail_cap,
                   (je_base_free_t){addr, size, sn}, err);
}

/* base_block_alloc (base.c:243-301): a block large enough for the header
 * and the request, at least the next page-size class after the last block,
 * rounded to huge pages; its tail after the header is a free extent. */
static as_status_t block_alloc(jemalloc_model_t *jm, je_base_t *b,
                               uint64_t size, uint64_t alignment,
                               je_base_free_t *out, as_err_t *err) {
  alignment = ceil_to(alignment, (uint64_t)1 << JE_LG_QUANTUM);
  uint64_t usize = ceil_to(size, alignment);
  uint64_t gap = ceil_to(JE_SIZEOF_BLOCK, alignment) - JE_SIZEOF_BLOCK;
  uint64_t huge = (uint64_t)1 << JE_LG_HUGEPAGE;
  uint64_t min_block =
      ceil_to(jm->pind2sz[je_psz2ind(jm, JE_SIZEOF_BLOCK + gap + usize)], huge);
  unsigned    limit = je_psz2ind(jm, jm->large_maxclass);
  unsigned    next = b->pind_last + 1 < limit ? b->pind_last + 1 : b->pind_last;
  uint64_t    next_block = ceil_to(jm->pind2sz[next], huge);
  uint64_t    block = min_block > next_block ? min_block : next_block;
  sim_addr_t  addr;
  as_status_t rc = sim_kernel_mmap(jm->kernel, block, huge, SIM_PROT_RW,
                                   SIM_OWNER_METADATA, &addr, err);
  if (rc != AS_OK)
    return rc;
  if ((rc = list_push(&b->blocks, &b->nblocks, &b->blocks_cap,
                      (je_base_free_t){addr, block, 0}, err)) != AS_OK)
    return rc;
  b->pind_last = je_psz2ind(jm, block);
  b->mapped += block;
  b->allocated += JE_SIZEOF_BLOCK;
  b->resident += ceil_to(JE_SIZEOF_BLOCK, jm->page);
  *out = (je_base_free_t){addr + JE_SIZEOF_BLOCK, block - JE_SIZEOF_BLOCK,
                          b->sn_next++};
  return base_touch(jm, addr, JE_SIZEOF_BLOCK, err); /* header written */
}

/* base_extent_bump_alloc (base.c:175-230): carve [aligned start, + usize)
 * off the front of free extent f; the rest goes back to avail. */
static as_status_t bump(jemalloc_model_t *jm, je_base_t *b, je_base_free_t f,
                        uint64_t usize, uint64_t alignment, bool touch,
                        sim_addr_t *out, as_err_t *err) {
  uint64_t gap = ceil_to(f.addr, alignment) - f.addr;
  uint64_t ret = f.addr + gap;
  uint64_t rest = f.size - gap - usize;
  if (rest > 0) {
    as_status_t rc = avail_push(b, ret + usize, rest, f.sn, err);
    if (rc != AS_OK)
      return rc;
  }
  b->allocated += usize;
  b->resident += ceil_to(ret + usize, jm->page) - ceil_to(f.addr, jm->page);
  *out = ret;
  return touch ? base_touch(jm, ret, usize, err) : AS_OK;
}

as_status_t je_base_alloc(jemalloc_model_t *jm, je_base_t *b, uint32_t ind,
                          uint64_t size, uint64_t alignment, bool touch,
                          sim_addr_t *out, as_err_t *err) {
  (void)ind;
  /* base_alloc_impl (base.c:435-476): the first free extent whose size
   * class (floor) is at least that of usize + alignment - QUANTUM, lowest
   * (sn, addr) within a class; else a new block. */
  alignment = ceil_to(alignment, (uint64_t)1 << JE_LG_QUANTUM);
  uint64_t usize = ceil_to(size, alignment);
  uint64_t asize = usize + alignment - ((uint64_t)1 << JE_LG_QUANTUM);
  unsigned need = je_size2index(jm, asize);
  int64_t  best = -1;
  unsigned best_i = 0;
  for (uint32_t k = 0; k < b->navail; k++) {
    unsigned i = index_floor(jm, b->avail[k].size);
    if (i < need)
      continue;
    const je_base_free_t *f = &b->avail[k],
                         *g = best >= 0 ? &b->avail[best] : NULL;
    if (best < 0 || i < best_i ||
        (i == best_i &&
         (f->sn < g->sn || (f->sn == g->sn && f->addr < g->addr)))) {
      best = k;
      best_i = i;
    }
  }
  je_base_free_t f;
  if (best >= 0) {
    f = b->avail[best];
    b->avail[best] = b->avail[--b->navail];
  } else {
    as_status_t rc = block_alloc(jm, b, usize, alignment, &f, err);
    if (rc != AS_OK)
      return rc;
  }
  return bump(jm, b, f, usize, alignment, touch, out, err);
}

void je_base_fini(je_base_t *b) {
  free(b->avail);
  free(b->blocks);
  b->avail = NULL;
  b->blocks = NULL;
}

as_status_t je_edata_get(jemalloc_model_t *jm, je_arena_t *a, as_err_t *err) {
  if (a->base.edata_avail > 0) {
    a->base.edata_avail--;
    return AS_OK;
  }
  /* base_alloc_edata (base.c:482-493): sizeof (edata_t) at EDATA_ALIGNMENT,
   * written by edata_init; in 5.2.1 base_alloc_extent (5.2.1 src/base.c:
   * 469-478), sizeof (extent_t) at CACHELINE. */
  sim_addr_t addr;
  return je_base_alloc(jm, &a->base, a->ind, jm->sizeof_edata, jm->edata_align,
                       true, &addr, err);
}

void je_edata_put(je_arena_t *a) {
  a->base.edata_avail++;
}

/* rtree_leaf_elm_lookup_hard (rtree.c:160-215) with init_missing: the leaf
 * for addr's 1 GiB is allocated from b0 on first use (rtree_leaf_alloc,
 * rtree.c:37-40, 78); then the 8-byte entries of the npages pages from addr
 * are written. */
as_status_t je_rtree_write(jemalloc_model_t *jm, uint64_t addr, uint64_t npages,
                           as_err_t *err) {
  unsigned shift = jm->lg_page + RTREE_LEAF_BITS;
  while (npages > 0) {
    uint64_t key = addr >> shift;
    uint32_t k;
    for (k = 0; k < jm->nleaves && jm->leaf_key[k] != key; k++)
      ;
    if (k == jm->nleaves) {
      if (jm->nleaves == jm->leaves_cap) {
        size_t    cap = jm->leaves_cap, cap2 = jm->leaves_cap;
        uint64_t *keys =
            as_grow(jm->leaf_key, &cap, (size_t)k + 1, sizeof *keys, 8);
        if (keys != NULL)
          jm->leaf_key = keys;
        sim_addr_t *addrs =
            as_grow(jm->leaf_addr, &cap2, (size_t)k + 1, sizeof *addrs, 8);
        if (keys == NULL || addrs == NULL)
          return as_err_set(err, AS_ENOMEM, "jemalloc: out of memory (rtree)");
        jm->leaf_addr = addrs;
        jm->leaves_cap = (uint32_t)cap;
      }
      sim_addr_t  leaf;
      as_status_t rc =
          je_base_alloc(jm, &jm->arenas[0]->base, 0,
                        (UINT64_C(1) << RTREE_LEAF_BITS) * RTREE_LEAF_ELM,
                        JE_CACHELINE, false, &leaf, err);
      if (rc != AS_OK)
        return rc;
      jm->leaf_key[k] = key;
      jm->leaf_addr[k] = leaf;
      jm->nleaves++;
    }
    uint64_t first =
        (addr >> jm->lg_page) & ((UINT64_C(1) << RTREE_LEAF_BITS) - 1);
    uint64_t    room = (UINT64_C(1) << RTREE_LEAF_BITS) - first;
    uint64_t    n = npages < room ? npages : room;
    as_status_t rc = base_touch(jm, jm->leaf_addr[k] + first * RTREE_LEAF_ELM,
                                n * RTREE_LEAF_ELM, err);
    if (rc != AS_OK)
      return rc;
    npages -= n;
    addr += n << jm->lg_page;
  }
  return AS_OK;
}
