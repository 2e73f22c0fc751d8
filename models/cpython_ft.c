/* models/cpython_ft.c -- CPython's free-threaded build (3.13t, 3.14t) as a
 * composition: the raw domain goes to the libc model, mem and obj to
 * per-thread heaps of the mimalloc 2.1.2 model (models/mimalloc.h), and an
 * emptied page of an object heap is parked until a QSBR grace period has
 * passed, as CPython's patched copy of mimalloc does.
 *
 * Why: the parking is why a free-threaded process keeps its freed objects'
 * memory.  A parked page goes back to its segment only when the same thread
 * later needs a fresh page in one of its object heaps (or allocates more
 * than 128 KiB from one); only then does mimalloc's own purge delay start,
 * and that purge again waits for a trigger (docs/models/cpython-ft.md).
 *
 * Sources: CPython 3.14.7 (tcchen2026/cpython-3.14@0edaa75, the release
 * source), 3.13.5 and 3.13.15 release tarballs; 3.14.0-3.14.3 are 3.14.7
 * with python/cpython#145626 reverted, which equals 3.13.15's rules (the
 * diff of the two trees, docs).  Line numbers are 3.14.7 unless marked.
 *
 * Routing (Objects/obmalloc.c:366-368): raw -> malloc (:55-90); mem ->
 * mi_heap_malloc(&heaps[MEM]) (:257-296); obj ->
 * mi_heap_malloc(current_object_heap) (:299-339), which is the OBJECT heap
 * except around a typed allocation of a GC type (pycore_object_alloc.h:16-64,
 * GC or GC_PRE).  A trace does not say an object's type, so obj requests go
 * to OBJECT unless the trace switches the heap (`option object_heap N`,
 * N = CPython's _Py_mimalloc_heap_id, pycore_mimalloc.h:12-18).  memalign
 * has no PyMem counterpart and goes to libc.
 *
 * Heaps (Python/pystate.c:3160-3206): four per thread on one mi_tld_t: MEM
 * (tag 0, the backing heap), OBJECT 1, GC 2, GC_PRE 3; page_use_qsbr for
 * all but MEM (:3199-3201).
 *
 * QSBR (Python/qsbr.c, Include/internal/pycore_qsbr.h): wr_seq starts at 1
 * and advances by 2 (pycore_qsbr.h:28-29, qsbr.c:114-121); a goal is
 * reached when every attached thread has observed it.  A thread reports a
 * quiescent state at every function entry and loop back-edge
 * (Python/bytecodes.c:157, 167); the model takes one before each of the
 * thread's trace events and treats threads as detached between their
 * events (blocked threads are detached, pystate.c:2258), so a poll by a
 * thread sees the write sequence as of the start of its current event.
 *
 * Versions (cpython.h): 3.13.0-3.13.5 advance the write sequence at every
 * 10th deferral (3.13.5 qsbr.c:44-46, 120-127); 3.13.6+ and 3.14 when more
 * than 80 KiB of pages were parked since the last advance (obmalloc.c:
 * 132-152).  Before 3.14.4 (every 3.13 and 3.14.0-3.14.3), gh-145615: a
 * page parked while in the full queue stays there (unusable), any
 * _mi_page_free_collect with a non-empty local free list -- which the
 * cyclic GC's heap visit does to every page of the GC heaps -- drops a
 * parked page from its list without freeing it, and a page is parked on
 * the list of the thread running the code, not its owner's.
 *
 * Left out: delayed frees of shared list/dict buffers (_PyMem_FreeDelayed,
 * obmalloc.c:1234-1320; a container becomes shared only when another thread
 * reads or resizes it, which a trace does not say), the GC's own schedule
 * (a trace says when it ran: `option gc_collect 1`), the abandoned pool's
 * visit by the GC, and sys.getallocatedblocks()'s heap visits.
 *
 * Sections
 *   Options and state          QSBR
 *   Parked-page lists          Hooks into mimalloc
 *   Threads and routing        Model methods
 */
#include "cpython.h"
#include "idset.h"
#include "mimalloc.h"

#include "../sim/threadtab.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Options and state --------------------------------------------------- */

/* _Py_mimalloc_heap_id (pycore_mimalloc.h:12-18). */
enum { FT_HEAP_MEM, FT_HEAP_OBJECT, FT_HEAP_GC, FT_HEAP_GC_PRE, FT_HEAPS };

#define QSBR_INITIAL             1           /* pycore_qsbr.h:28 */
#define QSBR_INCR                2           /* pycore_qsbr.h:29 */
#define QSBR_PAGE_MEM_LIMIT      (4096 * 20) /* obmalloc.c:132 */
#define QSBR_DEFERRED_LIMIT_3130 10          /* 3.13.5 qsbr.c:46 */

typedef struct ft_thread_s ft_thread_t;
struct ft_thread_s {
  mi_heap_ref_t heap[FT_HEAPS];
  uint32_t      parked_first, parked_last; /* tstate->mimalloc.page_list */
  uint64_t      seq;                       /* _qsbr_thread_state.seq */
  uint64_t      deferred_page_memory;      /* 3.13.6+ (pycore_qsbr.h:62) */
  int           deferrals;                 /* 3.13.0-3.13.5 */
  bool          live;
};

typedef struct ft_model_s ft_model_t;
struct ft_model_s {
  model_t     base;    /* must be first */
  model_t    *libc;    /* raw domain */
  model_t    *mibase;  /* mem and obj: the mimalloc model ... */
  mi_model_t *mi;      /* ... through its composition API */
  idset_t     in_libc; /* ids libc holds */
  /* rules of the version */
  bool count_advance; /* 3.13.0-3.13.5: every 10th deferral */
  bool fix_145615;    /* 3.14.4 and later */
  /* QSBR (struct _qsbr_shared, pycore_qsbr.h:79-94) */
  uint64_t wr_seq, rd_seq;
  /* threads, by trace thread id */
  ft_thread_t *threads;
  size_t       threads_cap;
  uint64_t     max_memory; /* bounds threads (sim/threadtab.h) */
  uint32_t     cur;        /* thread of the event being served */
  uint64_t     now_ns;
  uint8_t      object_heap; /* current_object_heap (option object_heap) */
  /* parked pages: a doubly linked list per thread, by page ref */
  uint32_t   *pnext, *pprev, *plist; /* plist: thread + 1, 0 = none */
  uint32_t    pcap;
  as_status_t hook_fail; /* first failure inside a hook */
  as_err_t    hook_err;
  /* counters */
  uint64_t parked_pages, parks, collects, collect_frees, advances, gc_runs,
      dropped_by_gc;
};

/* ---- QSBR ---------------------------------------------------------------- */

/* _Py_qsbr_advance (qsbr.c:114-121). */
static uint64_t qsbr_advance(ft_model_t *fm) {
  fm->advances++;
  return fm->wr_seq += QSBR_INCR;
}

/* _Py_qbsr_goal_reached (pycore_qsbr.h:114-119): against rd_seq, no scan. */
static bool qsbr_goal_reached(const ft_model_t *fm, uint64_t goal) {
  return goal <= fm->rd_seq;
}

/* _Py_qsbr_poll (qsbr.c:160-171): a scan sets rd_seq to the least sequence
 * any attached thread has observed; only the polling thread is attached. */
static bool qsbr_poll(ft_model_t *fm, uint64_t goal) {
  if (qsbr_goal_reached(fm, goal))
    return true;
  uint64_t seen = fm->threads[fm->cur].seq;
  if (seen > fm->rd_seq)
    fm->rd_seq = seen;
  return goal <= fm->rd_seq;
}

/* The goal of a page being parked: should_advance_qsbr_for_page
 * (obmalloc.c:137-152) with capacity*bsize taken as reserved*bsize (a page
 * emptied after full use); 3.13.0-3.13.5 _Py_qsbr_deferred_advance
 * (3.13.5 qsbr.c:120-127). */
static uint64_t park_goal(ft_model_t *fm, ft_thread_t *t, mi_page_ref_t p) {
  if (fm->count_advance) {
    if (++t->deferrals < QSBR_DEFERRED_LIMIT_3130)
      return fm->wr_seq + QSBR_INCR;
    t->deferrals = 0;
    return qsbr_advance(fm);
  }
  uint64_t bytes =
      mimalloc_page_blocks(fm->mi, p) * mimalloc_page_block_size(fm->mi, p);
  if (bytes > QSBR_PAGE_MEM_LIMIT) {
    t->deferred_page_memory = 0;
    return qsbr_advance(fm);
  }
  t->deferred_page_memory += bytes;
  if (t->deferred_page_memory > QSBR_PAGE_MEM_LIMIT) {
    t->deferred_page_memory = 0;
    return qsbr_advance(fm);
  }
  return fm->wr_seq + QSBR_INCR; /* _Py_qsbr_shared_next, qsbr.c:123-127 */
}

/* ---- Parked-page lists --------------------------------------------------- */

static bool ensure_page_slots(ft_model_t *fm, mi_page_ref_t p) {
  if (p < fm->pcap)
    return true;
  uint32_t cap = fm->pcap ? fm->pcap : 1024;
  while (cap <= p)
    cap *= 2;
  uint32_t *n = realloc(fm->pnext, cap * sizeof *n);
  if (n != NULL)
    fm->pnext = n;
  uint32_t *v = realloc(fm->pprev, cap * sizeof *v);
  if (v != NULL)
    fm->pprev = v;
  uint32_t *l = realloc(fm->plist, cap * sizeof *l);
  if (l != NULL)
    fm->plist = l;
  if (n == NULL || v == NULL || l == NULL)
    return false;
  memset(fm->plist + fm->pcap, 0, (cap - fm->pcap) * sizeof *l);
  fm->pcap = cap;
  return true;
}

static void park_insert_tail(ft_model_t *fm, uint32_t thread, mi_page_ref_t p) {
  if (!ensure_page_slots(fm, p)) {
    if (fm->hook_fail == AS_OK)
      fm->hook_fail = as_err_set(&fm->hook_err, AS_ENOMEM,
                                 "cpython: out of memory for page lists");
    return;
  }
  ft_thread_t *t = &fm->threads[thread];
  fm->plist[p] = thread + 1;
  fm->pnext[p] = 0;
  fm->pprev[p] = t->parked_last;
  if (t->parked_last != 0)
    fm->pnext[t->parked_last] = p;
  else
    t->parked_first = p;
  t->parked_last = p;
  fm->parked_pages++;
}

/* llist_remove of qsbr_node, when the page is on a list. */
static void park_remove(ft_model_t *fm, mi_page_ref_t p) {
  if (p >= fm->pcap || fm->plist[p] == 0)
    return;
  ft_thread_t *t = &fm->threads[fm->plist[p] - 1];
  if (fm->pprev[p] != 0)
    fm->pnext[fm->pprev[p]] = fm->pnext[p];
  else
    t->parked_first = fm->pnext[p];
  if (fm->pnext[p] != 0)
    fm->pprev[fm->pnext[p]] = fm->pprev[p];
  else
    t->parked_last = fm->pprev[p];
  fm->plist[p] = 0;
  fm->parked_pages--;
}

/* _PyMem_mi_page_clear_qsbr (obmalloc.c:97-107). */
static void page_clear_qsbr(ft_model_t *fm, mi_page_ref_t p) {
  *mimalloc_page_user(fm->mi, p) = 0;
  park_remove(fm, p);
}

static bool page_uses_qsbr(ft_model_t *fm, mi_page_ref_t p) {
  return mimalloc_page_tag(fm->mi, p) != FT_HEAP_MEM; /* pystate.c:3199-3201 */
}

/* tstate_from_heap (obmalloc.c:153-158): the thread owning the page's heap;
 * before 3.14.4 the code used the running thread (3.13.5 obmalloc.c:128,
 * 157). */
static uint32_t list_thread(ft_model_t *fm, mi_page_ref_t p) {
  if (!fm->fix_145615)
    return fm->cur;
  mi_heap_ref_t h = mimalloc_page_heap(fm->mi, p);
  for (uint32_t i = 0; i < fm->threads_cap; i++)
    if (fm->threads[i].live)
      for (int k = 0; k < FT_HEAPS; k++)
        if (fm->threads[i].heap[k] == h)
          return i;
  return fm->cur;
}

/* ---- Hooks into mimalloc ---------------------------------------------------
 */

/* _PyMem_mi_page_maybe_free (obmalloc.c:160-201; 3.13.5 :126-147): true
 * keeps (parks) the page. */
static bool hook_page_maybe_free(void *ctx, mi_model_t *m, mi_page_ref_t p,
                                 bool force) {
  ft_model_t *fm = ctx;
  (void)m, (void)force;
  if (!page_uses_qsbr(fm, p))
    return false;
  uint64_t *goal = mimalloc_page_user(fm->mi, p);
  if (*goal != 0 && qsbr_goal_reached(fm, *goal)) { /* :166-171 */
    page_clear_qsbr(fm, p);
    return false;
  }
  /* gh-145615: out of the full queue so it can serve allocations
   * (:173-180). */
  if (fm->fix_145615 && mimalloc_page_in_full(fm->mi, p))
    mimalloc_page_unfull(fm->mi, p);
  page_clear_qsbr(fm, p); /* :182-183; retire_expire: mimalloc.h */
  uint32_t thread = list_thread(fm, p);
  *goal = park_goal(fm, &fm->threads[fm->cur], p);
  park_insert_tail(fm, thread, p); /* :192-195 */
  fm->parks++;
  return true;
}

/* _PyMem_mi_heap_collect_qsbr (obmalloc.c:223-253): frees the running
 * thread's parked pages in order until a goal is not reached yet. */
static void hook_heap_collect(void *ctx, mi_model_t *m, mi_heap_ref_t heap) {
  ft_model_t  *fm = ctx;
  ft_thread_t *t = &fm->threads[fm->cur];
  (void)m;
  if (heap == t->heap[FT_HEAP_MEM]) /* !heap->page_use_qsbr */
    return;
  fm->collects++;
  mi_page_ref_t p = t->parked_first;
  while (p != 0) {
    mi_page_ref_t next = fm->pnext[p];
    if (!mimalloc_page_all_free(fm->mi, p)) { /* reused since */
      page_clear_qsbr(fm, p);
      p = next;
      continue;
    }
    if (!qsbr_poll(fm, *mimalloc_page_user(fm->mi, p)))
      return;
    page_clear_qsbr(fm, p);
    as_err_t    e;
    as_status_t rc = mimalloc_page_free(fm->mi, p, false, fm->now_ns, &e);
    if (rc != AS_OK && fm->hook_fail == AS_OK) {
      fm->hook_fail = rc;
      fm->hook_err = e;
    }
    fm->collect_frees++;
    p = next;
  }
}

/* _PyMem_mi_page_reclaimed (obmalloc.c:203-220). */
static void page_reclaimed(ft_model_t *fm, mi_page_ref_t p) {
  uint64_t *goal = mimalloc_page_user(fm->mi, p);
  if (*goal == 0)
    return;
  if (mimalloc_page_all_free(fm->mi, p))
    park_insert_tail(fm, list_thread(fm, p), p);
  else
    *goal = 0;
}

static void hook_page_event(void *ctx, mi_model_t *m, mi_page_ref_t p,
                            mi_page_event_t what) {
  ft_model_t *fm = ctx;
  (void)m;
  switch (what) {
  case MI_PAGE_REUSED: /* page.c:468, 795, 821 */
    page_clear_qsbr(fm, p);
    break;
  case MI_PAGE_MT_EMPTIED: /* page.c:216-222, 3.14.4+ */
    if (fm->fix_145615)
      page_clear_qsbr(fm, p);
    break;
  case MI_PAGE_LOCAL_COLLECTED: /* 3.13.5 page.c:227-229, before 3.14.4 */
    if (!fm->fix_145615) {
      if (p < fm->pcap && fm->plist[p] != 0)
        fm->dropped_by_gc++;
      page_clear_qsbr(fm, p);
    }
    break;
  case MI_PAGE_ABANDONED: /* page.c:394-400: off the list, goal kept */
    park_remove(fm, p);
    break;
  case MI_PAGE_RECLAIMED: /* page.c:277 */
    page_reclaimed(fm, p);
    break;
  }
}

/* _PyMem_mi_page_is_safe_to_free (obmalloc.c:109-127). */
static bool hook_page_safe_to_free(void *ctx, mi_model_t *m, mi_page_ref_t p) {
  ft_model_t *fm = ctx;
  (void)m;
  uint64_t goal = *mimalloc_page_user(fm->mi, p);
  if (!page_uses_qsbr(fm, p) || goal == 0)
    return true;
  return qsbr_goal_reached(fm, goal);
}

/* ---- Threads and routing --------------------------------------------------
 */

/* The thread's state, with its four heaps made at its first event
 * (tstate_mimalloc_bind, pystate.c:3160-3206); the event is a quiescent
 * point of the thread. */
static as_status_t enter_thread(ft_model_t *fm, const trace_event_t *ev,
                                as_err_t *err) {
  uint32_t id = ev->thread;
  fm->now_ns = ev->t_ns;
  as_status_t grown =
      sim_threadtab_reach((void **)&fm->threads, &fm->threads_cap, id,
                          sizeof *fm->threads, NULL, fm->max_memory, err);
  if (grown != AS_OK)
    return grown;
  ft_thread_t *t = &fm->threads[id];
  fm->cur = id;
  if (!t->live) {
    as_status_t rc =
        mimalloc_thread_heap(fm->mi, id, ev->t_ns, &t->heap[FT_HEAP_MEM], err);
    for (uint8_t k = FT_HEAP_OBJECT; rc == AS_OK && k < FT_HEAPS; k++)
      rc = mimalloc_heap_new(fm->mi, id, k, ev->t_ns, &t->heap[k], err);
    if (rc != AS_OK)
      return rc;
    t->live = true;
  }
  t->seq = fm->wr_seq; /* _Py_qsbr_quiescent_state */
  return AS_OK;
}

static as_status_t leave_hooks(ft_model_t *fm, as_status_t rc, as_err_t *err) {
  if (rc == AS_OK && fm->hook_fail != AS_OK) {
    rc = fm->hook_fail;
    *err = fm->hook_err;
    fm->hook_fail = AS_OK;
  }
  return rc;
}

static bool goes_to_libc(const trace_event_t *ev) {
  return ev->domain == TRACE_DOMAIN_RAW || ev->op == TRACE_MEMALIGN;
}

static mi_heap_ref_t heap_for(const ft_model_t *fm, const trace_event_t *ev) {
  const ft_thread_t *t = &fm->threads[ev->thread];
  return t
      ->heap[ev->domain == TRACE_DOMAIN_MEM ? FT_HEAP_MEM : fm->object_heap];
}

/* ---- Model methods ------------------------------------------------------- */

static as_status_t ft_alloc(model_t *m, const trace_event_t *ev,
                            as_err_t *err) {
  ft_model_t *fm = (ft_model_t *)m;
  if (goes_to_libc(ev)) {
    as_status_t rc = model_alloc(fm->libc, ev, err);
    if (rc == AS_OK && !idset_add(&fm->in_libc, ev->id))
      rc = as_err_set(err, AS_ENOMEM, "cpython: out of memory");
    return rc;
  }
  as_status_t rc = enter_thread(fm, ev, err);
  if (rc != AS_OK)
    return rc;
  rc = mimalloc_heap_alloc(fm->mi, heap_for(fm, ev), ev, err);
  return leave_hooks(fm, rc, err);
}

static as_status_t ft_realloc(model_t *m, const trace_event_t *ev,
                              as_err_t *err) {
  ft_model_t *fm = (ft_model_t *)m;
  if (idset_has(&fm->in_libc, ev->id))
    return model_realloc(fm->libc, ev, err);
  as_status_t rc = enter_thread(fm, ev, err);
  if (rc != AS_OK)
    return rc;
  /* _PyMem_MiRealloc / _PyObject_MiRealloc: mi_heap_realloc in the
   * thread's heap of the domain (obmalloc.c:280-290, 322-333). */
  rc = mimalloc_heap_realloc(fm->mi, heap_for(fm, ev), ev, err);
  return leave_hooks(fm, rc, err);
}

static as_status_t ft_free(model_t *m, const trace_event_t *ev, as_err_t *err) {
  ft_model_t *fm = (ft_model_t *)m;
  if (idset_has(&fm->in_libc, ev->id)) {
    as_status_t rc = model_free(fm->libc, ev, err);
    if (rc == AS_OK)
      idset_del(&fm->in_libc, ev->id);
    return rc;
  }
  as_status_t rc = enter_thread(fm, ev, err);
  if (rc != AS_OK)
    return rc;
  rc = mimalloc_free(fm->mi, ev, err); /* mi_free, obmalloc.c:293-296 */
  return leave_hooks(fm, rc, err);
}

/* A thread's exit: its delayed frees (none here) and then each heap's
 * _mi_heap_collect_abandon, MEM first (pystate.c:1851-1853, 3222-3228);
 * then mimalloc and libc see the thread end. */
static as_status_t ft_thread(model_t *m, const trace_event_t *ev,
                             as_err_t *err) {
  ft_model_t *fm = (ft_model_t *)m;
  if (ev->op == TRACE_THREAD_EXIT && ev->thread < fm->threads_cap &&
      fm->threads[ev->thread].live) {
    as_status_t rc = enter_thread(fm, ev, err);
    for (int k = 0; rc == AS_OK && k < FT_HEAPS; k++)
      rc = mimalloc_heap_abandon(fm->mi, fm->threads[ev->thread].heap[k],
                                 ev->t_ns, err);
    rc = leave_hooks(fm, rc, err);
    if (rc != AS_OK)
      return rc;
    fm->threads[ev->thread].live = false; /* _Py_qsbr_unregister */
  }
  as_status_t rc = model_thread(fm->mibase, ev, err);
  return rc == AS_OK ? model_thread(fm->libc, ev, err) : rc;
}

/* The cyclic GC ran (gc_free_threading.c): process_delayed_frees advances
 * the write sequence and the collecting thread observes it (:950-969), and
 * the collector visits every page of each thread's GC and GC_PRE heaps
 * (:413-423), which collects their free lists (heap.c:645-646). */
static as_status_t gc_collect(ft_model_t *fm, uint64_t now_ns, as_err_t *err) {
  fm->gc_runs++;
  fm->now_ns = now_ns;
  qsbr_advance(fm);
  if (fm->cur < fm->threads_cap)
    fm->threads[fm->cur].seq = fm->wr_seq;
  as_status_t rc = AS_OK;
  for (uint32_t i = 0; rc == AS_OK && i < fm->threads_cap; i++)
    if (fm->threads[i].live)
      for (int k = FT_HEAP_GC; rc == AS_OK && k <= FT_HEAP_GC_PRE; k++)
        rc = mimalloc_heap_visit(fm->mi, fm->threads[i].heap[k], now_ns, err);
  return leave_hooks(fm, rc, err);
}

/* `option object_heap N` switches current_object_heap for the obj requests
 * that follow (what _PyObject_MallocWithType does around one allocation,
 * pycore_object_alloc.h:35-49); `option gc_collect 1` says the cyclic GC
 * ran.  Anything else is the libc model's (mallopt, mallctl). */
static as_status_t ft_set_option(model_t *m, const char *name, int64_t value,
                                 uint64_t now_ns, as_err_t *err) {
  ft_model_t *fm = (ft_model_t *)m;
  if (strcmp(name, "object_heap") == 0) {
    if (value < FT_HEAP_OBJECT || value > FT_HEAP_GC_PRE)
      return as_err_set(err, AS_EINVAL,
                        "cpython: object_heap expects 1 (object), 2 (gc) or "
                        "3 (gc_pre), got %" PRId64,
                        value);
    fm->object_heap = (uint8_t)value;
    return AS_OK;
  }
  if (strcmp(name, "gc_collect") == 0)
    return gc_collect(fm, now_ns, err);
  return model_set_option(fm->libc, name, value, now_ns, err);
}

/* Seeds are the libc allocator's. */
static as_status_t ft_seed(model_t *m, const char *kind, uint64_t index,
                           uint64_t value, as_err_t *err) {
  return model_seed(((ft_model_t *)m)->libc, kind, index, value, err);
}

static as_status_t ft_purge(model_t *m, const trace_event_t *ev,
                            as_err_t *err) {
  ft_model_t *fm = (ft_model_t *)m;
  if (!model_has_purge(fm->libc))
    return AS_DONE; /* as the libc model alone: no notion (model.h) */
  return model_purge(fm->libc, ev, err);
}

static as_status_t ft_trim(model_t *m, uint64_t pad, uint64_t now_ns,
                           as_err_t *err) {
  ft_model_t *fm = (ft_model_t *)m;
  return model_trim(fm->libc, pad, now_ns, err);
}

static bool ft_locate(const model_t *m, uint64_t id, sim_addr_t *addr) {
  const ft_model_t *fm = (const ft_model_t *)m;
  return idset_has(&fm->in_libc, id) ? model_locate(fm->libc, id, addr)
                                     : model_locate(fm->mibase, id, addr);
}

static size_t ft_counters(const model_t *m, model_counter_t *out, size_t cap) {
  const ft_model_t *fm = (const ft_model_t *)m;
  size_t            n = 0;
  n = model_counter_put(out, n, cap, "cpython", "parked_pages",
                        fm->parked_pages, "count",
                        "empty object-heap pages waiting for QSBR");
  n = model_counter_put(out, n, cap, "cpython", "pages_parked", fm->parks,
                        "count", "pages parked so far");
  n = model_counter_put(out, n, cap, "cpython", "qsbr_collects", fm->collects,
                        "count", "_PyMem_mi_heap_collect_qsbr calls");
  n = model_counter_put(out, n, cap, "cpython", "parked_pages_freed",
                        fm->collect_frees, "count",
                        "parked pages handed back to their segments");
  n = model_counter_put(out, n, cap, "cpython", "qsbr_advances", fm->advances,
                        "count", "write-sequence advances");
  n = model_counter_put(out, n, cap, "cpython", "gc_runs", fm->gc_runs, "count",
                        "cyclic GC runs the trace reported");
  n = model_counter_put(out, n, cap, "cpython", "parked_dropped_by_gc",
                        fm->dropped_by_gc, "count",
                        "parked pages the GC's visit left unreclaimable "
                        "(before 3.14.4)");
  n += model_counters(fm->mibase, n < cap ? out + n : NULL,
                      n < cap ? cap - n : 0);
  return n + model_counters(fm->libc, n < cap ? out + n : NULL,
                            n < cap ? cap - n : 0);
}

static as_status_t ft_walk(const model_t *m, model_region_fn fn, void *user,
                           as_err_t *err) {
  const ft_model_t *fm = (const ft_model_t *)m;
  as_status_t       rc = model_walk(fm->mibase, fn, user, err);
  return rc == AS_OK ? model_walk(fm->libc, fn, user, err) : rc;
}

static as_status_t ft_check(const model_t *m, as_err_t *err) {
  const ft_model_t *fm = (const ft_model_t *)m;
  as_status_t       rc = model_check(fm->mibase, err);
  return rc != AS_OK ? rc : model_check(fm->libc, err);
}

static void ft_stats(const model_t *m, model_stats_t *out) {
  const ft_model_t *fm = (const ft_model_t *)m;
  model_stats_t     a, b;
  model_stats(fm->mibase, &a);
  model_stats(fm->libc, &b);
  out->live_bytes = a.live_bytes + b.live_bytes;
  out->live_objects = a.live_objects + b.live_objects;
  out->mapped_bytes = a.mapped_bytes + b.mapped_bytes;
  out->arenas = a.arenas; /* mimalloc segments */
  out->free_bytes = a.free_bytes + b.free_bytes;
}

static void ft_destroy(model_t *m) {
  ft_model_t *fm = (ft_model_t *)m;
  model_destroy(fm->mibase);
  model_destroy(fm->libc);
  idset_free(&fm->in_libc);
  free(fm->threads);
  free(fm->pnext);
  free(fm->pprev);
  free(fm->plist);
  free(fm);
}

static const model_methods_t model_cpython_ft_methods = {
    .name = "cpython",
    .summary = "CPython free-threaded build: per-thread mimalloc heaps, "
               "empty object pages parked for QSBR",
    .composition = true,
    /* The survivors formula's unit: a small page (mimalloc 2.1.2 64 KiB,
     * types.h:185), which one survivor pins once empty pages are purged. */
    .formula_page_bytes = 65536,
    .destroy = ft_destroy,
    .alloc = ft_alloc,
    .realloc = ft_realloc,
    .free = ft_free,
    .thread = ft_thread,
    .trim = ft_trim,
    .stats = ft_stats,
    .locate = ft_locate,
    .purge = ft_purge,
    .set_option = ft_set_option,
    .seed = ft_seed,
    .counters = ft_counters,
    .walk = ft_walk,
    .check = ft_check,
};

mi_model_t *cpython_ft_mimalloc(const model_t *m) {
  return m->methods == &model_cpython_ft_methods ? ((const ft_model_t *)m)->mi
                                                 : NULL;
}

/* "mimalloc:version=2.1.2,..." with the composition's mimalloc knobs. */
static void mimalloc_spec(const model_opts_t *opts, char *buf, size_t len) {
  size_t used = (size_t)snprintf(buf, len, "mimalloc:version=2.1.2");
  for (int k = CO_FIRST_MIMALLOC; k < CO_COUNT && used < len; k++)
    used += (size_t)snprintf(buf + used, len - used, ",%s=%s",
                             opts->table[k].name, model_opt_text(opts, k));
}

static as_status_t check_ft_options(const model_opts_t *opts, as_err_t *err) {
  const char *v = model_opt_text(opts, CO_VERSION);
  if (strcmp(v, "3.10") == 0 || strcmp(v, "3.11") == 0 ||
      strcmp(v, "3.12") == 0)
    return as_err_set(err, AS_EUSAGE,
                      "cpython: build=ft needs version 3.13 or later (the "
                      "free-threaded build first shipped in 3.13), not %s",
                      v);
  if (model_opt_was_set(opts, CO_PYTHONMALLOC) &&
      strcmp(model_opt_text(opts, CO_PYTHONMALLOC), "mimalloc") != 0)
    return as_err_set(err, AS_EUSAGE,
                      "cpython: build=ft's PYTHONMALLOC accepts only mimalloc "
                      "(and debug variants), not %s (Objects/obmalloc.c:"
                      "591-614)",
                      model_opt_text(opts, CO_PYTHONMALLOC));
  return AS_OK;
}

as_status_t cpython_ft_create(const model_opts_t *opts, const model_ctx_t *ctx,
                              model_t **out, as_err_t *err) {
  *out = NULL;
  as_status_t rc = check_ft_options(opts, err);
  if (rc != AS_OK)
    return rc;
  ft_model_t *fm = calloc(1, sizeof *fm);
  if (fm == NULL)
    return as_err_set(err, AS_ENOMEM, "cpython: out of memory");
  fm->base.methods = &model_cpython_ft_methods;
  fm->base.opts = *opts;
  /* The effective allocator of the mem and obj domains. */
  snprintf(fm->base.opts.text[CO_PYTHONMALLOC],
           sizeof fm->base.opts.text[CO_PYTHONMALLOC], "mimalloc");
  fm->base.opts.num[CO_PYTHONMALLOC] = 2;
  const char *v = model_opt_text(opts, CO_VERSION);
  fm->count_advance = strncmp(v, "3.13.", 5) == 0;
  fm->fix_145615 = strcmp(v, "3.14") == 0;
  fm->wr_seq = fm->rd_seq = QSBR_INITIAL;
  fm->object_heap = FT_HEAP_OBJECT;
  fm->max_memory = sim_kernel_max_memory_bytes(ctx->kernel);

  const char *libc_spec =
      ctx->libc_spec ? ctx->libc_spec : model_default_libc();
  rc = cpython_libc_check(libc_spec, err);
  if (rc == AS_OK)
    rc = model_create_from_spec(libc_spec, ctx, &fm->libc, err);
  model_t *mi = NULL;
  if (rc == AS_OK) {
    char spec[256];
    mimalloc_spec(opts, spec, sizeof spec);
    rc = model_create_from_spec(spec, ctx, &mi, err);
  }
  if (rc != AS_OK) {
    model_destroy(mi);
    ft_destroy(&fm->base);
    return rc;
  }
  fm->mibase = mi;
  fm->mi = (mi_model_t *)mi; /* mimalloc.h: begins with model_t */
  mimalloc_set_hooks(fm->mi, &(mi_hooks_t){
                                 .ctx = fm,
                                 .page_maybe_free = hook_page_maybe_free,
                                 .heap_collect = hook_heap_collect,
                                 .page_event = hook_page_event,
                                 .page_safe_to_free = hook_page_safe_to_free,
                             });
  *out = &fm->base;
  return AS_OK;
}
