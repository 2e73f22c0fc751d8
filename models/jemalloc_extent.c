/* models/jemalloc_extent.c -- the page level of the jemalloc 5.3.0 model:
 * extents and their caches (pac: src/pac.c, src/extent.c, src/eset.c,
 * src/emap.c), decay (src/decay.c, the decay parts of src/arena.c) and
 * background threads (src/background_thread.c).
 *
 * Extents.  Every run of pages an arena owns is an extent record: active
 * (a slab or a large object) or inactive in one of three ecaches -- dirty
 * (freed, pages still resident), muzzy (MADV_FREE'd; only when
 * muzzy_decay_ms != 0) and retained (purged with MADV_DONTNEED, address
 * space kept because opt.retain).  Allocation takes the first fit by (serial
 * number, address) from dirty, then muzzy, then retained, then maps more
 * retained address space in growing steps (2 MiB, then each page-size
 * class up: exp_grow).  Frees go to dirty; a free extent of 16 KiB or more
 * merges with free neighbours at once, smaller ones only when purging picks
 * them.  Purging walks dirty oldest-first (LRU).
 *
 * Decay.  Without background threads, purging happens only inside
 * "ticks" (about one arena operation in 1000 per thread, tcache hits not
 * counted) and only when the decay epoch (decay_ms / 200) has advanced:
 * the pages recorded at epoch advances decay along a 200-step smootherstep
 * curve.  Time is the engine's clock (ev->t_ns); an idle program never
 * ticks, so it never purges.  With background_thread:true, worker threads
 * (engine timers) advance the epochs and purge instead, sleeping at least
 * 100 ms or until the next purge worth doing.
 *
 * Left out: guard pages (san, off by default: opt.san_guard_* 0), the HPA
 * and SEC (opt.hpa false), dss (never used with retain on Linux), lock
 * contention (a replay has none: every trylock succeeds), and the extent
 * hooks API.
 */
#include "jemalloc_internal.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/grow.h"
#include "../sim/reserve.h"

#define E(jm, e) (&(jm)->ext[(e)])

/* ---- Heaps ordered by (sn, addr) ---------------------------------------- */

int je_snad_cmp(const jemalloc_model_t *jm, uint32_t a, uint32_t b) {
  const je_ext_t *x = E(jm, a), *y = E(jm, b);
  if (x->sn != y->sn)
    return x->sn < y->sn ? -1 : 1;
  return (x->addr > y->addr) - (x->addr < y->addr);
}

static void heap_place(jemalloc_model_t *jm, je_heap_t *h, uint32_t i,
                       uint32_t e) {
  h->a[i] = e;
  E(jm, e)->heap_pos = i;
}

static void heap_up(jemalloc_model_t *jm, je_heap_t *h, uint32_t i) {
  uint32_t e = h->a[i];
  while (i > 0) {
    uint32_t p = (i - 1) / 2;
    if (je_snad_cmp(jm, e, h->a[p]) >= 0)
      break;
    heap_place(jm, h, i, h->a[p]);
    i = p;
  }
  heap_place(jm, h, i, e);
}

static void heap_down(jemalloc_model_t *jm, je_heap_t *h, uint32_t i) {
  uint32_t e = h->a[i];
  for (;;) {
    uint32_t c = 2 * i + 1;
    if (c >= h->n)
      break;
    if (c + 1 < h->n && je_snad_cmp(jm, h->a[c + 1], h->a[c]) < 0)
      c++;
    if (je_snad_cmp(jm, h->a[c], e) >= 0)
      break;
    heap_place(jm, h, i, h->a[c]);
    i = c;
  }
  heap_place(jm, h, i, e);
}

as_status_t je_heap_insert(jemalloc_model_t *jm, je_heap_t *h, uint32_t e,
                           as_err_t *err) {
  if (h->n == h->cap) {
    size_t    cap = h->cap;
    uint32_t *a = as_grow(h->a, &cap, (size_t)h->n + 1, sizeof *a, 4);
    if (a == NULL || cap > UINT32_MAX)
      return as_err_set(err, AS_ENOMEM, "jemalloc: out of memory for heaps");
    h->a = a;
    h->cap = (uint32_t)cap;
  }
  h->a[h->n] = e;
  heap_up(jm, h, h->n++);
  return AS_OK;
}

void je_heap_remove(jemalloc_model_t *jm, je_heap_t *h, uint32_t e) {
  uint32_t i = E(jm, e)->heap_pos;
  E(jm, e)->heap_pos = JE_NO_POS;
  uint32_t last = h->a[--h->n];
  if (i == h->n)
    return;
  heap_place(jm, h, i, last);
  if (i > 0 && je_snad_cmp(jm, last, h->a[(i - 1) / 2]) < 0)
    heap_up(jm, h, i);
  else
    heap_down(jm, h, i);
}

uint32_t je_heap_first(const je_heap_t *h) {
  return h->n ? h->a[0] : JE_NONE;
}

void je_heap_fini(je_heap_t *h) {
  free(h->a);
  h->a = NULL;
  h->n = h->cap = 0;
}

/* ---- Page-size quantization (src/sz.c:9-54) ----------------------------- */

static uint64_t quantize_floor(const jemalloc_model_t *jm, uint64_t size) {
  unsigned pind = je_psz2ind(jm, size - jm->large_pad + 1);
  if (pind == 0)
    return size;
  return jm->pind2sz[pind - 1] + jm->large_pad;
}

static uint64_t quantize_ceil(const jemalloc_model_t *jm, uint64_t size) {
  uint64_t ret = quantize_floor(jm, size);
  if (ret < size)
    ret = jm->pind2sz[je_psz2ind(jm, ret - jm->large_pad + 1)] + jm->large_pad;
  return ret;
}

/* ---- eset (src/eset.c) -------------------------------------------------- */

as_status_t je_eset_init(jemalloc_model_t *jm, je_eset_t *s, je_state_t st,
                         bool delay_coalesce, as_err_t *err) {
  memset(s, 0, sizeof *s);
  s->bins = calloc((size_t)jm->npsizes + 1, sizeof *s->bins);
  s->nonempty = calloc(((size_t)jm->npsizes + 1 + 63) / 64, sizeof(uint64_t));
  if (s->bins == NULL || s->nonempty == NULL)
    return as_err_set(err, AS_ENOMEM, "jemalloc: out of memory for ecaches");
  s->state = (uint8_t)st;
  s->delay_coalesce = delay_coalesce;
  s->lru_head = s->lru_tail = JE_NONE;
  return AS_OK;
}

void je_eset_fini(jemalloc_model_t *jm, je_eset_t *s) {
  if (s->bins != NULL)
    for (unsigned i = 0; i <= jm->npsizes; i++)
      je_heap_fini(&s->bins[i]);
  free(s->bins);
  free(s->nonempty);
  s->bins = NULL;
  s->nonempty = NULL;
}

/* eset_insert (eset.c:71-111): by quantize_floor's size class, appended to
 * the LRU. */
static as_status_t eset_insert(jemalloc_model_t *jm, je_eset_t *s, uint32_t e,
                               as_err_t *err) {
  je_ext_t *x = E(jm, e);
  x->state = s->state;
  unsigned    pind = je_psz2ind(jm, quantize_floor(jm, x->size));
  as_status_t rc = je_heap_insert(jm, &s->bins[pind], e, err);
  if (rc != AS_OK)
    return rc;
  x = E(jm, e);
  s->nonempty[pind / 64] |= UINT64_C(1) << (pind % 64);
  x->lru_next = JE_NONE;
  x->lru_prev = s->lru_tail;
  if (s->lru_tail != JE_NONE)
    E(jm, s->lru_tail)->lru_next = e;
  else
    s->lru_head = e;
  s->lru_tail = e;
  s->npages += x->size >> jm->lg_page;
  s->nextents++;
  return AS_OK;
}

/* eset_remove (eset.c:113-156). */
static void eset_remove(jemalloc_model_t *jm, je_eset_t *s, uint32_t e) {
  je_ext_t *x = E(jm, e);
  unsigned  pind = je_psz2ind(jm, quantize_floor(jm, x->size));
  je_heap_remove(jm, &s->bins[pind], e);
  if (s->bins[pind].n == 0)
    s->nonempty[pind / 64] &= ~(UINT64_C(1) << (pind % 64));
  if (x->lru_prev != JE_NONE)
    E(jm, x->lru_prev)->lru_next = x->lru_next;
  else
    s->lru_head = x->lru_next;
  if (x->lru_next != JE_NONE)
    E(jm, x->lru_next)->lru_prev = x->lru_prev;
  else
    s->lru_tail = x->lru_prev;
  x->lru_prev = x->lru_next = JE_NONE;
  s->npages -= x->size >> jm->lg_page;
  s->nextents--;
}

/* The first non-empty bin at or after i (fb_ffs), or npsizes + 1. */
static unsigned eset_next_bin(const jemalloc_model_t *jm, const je_eset_t *s,
                              unsigned i) {
  unsigned nbits = jm->npsizes + 1;
  while (i < nbits) {
    uint64_t w = s->nonempty[i / 64] >> (i % 64);
    if (w != 0) {
      i += (unsigned)__builtin_ctzll(w);
      return i < nbits ? i : nbits;
    }
    i = (i / 64 + 1) * 64;
  }
  return nbits;
}

/* eset_first_fit (eset.c:205-259): the oldest/lowest extent among the bins
 * that fit, stopping at bins more than 2^lg_max_fit times the request. */
static uint32_t eset_first_fit(const jemalloc_model_t *jm, const je_eset_t *s,
                               uint64_t size, unsigned lg_max_fit) {
  uint32_t ret = JE_NONE;
  unsigned pind = je_psz2ind(jm, quantize_ceil(jm, size));
  if (lg_max_fit >= 64)
    lg_max_fit = 63;
  for (unsigned i = eset_next_bin(jm, s, pind); i <= jm->npsizes;
       i = eset_next_bin(jm, s, i + 1)) {
    if ((jm->pind2sz[i] >> lg_max_fit) > size)
      break;
    uint32_t first = je_heap_first(&s->bins[i]);
    if (ret == JE_NONE || je_snad_cmp(jm, first, ret) < 0)
      ret = first;
    if (i == jm->npsizes)
      break;
  }
  return ret;
}

/* eset_fit_alignment (eset.c:162-193). */
static uint32_t eset_fit_alignment(const jemalloc_model_t *jm,
                                   const je_eset_t *s, uint64_t min_size,
                                   uint64_t max_size, uint64_t alignment) {
  unsigned pind = je_psz2ind(jm, quantize_ceil(jm, min_size));
  unsigned pind_max = je_psz2ind(jm, quantize_ceil(jm, max_size));
  uint64_t align = (alignment + jm->page - 1) & ~(jm->page - 1);
  for (unsigned i = eset_next_bin(jm, s, pind); i < pind_max;
       i = eset_next_bin(jm, s, i + 1)) {
    uint32_t        e = je_heap_first(&s->bins[i]);
    const je_ext_t *x = E(jm, e);
    uint64_t        next = (x->addr + align - 1) & ~(align - 1);
    if (x->addr > next || x->addr + x->size <= next)
      continue;
    if (x->size - (next - x->addr) >= min_size)
      return e;
  }
  return JE_NONE;
}

/* eset_fit (eset.c:261-282). */
static uint32_t eset_fit(const jemalloc_model_t *jm, const je_eset_t *s,
                         uint64_t esize, uint64_t alignment,
                         unsigned lg_max_fit) {
  uint64_t palign = (alignment + jm->page - 1) & ~(jm->page - 1);
  uint64_t max_size = esize + palign - jm->page;
  uint32_t e = eset_first_fit(jm, s, max_size, lg_max_fit);
  if (alignment > jm->page && e == JE_NONE)
    e = eset_fit_alignment(jm, s, esize, max_size, alignment);
  return e;
}

/* ---- emap: boundary pages -> extent (src/emap.c) ------------------------ */

#define EMAP_LEAF_MASK ((UINT64_C(1) << JE_EMAP_LEAF_BITS) - 1)
#define EMAP_MID_MASK  ((UINT64_C(1) << JE_EMAP_MID_BITS) - 1)
#define EMAP_TOP_SHIFT (JE_EMAP_LEAF_BITS + JE_EMAP_MID_BITS)

/* The leaf holding page's entry, NULL if none was made. */
static uint32_t *emap_leaf(const je_emap_t *m, uint64_t page) {
  uint64_t t = page >> EMAP_TOP_SHIFT;
  if (m->top == NULL || t >= m->ntop || m->top[t] == NULL)
    return NULL;
  return m->top[t]->leaf[(page >> JE_EMAP_LEAF_BITS) & EMAP_MID_MASK];
}

/* The leaf holding page's entry, made (with the nodes above it) if need
 * be; NULL when out of memory. */
static uint32_t *emap_leaf_made(jemalloc_model_t *jm, uint64_t page) {
  je_emap_t *m = &jm->emap;
  if (m->top == NULL) {
    /* every page number below 2^SIM_KERNEL_TASK_SIZE_BITS / page */
    unsigned bits = SIM_KERNEL_TASK_SIZE_BITS - jm->lg_page;
    m->ntop =
        bits > EMAP_TOP_SHIFT ? UINT64_C(1) << (bits - EMAP_TOP_SHIFT) : 1;
    if ((m->top = calloc(m->ntop, sizeof *m->top)) == NULL)
      return NULL;
  }
  uint64_t t = page >> EMAP_TOP_SHIFT;
  assert(t < m->ntop);
  if (m->top[t] == NULL && (m->top[t] = calloc(1, sizeof *m->top[t])) == NULL)
    return NULL;
  uint32_t **leaf =
      &m->top[t]->leaf[(page >> JE_EMAP_LEAF_BITS) & EMAP_MID_MASK];
  if (*leaf == NULL)
    *leaf = calloc(EMAP_LEAF_MASK + 1, sizeof **leaf);
  return *leaf;
}

static as_status_t emap_set(jemalloc_model_t *jm, uint64_t page, uint32_t e,
                            as_err_t *err) {
  uint32_t *leaf = emap_leaf_made(jm, page);
  if (leaf == NULL)
    return as_err_set(err, AS_ENOMEM, "jemalloc: out of memory for the emap");
  leaf[page & EMAP_LEAF_MASK] = e;
  return AS_OK;
}

static uint32_t emap_get(const jemalloc_model_t *jm, uint64_t page) {
  const uint32_t *leaf = emap_leaf(&jm->emap, page);
  return leaf != NULL ? leaf[page & EMAP_LEAF_MASK] : JE_NONE;
}

static void emap_del(jemalloc_model_t *jm, uint64_t page) {
  uint32_t *leaf = emap_leaf(&jm->emap, page);
  if (leaf != NULL)
    leaf[page & EMAP_LEAF_MASK] = JE_NONE;
}

void je_emap_free(je_emap_t *m) {
  for (uint64_t t = 0; m->top != NULL && t < m->ntop; t++) {
    if (m->top[t] == NULL)
      continue;
    for (size_t i = 0; i <= EMAP_MID_MASK; i++)
      free(m->top[t]->leaf[i]);
    free(m->top[t]);
  }
  free(m->top);
  m->top = NULL;
}

/* emap_register_boundary (emap.c:158-177): the first and last page. */
static as_status_t emap_register(jemalloc_model_t *jm, uint32_t e,
                                 as_err_t *err) {
  const je_ext_t *x = E(jm, e);
  uint64_t        first = x->addr >> jm->lg_page;
  uint64_t        last = (x->addr + x->size - 1) >> jm->lg_page;
  as_status_t     rc = emap_set(jm, first, e, err);
  if (rc == AS_OK && last != first)
    rc = emap_set(jm, last, e, err);
  if (rc == AS_OK)
    rc = je_rtree_write(jm, x->addr, 1, err);
  if (rc == AS_OK && last != first)
    rc = je_rtree_write(jm, x->addr + x->size - jm->page, 1, err);
  return rc;
}

static void emap_deregister(jemalloc_model_t *jm, uint32_t e) {
  const je_ext_t *x = E(jm, e);
  uint64_t        first = x->addr >> jm->lg_page;
  uint64_t        last = (x->addr + x->size - 1) >> jm->lg_page;
  emap_del(jm, first);
  if (last != first)
    emap_del(jm, last);
}

/* ---- Extent records ------------------------------------------------------ */

/* A new record with an edata_t from the arena's edata_cache (or base). */
static as_status_t ext_new(jemalloc_model_t *jm, je_arena_t *a, uint64_t addr,
                           uint64_t size, uint64_t sn, bool is_head,
                           bool zeroed, uint32_t *out, as_err_t *err) {
  as_status_t rc = je_edata_get(jm, a, err);
  if (rc != AS_OK)
    return rc;
  uint32_t e = jm->ext_free;
  if (e != JE_NONE) {
    jm->ext_free = E(jm, e)->next_free;
  } else {
    if (jm->next_ext == UINT32_MAX ||
        !sim_idtable_reach(&jm->ext_tab, jm->next_ext) ||
        (jm->next_ext >= jm->narrow_exts && jm->obj_bytes < sizeof(je_obj_t) &&
         !je_widen_objs(jm)))
      return as_err_set(err, AS_ENOMEM, "jemalloc: out of memory for extents");
    e = jm->next_ext++;
  }
  je_ext_t *x = E(jm, e);
  memset(x, 0, sizeof *x);
  x->addr = addr;
  x->size = size;
  x->sn = sn;
  x->arena = (uint16_t)a->ind;
  x->state = JE_ACTIVE;
  x->is_head = is_head;
  x->zeroed = zeroed;
  x->heap_pos = JE_NO_POS;
  x->binind = UINT8_MAX;
  jm->nrecords++;
  *out = e;
  return AS_OK;
}

static void ext_release(jemalloc_model_t *jm, uint32_t e) {
  je_edata_put(jm->arenas[E(jm, e)->arena]);
  E(jm, e)->next_free = jm->ext_free;
  E(jm, e)->state = UINT8_MAX;
  jm->ext_free = e;
  jm->nrecords--;
}

/* extent_split_impl (extent.c:1174-1233): e keeps size_a; the trail gets a
 * new record with e's sn, state and zeroed, never a head. */
static as_status_t ext_split(jemalloc_model_t *jm, uint32_t e, uint64_t size_a,
                             uint32_t *trail, as_err_t *err) {
  je_ext_t   *x = E(jm, e);
  je_arena_t *a = jm->arenas[x->arena];
  uint64_t    addr = x->addr + size_a, size_b = x->size - size_a;
  uint64_t    sn = x->sn;
  bool        zeroed = x->zeroed;
  uint8_t     state = x->state;
  *trail = JE_NONE;
  emap_deregister(jm, e);
  as_status_t rc = ext_new(jm, a, addr, size_b, sn, false, zeroed, trail, err);
  if (rc != AS_OK)
    return rc;
  E(jm, *trail)->state = state;
  E(jm, e)->size = size_a;
  E(jm, e)->rt_slab = 0; /* extent_split_impl rewrites both (5.2.1 src/
                            extent.c:2156-2159); a slab's are set after */
  rc = emap_register(jm, e, err);
  if (rc == AS_OK)
    rc = emap_register(jm, *trail, err);
  return rc;
}

/* extent_merge_impl (extent.c:1242-1289): a absorbs the following b. */
static as_status_t ext_merge(jemalloc_model_t *jm, uint32_t a, uint32_t b,
                             as_err_t *err) {
  emap_deregister(jm, a);
  emap_deregister(jm, b);
  je_ext_t *x = E(jm, a), *y = E(jm, b);
  x->size += y->size;
  if (y->sn < x->sn)
    x->sn = y->sn;
  x->zeroed = x->zeroed && y->zeroed;
  x->rt_slab = 0; /* extent_merge_impl (5.2.1 src/extent.c:2302) */
  ext_release(jm, b);
  return emap_register(jm, a, err);
}

/* extent_can_acquire_neighbor (include/.../extent.h:84-135) with the head
 * rule (:63-82): the neighbour in state st that e may merge with, forward
 * (the extent starting where e ends) or backward.  5.2.1's eager
 * coalescing of large dirty extents (extent_try_coalesce_large, 5.2.1
 * src/extent.c:1680-1684: inactive_only) skips a neighbour whose facing
 * rtree entry says slab (extent_rtree_leaf_elm_try_lock, :130-156): a
 * freed slab keeps that bit (extent_record only deregisters its interior,
 * :1704-1708). */
static uint32_t neighbor(const jemalloc_model_t *jm, uint32_t e, uint8_t st,
                         bool forward, bool inactive_only) {
  const je_ext_t *x = E(jm, e);
  uint64_t        page;
  if (forward) {
    page = (x->addr + x->size) >> jm->lg_page;
  } else {
    if (x->addr < jm->page)
      return JE_NONE;
    page = (x->addr >> jm->lg_page) - 1;
  }
  uint32_t n = emap_get(jm, page);
  if (n == JE_NONE)
    return JE_NONE;
  const je_ext_t *y = E(jm, n);
  /* 5.2.1 applies the head rule only where mappings cannot coalesce
   * (extent_head_no_merge, 5.2.1 src/extent.c:2196-2222: false when
   * maps_coalesce, as on Linux): extents of different mappings merge */
  if (jm->version != JE_V521 && (forward ? y->is_head : x->is_head))
    return JE_NONE;
  if (jm->version == JE_V521 && inactive_only &&
      (y->rt_slab & (forward ? JE_RT_FIRST : JE_RT_LAST)))
    return JE_NONE;
  if (y->state != st || y->arena != x->arena)
    return JE_NONE;
  /* The page must be y's boundary on the side facing e. */
  if (forward ? y->addr != x->addr + x->size : y->addr + y->size != x->addr)
    return JE_NONE;
  return n;
}

/* ---- Ecaches of an arena ------------------------------------------------- */

/* extent_try_coalesce_impl (extent.c:820-873): merge with free neighbours
 * of the ecache's state; with delayed coalescing, stop after one merge
 * (*coalesced says whether one happened). */
static as_status_t try_coalesce(jemalloc_model_t *jm, je_eset_t *s, uint32_t *e,
                                bool *coalesced, bool inactive_only,
                                as_err_t *err) {
  bool again;
  if (coalesced != NULL)
    *coalesced = false;
  do {
    again = false;
    uint32_t next = neighbor(jm, *e, s->state, true, inactive_only);
    if (next != JE_NONE) {
      eset_remove(jm, s, next);
      as_status_t rc = ext_merge(jm, *e, next, err);
      if (rc != AS_OK)
        return rc;
      if (s->delay_coalesce) {
        *coalesced = true;
        return AS_OK;
      }
      again = true;
    }
    uint32_t prev = neighbor(jm, *e, s->state, false, inactive_only);
    if (prev != JE_NONE) {
      eset_remove(jm, s, prev);
      as_status_t rc = ext_merge(jm, prev, *e, err);
      if (rc != AS_OK)
        return rc;
      *e = prev;
      if (s->delay_coalesce) {
        *coalesced = true;
        return AS_OK;
      }
      again = true;
    }
  } while (again);
  return AS_OK;
}

static as_status_t dalloc_wrapper(jemalloc_model_t *jm, je_arena_t *a,
                                  uint32_t e, as_err_t *err);

/* extent_maximally_purge (extent.c:890-908). */
static as_status_t maximally_purge(jemalloc_model_t *jm, je_arena_t *a,
                                   uint32_t e, as_err_t *err) {
  uint64_t    size = E(jm, e)->size;
  as_status_t rc = dalloc_wrapper(jm, a, e, err);
  a->decay_dirty.nmadvise++;
  a->decay_dirty.purged += size >> jm->lg_page;
  a->pac_mapped -= size;
  return rc;
}

/* extent_record (extent.c:914-954): into ecache s, coalescing as that
 * ecache does; a dirty extent that grows to oversize_threshold is purged
 * at once unless a decay is -1 (extent_may_force_decay :54-58). */
static as_status_t ext_record(jemalloc_model_t *jm, je_arena_t *a, je_eset_t *s,
                              uint32_t e, as_err_t *err) {
  as_status_t rc = AS_OK;
  if (!s->delay_coalesce) {
    rc = try_coalesce(jm, s, &e, NULL, false, err);
  } else if (E(jm, e)->size >= jm->large_minclass) {
    bool coalesced;
    do
      rc = try_coalesce(jm, s, &e, &coalesced, true, err);
    while (rc == AS_OK && coalesced);
    /* extent_may_force_decay: not with a decay of -1; 5.2.1 purges
     * whatever the decay (5.2.1 src/extent.c:1726-1731) */
    bool may_force = jm->version == JE_V521 ||
                     (a->decay_dirty.ms != -1 && a->decay_muzzy.ms != -1);
    if (rc == AS_OK && E(jm, e)->size >= jm->oversize_threshold && may_force)
      return maximally_purge(jm, a, e, err);
  }
  return rc == AS_OK ? eset_insert(jm, s, e, err) : rc;
}

/* extent_dalloc_wrapper (extent.c:1028-1077): with retain the mapping
 * stays -- decommit fails on an overcommitting kernel (pages.c:348-364), so
 * the pages are purged with MADV_DONTNEED (pages_purge_forced, pages.c:465-
 * 484) and the extent joins retained; without retain it is unmapped. */
static as_status_t dalloc_wrapper(jemalloc_model_t *jm, je_arena_t *a,
                                  uint32_t e, as_err_t *err) {
  je_ext_t   *x = E(jm, e);
  as_status_t rc;
  if (!jm->retain) {
    emap_deregister(jm, e);
    rc = sim_kernel_munmap(jm->kernel, x->addr, x->size, err);
    ext_release(jm, e);
    return rc;
  }
  rc = sim_kernel_madvise(jm->kernel, x->addr, x->size, SIM_MADV_DONTNEED, err);
  if (rc != AS_OK)
    return rc;
  E(jm, e)->zeroed = true;
  return ext_record(jm, a, &a->retained, e, err);
}

/* ---- Allocation from the ecaches ---------------------------------------- */

/* extent_split_interior + extent_recycle_split (extent.c:476-594): cut e
 * to [aligned start, + size); lead and trail go back to s without
 * coalescing (extent_deactivate_locked), or into retained after a grow. */
static as_status_t split_interior(jemalloc_model_t *jm, je_arena_t *a,
                                  je_eset_t *s, bool grown, uint32_t *e,
                                  uint64_t size, uint64_t alignment,
                                  as_err_t *err) {
  uint64_t    palign = (alignment + jm->page - 1) & ~(jm->page - 1);
  je_ext_t   *x = E(jm, *e);
  uint64_t    lead = ((x->addr + palign - 1) & ~(palign - 1)) - x->addr;
  uint64_t    trail = x->size - lead - size;
  uint32_t    lead_e = JE_NONE, trail_e = JE_NONE;
  as_status_t rc = AS_OK;
  if (lead != 0) {
    lead_e = *e;
    rc = ext_split(jm, lead_e, lead, e, err);
  }
  if (rc == AS_OK && trail != 0)
    rc = ext_split(jm, *e, size, &trail_e, err);
  if (rc != AS_OK)
    return rc;
  jm->split_done = lead != 0 || trail != 0;
  if (grown) { /* extent_grow_retained :705-712: extent_record */
    if (lead_e != JE_NONE)
      rc = ext_record(jm, a, s, lead_e, err);
    if (rc == AS_OK && trail_e != JE_NONE)
      rc = ext_record(jm, a, s, trail_e, err);
  } else {
    if (lead_e != JE_NONE)
      rc = eset_insert(jm, s, lead_e, err);
    if (rc == AS_OK && trail_e != JE_NONE)
      rc = eset_insert(jm, s, trail_e, err);
  }
  return rc;
}

/* ehooks_zero for the default hooks (ehooks.c:231-245): opt.thp is not
 * "always", so a recycled extent is zeroed by MADV_DONTNEED. */
static as_status_t zero_extent(jemalloc_model_t *jm, uint32_t e,
                               as_err_t *err) {
  je_ext_t *x = E(jm, e);
  if (x->zeroed)
    return AS_OK;
  x->zeroed = true;
  return sim_kernel_madvise(jm->kernel, x->addr, x->size, SIM_MADV_DONTNEED,
                            err);
}

/* extent_recycle (extent.c:596-642) without an expand target: the first
 * fit of s (dirty: no more than 64 times the request, extent.c:425-427,
 * LG_EXTENT_MAX_ACTIVE_FIT_DEFAULT 6), split to size. */
static as_status_t recycle(jemalloc_model_t *jm, je_arena_t *a, je_eset_t *s,
                           uint64_t size, uint64_t alignment, bool zero,
                           uint32_t *out, as_err_t *err) {
  *out = JE_NONE;
  uint32_t e = eset_fit(jm, s, size, alignment, s->delay_coalesce ? 6 : 64);
  if (e == JE_NONE)
    return AS_OK;
  eset_remove(jm, s, e);
  E(jm, e)->state = JE_ACTIVE;
  as_status_t rc = split_interior(jm, a, s, false, &e, size, alignment, err);
  if (rc == AS_OK && zero)
    rc = zero_extent(jm, e, err);
  if (rc == AS_OK)
    *out = e;
  return rc;
}

/* extent_grow_retained (extent.c:644-772): map the next size of the
 * exp_grow series that holds the request, keep the rest as retained. */
static as_status_t grow_retained(jemalloc_model_t *jm, je_arena_t *a,
                                 uint64_t size, uint64_t alignment,
                                 uint32_t *out, as_err_t *err) {
  *out = JE_NONE;
  uint64_t palign = (alignment + jm->page - 1) & ~(jm->page - 1);
  uint64_t min = size + palign - jm->page;
  unsigned skip = 0, limit_ind = je_psz2ind(jm, jm->large_maxclass);
  /* exp_grow_size_prepare (exp_grow.h:23-38) */
  while (jm->pind2sz[a->exp_next + skip] < min) {
    skip++;
    if (a->exp_next + skip >= limit_ind)
      return AS_OK;
  }
  uint64_t    alloc_size = jm->pind2sz[a->exp_next + skip];
  sim_addr_t  addr;
  as_status_t rc = sim_kernel_mmap(jm->kernel, alloc_size, jm->page,
                                   SIM_PROT_RW, SIM_OWNER_JEMALLOC, &addr, err);
  uint32_t    e = JE_NONE;
  if (rc == AS_OK)
    rc = ext_new(jm, a, addr, alloc_size, a->sn_next++, true, true, &e, err);
  if (rc == AS_OK)
    rc = emap_register(jm, e, err);
  if (rc == AS_OK)
    rc = split_interior(jm, a, &a->retained, true, &e, size, alignment, err);
  if (rc != AS_OK)
    return rc;
  /* exp_grow_size_commit (exp_grow.h:40-47) */
  a->exp_next = a->exp_next + skip + 1 <= a->exp_limit ? a->exp_next + skip + 1
                                                       : a->exp_limit;
  *out = e;
  return AS_OK;
}

/* extent_alloc_wrapper (extent.c:992-1026) for retain:false: a mapping of
 * its own, a head only under retain. */
static as_status_t alloc_wrapper(jemalloc_model_t *jm, je_arena_t *a,
                                 uint64_t size, uint64_t alignment,
                                 uint32_t *out, as_err_t *err) {
  uint64_t    palign = (alignment + jm->page - 1) & ~(jm->page - 1);
  sim_addr_t  addr;
  as_status_t rc = sim_kernel_mmap(jm->kernel, size, palign, SIM_PROT_RW,
                                   SIM_OWNER_JEMALLOC, &addr, err);
  if (rc == AS_OK)
    rc = ext_new(jm, a, addr, size, a->sn_next++, jm->retain, true, out, err);
  if (rc == AS_OK)
    rc = emap_register(jm, *out, err);
  jm->split_done = true; /* extent_register writes both ends */
  return rc;
}

/* The slab bits 5.2.1 writes into the rtree for extent e just allocated:
 * both ends after a split or registration; without a split only the
 * first page, and the last for a slab of more than one page
 * (extent_split_interior, 5.2.1 src/extent.c:1028-1044). */
static void rtree_slab_bits(jemalloc_model_t *jm, uint32_t e, bool slab) {
  je_ext_t *x = E(jm, e);
  uint8_t   last = x->rt_slab & JE_RT_LAST;
  if (jm->split_done || (slab && x->size > jm->page))
    last = slab ? JE_RT_LAST : 0;
  else if (x->size == jm->page) /* one page: one entry */
    last = slab ? JE_RT_LAST : 0;
  x->rt_slab = (uint8_t)((slab ? JE_RT_FIRST : 0) | last);
}

as_status_t je_pa_alloc(jemalloc_model_t *jm, je_arena_t *a, uint64_t size,
                        uint64_t alignment, bool slab, bool zero, uint32_t *out,
                        as_err_t *err) {
  /* pac_alloc_real (pac.c:111-134) */
  jm->split_done = false;
  as_status_t rc = recycle(jm, a, &a->dirty, size, alignment, zero, out, err);
  if (rc == AS_OK && *out == JE_NONE && a->decay_muzzy.ms != 0)
    rc = recycle(jm, a, &a->muzzy, size, alignment, zero, out, err);
  if (rc == AS_OK && *out == JE_NONE) {
    /* ecache_alloc_grow (extent.c:95-134) -> extent_alloc_retained
     * (:774-801): reuse retained, else grow (retain) or map anew. */
    rc = recycle(jm, a, &a->retained, size, alignment, zero, out, err);
    if (rc == AS_OK && *out == JE_NONE)
      rc = jm->retain ? grow_retained(jm, a, size, alignment, out, err)
                      : alloc_wrapper(jm, a, size, alignment, out, err);
    if (rc == AS_OK && *out != JE_NONE)
      a->pac_mapped += size;
  }
  if (rc != AS_OK)
    return rc;
  if (*out == JE_NONE)
    return as_err_set(
        err, AS_ENOMEM,
        "jemalloc: no extent of %" PRIu64 " bytes (exp_grow limit)", size);
  a->nactive += size >> jm->lg_page;
  rtree_slab_bits(jm, *out, slab);
  /* pa.c:148-150 emap_register_interior: every page of a slab over two
   * pages gets an rtree entry. */
  if (slab && size > 2 * jm->page)
    rc = je_rtree_write(jm, E(jm, *out)->addr, size >> jm->lg_page, err);
  return rc;
}

as_status_t je_pa_dalloc(jemalloc_model_t *jm, je_arena_t *a, uint32_t e,
                         as_err_t *err) {
  je_ext_t *x = E(jm, e);
  a->nactive -= x->size >> jm->lg_page;
  x->slab = 0;
  x->binind = UINT8_MAX;
  x->offset = 0;
  x->zeroed = false; /* ecache_dalloc (extent.c:136-149) */
  as_status_t rc = ext_record(jm, a, &a->dirty, e, err);
  if (rc != AS_OK)
    return rc;
  /* arena_handle_deferred_work (arena.c:216-224) */
  if (a->decay_dirty.ms == 0) {
    rc = je_arena_decay(jm, a, false, true, err);
    if (rc != AS_OK)
      return rc;
  }
  return AS_OK; /* the background-thread wakeup: je_arena_decay's caller */
}

/* The neighbour after e in eset s, with at least need bytes
 * (emap_try_acquire_edata_neighbor_expand, emap.c:104-110), split to need:
 * extent_recycle with expand_edata. */
static as_status_t recycle_expand(jemalloc_model_t *jm, je_arena_t *a,
                                  je_eset_t *s, uint32_t e, uint64_t need,
                                  bool zero, uint32_t *out, as_err_t *err) {
  *out = JE_NONE;
  uint32_t n = neighbor(jm, e, s->state, true, false);
  if (n == JE_NONE || E(jm, n)->size < need)
    return AS_OK;
  eset_remove(jm, s, n);
  E(jm, n)->state = JE_ACTIVE;
  as_status_t rc = split_interior(jm, a, s, false, &n, need, jm->page, err);
  if (rc == AS_OK && zero)
    rc = zero_extent(jm, n, err);
  if (rc == AS_OK)
    *out = n;
  return rc;
}

/* extent_alloc_wrapper with new_addr (extent.c:127-131, 992-1026) for
 * retain:false: a mapping right after e if the kernel takes the hint
 * (os_pages_map, pages.c:112-163, unmaps a mapping placed elsewhere). */
static as_status_t map_after(jemalloc_model_t *jm, je_arena_t *a, uint32_t e,
                             uint64_t size, uint32_t *out, as_err_t *err) {
  *out = JE_NONE;
  sim_addr_t  want = E(jm, e)->addr + E(jm, e)->size, got;
  as_status_t rc = sim_kernel_mmap_hint(jm->kernel, want, size, SIM_PROT_RW,
                                        SIM_OWNER_JEMALLOC, &got, err);
  if (rc != AS_OK)
    return rc;
  if (got != want)
    return sim_kernel_munmap(jm->kernel, got, size, err);
  rc = ext_new(jm, a, got, size, a->sn_next++, false, true, out, err);
  return rc == AS_OK ? emap_register(jm, *out, err) : rc;
}

as_status_t je_pa_expand(jemalloc_model_t *jm, je_arena_t *a, uint32_t e,
                         uint64_t new_size, bool zero, bool *done,
                         as_err_t *err) {
  /* pac_expand_impl (pac.c:191-226): dirty, muzzy, then retained; with
   * retain no new mapping is tried (extent.c:112-121). */
  uint64_t    amount = new_size - E(jm, e)->size;
  uint32_t    trail;
  bool        from_retained = false;
  as_status_t rc =
      recycle_expand(jm, a, &a->dirty, e, amount, zero, &trail, err);
  if (rc == AS_OK && trail == JE_NONE)
    rc = recycle_expand(jm, a, &a->muzzy, e, amount, zero, &trail, err);
  if (rc == AS_OK && trail == JE_NONE) {
    rc = recycle_expand(jm, a, &a->retained, e, amount, zero, &trail, err);
    from_retained = true;
  }
  if (rc == AS_OK && trail == JE_NONE && !jm->retain)
    rc = map_after(jm, a, e, amount, &trail, err);
  *done = false;
  if (rc != AS_OK || trail == JE_NONE)
    return rc;
  rc = ext_merge(jm, e, trail, err);
  if (rc != AS_OK)
    return rc;
  if (from_retained)
    a->pac_mapped += amount;
  a->nactive += amount >> jm->lg_page;
  *done = true;
  return AS_OK;
}

as_status_t je_pa_shrink(jemalloc_model_t *jm, je_arena_t *a, uint32_t e,
                         uint64_t new_size, bool *done, as_err_t *err) {
  /* pac_shrink_impl (pac.c:229-248), then arena_handle_deferred_work */
  uint64_t    amount = E(jm, e)->size - new_size;
  uint32_t    trail;
  as_status_t rc = ext_split(jm, e, new_size, &trail, err);
  if (rc != AS_OK)
    return rc;
  a->nactive -= amount >> jm->lg_page;
  E(jm, trail)->zeroed = false;
  rc = ext_record(jm, a, &a->dirty, trail, err);
  if (rc == AS_OK && a->decay_dirty.ms == 0)
    rc = je_arena_decay(jm, a, false, true, err);
  *done = rc == AS_OK;
  return rc;
}

/* ---- Purging (pac.c:340-478) --------------------------------------------- */

/* ecache_evict (extent.c:151-224): the LRU extent while s holds more than
 * npages_min pages; the dirty cache first merges it with its neighbours
 * one step at a time, re-queueing the result at the LRU tail. */
static as_status_t evict(jemalloc_model_t *jm, je_eset_t *s,
                         uint64_t npages_min, uint32_t *out, as_err_t *err) {
  *out = JE_NONE;
  for (;;) {
    uint32_t e = s->lru_head;
    if (e == JE_NONE || s->npages <= npages_min)
      return AS_OK;
    eset_remove(jm, s, e);
    if (!s->delay_coalesce) {
      *out = e;
      break;
    }
    /* extent_try_delayed_coalesce (extent.c:61-76) */
    E(jm, e)->state = JE_ACTIVE;
    bool        coalesced;
    as_status_t rc = try_coalesce(jm, s, &e, &coalesced, false, err);
    if (rc != AS_OK)
      return rc;
    if (!coalesced) {
      *out = e;
      break;
    }
    if ((rc = eset_insert(jm, s, e, err)) != AS_OK)
      return rc;
  }
  E(jm, *out)->state = JE_ACTIVE;
  return AS_OK;
}

/* pac_decay_to_limit (pac.c:434-459): stash extents LRU-first until the
 * cache is down to npages_limit (at most npages_max pages), then purge
 * them (pac_decay_stashed :362-425). */
static as_status_t decay_to_limit(jemalloc_model_t *jm, je_arena_t *a,
                                  je_decay_t *d, je_eset_t *s, bool fully_decay,
                                  uint64_t npages_limit, uint64_t npages_max,
                                  as_err_t *err) {
  if (npages_max == 0)
    return AS_OK;
  uint32_t   *stash = NULL;
  size_t      n = 0, cap = 0;
  uint64_t    nstashed = 0;
  as_status_t rc = AS_OK;
  while (nstashed < npages_max) {
    uint32_t e;
    if ((rc = evict(jm, s, npages_limit, &e, err)) != AS_OK || e == JE_NONE)
      break;
    uint32_t *v = as_grow(stash, &cap, n + 1, sizeof *v, 64);
    if (v == NULL) {
      rc = as_err_set(err, AS_ENOMEM, "jemalloc: out of memory purging");
      break;
    }
    stash = v;
    stash[n++] = e;
    nstashed += E(jm, e)->size >> jm->lg_page;
  }
  bool     try_muzzy = !fully_decay && a->decay_muzzy.ms != 0;
  uint64_t nunmapped = 0;
  for (size_t i = 0; rc == AS_OK && i < n; i++) {
    uint32_t e = stash[i];
    uint64_t npages = E(jm, e)->size >> jm->lg_page;
    d->nmadvise++;
    d->purged += npages;
    if (s->state == JE_DIRTY && try_muzzy) {
      /* pages_purge_lazy: MADV_FREE (pages.c:427-460) */
      rc = sim_kernel_madvise(jm->kernel, E(jm, e)->addr, E(jm, e)->size,
                              SIM_MADV_FREE, err);
      if (rc == AS_OK) {
        E(jm, e)->zeroed = false;
        rc = ext_record(jm, a, &a->muzzy, e, err);
      }
    } else {
      rc = dalloc_wrapper(jm, a, e, err);
      nunmapped += npages;
    }
  }
  if (n > 0)
    d->npurge++;
  a->pac_mapped -= nunmapped << jm->lg_page;
  free(stash);
  return rc;
}

/* ---- Decay (src/decay.c) ------------------------------------------------- */

uint64_t je_prng_lg_range(uint64_t *state, unsigned lg_range) {
  /* prng.h:39-42, 75-84: an LCG, the top lg_range bits */
  *state =
      *state * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
  return *state >> (64 - lg_range);
}

/* prng_range_u64 (prng.h:126-145): uniform in [0, range) by rejection. */
static uint64_t prng_range(uint64_t *state, uint64_t range) {
  if (range <= 1)
    return 0;
  unsigned lg = 64 - (unsigned)__builtin_clzll(range - 1);
  uint64_t r;
  do
    r = je_prng_lg_range(state, lg);
  while (r >= range);
  return r;
}

/* decay_deadline_init (decay.c:17-28): the next epoch plus uniform jitter
 * below one interval. */
static void deadline_init(je_decay_t *d) {
  d->deadline_ns = d->epoch_ns + d->interval_ns;
  if (d->ms > 0)
    d->deadline_ns += prng_range(&d->jitter_state, d->interval_ns);
}

void je_decay_init(jemalloc_model_t *jm, je_decay_t *d, int64_t ms,
                   uint64_t now_ns, uint64_t jitter_seed) {
  (void)jm;
  /* decay_reinit (decay.c:31-44); jitter_state there is the decay_t's
   * address, here the model's jitter seed per arena and decay. */
  d->ms = ms;
  if (ms > 0)
    d->interval_ns = (uint64_t)ms * UINT64_C(1000000) / JE_NSTEPS;
  d->epoch_ns = now_ns;
  d->jitter_state = jitter_seed;
  deadline_init(d);
  d->nunpurged = 0;
  memset(d->backlog, 0, sizeof d->backlog);
  d->advanced = false;
}

void je_decay_reseed(je_arena_t *a, uint64_t seed) {
  a->jitter_seed = seed;
  for (int dirty = 0; dirty < 2; dirty++) {
    je_decay_t *d = dirty ? &a->decay_dirty : &a->decay_muzzy;
    if (d->advanced)
      continue;
    d->jitter_state = je_decay_seed(a, dirty);
    deadline_init(d);
  }
}

/* decay_maybe_advance_epoch (decay.c:176-208) with decay_backlog_update
 * (:117-150) and decay_backlog_npages_limit (:96-110). */
static bool advance_epoch(jemalloc_model_t *jm, je_decay_t *d, uint64_t now_ns,
                          uint64_t current) {
  if (now_ns < d->deadline_ns)
    return false;
  uint64_t nadvance = (now_ns - d->epoch_ns) / d->interval_ns;
  d->epoch_ns += nadvance * d->interval_ns;
  deadline_init(d);
  d->advanced = true;
  if (nadvance >= JE_NSTEPS) {
    memset(d->backlog, 0, (JE_NSTEPS - 1) * sizeof d->backlog[0]);
  } else {
    memmove(d->backlog, &d->backlog[nadvance],
            (JE_NSTEPS - nadvance) * sizeof d->backlog[0]);
    if (nadvance > 1)
      memset(&d->backlog[JE_NSTEPS - nadvance], 0,
             (nadvance - 1) * sizeof d->backlog[0]);
  }
  d->backlog[JE_NSTEPS - 1] =
      current > d->nunpurged ? current - d->nunpurged : 0;
  uint64_t sum = 0;
  for (unsigned i = 0; i < JE_NSTEPS; i++)
    sum += d->backlog[i] * jm->h_steps[i];
  d->npages_limit = sum >> JE_BFP;
  d->nunpurged = d->npages_limit > current ? d->npages_limit : current;
  return true;
}

typedef enum je_eagerness_e {
  JE_PURGE_ALWAYS,
  JE_PURGE_NEVER,
  JE_PURGE_ON_EPOCH_ADVANCE
} je_eagerness_t;

/* pac_maybe_decay_purge (pac.c:480-517). */
static as_status_t maybe_decay_purge(jemalloc_model_t *jm, je_arena_t *a,
                                     je_decay_t *d, je_eset_t *s,
                                     je_eagerness_t eagerness, bool *advanced,
                                     as_err_t *err) {
  *advanced = false;
  if (d->ms <= 0)
    return d->ms == 0 ? decay_to_limit(jm, a, d, s, false, 0, s->npages, err)
                      : AS_OK;
  uint64_t current = s->npages;
  *advanced = advance_epoch(jm, d, je_clock_ns(jm), current);
  if ((eagerness == JE_PURGE_ALWAYS ||
       (*advanced && eagerness == JE_PURGE_ON_EPOCH_ADVANCE)) &&
      current > d->npages_limit)
    return decay_to_limit(jm, a, d, s, false, d->npages_limit,
                          current - d->npages_limit, err);
  return AS_OK;
}

static void maybe_do_deferred_work(jemalloc_model_t *jm, je_arena_t *a,
                                   je_decay_t *d, uint64_t npages_new);

/* arena_decay_impl (arena.c:422-455). */
static as_status_t decay_impl(jemalloc_model_t *jm, je_arena_t *a,
                              je_decay_t *d, je_eset_t *s, bool is_bg, bool all,
                              as_err_t *err) {
  if (all) /* pac_decay_all (pac.c:461-467), fully: no lazy step */
    return decay_to_limit(jm, a, d, s, true, 0, s->npages, err);
  /* arena_decide_unforced_purge_eagerness (arena.c:396-405) */
  je_eagerness_t eager = is_bg                   ? JE_PURGE_ALWAYS
                         : jm->background_thread ? JE_PURGE_NEVER
                                                 : JE_PURGE_ON_EPOCH_ADVANCE;
  bool           advanced;
  as_status_t    rc = maybe_decay_purge(jm, a, d, s, eager, &advanced, err);
  if (rc == AS_OK && jm->background_thread && advanced && !is_bg)
    maybe_do_deferred_work(jm, a, d, d->backlog[JE_NSTEPS - 1]);
  return rc;
}

as_status_t je_arena_decay(jemalloc_model_t *jm, je_arena_t *a, bool is_bg,
                           bool all, as_err_t *err) {
  as_status_t rc =
      decay_impl(jm, a, &a->decay_dirty, &a->dirty, is_bg, all, err);
  /* arena_decay_muzzy (arena.c:465-474), pa_shard_dont_decay_muzzy */
  if (rc == AS_OK && !(a->muzzy.npages == 0 && a->decay_muzzy.ms <= 0))
    rc = decay_impl(jm, a, &a->decay_muzzy, &a->muzzy, is_bg, all, err);
  return rc;
}

as_status_t je_decay_ticks(jemalloc_model_t *jm, je_thread_t *th, je_arena_t *a,
                           unsigned nticks, as_err_t *err) {
  /* ticker_geom_ticks / ticker_geom_fixup (ticker.h:152-168) */
  th->tick -= (int32_t)nticks;
  if (th->tick >= 0)
    return AS_OK;
  uint64_t idx = je_prng_lg_range(&th->prng, 6);
  th->tick = (int32_t)((uint64_t)JE_DECAY_NTICKS * jm->ticker_table[idx] / 61);
  return je_arena_decay(jm, a, false, false, err);
}

as_status_t je_decay_ms_set(jemalloc_model_t *jm, je_arena_t *a, bool dirty,
                            int64_t ms, as_err_t *err) {
  je_decay_t *d = dirty ? &a->decay_dirty : &a->decay_muzzy;
  je_eset_t  *s = dirty ? &a->dirty : &a->muzzy;
  /* decay_reinit seeds the jitter from the decay_t's address again: the
   * seed it was made with. */
  je_decay_init(jm, d, ms, je_clock_ns(jm), je_decay_seed(a, dirty));
  bool           advanced;
  je_eagerness_t eager =
      jm->background_thread ? JE_PURGE_NEVER : JE_PURGE_ON_EPOCH_ADVANCE;
  return maybe_decay_purge(jm, a, d, s, eager, &advanced, err);
}

/* decay_npurge_after_interval (decay.c:226-239). */
static uint64_t npurge_after(const jemalloc_model_t *jm, const je_decay_t *d,
                             unsigned interval) {
  uint64_t sum = 0;
  unsigned i;
  for (i = 0; i < interval; i++)
    sum += d->backlog[i] * jm->h_steps[i];
  for (; i < JE_NSTEPS; i++)
    sum += d->backlog[i] * (jm->h_steps[i] - jm->h_steps[i - interval]);
  return sum >> JE_BFP;
}

/* decay_ns_until_purge (decay.c:241-295). */
static uint64_t ns_until_purge(const jemalloc_model_t *jm, const je_decay_t *d,
                               uint64_t current) {
  if (d->ms <= 0)
    return JE_UNBOUNDED;
  uint64_t iv = d->interval_ns;
  if (current == 0) {
    unsigned i;
    for (i = 0; i < JE_NSTEPS && d->backlog[i] == 0; i++)
      ;
    if (i == JE_NSTEPS)
      return JE_UNBOUNDED;
  }
  const uint64_t threshold = JE_DEFERRED_PURGE_NPAGES;
  if (current <= threshold)
    return iv * JE_NSTEPS;
  unsigned lb = 2, ub = JE_NSTEPS;
  uint64_t npurge_lb = npurge_after(jm, d, lb);
  if (npurge_lb > threshold)
    return iv * lb;
  uint64_t npurge_ub = npurge_after(jm, d, ub);
  if (npurge_ub < threshold)
    return iv * ub;
  while (npurge_lb + threshold < npurge_ub && lb + 2 < ub) {
    unsigned target = (lb + ub) / 2;
    uint64_t npurge = npurge_after(jm, d, target);
    if (npurge > threshold) {
      ub = target;
      npurge_ub = npurge;
    } else {
      lb = target;
      npurge_lb = npurge;
    }
  }
  return iv * (ub + lb) / 2;
}

/* pac_time_until_deferred_work (pac.c:295-314). */
static uint64_t time_until_deferred(const jemalloc_model_t *jm,
                                    const je_arena_t       *a) {
  uint64_t t = ns_until_purge(jm, &a->decay_dirty, a->dirty.npages);
  uint64_t m = ns_until_purge(jm, &a->decay_muzzy, a->muzzy.npages);
  return m < t ? m : t;
}

/* ---- Background threads (src/background_thread.c) ----------------------- */

/* background_work_sleep_once (background_thread.c:188-231): purge this
 * thread's arenas (ind, ind + max, ...) unless it slept indefinitely, then
 * sleep until the soonest deferred work, at least 100 ms. */
static as_status_t bg_sleep_once(jemalloc_model_t *jm, je_bg_t *bg,
                                 as_err_t *err) {
  uint64_t ns = UINT64_MAX;
  bool     slept_indefinitely = bg->indefinite;
  for (uint32_t i = bg->ind; i < jm->narenas_total; i += jm->max_bg_threads) {
    je_arena_t *a = jm->arenas[i];
    if (a == NULL)
      continue;
    if (!slept_indefinitely) {
      as_status_t rc = je_arena_decay(jm, a, true, false, err);
      if (rc != AS_OK)
        return rc;
    }
    if (ns <= JE_BG_MIN_INTERVAL_NS)
      continue;
    uint64_t t = time_until_deferred(jm, a);
    if (t < ns)
      ns = t;
  }
  bg->runs++;
  bg->npages_to_purge_new = 0;
  if (ns == UINT64_MAX) { /* BACKGROUND_THREAD_INDEFINITE_SLEEP */
    bg->indefinite = true;
    sim_event_queue_cancel(jm->timers, &bg->timer);
    return AS_OK;
  }
  if (ns < JE_BG_MIN_INTERVAL_NS)
    ns = JE_BG_MIN_INTERVAL_NS;
  bg->indefinite = false;
  bg->wakeup_ns = jm->now_ns + ns;
  bg->wakeup_clock_ns = je_clock_ns(jm) + ns; /* next_wakeup (:219-222) */
  return sim_event_queue_push(jm->timers, &bg->timer, bg->wakeup_ns, err);
}

static as_status_t bg_fire(sim_timer_t *t, uint64_t now_ns, as_err_t *err) {
  je_bg_t          *bg = SIM_CONTAINER_OF(t, je_bg_t, timer);
  jemalloc_model_t *jm = bg->jm;
  if (jm->fail != AS_OK)
    return AS_OK;
  if (now_ns > jm->now_ns)
    jm->now_ns = now_ns;
  jm->clock_started = true;
  as_status_t rc = bg_sleep_once(jm, bg, &jm->ferr);
  if (rc != AS_OK) {
    jm->fail = rc;
    if (err != NULL)
      *err = jm->ferr;
  }
  return rc;
}

static void bg_wakeup_early(jemalloc_model_t *jm, je_bg_t *bg,
                            const uint64_t *remaining_ns);

/* background_thread_create_locked (background_thread.c:460-513): thread
 * arena_ind % max_background_threads, if not running.  Its first loop
 * (background_work, :405-426) starts from an indefinite sleep: it only
 * computes how long to sleep. */
as_status_t je_bg_create(jemalloc_model_t *jm, uint32_t arena_ind,
                         as_err_t *err) {
  if (!jm->background_thread)
    return AS_OK;
  je_bg_t *bg = &jm->bg[arena_ind % jm->max_bg_threads];
  if (bg->started)
    return AS_OK;
  bg->started = true;
  bg->indefinite = true;
  as_status_t rc = bg_sleep_once(jm, bg, err);
  /* Thread 0 creates the others: the signal (:481-490) wakes it, and
   * unless it slept indefinitely, its next background_work_sleep_once
   * does its arenas' deferred work (background_thread0_work, :354-373) */
  if (rc == AS_OK && bg != &jm->bg[0] && jm->bg[0].started)
    bg_wakeup_early(jm, &jm->bg[0], NULL);
  return rc == AS_OK ? jm->fail : rc;
}

/* background_thread_wakeup_early (background_thread.c:602-614): wake the
 * thread now, unless its remaining sleep is under 100 ms. */
static void bg_wakeup_early(jemalloc_model_t *jm, je_bg_t *bg,
                            const uint64_t *remaining_ns) {
  if (remaining_ns != NULL && *remaining_ns < JE_BG_MIN_INTERVAL_NS)
    return;
  as_status_t rc =
      sim_event_queue_push(jm->timers, &bg->timer, jm->now_ns, &jm->ferr);
  if (rc != AS_OK && jm->fail == AS_OK)
    jm->fail = rc;
}

/* decay_npages_purge_in (decay.c:157-174). */
static uint64_t npages_purge_in(const jemalloc_model_t *jm, const je_decay_t *d,
                                uint64_t time_ns, uint64_t npages_new) {
  uint64_t n_epoch = time_ns / d->interval_ns;
  if (n_epoch >= JE_NSTEPS)
    return npages_new;
  return npages_new * (jm->h_steps[JE_NSTEPS - 1] -
                       jm->h_steps[JE_NSTEPS - 1 - n_epoch]) >>
         JE_BFP;
}

/* arena_maybe_do_deferred_work (arena.c:531-560) with
 * arena_should_decay_early (:492-523). */
static void maybe_do_deferred_work(jemalloc_model_t *jm, je_arena_t *a,
                                   je_decay_t *d, uint64_t npages_new) {
  je_bg_t *bg = &jm->bg[a->ind % jm->max_bg_threads];
  if (!bg->started)
    return;
  if (bg->indefinite) {
    bg_wakeup_early(jm, bg, NULL);
    return;
  }
  if (d->ms <= 0 || bg->wakeup_clock_ns <= d->epoch_ns)
    return;
  uint64_t remaining = bg->wakeup_clock_ns - d->epoch_ns;
  if (npages_new > 0)
    bg->npages_to_purge_new += npages_purge_in(jm, d, remaining, npages_new);
  if (bg->npages_to_purge_new > JE_DEFERRED_PURGE_NPAGES) {
    bg->npages_to_purge_new = 0;
    bg_wakeup_early(jm, bg, &remaining);
  }
}

as_status_t je_bg_inactivity_check(jemalloc_model_t *jm, je_arena_t *a) {
  /* arena_background_thread_inactivity_check (arena.c:200-214) */
  if (jm->background_thread && jm->bg[a->ind % jm->max_bg_threads].started &&
      jm->bg[a->ind % jm->max_bg_threads].indefinite)
    maybe_do_deferred_work(jm, a, &a->decay_dirty, 0);
  return jm->fail;
}

void je_bg_init(jemalloc_model_t *jm, je_bg_t *bg, uint32_t ind) {
  memset(bg, 0, sizeof *bg);
  sim_timer_init(&bg->timer, bg_fire);
  bg->jm = jm;
  bg->ind = ind;
}
