/* traces/wl_spike.c -- the `spike` workload: the load-spike study's spike
 * (docs/studies.md), as the
 * allocation requests CPython 3.11 (or, with --python 3.14, 3.14) makes.
 *
 * The Python program (scripts/measure/spike.py runs exactly this; the study's
 * "Reproduce retained memory", with the shared splitmix64 size rule instead
 * of random.Random so that both sides draw the same lengths):
 *
 *     gc.collect()                                  # mark start
 *     data = [("x" * len_i, value_i) for i in range(count)]
 *                                                   # mark peak
 *     survivors = data[::keep_every]
 *     del data
 *     gc.collect()                                  # mark after_free
 *     malloc_trim(0)                                # trim 0; mark after_trim
 *
 * With --threads T > 1 the build is `data = [None] * count` in the main
 * thread, then T threads (ids 1..T) fill data[k*count//T, (k+1)*count//T),
 * all alive at once (spike.py parks them at a barrier before building); the
 * GIL interleaves them, which the trace renders as round-robin slices of
 * --slice tuples.  Everything after the build runs in the main thread.
 *
 * Requests, with CPython 3.11 sources (branch tip 3.11.11+,
 * shane-mf/cpython-3.11@05e222c):
 *   - "x" * n is unicode_repeat (Objects/unicodeobject.c:12746), which calls
 *     PyUnicode_New(n, 127) (:12768); for an ASCII string that is one
 *     PyObject_Malloc (obj domain) of sizeof(PyASCIIObject) + n + 1 (:1388,
 *     :1425).  sizeof(PyASCIIObject) is 48 on 64-bit (Include/cpython/
 *     unicodeobject.h:146-206: ob_base 16, length 8, hash 8, state 4 padded
 *     to 8, wstr 8; sys.getsizeof("") == 49 on 3.11).  Every length here is
 *     over 512 bytes, so cpython hands them to libc (3.11.2
 *     Objects/obmalloc.c:1962, :2002).
 *   - The float is PyFloat_FromDouble (Objects/floatobject.c:136-156): it
 *     pops the float free list, else PyObject_Malloc(sizeof(PyFloatObject))
 *     = 24 bytes.  float dealloc (:255-272) pushes onto the free list while
 *     it holds fewer than PyFloat_MAXFREELIST = 100 (:28-29), else frees.
 *   - The 2-tuple is tuple_alloc (Objects/tupleobject.c:33-53): the size-2
 *     free list, else PyObject_GC_NewVar → gc_alloc (Modules/gcmodule.c:
 *     2276-2290, 2307-2318) of _PyType_PreHeaderSize 16 (PyGC_Head;
 *     Include/internal/pycore_object.h:222-226) + _PyObject_VAR_SIZE =
 *     basicsize 24 + 2 * 8 = 56 bytes (sys.getsizeof((1, 2)) == 56).
 *     tupledealloc (:200-213) decrefs the items last to first (float, then
 *     str) and then maybe_freelist_push (:1212-1236) keeps the tuple while
 *     its free list holds fewer than PyTuple_MAXFREELIST = 2000
 *     (Include/internal/pycore_tuple.h:44).
 *   - The list object is PyList_New → gc_alloc of 16 + sizeof(PyListObject)
 *     40 = 56 bytes; its free list holds up to PyList_MAXFREELIST = 80
 *     (Include/internal/pycore_list.h:28).  Appends grow ob_item through
 *     list_resize (Objects/listobject.c:44-96): new_allocated = (newsize +
 *     (newsize >> 3) + 6) & ~3 (:70), not over-allocated when the jump is
 *     large (:74-75), PyMem_Realloc (mem domain) of new_allocated * 8 (:80-81),
 *     a malloc the first time (ob_item NULL).
 *   - [None] * count and data[::k] both use list_new_prealloc (:201-215):
 *     PyList_New(0) plus PyMem_New(PyObject *, size), i.e. a mem-domain
 *     malloc of size * 8 (list_repeat :558; list_subscript :2907).
 *   - del data is list_dealloc (:345-370): items decref'd *backwards*
 *     (:355-358), then PyMem_Free(ob_item), then the list object goes to the
 *     list free list.
 *   - gc.collect() is a generation-2 collection, which runs clear_freelists
 *     (Modules/gcmodule.c:1312-1313, :1035-1043): tuples first
 *     (maybe_freelist_clear, tupleobject.c:1239-1254, popping from the
 *     head), then floats (floatobject.c:2016-2028, from the head), then
 *     lists (listobject.c:121-131, from the top of the array).
 *   Because the script calls gc.collect() before `start`, every free list is
 *   empty when the trace begins.
 * --python 3.14 (CPython 3.14.7, tcchen2026/cpython-3.14@b494531) changes two
 * things and nothing else that this program reaches:
 *   - sizeof(PyASCIIObject) is 40: wstr is gone (Include/cpython/
 *     unicodeobject.h; sys.getsizeof("") == 41 since 3.12), so each string
 *     asks for 8 bytes less (Objects/unicodeobject.c:1391, :1424);
 *   - gc.collect() clears the float free list before the tuple lists
 *     (Python/gc.c:1492-1496 → _PyObject_ClearFreeLists, Objects/object.c:
 *     926-934: floats, tuples[0..19], lists).
 *   The free-list limits are the same (Include/internal/
 *   pycore_freelist_state.h:12-18: tuples 2000, lists 80, floats 100), as
 *   are list_resize (Objects/listobject.c:133-138), the tuple's 56 bytes and
 *   list_dealloc's backward order (:555-567).  3.14 inlines comprehensions
 *   (PEP 709), which changes no request made here.
 * Left out, deliberately: the loop's temporary ints (range items and the
 * PRNG arithmetic; each is freed before the next is made, so they recycle
 * one or two pymalloc blocks), the temporary [None] of the threaded build
 * (two tiny blocks), the comprehension's function and frame objects, thread
 * bootstrap allocations, and automatic GC passes during the build (they
 * allocate nothing; a generation-2 pass would also clear the free lists,
 * which are empty then anyway).
 *
 * Object ids are recycled LIFO from a stack of freed ids, so they stay below
 * the peak live count.  Virtual time: each tuple costs --tuple-ns (default
 * 1250 ns = the study's 0.20 s build / 160,000 tuples), in the build and in
 * the teardown alike (the teardown was not timed by the study; using the same
 * cost is a simplification that only matters for clocked models); trim
 * takes 30 ms (the study: "brought it down to 57 MiB in about 30 ms").
 *
 * Sections: size rules, generator state, event emission, phases, options.
 */
#include "wl_spike.h"
#include "wl_emit.h"
#include "wl_survivors.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPIKE_FLOAT_FREELIST 100  /* floatobject.c:29 PyFloat_MAXFREELIST */
#define SPIKE_TUPLE_FREELIST 2000 /* pycore_tuple.h:44 PyTuple_MAXFREELIST */
#define SPIKE_LIST_FREELIST  80   /* pycore_list.h:28 PyList_MAXFREELIST */
#define SPIKE_PTR_SIZE       8    /* sizeof(PyObject *) on 64-bit */
#define SPIKE_TRIM_NS        UINT64_C(30000000)  /* the study: ~30 ms */
#define SPIKE_MAX_COUNT      UINT64_C(100000000) /* ids fit in uint32_t */

/* ---- Size rules --------------------------------------------------------- */

uint64_t spike_str_len(uint64_t seed, uint64_t i, uint64_t min, uint64_t max) {
  uint64_t z = survivors_splitmix64_at(seed, i);
  return min + z % (max - min + 1);
}

uint64_t spike_str_request(spike_python_t py, uint64_t len) {
  /* 3.11 unicodeobject.c:1425; 3.14 :1424 (same expression). */
  return (py == SPIKE_PY314 ? SPIKE_ASCII_HEADER_314 : SPIKE_ASCII_HEADER) +
         len + 1;
}

uint64_t spike_list_capacity(uint64_t allocated, uint64_t old_size,
                             uint64_t new_size) {
  /* listobject.c:52-55: no realloc while the capacity fits and the list
   * stays at least half full. */
  if (allocated >= new_size && new_size >= (allocated >> 1))
    return allocated;
  uint64_t cap = (new_size + (new_size >> 3) + 6) & ~UINT64_C(3); /* :70 */
  if (new_size - old_size > cap - new_size)                       /* :74 */
    cap = (new_size + 3) & ~UINT64_C(3);                          /* :75 */
  if (new_size == 0)
    cap = 0;
  return cap;
}

/* ---- Generator state ---------------------------------------------------- */

typedef enum spike_phase_e {
  PH_START,      /* mark start */
  PH_SETUP,      /* the data list (and, threaded, the threads) */
  PH_BUILD,      /* one tuple per step */
  PH_PEAK,       /* mark peak */
  PH_SLICE,      /* survivors = data[::k] */
  PH_DEALLOC,    /* del data: one tuple per step, backwards */
  PH_DATA_LIST,  /* del data: ob_item, list object to its free list */
  PH_GC,         /* gc.collect(): clear the free lists */
  PH_AFTER_FREE, /* mark after_free */
  PH_TRIM,       /* trim 0 */
  PH_AFTER_TRIM, /* mark after_trim */
  PH_DONE
} spike_phase_t;

/* PH_GC frees at most SPIKE_PENDING_MAX / 2 - 1 objects per step. */
#define SPIKE_PENDING_MAX 16

typedef struct spike_src_s spike_src_t;
struct spike_src_s {
  trace_source_t base; /* must be first */

  uint64_t       count, min, max, keep_every, seed, threads, slice, tuple_ns;
  spike_python_t python;

  spike_phase_t phase;
  wl_emit_t     em;     /* clock, id stack, pending events */
  uint64_t      cursor; /* build: tuples made (threaded: threads started);
                           dealloc: next index + 1 */

  /* Per tuple i: the ids of its str, float and tuple. */
  uint32_t *str_id, *flt_id, *tup_id;

  /* CPython's free lists: ids of objects the allocator still holds. */
  uint32_t float_fl[SPIKE_FLOAT_FREELIST];
  size_t   nfloat_fl;
  uint32_t tuple_fl[SPIKE_TUPLE_FREELIST];
  size_t   ntuple_fl;
  uint32_t list_fl[SPIKE_LIST_FREELIST];
  size_t   nlist_fl;

  /* The data list: object id, ob_item id, capacity and length. */
  uint32_t data_list, data_items;
  uint64_t data_alloc, data_len;
  bool     data_items_live;

  /* Threaded build: per thread k, the next index and the end of its range;
   * cur_thread is the thread whose slice is running, slice_done its count. */
  uint64_t *th_next, *th_end;
  uint64_t  cur_thread, slice_done, threads_left;
};

/* ---- Event emission ----------------------------------------------------- */

/* take_id, push, emit_* and parse_u64 live in traces/wl_emit.c. */

/* ---- Phases ------------------------------------------------------------- */

/* One tuple of the build, made by thread `thread` (0 = main). */
static void build_tuple(spike_src_t *s, uint64_t i, uint32_t thread) {
  uint64_t len = spike_str_len(s->seed, i, s->min, s->max);
  s->str_id[i] = wl_emit_malloc(&s->em, thread, TRACE_DOMAIN_OBJ,
                                spike_str_request(s->python, len));
  s->flt_id[i] =
      s->nfloat_fl > 0
          ? s->float_fl[--s->nfloat_fl]
          : wl_emit_malloc(&s->em, thread, TRACE_DOMAIN_OBJ, SPIKE_FLOAT_SIZE);
  s->tup_id[i] =
      s->ntuple_fl > 0
          ? s->tuple_fl[--s->ntuple_fl]
          : wl_emit_malloc(&s->em, thread, TRACE_DOMAIN_OBJ, SPIKE_TUPLE2_SIZE);
  if (s->threads == 1) { /* LIST_APPEND → list_resize(len + 1) */
    uint64_t cap =
        spike_list_capacity(s->data_alloc, s->data_len, s->data_len + 1);
    if (cap != s->data_alloc) {
      if (!s->data_items_live) {
        s->data_items = wl_emit_malloc(&s->em, thread, TRACE_DOMAIN_MEM,
                                       cap * SPIKE_PTR_SIZE);
        s->data_items_live = true;
      } else {
        wl_emit_realloc(&s->em, thread, TRACE_DOMAIN_MEM, s->data_items,
                        cap * SPIKE_PTR_SIZE);
      }
      s->data_alloc = cap;
    }
    s->data_len++;
  }
  s->em.t_ns += s->tuple_ns;
}

/* Threaded build: one tuple of the running slice, rotating threads. */
static void build_threaded_step(spike_src_t *s) {
  uint64_t k = s->cur_thread;
  build_tuple(s, s->th_next[k]++, (uint32_t)(k + 1));
  s->slice_done++;
  if (s->th_next[k] == s->th_end[k]) {
    wl_emit_push(&s->em, TRACE_THREAD_EXIT, (uint32_t)(k + 1));
    s->threads_left--;
    s->slice_done = s->slice;
  }
  if (s->slice_done >= s->slice && s->threads_left > 0) {
    s->slice_done = 0;
    do
      s->cur_thread = (s->cur_thread + 1) % s->threads;
    while (s->th_next[s->cur_thread] == s->th_end[s->cur_thread]);
  }
}

/* del data, for tuple i (a non-survivor): tupledealloc. */
static void dealloc_tuple(spike_src_t *s, uint64_t i) {
  if (s->nfloat_fl < SPIKE_FLOAT_FREELIST)
    s->float_fl[s->nfloat_fl++] = s->flt_id[i];
  else
    wl_emit_free(&s->em, 0, TRACE_DOMAIN_OBJ, s->flt_id[i]);
  wl_emit_free(&s->em, 0, TRACE_DOMAIN_OBJ, s->str_id[i]);
  if (s->ntuple_fl < SPIKE_TUPLE_FREELIST)
    s->tuple_fl[s->ntuple_fl++] = s->tup_id[i];
  else
    wl_emit_free(&s->em, 0, TRACE_DOMAIN_OBJ, s->tup_id[i]);
  s->em.t_ns += s->tuple_ns;
}

/* Runs the state machine until at least one event is pending or done. */
static void step(spike_src_t *s) {
  while (s->em.npending == 0 && s->phase != PH_DONE) {
    switch (s->phase) {
    case PH_START:
      wl_emit_mark(&s->em, "start");
      s->phase = PH_SETUP;
      break;
    case PH_SETUP:
      s->data_list =
          wl_emit_malloc(&s->em, 0, TRACE_DOMAIN_OBJ, SPIKE_LIST_SIZE);
      if (s->threads > 1) { /* data = [None] * count */
        s->data_items = wl_emit_malloc(&s->em, 0, TRACE_DOMAIN_MEM,
                                       s->count * SPIKE_PTR_SIZE);
        s->data_items_live = true;
        s->data_alloc = s->data_len = s->count;
      }
      s->cursor = 0;
      s->phase = PH_BUILD;
      break;
    case PH_BUILD:
      if (s->threads == 1) {
        if (s->cursor < s->count)
          build_tuple(s, s->cursor++, 0);
        else
          s->phase = PH_PEAK;
      } else if (s->cursor < s->threads) {
        wl_emit_push(&s->em, TRACE_THREAD_START, (uint32_t)(++s->cursor));
      } else if (s->threads_left > 0) {
        build_threaded_step(s);
      } else {
        s->phase = PH_PEAK;
      }
      break;
    case PH_PEAK:
      wl_emit_mark(&s->em, "peak");
      s->phase = PH_SLICE;
      break;
    case PH_SLICE: { /* list_subscript → list_new_prealloc(slicelength) */
      uint64_t nsurv = (s->count + s->keep_every - 1) / s->keep_every;
      wl_emit_malloc(&s->em, 0, TRACE_DOMAIN_OBJ, SPIKE_LIST_SIZE);
      wl_emit_malloc(&s->em, 0, TRACE_DOMAIN_MEM, nsurv * SPIKE_PTR_SIZE);
      s->cursor = s->count;
      s->phase = PH_DEALLOC;
      break;
    }
    case PH_DEALLOC:
      while (s->cursor > 0 && s->em.npending == 0) {
        uint64_t i = --s->cursor;
        if (i % s->keep_every != 0)
          dealloc_tuple(s, i);
      }
      if (s->cursor == 0)
        s->phase = PH_DATA_LIST;
      break;
    case PH_DATA_LIST:
      if (s->data_items_live)
        wl_emit_free(&s->em, 0, TRACE_DOMAIN_MEM, s->data_items);
      s->data_items_live = false;
      s->list_fl[s->nlist_fl++] = s->data_list; /* free list was empty */
      s->phase = PH_GC;
      break;
    case PH_GC: /* clear the free lists, in the version's order */
      while (s->em.npending + 1 < SPIKE_PENDING_MAX / 2) {
        /* 3.11: tuples, floats, lists; 3.14: floats first (object.c:
         * 930-934). */
        bool floats_first = s->python == SPIKE_PY314;
        if (floats_first && s->nfloat_fl > 0)
          wl_emit_free(&s->em, 0, TRACE_DOMAIN_OBJ,
                       s->float_fl[--s->nfloat_fl]);
        else if (s->ntuple_fl > 0)
          wl_emit_free(&s->em, 0, TRACE_DOMAIN_OBJ,
                       s->tuple_fl[--s->ntuple_fl]);
        else if (s->nfloat_fl > 0)
          wl_emit_free(&s->em, 0, TRACE_DOMAIN_OBJ,
                       s->float_fl[--s->nfloat_fl]);
        else if (s->nlist_fl > 0)
          wl_emit_free(&s->em, 0, TRACE_DOMAIN_OBJ, s->list_fl[--s->nlist_fl]);
        else {
          s->phase = PH_AFTER_FREE;
          break;
        }
      }
      break;
    case PH_AFTER_FREE:
      wl_emit_mark(&s->em, "after_free");
      s->phase = PH_TRIM;
      break;
    case PH_TRIM:
      wl_emit_push(&s->em, TRACE_TRIM, 0)->size = 0;
      s->em.t_ns += SPIKE_TRIM_NS;
      s->phase = PH_AFTER_TRIM;
      break;
    case PH_AFTER_TRIM:
      wl_emit_mark(&s->em, "after_trim");
      s->phase = PH_DONE;
      break;
    case PH_DONE:
      break;
    }
  }
}

static as_status_t spike_next(trace_source_t *src, trace_event_t *ev,
                              as_err_t *err) {
  (void)err;
  spike_src_t *s = (spike_src_t *)src;
  if (wl_emit_next(&s->em, ev))
    return AS_OK;
  step(s);
  return wl_emit_next(&s->em, ev) ? AS_OK : AS_DONE;
}

static void spike_close(trace_source_t *src) {
  spike_src_t *s = (spike_src_t *)src;
  if (s == NULL)
    return;
  free(s->str_id);
  free(s->flt_id);
  free(s->tup_id);
  free(s->em.free_ids);
  free(s->th_next);
  free(s->th_end);
  free(s);
}

static const trace_source_methods_t spike_methods = {
    .next = spike_next,
    .close = spike_close,
};

/* ---- Options ------------------------------------------------------------ */

static const workload_option_t spike_options[] = {
    {"count", "160000", "tuples built (load-spike study: 160,000)"},
    {"min", "600", "shortest string, characters (the study: 600)"},
    {"max", "4000", "longest string, characters (the study: 4,000)"},
    {"keep-every", "50", "keep tuples 0, k, 2k, ... (the study: 2% = 50)"},
    {"seed", "1", "splitmix64 seed for string lengths"},
    {"threads", "1", "threads sharing the build (the study also ran 16)"},
    {"slice", "4000",
     "tuples per GIL turn when threaded (5 ms switch interval / 1.25 us)"},
    {"tuple-ns", "1250", "virtual ns per tuple (study: 0.20 s / 160,000)"},
    {"python", "3.11", "CPython whose requests to emit: 3.11 or 3.14"},
    {NULL, NULL, NULL},
};

static as_status_t spike_open(const char *const *values, trace_source_t **out,
                              as_err_t *err) {
  *out = NULL;
  uint64_t              v[8];
  static const uint64_t lo[8] = {1, 1, 1, 1, 0, 1, 1, 0};
  static const uint64_t hi[8] = {
      SPIKE_MAX_COUNT, UINT32_MAX, UINT32_MAX,      SPIKE_MAX_COUNT,
      UINT64_MAX,      1024,       SPIKE_MAX_COUNT, UINT64_C(1000000000)};
  for (int i = 0; i < 8; i++) {
    as_status_t rc = wl_parse_u64("spike", values[i], spike_options[i].name,
                                  lo[i], hi[i], &v[i], err);
    if (rc != AS_OK)
      return rc;
  }
  spike_python_t py;
  if (strcmp(values[8], "3.11") == 0)
    py = SPIKE_PY311;
  else if (strcmp(values[8], "3.14") == 0)
    py = SPIKE_PY314;
  else
    return as_err_set(err, AS_EUSAGE,
                      "spike: --python must be 3.11 or 3.14, got '%s'",
                      values[8]);
  if (v[1] > v[2])
    return as_err_set(err, AS_EUSAGE,
                      "spike: --min (%" PRIu64 ") exceeds --max (%" PRIu64 ")",
                      v[1], v[2]);
  if (v[5] > v[0])
    return as_err_set(err, AS_EUSAGE,
                      "spike: --threads (%" PRIu64 ") exceeds --count (%" PRIu64
                      ")",
                      v[5], v[0]);

  spike_src_t *s = calloc(1, sizeof *s);
  if (s == NULL)
    return as_err_set(err, AS_ENOMEM, "spike: out of memory");
  s->base.methods = &spike_methods;
  s->count = v[0], s->min = v[1], s->max = v[2], s->keep_every = v[3];
  s->seed = v[4], s->threads = v[5], s->slice = v[6], s->tuple_ns = v[7];
  s->python = py;
  s->phase = PH_START;
  /* Live objects peak below 3 per tuple plus 4; every id is freed at most
   * once before it is reused, so the free-id stack needs no more. */
  size_t nids = (size_t)(3 * s->count + 8);
  s->str_id = malloc((size_t)s->count * sizeof *s->str_id);
  s->flt_id = malloc((size_t)s->count * sizeof *s->flt_id);
  s->tup_id = malloc((size_t)s->count * sizeof *s->tup_id);
  s->em.free_ids = malloc(nids * sizeof *s->em.free_ids);
  s->th_next = calloc((size_t)s->threads, sizeof *s->th_next);
  s->th_end = calloc((size_t)s->threads, sizeof *s->th_end);
  if (!s->str_id || !s->flt_id || !s->tup_id || !s->em.free_ids ||
      !s->th_next || !s->th_end) {
    spike_close(&s->base);
    return as_err_set(err, AS_ENOMEM,
                      "spike: out of memory for %" PRIu64 " tuples", v[0]);
  }
  for (uint64_t k = 0; k < s->threads; k++) {
    s->th_next[k] = k * s->count / s->threads;
    s->th_end[k] = (k + 1) * s->count / s->threads;
  }
  s->threads_left = s->threads;

  char args[256];
  snprintf(args, sizeof args,
           "spike --count %" PRIu64 " --min %" PRIu64 " --max %" PRIu64
           " --keep-every %" PRIu64 " --seed %" PRIu64 " --threads %" PRIu64
           " --python %s",
           s->count, s->min, s->max, s->keep_every, s->seed, s->threads,
           py == SPIKE_PY314 ? "3.14" : "3.11");
  snprintf(s->base.name, sizeof s->base.name, "%s", args);
  as_status_t rc = trace_meta_set(&s->base.meta, "kind", "workload", err);
  if (rc == AS_OK)
    rc = trace_meta_set(&s->base.meta, "workload", args, err);
  if (rc == AS_OK)
    rc = trace_meta_set(&s->base.meta, "generator", "traces/wl_spike.c", err);
  if (rc != AS_OK) {
    spike_close(&s->base);
    return rc;
  }
  *out = &s->base;
  return AS_OK;
}

const workload_def_t workload_spike = {
    .name = "spike",
    .summary = "the load-spike study: (str, float) tuples, keep 2%, "
               "gc.collect, malloc_trim(0)",
    .options = spike_options,
    .open = spike_open,
};
