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
 * reclaiming thread's heap with the page's tag (_mi_heap_by_tag).
 *
 * Hooks.  CPython 3.13/3.14 patch their vendored 2.1.2 at a few places
 * (Objects/mimalloc/page.c and heap.c); each patch is a hook here, called
 * at the same place, with the same effect when the hook is absent.
 */
#ifndef ALLOCSIM_MIMALLOC_H
#define ALLOCSIM_MIMALLOC_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"

typedef struct mi_model_s mi_model_t; /* begins with model_t */
typedef uint32_t           mi_heap_ref_t;
typedef uint32_t           mi_page_ref_t;

typedef struct mi_hooks_s mi_hooks_t;
struct mi_hooks_s {
  void *ctx;
  /* Called where upstream frees an empty page from _mi_page_retire and
   * _mi_heap_collect_retired (CPython page.c:491 and :509 call
   * _PyMem_mi_page_maybe_free there).  Return true if the hook keeps the
   * page (deferred); it frees it later with mimalloc_page_free().  NULL:
   * the page is freed. */
  bool (*page_maybe_free)(void *ctx, mi_model_t *m, mi_page_ref_t page,
                          bool force);
  /* Called where CPython calls _PyMem_mi_heap_collect_qsbr: no page with
   * room in mi_page_queue_find_free_ex (page.c:784), before a large or
   * huge allocation (page.c:915) and at heap collect (heap.c:163). */
  void (*heap_collect)(void *ctx, mi_model_t *m, mi_heap_ref_t heap);
  /* A page is allocated from again, or reclaimed, or leaves the full queue
   * (CPython's _PyMem_mi_page_clear_qsbr / _PyMem_mi_page_reclaimed
   * sites: page.c:216-222, 277, 394-400, 467, 795, 821). */
  void (*page_reused)(void *ctx, mi_model_t *m, mi_page_ref_t page);
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
as_status_t mimalloc_heap_collect(mi_model_t *m, mi_heap_ref_t heap,
                                  bool force, uint64_t now_ns,
                                  as_err_t *err);

/* Page queries and actions, for hooks. */
bool          mimalloc_page_all_free(const mi_model_t *m, mi_page_ref_t p);
mi_heap_ref_t mimalloc_page_heap(const mi_model_t *m, mi_page_ref_t p);
uint8_t       mimalloc_page_tag(const mi_model_t *m, mi_page_ref_t p);
uint64_t      mimalloc_page_bytes(const mi_model_t *m, mi_page_ref_t p);
/* One word per page that the model never reads (a QSBR goal). */
uint64_t     *mimalloc_page_user(mi_model_t *m, mi_page_ref_t p);
/* _mi_page_free of an empty page kept by page_maybe_free; AS_EINVAL if
 * the page is not empty any more. */
as_status_t   mimalloc_page_free(mi_model_t *m, mi_page_ref_t p, bool force,
                                 uint64_t now_ns, as_err_t *err);

#endif
