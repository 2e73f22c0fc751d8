/* models/mimalloc.h -- the mimalloc model as a library for compositions
 * (CPython's free-threaded build): several heaps on one thread's segments,
 * pages tagged by heap, and hooks where CPython's vendored copy defers
 * freeing empty pages.  The model itself is registered as "mimalloc"
 * (models/mimalloc.c); docs/models/mimalloc.md describes both.
 *
 * Heaps.  Every trace thread gets thread-local data (its segments, span
 * queues and abandoned state: mimalloc's mi_tld_t) and a backing heap with
 * tag 0 at its first event.  mimalloc_heap_new() adds a heap to a thread,
 * as mi_heap_new() does; pages allocated through it carry its tag (as
 * CPython's Objects/mimalloc/page.c:689 sets page->tag = heap->tag), and
 * the heaps of one thread share its segments, so their pages interleave in
 * the same 32 MiB segments.  A reclaimed abandoned page goes to the
 * reclaiming thread's heap with the page's tag (_mi_heap_by_tag: upstream
 * from 2.1.7's heap_tag, and CPython's patched 2.1.2, segment.c:1350;
 * the model takes it in 2.1.2 too once a heap with a non-zero tag exists).
 *
 * Hooks.  CPython 3.13/3.14 patch their vendored 2.1.2 at a few places
 * (Objects/mimalloc/page.c, heap.c, segment.c); each patch is a hook here,
 * called at the same place, with upstream's behaviour when the hook is
 * absent.  The 2.x code paths carry them; 3.x calls the ones whose place
 * still exists (retire, collect, the free-page search).
 */
#ifndef ALLOCSIM_MIMALLOC_H
#define ALLOCSIM_MIMALLOC_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"

typedef struct mi_model_s mi_model_t; /* begins with model_t */
typedef uint32_t          mi_heap_ref_t;
typedef uint32_t          mi_page_ref_t;

/* What happened to a page, for the hook that follows CPython's QSBR state
 * (Objects/mimalloc/page.c in CPython 3.14.7; 3.13.5 in brackets). */
typedef enum mi_page_event_e {
  /* _PyMem_mi_page_clear_qsbr sites: _mi_page_retire starts (page.c:468
   * [464]), a page is picked by mi_page_queue_find_free_ex (:795 [791]) or
   * by mi_find_free_page's fast path (:821 [817]). */
  MI_PAGE_REUSED,
  /* _mi_page_thread_free_collect brought `used` to 0 (page.c:216-222;
   * only CPython 3.14.4 and later clear there). */
  MI_PAGE_MT_EMPTIED,
  /* _mi_page_free_collect found local_free non-empty (3.13.5 page.c:227-229
   * clears there; 3.14.4 and later do not). */
  MI_PAGE_LOCAL_COLLECTED,
  /* _mi_page_abandon (page.c:394-400): leaves its QSBR list, keeps its
   * goal. */
  MI_PAGE_ABANDONED,
  /* _mi_page_reclaim (page.c:277 -> _PyMem_mi_page_reclaimed): the page is
   * in a heap of the reclaiming thread again. */
  MI_PAGE_RECLAIMED
} mi_page_event_t;

typedef struct mi_hooks_s mi_hooks_t;
struct mi_hooks_s {
  void *ctx;
  /* Called where upstream frees an empty page from _mi_page_retire,
   * _mi_heap_collect_retired and mi_heap_page_collect (CPython page.c:491,
   * :509 and heap.c:101 call _PyMem_mi_page_maybe_free there).  Return true
   * to keep the page (deferred: the composition frees it later with
   * mimalloc_page_free()), false to have it freed now.  NULL: freed.
   * A kept page's retire_expire is reset, as CPython's hook does
   * (Objects/obmalloc.c:183 in 3.14.7, :140 in 3.13.5).  mi_heap_collect
   * asks twice for a retired page (collect_retired, then the page visit),
   * as CPython's does. */
  bool (*page_maybe_free)(void *ctx, mi_model_t *m, mi_page_ref_t page,
                          bool force);
  /* Called where CPython calls _PyMem_mi_heap_collect_qsbr: no page with
   * room in mi_page_queue_find_free_ex (page.c:784), before a large or
   * huge allocation (page.c:915) and at heap collect after the retired
   * pages (heap.c:159-163). */
  void (*heap_collect)(void *ctx, mi_model_t *m, mi_heap_ref_t heap);
  /* The page events above; NULL: nothing. */
  void (*page_event)(void *ctx, mi_model_t *m, mi_page_ref_t page,
                     mi_page_event_t what);
  /* Whether an all-free page of an abandoned segment may be freed when the
   * segment is checked or reclaimed (CPython segment.c:1283 and :1361 ask
   * _PyMem_mi_page_is_safe_to_free).  NULL: always. */
  bool (*page_safe_to_free)(void *ctx, mi_model_t *m, mi_page_ref_t page);
};

/* Installs hooks (copied); NULL removes them. */
void mimalloc_set_hooks(mi_model_t *m, const mi_hooks_t *hooks);

/* The backing heap of trace thread `thread` (creating the thread's data on
 * first use). */
as_status_t mimalloc_thread_heap(mi_model_t *m, uint32_t thread,
                                 uint64_t now_ns, mi_heap_ref_t *out,
                                 as_err_t *err);
/* A new heap with tag on thread's segments (mi_heap_new + heap->tag). */
as_status_t mimalloc_heap_new(mi_model_t *m, uint32_t thread, uint8_t tag,
                              uint64_t now_ns, mi_heap_ref_t *out,
                              as_err_t *err);

/* Allocation through a heap (malloc/calloc/memalign/realloc events, object
 * ids as in the trace; the heap must belong to ev->thread); free from
 * ev->thread of whatever heap owns the block. */
as_status_t mimalloc_heap_alloc(mi_model_t *m, mi_heap_ref_t heap,
                                const trace_event_t *ev, as_err_t *err);
as_status_t mimalloc_heap_realloc(mi_model_t *m, mi_heap_ref_t heap,
                                  const trace_event_t *ev, as_err_t *err);
as_status_t mimalloc_free(mi_model_t *m, const trace_event_t *ev,
                          as_err_t *err);
/* mi_heap_collect(heap, force) at now_ns. */
as_status_t mimalloc_heap_collect(mi_model_t *m, mi_heap_ref_t heap, bool force,
                                  uint64_t now_ns, as_err_t *err);
/* _mi_heap_collect_abandon(heap): what CPython does for each of a thread's
 * heaps when it exits (Python/pystate.c:3224-3228), before the thread's
 * end (a `thread exit` event) returns the thread data. */
as_status_t mimalloc_heap_abandon(mi_model_t *m, mi_heap_ref_t heap,
                                  uint64_t now_ns, as_err_t *err);
/* What visiting a heap's blocks does to its pages: _mi_page_free_collect
 * (page, force) of each (mi_heap_visit_blocks -> _mi_heap_area_init,
 * CPython heap.c:645-646; the free-threaded GC visits its heaps). */
as_status_t mimalloc_heap_visit(mi_model_t *m, mi_heap_ref_t heap,
                                uint64_t now_ns, as_err_t *err);

/* Page queries and actions, for hooks. */
bool          mimalloc_page_all_free(const mi_model_t *m, mi_page_ref_t p);
mi_heap_ref_t mimalloc_page_heap(const mi_model_t *m, mi_page_ref_t p);
uint8_t       mimalloc_page_tag(const mi_model_t *m, mi_page_ref_t p);
uint64_t      mimalloc_page_bytes(const mi_model_t *m, mi_page_ref_t p);
/* The page holding live object id, 0 if none; the page's block size and
 * the blocks it can hold (page->reserved). */
mi_page_ref_t mimalloc_object_page(const mi_model_t *m, uint64_t id);
uint64_t      mimalloc_page_block_size(const mi_model_t *m, mi_page_ref_t p);
uint64_t      mimalloc_page_blocks(const mi_model_t *m, mi_page_ref_t p);
/* Whether the page is in its heap's full queue, and _mi_page_unfull
 * (CPython 3.14.4+ obmalloc.c:178-180 unfulls a page it defers). */
bool mimalloc_page_in_full(const mi_model_t *m, mi_page_ref_t p);
void mimalloc_page_unfull(mi_model_t *m, mi_page_ref_t p);
/* One word per page that the model never reads (a QSBR goal). */
uint64_t *mimalloc_page_user(mi_model_t *m, mi_page_ref_t p);
/* _mi_page_free of an empty page kept by page_maybe_free; AS_EINVAL if
 * the page is not empty any more. */
as_status_t mimalloc_page_free(mi_model_t *m, mi_page_ref_t p, bool force,
                               uint64_t now_ns, as_err_t *err);

/* The 3.x arenas, in reservation order (none in 2.x): how many there are,
 * and the start and size of the first max in base[] and bytes[] -- what
 * mi_debug_show_arenas prints of a real process ("arena I at P: N
 * slices", v3.0.1 src/arena.c:1467), for lining the two up. */
size_t mimalloc_arenas3(const mi_model_t *m, uint64_t *base, uint64_t *bytes,
                        size_t max);

/* Lowers the page numbers the object table's 4-byte entries hold to n (if
 * fewer), so that a test reaches its rewrite to whole entries with a small
 * heap. */
void mimalloc_narrow_pages_for_tests(model_t *m, uint32_t n);

#endif
