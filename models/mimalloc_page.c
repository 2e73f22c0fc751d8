/* models/mimalloc_page.c -- mimalloc's pages: size bins, page queues, free
 * lists, lazy free-list extension, retire, the generic allocation path,
 * local and cross-thread free, heap collect.
 *
 * Citations are to v2.0.9 (src/page.c, src/page-queue.c, src/alloc.c,
 * src/heap.c) unless marked 212 (v2.1.2), 217 (v2.1.7), 301 (v3.0.1) or
 * 343 (v3.4.3); in 3.x the free path is src/free.c.  The 2.x and 3.x page
 * logic is the same code with the version branches marked.
 */
#include <stdlib.h>
#include <string.h>

#include "mimalloc_int.h"

/* ---- Size bins ---------------------------------------------------------- */

/* Bin sizes in words, the page queues of _mi_heap_empty (init.c:48-61; 301
 * init.c:55-66 is the same table). */
static const uint32_t bin_words[MI_BIN_HUGE] = {
    1,      1,      2,      3,      4,      5,      6,      7,      8,
    10,     12,     14,     16,     20,     24,     28,     32,     40,
    48,     56,     64,     80,     96,     112,    128,    160,    192,
    224,    256,    320,    384,    448,    512,    640,    768,    896,
    1024,   1280,   1536,   1792,   2048,   2560,   3072,   3584,   4096,
    5120,   6144,   7168,   8192,   10240,  12288,  14336,  16384,  20480,
    24576,  28672,  32768,  40960,  49152,  57344,  65536,  81920,  98304,
    114688, 131072, 163840, 196608, 229376, 262144, 327680, 393216, 458752,
    524288};

static unsigned bsr64(uint64_t x) {
  return 63u - (unsigned)__builtin_clzll(x);
}

/* mi_bin (page-queue.c:56-93): 8 bytes, then even word counts up to 64
 * bytes (MI_ALIGN2W: MI_MAX_ALIGN_SIZE 16 is two words on x86-64,
 * page-queue.c:20-27), then four bins per doubling; above the medium (2.x)
 * or large (3.x) maximum, the huge bin.  The maximum is passed in words. */
static uint8_t bin_of(uint64_t size, uint64_t max_wsize) {
  uint64_t w = (size + 7) / 8; /* _mi_wsize_from_size */
  if (w <= 1)
    return 1;
  if (w <= 8)
    return (uint8_t)((w + 1) & ~UINT64_C(1));
  if (w > max_wsize)
    return MI_BIN_HUGE;
  w--;
  unsigned b = bsr64(w);
  return (uint8_t)(((b << 2) + ((w >> (b - 2)) & 3)) - 3);
}

uint8_t mi_bin(uint64_t size) {
  return bin_of(size, MI_MEDIUM_OBJ_MAX / 8);
}

uint64_t mi_bin_size(uint8_t bin) {
  return bin < MI_BIN_HUGE ? (uint64_t)bin_words[bin] * 8 : 0;
}

uint8_t mi_model_bin(const mi_model_t *m, uint64_t size) {
  return bin_of(
      size, (MI_IS_V3(m->version) ? m->g.large_max : MI_MEDIUM_OBJ_MAX) / 8);
}

/* _mi_os_good_alloc_size (209 os.c:118-127). */
uint64_t mi_good_alloc_size(uint64_t size) {
  uint64_t a;
  if (size < 512 * MI_KIB)
    a = 4096;
  else if (size < 2 * MI_MIB)
    a = 64 * MI_KIB;
  else if (size < 8 * MI_MIB)
    a = 256 * MI_KIB;
  else if (size < 32 * MI_MIB)
    a = MI_MIB;
  else
    a = 4 * MI_MIB;
  return (size + a - 1) / a * a;
}

/* _mi_random_shuffle (209 include/mimalloc-internal.h:798-811). */
uint64_t mi_random_shuffle(uint64_t x) {
  if (x == 0)
    x = 17;
  x ^= x >> 30;
  x *= UINT64_C(0xbf58476d1ce4e5b9);
  x ^= x >> 27;
  x *= UINT64_C(0x94d049bb133111eb);
  x ^= x >> 31;
  return x;
}

/* ---- Page records ------------------------------------------------------- */

uint32_t mi_page_new(mi_model_t *m) {
  uint32_t id = m->pages_free;
  if (id != 0) {
    m->pages_free = m->pages[id].next;
  } else {
    id = m->pages_n++;
    if (id == 0) /* record 0 means "none" */
      id = m->pages_n++;
    if (m->pages_n == UINT32_MAX || !sim_idtable_reach(&m->pages_tab, id)) {
      mi_fail_oom(m);
      return 0;
    }
  }
  memset(&m->pages[id], 0, sizeof m->pages[id]);
  m->pages[id].live = true;
  m->pages_live++;
  return id;
}

void mi_page_release(mi_model_t *m, uint32_t id) {
  mpage_t *p = P(m, id);
  free(p->blocks);
  free(p->tfree);
  memset(p, 0, sizeof *p);
  p->next = m->pages_free;
  m->pages_free = id;
  m->pages_live--;
}

static sim_addr_t block_addr(const mpage_t *p, uint32_t b) {
  return p->start + (uint64_t)b * p->block_size;
}

/* ---- Page queues (page-queue.c) --------------------------------------- */

uint32_t mi_page_queue_bin(const mi_model_t *m, const mpage_t *p) {
  (void)m;
  return p->in_full ? MI_BIN_FULL : p->bin;
}

/* mi_page_queue_is_special: the huge and full queues (page-queue.c:44-46). */
static bool queue_is_special(uint32_t bin) {
  return bin >= MI_BIN_HUGE;
}

/* mi_page_queue_push (page-queue.c:229-255): at the front. */
void mi_pq_push(mi_model_t *m, uint32_t heap, uint32_t bin, uint32_t page) {
  mheap_t  *h = H(m, heap);
  mqueue_t *q = &h->pages[bin];
  mpage_t  *p = P(m, page);
  p->in_full = (bin == MI_BIN_FULL);
  p->heap = heap;
  p->prev = 0;
  p->next = q->first;
  if (q->first != 0)
    P(m, q->first)->prev = page;
  else
    q->last = page;
  q->first = page;
  h->page_count++;
}

/* mi_page_queue_push_at_end (301 page-queue.c): reclaimed pages. */
void mi_pq_push_end(mi_model_t *m, uint32_t heap, uint32_t bin, uint32_t page) {
  mheap_t  *h = H(m, heap);
  mqueue_t *q = &h->pages[bin];
  mpage_t  *p = P(m, page);
  p->in_full = (bin == MI_BIN_FULL);
  p->heap = heap;
  p->next = 0;
  p->prev = q->last;
  if (q->last != 0)
    P(m, q->last)->next = page;
  else
    q->first = page;
  q->last = page;
  h->page_count++;
}

/* mi_page_queue_remove (page-queue.c:206-226). */
void mi_pq_remove(mi_model_t *m, uint32_t heap, uint32_t bin, uint32_t page) {
  mheap_t  *h = H(m, heap);
  mqueue_t *q = &h->pages[bin];
  mpage_t  *p = P(m, page);
  if (p->prev != 0)
    P(m, p->prev)->next = p->next;
  if (p->next != 0)
    P(m, p->next)->prev = p->prev;
  if (q->last == page)
    q->last = p->prev;
  if (q->first == page)
    q->first = p->next;
  h->page_count--;
  p->next = p->prev = 0;
  p->in_full = false;
}

/* mi_page_queue_enqueue_from (page-queue.c:258-294): to the END of `to`. */
static void pq_move(mi_model_t *m, uint32_t heap, uint32_t to, uint32_t from,
                    uint32_t page) {
  mi_pq_remove(m, heap, from, page);
  mi_pq_push_end(m, heap, to, page);
}

/* 301 mi_page_queue_move_to_front: the chosen candidate goes first. */
static void pq_move_to_front(mi_model_t *m, uint32_t heap, uint32_t bin,
                             uint32_t page) {
  if (H(m, heap)->pages[bin].first == page)
    return;
  mi_pq_remove(m, heap, bin, page);
  mi_pq_push(m, heap, bin, page);
}

/* ---- Free lists --------------------------------------------------------- */

void mi_hook_page_event(mi_model_t *m, uint32_t page, mi_page_event_t what) {
  if (m->has_hooks && m->hooks.page_event != NULL)
    m->hooks.page_event(m->hooks.ctx, m, page, what);
}

/* Gives a page whose free stack is a run (mpage_t.blocks) its array, the
 * run written out; false, with the model failed, without memory. */
static bool page_blocks(mi_model_t *m, mpage_t *p) {
  if (p->blocks != NULL)
    return true;
  p->blocks = malloc((size_t)p->reserved * sizeof *p->blocks);
  if (p->blocks == NULL) {
    mi_fail_oom(m);
    return false;
  }
  for (uint32_t i = 0; i < p->free_n; i++)
    p->blocks[i] = (uint16_t)(p->run_hi - i);
  return true;
}

/* Moves the thread-free stack onto local_free: local = thread_free ++
 * local (_mi_page_thread_free_collect, page.c:170-204). */
static void thread_free_collect(mi_model_t *m, mpage_t *p) {
  if (p->tfree_n == 0 || !page_blocks(m, p))
    return;
  /* local_free's head is at blocks[reserved - local_n]; push the
   * thread-free list from its tail (oldest, tfree[0]) to its head. */
  for (uint32_t i = 0; i < p->tfree_n; i++) {
    p->local_n++;
    p->blocks[p->reserved - p->local_n] = p->tfree[i];
  }
  p->used -= p->tfree_n;
  p->tfree_n = 0;
}

/* free = local_free when free is empty: the local stack, head at its low
 * end, becomes the free stack, head at its high end. */
static void local_to_free(mpage_t *p) {
  uint32_t  n = p->local_n;
  uint16_t *l = p->blocks + (p->reserved - n);
  for (uint32_t i = 0, j = n - 1; i < j; i++, j--) {
    uint16_t t = l[i];
    l[i] = l[j];
    l[j] = t;
  }
  memmove(p->blocks, l, (size_t)n * sizeof *l);
  p->free_n = n;
  p->local_n = 0;
}

/* _mi_page_free_collect (page.c:206-237). */
void mi_page_free_collect(mi_model_t *m, uint32_t page, bool force) {
  mpage_t *p = P(m, page);
  uint32_t was_used = p->used;
  thread_free_collect(m, p);
  if (p->used == 0 && was_used != 0) /* CPython page.c:216-222 */
    mi_hook_page_event(m, page, MI_PAGE_MT_EMPTIED);
  if (p->local_n == 0)
    return;
  mi_hook_page_event(m, page, MI_PAGE_LOCAL_COLLECTED); /* 3.13.5 :227-229 */
  p = P(m, page);
  if (p->free_n == 0) {
    local_to_free(p);
    p->free_is_zero = false;
  } else if (force) {
    /* free = local_free ++ free: push local from its oldest to its head
     * (page.c:222-233); the local region lies above free's top. */
    uint32_t  n = p->local_n;
    uint16_t *tmp = malloc((size_t)n * sizeof *tmp);
    if (tmp == NULL) {
      mi_fail_oom(m);
      return;
    }
    memcpy(tmp, p->blocks + (p->reserved - n), (size_t)n * sizeof *tmp);
    for (uint32_t i = 0; i < n; i++)
      p->blocks[p->free_n + i] = tmp[n - 1 - i];
    p->free_n += n;
    p->local_n = 0;
    p->free_is_zero = false;
    free(tmp);
  }
}

/* mi_page_extend_free (page.c:598-646; 301 page.c:579-630): at most
 * max(MI_MIN_EXTEND, 4 KiB / bsize) new blocks, each first word written by
 * mi_page_free_list_extend (:556-580). */
void mi_page_extend_free(mi_model_t *m, uint32_t page) {
  mpage_t *p = P(m, page);
  if (p->free_n != 0 || p->capacity >= p->reserved)
    return;
  uint64_t bsize = p->block_size;
  uint64_t extend = p->reserved - p->capacity;
  uint64_t max_extend = bsize >= 4096 ? m->g.min_extend : 4096 / bsize;
  if (max_extend < m->g.min_extend)
    max_extend = m->g.min_extend;
  if (extend > max_extend)
    extend = max_extend;
  /* 301 page.c:612-620: commit on demand covers the new blocks first. */
  if (p->slice_committed != 0) {
    uint64_t need =
        (p->start - p->slice_start) + (p->capacity + extend) * bsize;
    need = (need + MI_SLICE_SIZE - 1) / MI_SLICE_SIZE * MI_SLICE_SIZE;
    if (need > p->slice_committed)
      p->slice_committed = (uint32_t)need;
  }
  p->run_hi = (uint32_t)(p->capacity + extend - 1);
  if (p->blocks != NULL)
    for (uint32_t i = 0; i < extend; i++)
      p->blocks[i] = (uint16_t)(p->run_hi - i);
  p->free_n = (uint32_t)extend;
  sim_addr_t first = block_addr(p, p->capacity);
  sim_addr_t last = block_addr(p, (uint32_t)(p->capacity + extend - 1));
  if (extend == 1 || bsize <= 4096)
    mi_touch(m, first, last + 8 - first);
  else
    for (uint64_t i = 0; i < extend; i++)
      mi_touch(m, first + i * bsize, 8);
  p->capacity += (uint32_t)extend;
  if (!p->zero_init) /* :641-644 */
    p->free_is_zero = false;
}

/* mi_page_init (page.c:649-695): binds the heap, lays out the blocks
 * (2.x: the segment's start-offset rule; 3.x: the arena set start and
 * reserved when it allocated the page) and makes the first blocks
 * available.  page->is_zero starts as is_zero_init (:673). */
void mi_page_init(mi_model_t *m, uint32_t heap, uint32_t page,
                  uint64_t block_size) {
  mpage_t *p = P(m, page);
  p->heap = heap;
  p->tag = H(m, heap)->tag;
  p->block_size = block_size;
  p->bin = mi_model_bin(m, block_size);
  if (!MI_IS_V3(m->version))
    mi_segment_page_layout(m, page);
  p = P(m, page);
  p->free_is_zero = p->zero_init;
  mi_page_extend_free(m, page);
}

/* ---- Retire and free ---------------------------------------------------- */

static bool page_all_free(const mpage_t *p) {
  return p->used == 0;
}

/* _mi_page_free (page.c:396-416; 301 page.c:346-366). */
void mi_page_free(mi_model_t *m, uint32_t page, bool force) {
  mpage_t *p = P(m, page);
  uint32_t heap = p->heap;
  uint32_t tld = H(m, heap)->tld;
  mi_pq_remove(m, heap, mi_page_queue_bin(m, p), page);
  p->heap = 0;
  if (MI_IS_V3(m->version)) {
    mi_arenas3_page_free(m, page);
    mi_arenas3_collect(m, false, false, tld); /* 301 page.c:365 */
  } else {
    mi_segment_page_free(m, page, force);
  }
}

/* Upstream frees an empty page here; CPython lets QSBR keep it, and a
 * kept page is no longer retired (CPython 3.14.7 Objects/obmalloc.c:183,
 * 3.13.5 :140 `page->retire_expire = 0`), so collect_retired does not ask
 * for it again.  Whether the page was freed. */
static bool page_maybe_free(mi_model_t *m, uint32_t page, bool force) {
  if (m->has_hooks && m->hooks.page_maybe_free != NULL &&
      m->hooks.page_maybe_free(m->hooks.ctx, m, page, force)) {
    P(m, page)->retire_expire = 0;
    return false;
  }
  mi_page_free(m, page, force);
  return true;
}

/* _mi_page_retire (page.c:418-457; 212 :432-469; 217 :454-468; 301
 * page.c:368-410): keep the only page of a queue for a few collect cycles
 * instead of freeing it. */
static void page_retire(mi_model_t *m, uint32_t page) {
  mpage_t *p = P(m, page);
  if (m->version == MV_343 && p->retire_expire != 0)
    return; /* 343 page.c:437: already retired */
  mi_hook_page_event(m, page, MI_PAGE_REUSED); /* CPython page.c:468 */
  p = P(m, page);
  uint32_t bin = mi_page_queue_bin(m, p);
  bool     small_enough =
      m->g.retire_any_size || p->block_size <= MI_MEDIUM_OBJ_MAX;
  if (small_enough && !queue_is_special(bin)) {
    mqueue_t *q = &H(m, p->heap)->pages[bin];
    if (q->first == page && q->last == page) {
      uint64_t small_max =
          MI_IS_V3(m->version) ? m->g.small_max : MI_SMALL_OBJ_MAX;
      uint32_t cycles = p->block_size <= small_max ? m->g.retire_cycles
                                                   : m->g.retire_cycles / 4;
      p->retire_expire = (uint8_t)(cycles + (m->g.retire_plus1 ? 1 : 0));
      mheap_t *h = H(m, p->heap);
      if (bin < h->retired_min)
        h->retired_min = bin;
      if (bin > h->retired_max)
        h->retired_max = bin;
      return;
    }
  }
  page_maybe_free(m, page, false);
}

/* _mi_heap_collect_retired (page.c:461-486). */
static void heap_collect_retired(mi_model_t *m, uint32_t heap, bool force) {
  mheap_t *h = H(m, heap);
  uint32_t min = MI_BIN_FULL, max = 0;
  for (uint32_t bin = h->retired_min; bin <= h->retired_max; bin++) {
    uint32_t page = H(m, heap)->pages[bin].first;
    if (page == 0 || P(m, page)->retire_expire == 0)
      continue;
    mpage_t *p = P(m, page);
    if (page_all_free(p)) {
      p->retire_expire--;
      if (force || p->retire_expire == 0) {
        page_maybe_free(m, page, force);
      } else {
        if (bin < min)
          min = bin;
        if (bin > max)
          max = bin;
      }
    } else {
      p->retire_expire = 0;
    }
  }
  h = H(m, heap);
  h->retired_min = min;
  h->retired_max = max;
}

/* _mi_page_unfull (page.c:337-349): back to the END of its bin queue. */
void mi_page_unfull(mi_model_t *m, uint32_t page) {
  mpage_t *p = P(m, page);
  if (!p->in_full)
    return;
  pq_move(m, p->heap, p->bin, MI_BIN_FULL, page);
}

/* Where a heap's theap lies, as 3.4.3 compares theaps by pointer: a
 * thread's in its meta page, which the next thread's may reuse once the
 * thread has exited; main's is static, another heap's its own. */
static sim_addr_t theap_addr(mi_model_t *m, uint32_t heap) {
  const mtld_t *t = &m->tlds[H(m, heap)->tld];
  if (t->heap_backing == heap && t->meta_heap != 0)
    return t->meta_heap;
  return heap; /* below every mapping: never equal to a meta address */
}

/* v3 _mi_page_abandon (301 page.c:247-259). */
static void page_abandon3(mi_model_t *m, uint32_t page) {
  mi_page_free_collect(m, page, false);
  mpage_t *p = P(m, page);
  if (page_all_free(p)) {
    mi_page_free(m, page, false);
    return;
  }
  uint32_t heap = p->heap;
  uint32_t tld = H(m, heap)->tld;
  mi_pq_remove(m, heap, mi_page_queue_bin(m, p), page);
  p->heap = 0;
  p->origin = theap_addr(m, heap); /* 343 page.c:307-310 keeps it */
  mi_arenas3_page_abandon(m, page);
  mi_arenas3_collect(m, false, false, tld);
}

/* mi_page_to_full (page.c:351-359; 301 page.c:326-343 abandons instead). */
static void page_to_full(mi_model_t *m, uint32_t page) {
  mpage_t *p = P(m, page);
  if (MI_IS_V3(m->version) && H(m, p->heap)->full_page_retain >= 0 &&
      !H(m, p->heap)->no_reclaim) {
    page_abandon3(m, page);
    return;
  }
  if (p->in_full)
    return;
  pq_move(m, p->heap, MI_BIN_FULL, p->bin, page);
  mi_page_free_collect(m, page, false);
}

/* ---- Finding a page with room ------------------------------------------ */

static uint32_t page_fresh(mi_model_t *m, uint32_t heap, uint32_t bin,
                           uint64_t block_size);

static bool immediate_available(const mpage_t *p) {
  return p->free_n != 0;
}

static void heap_collect_hook(mi_model_t *m, uint32_t heap) {
  if (m->has_hooks && m->hooks.heap_collect != NULL)
    m->hooks.heap_collect(m->hooks.ctx, m, heap);
}

/* mi_page_queue_find_free_ex, 2.x (page.c:703-752): next fit. */
static uint32_t find_free_ex2(mi_model_t *m, uint32_t heap, uint32_t bin,
                              bool first_try) {
  uint32_t page = H(m, heap)->pages[bin].first;
  while (page != 0) {
    uint32_t next = P(m, page)->next;
    mi_page_free_collect(m, page, false);
    mpage_t *p = P(m, page);
    if (immediate_available(p))
      break;
    if (p->capacity < p->reserved) {
      mi_page_extend_free(m, page);
      break;
    }
    page_to_full(m, page);
    page = next;
  }
  if (page == 0) {
    heap_collect_hook(m, heap); /* CPython page.c:784 */
    heap_collect_retired(m, heap, false);
    page = page_fresh(m, heap, bin, mi_bin_size((uint8_t)bin));
    if (page == 0 && first_try && m->fail == AS_OK)
      page = find_free_ex2(m, heap, bin, false);
  } else {
    P(m, page)->retire_expire = 0;
    mi_hook_page_event(m, page, MI_PAGE_REUSED); /* CPython page.c:795 */
  }
  return page;
}

/* mi_page_is_mostly_used (301 internal.h:688-692). */
static bool mostly_used(const mpage_t *p) {
  return p->reserved - p->used <= p->reserved / 8u;
}

/* mi_page_queue_find_free_ex, 3.x (301 page.c:683-800): up to
 * page_max_candidates pages with room, preferring fuller ones; full pages
 * beyond page_full_retain are abandoned (343 :745-800). */
static uint32_t find_free_ex3(mi_model_t *m, uint32_t heap, uint32_t bin,
                              bool first_try) {
  long candidate_limit = 0;
  long full_retain = H(m, heap)->full_page_retain;
  if (m->version == MV_343 &&
      (bin >= MI_BIN_HUGE ||
       H(m, heap)->pages[bin].block_size > m->g.small_max))
    full_retain = 0; /* 343 page.c:750: only small pages are retained (the
                        huge queue's size is above them, init.c:64) */
  uint32_t cand = 0;
  uint32_t page = H(m, heap)->pages[bin].first;
  while (page != 0) {
    uint32_t next = P(m, page)->next;
    candidate_limit--;
    /* 301 page.c:702 collects every page it visits; 343 page.c:762-767
     * only one without free blocks at hand, so another thread's frees into
     * a page with some still count as used when candidates compare */
    if (m->version != MV_343 || !immediate_available(P(m, page)))
      mi_page_free_collect(m, page, false);
    mpage_t *p = P(m, page);
    bool     immediate = immediate_available(p);
    if (!immediate && p->capacity >= p->reserved) {
      full_retain--;
      if (full_retain < 0)
        page_to_full(m, page);
    } else {
      if (cand == 0) {
        cand = page;
        candidate_limit = m->max_candidates;
      } else if (page_all_free(P(m, cand))) {
        mi_page_free(m, cand, false);
        cand = page;
      } else if (p->used >= P(m, cand)->used && !mostly_used(p)) {
        cand = page;
      }
      if (immediate || candidate_limit <= 0)
        break;
    }
    page = next;
  }
  if (cand != 0)
    page = cand;
  if (page != 0) {
    if (!immediate_available(P(m, page)))
      mi_page_extend_free(m, page);
    pq_move_to_front(m, heap, bin, page);
    P(m, page)->retire_expire = 0;
    return page;
  }
  heap_collect_retired(m, heap, false);
  page = page_fresh(m, heap, bin, mi_bin_size((uint8_t)bin));
  if (page == 0 && first_try && m->fail == AS_OK)
    page = find_free_ex3(m, heap, bin, false);
  return page;
}

/* mi_page_free_quick_collect (343 page.c:196-204): free blocks at hand, or
 * the local free list made the free list; other threads' frees wait. */
static bool quick_collect(mpage_t *p) {
  if (p->free_n != 0)
    return true;
  if (p->local_n == 0)
    return false;
  local_to_free(p);
  p->free_is_zero = false;
  return true;
}

/* mi_find_free_page: the queue's first page if it has room, collected
 * whole (301 page.c:845-866) or only its local frees (343 :860-879). */
static uint32_t find_free_page(mi_model_t *m, uint32_t heap, uint32_t bin) {
  uint32_t page = H(m, heap)->pages[bin].first;
  if (page != 0 && m->version == MV_343) {
    if (quick_collect(P(m, page))) {
      P(m, page)->retire_expire = 0;
      return page;
    }
  } else if (page != 0) {
    mi_page_free_collect(m, page, false);
    if (immediate_available(P(m, page))) {
      P(m, page)->retire_expire = 0;
      mi_hook_page_event(m, page, MI_PAGE_REUSED); /* CPython page.c:821 */
      return page;
    }
  }
  return MI_IS_V3(m->version) ? find_free_ex3(m, heap, bin, true)
                              : find_free_ex2(m, heap, bin, true);
}

/* mi_page_fresh_alloc (page.c:262-284; 301 page.c:262-293). */
static uint32_t page_fresh(mi_model_t *m, uint32_t heap, uint32_t bin,
                           uint64_t block_size) {
  uint32_t page;
  if (MI_IS_V3(m->version)) {
    page = mi_arenas3_page_alloc(m, heap, block_size);
    if (page == 0)
      return 0;
    if (P(m, page)->heap == heap) /* reclaimed an abandoned page */
      return page;
  } else {
    page = mi_segment_page_alloc(m, heap, block_size);
    if (page == 0)
      return 0; /* out of memory, or reclaimed a page into the heap */
    /* The page's whole span is the block: for every huge queue page at
     * 209 and 212 (page.c:276; 212 :289), only for a huge segment's at
     * 217 (page.c:290, upstream b5665f0e), where a large page keeps the
     * request's _mi_os_good_alloc_size; never at 2.0.5 (v2.0.5
     * src/page.c:254). */
    bool whole = m->version >= MV_217   ? P(m, page)->is_huge
                 : m->version == MV_205 ? false
                                        : bin == MI_BIN_HUGE;
    mi_page_init(m, heap, page, whole ? P(m, page)->block_size : block_size);
  }
  mi_pq_push(m, heap, bin, page);
  return page;
}

/* ---- Allocation --------------------------------------------------------- */

/* Pops the head of the free list (alloc.c:29-39). */
static uint32_t page_pop(mpage_t *p) {
  p->used++;
  return mi_free_entry(p, --p->free_n);
}

/* _mi_heap_delayed_free_partial (page.c:307-330): blocks other threads
 * freed into this heap's full pages, freed now as local frees. */
static void heap_delayed_free(mi_model_t *m, uint32_t heap);

/* mi_heap_generic_collect (301 page.c:461-468): every 10000 generic
 * allocations (301 page.c:922; 343 option generic_collect). */
static void heap_generic_collect3(mi_model_t *m, uint32_t heap) {
  heap_collect_retired(m, heap, false);
  /* mi_heap_collect_full_pages: only non-abandoning heaps keep full pages;
   * this model's heaps abandon them, so the queue is empty. */
  (void)heap;
}

/* _mi_malloc_generic (page.c:881-926; 301 page.c:912-957) -> page. */
static uint32_t malloc_generic(mi_model_t *m, uint32_t heap, uint64_t size) {
  if (MI_IS_V3(m->version)) {
    mheap_t *h = H(m, heap);
    if (h->generic_count++ > (uint32_t)m->generic_collect) {
      h->generic_count = 0;
      heap_generic_collect3(m, heap);
    }
  } else {
    heap_delayed_free(m, heap);
  }
  uint32_t page;
  uint64_t big = MI_IS_V3(m->version) ? m->g.large_max : MI_MEDIUM_OBJ_MAX;
  if (size > big) {
    /* mi_large_huge_page_alloc (page.c:816-853) */
    heap_collect_hook(m, heap); /* CPython page.c:915 */
    uint64_t bsize = mi_good_alloc_size(size);
    page = page_fresh(m, heap, MI_BIN_HUGE, bsize);
  } else {
    page = find_free_page(m, heap, mi_model_bin(m, size));
  }
  if (page == 0 && m->fail == AS_OK) {
    /* out of memory: collect and retry once (page.c:901-904) */
    mi_heap_collect_ex(m, heap, MI_FORCE);
    if (size > big)
      page = page_fresh(m, heap, MI_BIN_HUGE, mi_good_alloc_size(size));
    else
      page = find_free_page(m, heap, mi_model_bin(m, size));
  }
  return page;
}

/* mi_malloc for one request of size bytes through heap: the fast path for
 * <= 1 KiB (MI_SMALL_SIZE_MAX, include/mimalloc.h:124) pops the first
 * page of the bin's queue without resetting its retire count; anything
 * else takes the generic path (alloc.c:127-145). */
bool mi_malloc(mi_model_t *m, uint32_t heap, uint64_t size, uint32_t *page,
               uint32_t *block) {
  if (size == 0)
    size = 1; /* a zero-size request gets the smallest block */
  if (size <= 1024) {
    uint32_t pg = H(m, heap)->pages[mi_model_bin(m, size)].first;
    if (pg != 0 && immediate_available(P(m, pg))) {
      *page = pg;
      *block = page_pop(P(m, pg));
      return true;
    }
  }
  uint32_t pg = malloc_generic(m, heap, size);
  if (pg == 0) {
    if (m->fail == AS_OK)
      mi_fail_oom(m);
    return false;
  }
  *page = pg;
  *block = page_pop(P(m, pg));
  mpage_t *p = P(m, pg);
  /* 343 _mi_malloc_generic (page.c:1035-1038): a page of blocks above
   * small_max that this block filled goes to the full queue at once, which
   * abandons it (a singleton page too) */
  if (m->version == MV_343 && p->block_size > m->g.small_max &&
      p->used == p->reserved)
    page_to_full(m, pg);
  return true;
}

/* ---- Free --------------------------------------------------------------- */

/* _mi_free_block local part (alloc.c:444-466; 301 free.c mi_free_block_local):
 * push on local_free, writing the block's first word. */
static void free_local(mi_model_t *m, uint32_t page, uint32_t block) {
  mpage_t *p = P(m, page);
  if (!page_blocks(m, p))
    return;
  mi_touch(m, block_addr(p, block), 8);
  p->local_n++;
  p->blocks[p->reserved - p->local_n] = (uint16_t)block;
  p->used--;
  if (p->used == 0)
    page_retire(m, page);
  else if (p->in_full)
    mi_page_unfull(m, page);
}

static void tfree_push(mi_model_t *m, mpage_t *p, uint32_t block) {
  if (p->tfree_n == p->tfree_cap) {
    uint32_t  cap = p->tfree_cap ? p->tfree_cap * 2 : 8;
    uint16_t *nt = realloc(p->tfree, (size_t)cap * sizeof *nt);
    if (nt == NULL) {
      mi_fail_oom(m);
      return;
    }
    p->tfree = nt;
    p->tfree_cap = cap;
  }
  p->tfree[p->tfree_n++] = (uint16_t)block;
}

static void delayed_push(mi_model_t *m, uint32_t heap, uint32_t page,
                         uint32_t block) {
  mheap_t *h = H(m, heap);
  if (h->delayed_n == h->delayed_cap) {
    uint32_t    cap = h->delayed_cap ? h->delayed_cap * 2 : 16;
    mdelayed_t *nd = realloc(h->delayed, (size_t)cap * sizeof *nd);
    if (nd == NULL) {
      mi_fail_oom(m);
      return;
    }
    h->delayed = nd;
    h->delayed_cap = cap;
  }
  h->delayed[h->delayed_n++] = (mdelayed_t){page, block};
}

/* _mi_free_block_mt (209 alloc.c:375-441): the first free from another
 * thread into a page goes to the owner heap's delayed list (the page's
 * delayed state starts at MI_USE_DELAYED_FREE), later ones to the page's
 * thread_free; both write the block's first word. */
static void free_mt2(mi_model_t *m, uint32_t page, uint32_t block) {
  mpage_t *p = P(m, page);
  if (p->is_huge)
    mi_huge_page_reset(m, page); /* alloc.c:384-396 */
  p = P(m, page);
  mi_touch(m, block_addr(p, block), 8);
  if (p->delayed == MI_USE_DELAYED_FREE && p->heap != 0) {
    delayed_push(m, p->heap, page, block);
    p->delayed = MI_NO_DELAYED_FREE;
  } else {
    tfree_push(m, p, block);
  }
}

static uint32_t queue_length(mi_model_t *m, uint32_t heap, uint8_t bin) {
  uint32_t n = 0;
  for (uint32_t pg = H(m, heap)->pages[bin].first; pg != 0; pg = P(m, pg)->next)
    n++;
  return n;
}

/* 343 mi_abandoned_page_try_reclaim (free.c:305-350): into the freeing
 * thread's heap, without limit (page_max_reclaim -1) when the page came
 * from it, else only with reclaim_on_free 1 and the page not mostly used;
 * never once that heap's queue of the size holds more pages than the
 * limit (a limit of 0 when neither applies: only into an empty queue).
 * "Came from it" is `theap == page->theap` (:328), a pointer: a thread
 * whose theap took the meta blocks of an exited thread's counts as the
 * page's origin. */
static bool try_reclaim343(mi_model_t *m, uint32_t tld, uint32_t page) {
  mpage_t *p = P(m, page);
  if (m->reclaim_on_free < 0 || p->block_size > m->g.medium_max || tld == 0)
    return false;
  uint32_t heap = mi_heap_by_tag(m, m->tlds[tld].heap_backing, p->tag);
  if (heap == 0 || H(m, heap)->no_reclaim)
    return false;
  int64_t max = 0;
  if (theap_addr(m, heap) == p->origin)
    max = m->page_max_reclaim;
  else if (m->reclaim_on_free == 1 && !mostly_used(p))
    max = m->cross_thread_max_reclaim;
  if (max >= 0 && queue_length(m, heap, p->bin) > (uint64_t)max)
    return false;
  mi_arenas3_page_unabandon(m, page);
  P(m, page)->heap = heap; /* _mi_theap_page_reclaim (page.c) */
  mi_page_free_collect(m, page, false);
  mi_pq_push_end(m, heap, P(m, page)->bin, page);
  return true;
}

/* mi_free_try_collect_mt (301 free.c, 343 :355-390): the freeing thread
 * now owns an abandoned page: free it if empty, reclaim it into its own
 * heap, or put it back on the reclaimable abandoned list. */
static void free_try_collect_mt3(mi_model_t *m, uint32_t tld, uint32_t page) {
  mi_page_free_collect(m, page, false);
  mpage_t *p = P(m, page);
  if (page_all_free(p)) {
    mi_arenas3_page_unabandon(m, page);
    mi_arenas3_page_free(m, page);
    return;
  }
  bool used_at_frac8 = mostly_used(p);
  if (m->version == MV_343) {
    if (try_reclaim343(m, tld, page))
      return;
  } else if (m->reclaim_on_free != 0 && !used_at_frac8 && tld != 0) {
    uint32_t heap = mi_heap_by_tag(m, m->tlds[tld].heap_backing, p->tag);
    if (heap != 0 && !H(m, heap)->no_reclaim &&
        H(m, heap)->pages[p->bin].first != 0) {
      mi_arenas3_page_unabandon(m, page);
      p = P(m, page);
      p->heap = heap;
      mi_page_free_collect(m, page, false);
      mi_pq_push_end(m, heap, P(m, page)->bin, page);
      return;
    }
  }
  if (!used_at_frac8 && !p->abandoned_mapped)
    mi_arenas3_try_reabandon(m, page);
}

/* 301 mi_free_block_mt (free.c): push on the page's thread_free; a page
 * nobody owns (abandoned) is claimed by this free. */
static void free_mt3(mi_model_t *m, uint32_t tld, uint32_t page,
                     uint32_t block) {
  mpage_t *p = P(m, page);
  mi_touch(m, block_addr(p, block), 8);
  tfree_push(m, p, block);
  if (P(m, page)->heap == 0)
    free_try_collect_mt3(m, tld, page);
}

/* The thread owning the page's memory: 2.x the segment's thread
 * (alloc.c:538), 3.x the page's heap's thread. */
static uint32_t page_owner_tld(mi_model_t *m, const mpage_t *p) {
  if (MI_IS_V3(m->version))
    return p->heap != 0 ? H(m, p->heap)->tld : 0;
  return S(m, p->seg)->tld;
}

void mi_debug_alloc_fill(mi_model_t *m, uint32_t page, sim_addr_t a,
                         uint64_t size) {
  const mpage_t *p = P(m, page);
  uint64_t       usable = p->block_size - MI_PADDING_SIZE;
  uint64_t       delta = usable - size;
  /* memset(block, MI_DEBUG_UNINIT, padded size) (v2.0.5 src/alloc.c:40-42:
   * page->is_zero is never set in a debug build, page.c:642-644) */
  mi_touch(m, a, size + MI_PADDING_SIZE);
  /* the padding's canary and delta at the block's end, and up to 16 fill
   * bytes after the request (alloc.c:58-68) */
  mi_touch(m, a + usable, MI_PADDING_SIZE);
  mi_touch(m, a + size, delta < 16 ? delta : 16);
}

void mi_debug_free_fill(mi_model_t *m, uint32_t tld, uint32_t page,
                        uint32_t block, uint64_t size) {
  const mpage_t *p = P(m, page);
  sim_addr_t     a = p->start + (uint64_t)block * p->block_size;
  /* a huge segment belongs to no thread (v2.0.5 src/segment.c:1557) */
  bool local = page_owner_tld(m, p) == tld && !p->is_huge;
  /* memset(block, MI_DEBUG_FREED, ...): the whole block by its owner
   * (alloc.c:493-495, 410-412), the usable size, at least a free-list
   * word, by another thread (alloc.c:349-353) */
  mi_touch(m, a, local ? p->block_size : size < 8 ? 8 : size);
}

/* mi_free of block `block` of page `page` from the thread whose tld is
 * `tld` (0: a thread mimalloc never initialised). */
void mi_free_block(mi_model_t *m, uint32_t tld, uint32_t page, uint32_t block) {
  mpage_t *p = P(m, page);
  uint32_t owner = page_owner_tld(m, p);
  /* 2.0.5's huge segments belong to no thread: a free from any thread
   * frees the segment at once (v2.0.5 src/alloc.c:355-359,
   * src/segment.c:1562-1585), as its owner's free does here */
  bool huge205 = m->version == MV_205 && p->is_huge;
  if ((owner != 0 && owner == tld) || huge205 ||
      (owner == 0 && mi_segment_attempt_reclaim(m, tld, p->seg))) {
    free_local(m, page, block);
  } else if (MI_IS_V3(m->version)) {
    free_mt3(m, tld, page, block);
  } else {
    free_mt2(m, page, block);
  }
}

/* _mi_free_delayed_block (alloc.c:570-592). */
static void free_delayed_block(mi_model_t *m, uint32_t page, uint32_t block) {
  mpage_t *p = P(m, page);
  if (p->delayed != MI_NEVER_DELAYED_FREE)
    p->delayed = MI_USE_DELAYED_FREE;
  mi_page_free_collect(m, page, false);
  free_local(m, page, block);
}

static void heap_delayed_free(mi_model_t *m, uint32_t heap) {
  mheap_t *h = H(m, heap);
  while (h->delayed_n != 0) {
    mdelayed_t d = h->delayed[--h->delayed_n];
    free_delayed_block(m, d.page, d.block);
    h = H(m, heap);
  }
}

void mi_heap_delayed_free_all(mi_model_t *m, uint32_t heap) {
  heap_delayed_free(m, heap);
}

/* ---- Heap collect (heap.c:88-170; 212 heap.c:119-171; 217; 301) ------- */

uint32_t mi_heap_by_tag(mi_model_t *m, uint32_t heap, uint8_t tag) {
  if (H(m, heap)->tag == tag)
    return heap;
  for (uint32_t h = m->tlds[H(m, heap)->tld].heaps; h != 0;
       h = H(m, h)->next_in_tld)
    if (H(m, h)->tag == tag)
      return h;
  return 0;
}

/* _mi_page_abandon (page.c:366-392; 301 page.c:247-259). */
static void page_abandon(mi_model_t *m, uint32_t page) {
  if (MI_IS_V3(m->version)) {
    page_abandon3(m, page);
    return;
  }
  mi_hook_page_event(m, page, MI_PAGE_ABANDONED); /* CPython page.c:394 */
  mpage_t *p = P(m, page);
  mi_pq_remove(m, p->heap, mi_page_queue_bin(m, p), page);
  P(m, page)->heap = 0;
  mi_segment_page_abandon(m, page);
}

/* mi_heap_page_collect (heap.c:88-104; 217 heap.c:93-109; CPython
 * heap.c:96-111 asks page_maybe_free and abandons a page it keeps). */
static void heap_page_collect(mi_model_t *m, uint32_t page, int kind) {
  if (m->version == MV_217 && kind == MI_FORCE)
    mi_segment_collect(m, P(m, page)->seg, true); /* 217 heap.c:98-102 */
  mi_page_free_collect(m, page, kind >= MI_FORCE);
  if (page_all_free(P(m, page))) {
    /* 343 theap.c:97-103: a normal collect leaves a retired page to its
     * retire count */
    if (m->version == MV_343 && kind < MI_FORCE &&
        P(m, page)->retire_expire != 0)
      return;
    if (!page_maybe_free(m, page, kind >= MI_FORCE) && kind == MI_ABANDON)
      page_abandon(m, page);
  } else if (kind == MI_ABANDON) {
    page_abandon(m, page);
  }
}

static void heap_visit_collect(mi_model_t *m, uint32_t heap, int kind) {
  for (uint32_t bin = 0; bin <= MI_BIN_FULL; bin++) {
    uint32_t page = H(m, heap)->pages[bin].first;
    while (page != 0) {
      uint32_t next = P(m, page)->next;
      heap_page_collect(m, page, kind);
      page = next;
    }
  }
}

void mi_heap_collect_ex(mi_model_t *m, uint32_t heap, int kind) {
  bool     force = kind >= MI_FORCE;
  uint32_t tld = H(m, heap)->tld;
  bool     main_backing =
      m->tlds[tld].thread == 0 && m->tlds[tld].heap_backing == heap;
  m->collects++;
  if (MI_IS_V3(m->version)) {
    heap_collect_retired(m, heap, force);
    heap_collect_hook(m, heap);
    heap_visit_collect(m, heap, kind);
    /* 301 heap.c:126 visits every arena; 343 theap.c:136 only when forced */
    mi_arenas3_collect(m, kind == MI_FORCE,
                       m->version != MV_343 || kind >= MI_FORCE, tld);
    return;
  }
  if (kind == MI_FORCE && main_backing && !H(m, heap)->no_reclaim)
    mi_abandoned_reclaim_all(m, heap); /* heap.c:131-135 */
  if (kind == MI_ABANDON)
    for (uint32_t bin = 0; bin <= MI_BIN_FULL; bin++)
      for (uint32_t pg = H(m, heap)->pages[bin].first; pg != 0;
           pg = P(m, pg)->next)
        P(m, pg)->delayed = MI_NEVER_DELAYED_FREE;
  heap_delayed_free(m, heap);
  heap_collect_retired(m, heap, force);
  /* CPython's QSBR collect comes after the retired pages, which may park
   * pages on the thread's list (3.14.7 heap.c:159-163; 3.13.5 :156-160). */
  heap_collect_hook(m, heap);
  heap_visit_collect(m, heap, kind);
  mi_abandoned_collect(m, heap, kind == MI_FORCE);
  switch (m->version) {
  case MV_205: /* v2.0.5 heap.c:164 (the per-thread cache, :158-160, is
                 off: segment_cache=0, options.c:77) */
  case MV_209: /* heap.c:164 */
    mi_segment_cache_collect(m, kind == MI_FORCE);
    break;
  case MV_212: /* 212 heap.c:167-170 */
    if (force && main_backing)
      mi_arenas2_collect(m, true);
    break;
  default: /* 217 heap.c:173-175 */
    mi_arenas2_collect(m, kind == MI_FORCE);
    break;
  }
}

/* mi_heap_visit_blocks' effect on the heap's pages: each gets
 * _mi_page_free_collect(page, true) (212 heap.c:517 in
 * mi_heap_area_visit_blocks; CPython heap.c:645-646 _mi_heap_area_init). */
void mi_heap_visit_pages(mi_model_t *m, uint32_t heap) {
  for (uint32_t bin = 0; bin <= MI_BIN_FULL; bin++)
    for (uint32_t pg = H(m, heap)->pages[bin].first; pg != 0;
         pg = P(m, pg)->next)
      mi_page_free_collect(m, pg, true);
}

/* A thread's pages at its exit (_mi_heap_collect_abandon, heap.c:172). */
void mi_heap_abandon_all(mi_model_t *m, uint32_t heap) {
  mi_heap_collect_ex(m, heap, MI_ABANDON);
}
