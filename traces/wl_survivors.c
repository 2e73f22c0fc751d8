/* traces/wl_survivors.c -- the `survivors` workload: build many small
 * Python objects, keep a few, free the rest, optionally allocate again.
 *
 * It reproduces the experiment of the survivors study ("A few survivors keep
 * Python's freed memory", docs/studies.md) as the allocation requests
 * CPython 3.11 makes for this Python program (scripts/measure/survivors.py
 * runs the same program):
 *
 *     keep_flags = [survivor rule for i in range(n)]        # before `start`
 *     objs = []; for _ in range(n): objs.append(os.urandom(size - 33))
 *     # mark peak
 *     keep = [o for o, f in zip(objs, keep_flags) if f]
 *     del objs                                             # mark after
 *     objs2 = []; for _ in range(m): objs2.append(os.urandom(rsize - 33))
 *     # mark after_reuse
 *
 * Requests, with their CPython 3.11 sources (branch tip 3.11.11+,
 * shane-mf/cpython-3.11@05e222c; identical algorithms in 3.14):
 *   - Each bytes object of length n is one PyObject_Malloc (obj domain) of
 *     PyBytesObject_SIZE + n bytes (Objects/bytesobject.c:33 defines
 *     PyBytesObject_SIZE = offsetof(ob_sval) + 1 = 33 on 64-bit; the malloc
 *     is in _PyBytes_FromSize, :103, reached from PyBytes_FromStringAndSize,
 *     :119-145).  sys.getsizeof reports exactly that request, so --size is
 *     the malloc size.  Lengths 0 and 1 are shared singletons (:127-134),
 *     hence --size >= 35.
 *   - append() grows the list through list_resize (Objects/listobject.c:
 *     44-96, called from _PyList_AppendTakeRefListResize :319-329 when
 *     allocated == len, Include/internal/pycore_list.h:44-57):
 *     new_allocated = (newsize + (newsize >> 3) + 6) & ~3 (:70), not
 *     over-allocating when the jump is large (:74-75), and ob_item is
 *     PyMem_Realloc'd (mem domain) to new_allocated * 8 bytes (:80-81); the
 *     first growth reallocs NULL, i.e. a malloc.
 *   - `del objs` runs list_dealloc, which decrefs the items *backwards*
 *     (:355-358) and then PyMem_Free's ob_item (:359).
 *   - The PyListObject headers themselves are left out: they come from the
 *     list free list (PyList_MAXFREELIST, :361-) and are one block each.
 *
 * Object ids: 0 names the objects list (later the reuse list), 1 the
 * survivors list, object i of the build has id 2 + i.  Allocations after the
 * free phase take the lowest free id (freed build objects in ascending
 * order, then never-used ids), so ids stay below the peak live count.
 *
 * Virtual time: an allocation or realloc costs what creating a small
 * CPython object costs, a free what dropping one costs (sim/cost.h
 * python_alloc_ns, python_free_ns: measured; or --alloc-ns / --free-ns,
 * which a measured run sets to its own pace), and a mark 1 us (reading
 * RSS), so marks have distinct times.  The optional
 * settle phase (--settle-ms) is an idle stretch in 50 ms steps with one
 * small allocation and free per step, standing in for the study's "waits
 * 2.5 s while doing some light allocation".  It is off by default because it
 * cannot change RSS under pymalloc or glibc: neither releases memory on a
 * clock (neither starts a thread or timer: glibc 2.36 trims only inside
 * free and malloc_trim), pymalloc frees arenas only inside free(), and
 * the light allocations land in pools the survivors already pin.  It matters
 * only for models with purge deadlines (mimalloc), where it is worth enabling.
 *
 * --build ft makes the requests of CPython's free-threaded build instead
 * (CPython 3.14.7 / 3.13.5; docs/models/cpython-ft.md):
 *   - The list never reallocs its item array: list_resize allocates a new
 *     _PyListArray, PyMem_Malloc(8 + new_allocated * 8) (the `allocated`
 *     header and the slots; Objects/listobject.c:36-47), copies, and frees
 *     the old array at once, the list being owned by its thread
 *     (:146-169, free_list_items :58-73).  The same growth formula
 *     (:140-143).  The two arrays of a list alternate between two ids.
 *   - The interpreter already holds a page of the light objects' class: a
 *     running interpreter has pages of every common class in each heap, so
 *     the light allocation never needs a fresh page (measured on 3.14.7t:
 *     with MIMALLOC_PURGE_DELAY=0 nothing comes back during it).  One such
 *     object is allocated before `start` and lives to the end.
 *   - After `del objs` the program runs gc.collect(), which in this build
 *     advances the QSBR write sequence and visits the GC heaps' pages
 *     (Python/gc_free_threading.c:413-435, 950-969): an `option gc_collect`
 *     event, which the free-threaded model takes as the collector's run.
 *   - --kind tuple builds GC objects instead of bytes: tuples of Nones whose
 *     sys.getsizeof is --size, allocated in the GC heap
 *     (pycore_object_alloc.h:16-28), which the trace says with `option
 *     object_heap 2` before the build and `option object_heap 1` after it
 *     (--size is the request, sys.getsizeof: 56 for a 1-tuple in 3.14t);
 *     --reuse-kind tuple does the same for the reuse phase (the study's
 *     "256 MiB of tuples, a different kind of object that lives in a
 *     separate mimalloc heap").
 * --alloc-after N (either build) allocates one object of N bytes after
 * `after`, waits 200 ms and marks `after_alloc`: the study's "once the
 * program allocated again".  Under build=ft an object of more than 128 KiB
 * is a large page of the object heap, whose allocation runs CPython's
 * collect of parked pages (Objects/mimalloc/page.c:915).
 */
#include "workload.h"
#include "wl_survivors.h"

#include "../sim/cost.h"
#include "../sim/units.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The survivor rule -------------------------------------------------- */

/* Vigna, splitmix64.c (public domain, prng.di.unimi.it/splitmix64.c): the
 * golden-ratio increment and the two multiply-xorshift mixing constants. */
#define SPLITMIX64_GAMMA UINT64_C(0x9E3779B97F4A7C15)
#define SPLITMIX64_MUL1  UINT64_C(0xBF58476D1CE4E5B9)
#define SPLITMIX64_MUL2  UINT64_C(0x94D049BB133111EB)

uint64_t survivors_splitmix64_at(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * SPLITMIX64_GAMMA;
  z = (z ^ (z >> 30)) * SPLITMIX64_MUL1;
  z = (z ^ (z >> 27)) * SPLITMIX64_MUL2;
  return z ^ (z >> 31);
}

bool survivors_is_kept(const survivors_rule_t *r, uint64_t i) {
  switch (r->pattern) {
  case SURVIVORS_RANDOM:
    /* The top 53 bits as a double in [0, 1): exact, so Python's
     * (z >> 11) * 2.0**-53 < p compares the same numbers. */
    return (double)(survivors_splitmix64_at(r->seed, i) >> 11) * 0x1.0p-53 <
           r->fraction;
  case SURVIVORS_STRIDE:
    return i % r->every == 0;
  case SURVIVORS_OLDEST:
    return i < r->oldest_count;
  }
  return false;
}

static const char *const pattern_names[] = {"random", "stride", "oldest"};

const char *survivors_pattern_name(survivors_pattern_t p) {
  return (unsigned)p < 3 ? pattern_names[p] : "?";
}

bool survivors_pattern_parse(const char *s, survivors_pattern_t *out) {
  for (unsigned p = 0; p < 3; p++)
    if (strcmp(s, pattern_names[p]) == 0) {
      *out = (survivors_pattern_t)p;
      return true;
    }
  return false;
}

uint64_t survivors_object_count(uint64_t total_bytes, uint64_t size_bytes) {
  return size_bytes ? total_bytes / size_bytes : 0;
}

/* ---- The source --------------------------------------------------------- */

#define ID_LIST_MAIN        0 /* the objects list, then the reuse list */
#define ID_LIST_KEEP        1 /* the survivors list */
#define ID_FIRST_OBJ        2 /* object i has id first_obj + i: this, ... */
#define ID_FT_MAIN_ALT      2 /* build=ft: the lists' second arrays and the */
#define ID_FT_KEEP_ALT      3 /* interpreter's light object; objects from 5 */
#define ID_FT_WARM          4
#define ID_FT_FIRST_OBJ     5
#define FT_HEAP_OBJECT      1 /* _Py_MIMALLOC_HEAP_OBJECT, pycore_mimalloc.h */
#define FT_HEAP_GC          2 /* _Py_MIMALLOC_HEAP_GC */
#define FT_LIST_HEADER      8 /* _PyListArray.allocated (listobject.c:31-34) */
#define ALLOC_AFTER_WAIT_NS UINT64_C(200000000) /* survivors_ft.py's 200 ms */
#define COST_MARK_NS        1000
#define SETTLE_STEP_NS      UINT64_C(50000000) /* 50 ms, one light allocation */
#define SETTLE_OBJ_BYTES    56                 /* sys.getsizeof([]) on 3.11 */
#define PENDING_MAX         5
#define BATCH_EVENTS        256 /* events survivors_batch hands out at once */

typedef enum phase_e {
  PH_WARM,
  PH_START,
  PH_BUILD,
  PH_SELECT,
  PH_FREE,
  PH_GC,
  PH_SETTLE,
  PH_AFTER,
  PH_ALLOC_AFTER,
  PH_REUSE,
  PH_DONE
} phase_t;

/* A CPython list's ob_item as list_resize keeps it. */
typedef struct pylist_s {
  uint64_t id;        /* object id of ob_item */
  uint64_t alt_id;    /* build=ft: the id the next array takes */
  uint64_t size;      /* Py_SIZE */
  uint64_t allocated; /* slots; 0 while ob_item is NULL */
} pylist_t;

typedef struct survivors_src_s {
  trace_source_t   base; /* must be first */
  survivors_rule_t rule;
  uint64_t         size_bytes;       /* request of each built object */
  uint64_t         nobjects;         /* objects built */
  uint64_t         reuse_size_bytes; /* 0: no reuse phase */
  uint64_t         reuse_nobjects;
  uint64_t         settle_ns;      /* remaining settle time */
  uint64_t         alloc_after;    /* bytes of the after-allocation, 0: none */
  bool             ft;             /* --build ft */
  bool             gc_objects;     /* --kind tuple (build=ft) */
  bool             gc_reuse;       /* --reuse-kind tuple (build=ft) */
  uint64_t         first_obj;      /* id of object 0 */
  uint64_t      alloc_ns, free_ns; /* virtual time per object made / dropped */
  phase_t       phase;
  uint64_t      i;    /* position in the current phase */
  uint64_t      t_ns; /* virtual clock */
  pylist_t      main, keep;
  uint64_t      next_free_obj; /* lowest-free cursor over build objects */
  uint64_t      fresh_id;      /* first id never used */
  uint64_t      returned[PENDING_MAX]; /* ids freed after the free phase */
  size_t        nreturned;
  trace_event_t pending[PENDING_MAX]; /* generated, not yet returned */
  size_t        npending, pending_at;
  uint64_t     *kept; /* random pattern, from PH_SELECT on: bit i of word
                         i / 64 set when object i survives; NULL: ask
                         survivors_is_kept */
  trace_event_t batch[BATCH_EVENTS]; /* the last batch handed out */
} survivors_src_t;

/* Whether object i survives: one bit test once the random pattern's set is
 * drawn, else the rule.  The set is drawn once, not per test: the selection
 * and the free phase each tested every object (splitmix64 and a float
 * compare), 12 % of the generator's instructions (callgrind, --size 512). */
static inline bool kept(const survivors_src_t *s, uint64_t i) {
  return s->kept ? (s->kept[i >> 6] >> (i & 63)) & 1
                 : survivors_is_kept(&s->rule, i);
}

/* Draws the random pattern's survivor set into s->kept, as
 * survivors_is_kept would: (z >> 11) * 2^-53 < fraction is, for the integer
 * z >> 11, z >> 11 < ceil(fraction * 2^53) (a power-of-two scaling, exact).
 * Without memory for the set (n / 8 bytes), s->kept stays NULL. */
static void draw_survivors(survivors_src_t *s) {
  uint64_t words = (s->nobjects + 63) / 64;
  s->kept = calloc(words, sizeof *s->kept);
  if (s->kept == NULL)
    return;
  uint64_t threshold = (uint64_t)ceil(s->rule.fraction * 0x1.0p53);
  for (uint64_t w = 0; w < words; w++) {
    uint64_t bits = 0, base = w * 64;
    uint64_t end = s->nobjects - base < 64 ? s->nobjects - base : 64;
    for (uint64_t b = 0; b < end; b++)
      bits |= (uint64_t)((survivors_splitmix64_at(s->rule.seed, base + b) >>
                          11) < threshold)
              << b;
    s->kept[w] = bits;
  }
}

static void emit(survivors_src_t *s, trace_op_t op, uint8_t domain, uint64_t id,
                 uint64_t size, const char *label) {
  /* Each step emits at most PENDING_MAX events; more is a generator bug. */
  if (s->npending >= PENDING_MAX)
    abort();
  trace_event_t *ev = &s->pending[s->npending++];
  trace_event_set(ev, s->t_ns, (uint8_t)op, domain, id, size);
  ev->label = label;
  s->t_ns += op == TRACE_FREE   ? s->free_ns
             : op == TRACE_MARK ? COST_MARK_NS
             : op == TRACE_IDLE ? size
                                : s->alloc_ns;
}

/* An option event: a knob of the free-threaded model (cpython_ft.c). */
static void emit_option(survivors_src_t *s, const char *name, int64_t value) {
  emit(s, TRACE_OPTION, 0, 0, (uint64_t)value, name);
  s->t_ns -= s->alloc_ns; /* a thread-state store, no allocation */
}

/* build=ft list_resize (3.14.7 listobject.c:146-169): a new array under
 * the list's other id, then the old one freed. */
static void ft_list_grow(survivors_src_t *s, pylist_t *l,
                         uint64_t new_allocated) {
  emit(s, TRACE_MALLOC, TRACE_DOMAIN_MEM, l->alt_id,
       FT_LIST_HEADER + new_allocated * 8, NULL);
  if (l->allocated != 0)
    emit(s, TRACE_FREE, TRACE_DOMAIN_MEM, l->id, 0, NULL);
  uint64_t id = l->id;
  l->id = l->alt_id;
  l->alt_id = id;
}

/* append(): Objects/listobject.c list_resize (:44-96) when full. */
static void list_append(survivors_src_t *s, pylist_t *l) {
  if (l->allocated > l->size) {
    l->size++;
    return;
  }
  uint64_t newsize = l->size + 1;
  /* listobject.c:70 */
  uint64_t new_allocated = (newsize + (newsize >> 3) + 6) & ~UINT64_C(3);
  /* listobject.c:74-75: no over-allocation for a jump past it. */
  if (newsize - l->size > new_allocated - newsize)
    new_allocated = (newsize + 3) & ~UINT64_C(3);
  if (s->ft) {
    ft_list_grow(s, l, new_allocated);
  } else {
    /* listobject.c:80-81: PyMem_Realloc(ob_item, new_allocated * 8). */
    emit(s, l->allocated == 0 ? TRACE_MALLOC : TRACE_REALLOC, TRACE_DOMAIN_MEM,
         l->id, new_allocated * 8, NULL);
  }
  l->allocated = new_allocated;
  l->size = newsize;
}

/* list_dealloc's PyMem_Free(ob_item) (:359); items are freed by the caller. */
static void list_free(survivors_src_t *s, pylist_t *l) {
  if (l->allocated != 0)
    emit(s, TRACE_FREE, TRACE_DOMAIN_MEM, l->id, 0, NULL);
  l->allocated = l->size = 0;
}

/* The lowest free object id once the free phase is over. */
static uint64_t take_id(survivors_src_t *s) {
  if (s->nreturned > 0) {
    size_t lo = 0;
    for (size_t k = 1; k < s->nreturned; k++)
      if (s->returned[k] < s->returned[lo])
        lo = k;
    uint64_t id = s->returned[lo];
    s->returned[lo] = s->returned[--s->nreturned];
    return id;
  }
  while (s->next_free_obj < s->nobjects && kept(s, s->next_free_obj))
    s->next_free_obj++;
  if (s->next_free_obj < s->nobjects)
    return s->first_obj + s->next_free_obj++;
  return s->fresh_id++;
}

/* The first survivor at or after object i, or nobjects: whole words of
 * the drawn set at a time (bits past nobjects are clear). */
static uint64_t next_survivor(const survivors_src_t *s, uint64_t i) {
  uint64_t n = s->nobjects;
  if (s->kept == NULL) {
    while (i < n && !survivors_is_kept(&s->rule, i))
      i++;
    return i;
  }
  if (i >= n)
    return n;
  uint64_t w = i >> 6, bits = s->kept[w] & (~UINT64_C(0) << (i & 63));
  while (bits == 0) {
    if (++w >= (n + 63) / 64)
      return n;
    bits = s->kept[w];
  }
  return w * 64 + (uint64_t)__builtin_ctzll(bits);
}

/* Generates the next step's events into s->pending. */
static void step(survivors_src_t *s) {
  switch (s->phase) {
  case PH_WARM:
    /* build=ft: the interpreter's own object of the light class. */
    emit(s, TRACE_MALLOC, TRACE_DOMAIN_OBJ, ID_FT_WARM, SETTLE_OBJ_BYTES, NULL);
    s->phase = PH_START;
    return;
  case PH_START:
    emit(s, TRACE_MARK, 0, 0, 0, "start");
    if (s->gc_objects)
      emit_option(s, "object_heap", FT_HEAP_GC);
    s->phase = PH_BUILD;
    s->i = 0;
    return;
  case PH_BUILD:
    if (s->i < s->nobjects) {
      /* os.urandom(n) is evaluated before append() runs. */
      emit(s, TRACE_MALLOC, TRACE_DOMAIN_OBJ, s->first_obj + s->i,
           s->size_bytes, NULL);
      list_append(s, &s->main);
      s->i++;
      return;
    }
    if (s->gc_objects)
      emit_option(s, "object_heap", FT_HEAP_OBJECT);
    emit(s, TRACE_MARK, 0, 0, 0, "peak");
    s->phase = PH_SELECT;
    s->i = 0;
    return;
  case PH_SELECT:
    /* Survivors are appended to the keep list in ascending order; only
     * list growth is an event, so scan until one happens. */
    if (s->rule.pattern == SURVIVORS_OLDEST) {
      /* All the oldest survive: no need to test each index. */
      while (s->i < s->rule.oldest_count && s->i < s->nobjects) {
        s->i++;
        size_t before = s->npending;
        list_append(s, &s->keep);
        if (s->npending != before)
          return;
      }
    } else if (s->rule.pattern == SURVIVORS_STRIDE) {
      while (s->i < s->nobjects) {
        s->i += s->rule.every;
        size_t before = s->npending;
        list_append(s, &s->keep);
        if (s->npending != before)
          return;
      }
    } else {
      if (s->i == 0 && s->kept == NULL)
        draw_survivors(s);
      while ((s->i = next_survivor(s, s->i)) < s->nobjects) {
        s->i++;
        size_t before = s->npending;
        list_append(s, &s->keep);
        if (s->npending != before)
          return;
      }
    }
    s->phase = PH_FREE;
    s->i = s->nobjects;
    return;
  case PH_FREE:
    /* list_dealloc decrefs backwards (listobject.c:355-358). */
    while (s->i > 0) {
      uint64_t j = --s->i;
      if (!kept(s, j)) {
        emit(s, TRACE_FREE, TRACE_DOMAIN_OBJ, s->first_obj + j, 0, NULL);
        return;
      }
    }
    list_free(s, &s->main);
    s->phase = s->ft ? PH_GC : s->settle_ns ? PH_SETTLE : PH_AFTER;
    return;
  case PH_GC:
    emit_option(s, "gc_collect", 1);
    s->phase = s->settle_ns ? PH_SETTLE : PH_AFTER;
    return;
  case PH_SETTLE: {
    uint64_t d = s->settle_ns < SETTLE_STEP_NS ? s->settle_ns : SETTLE_STEP_NS;
    s->settle_ns -= d;
    emit(s, TRACE_IDLE, 0, 0, d, NULL);
    uint64_t id = take_id(s);
    emit(s, TRACE_MALLOC, TRACE_DOMAIN_OBJ, id, SETTLE_OBJ_BYTES, NULL);
    emit(s, TRACE_FREE, TRACE_DOMAIN_OBJ, id, 0, NULL);
    s->returned[s->nreturned++] = id;
    if (s->settle_ns == 0)
      s->phase = PH_AFTER;
    return;
  }
  case PH_AFTER:
    emit(s, TRACE_MARK, 0, 0, 0, "after");
    s->phase = s->alloc_after      ? PH_ALLOC_AFTER
               : s->reuse_nobjects ? PH_REUSE
                                   : PH_DONE;
    s->i = 0;
    return;
  case PH_ALLOC_AFTER: {
    uint64_t id = take_id(s);
    emit(s, TRACE_MALLOC, TRACE_DOMAIN_OBJ, id, s->alloc_after, NULL);
    emit(s, TRACE_IDLE, 0, 0, ALLOC_AFTER_WAIT_NS, NULL);
    emit(s, TRACE_MARK, 0, 0, 0, "after_alloc");
    emit(s, TRACE_FREE, TRACE_DOMAIN_OBJ, id, 0, NULL);
    s->returned[s->nreturned++] = id;
    s->phase = s->reuse_nobjects ? PH_REUSE : PH_DONE;
    return;
  }
  case PH_REUSE:
    if (s->gc_reuse && s->i == 0)
      emit_option(s, "object_heap", FT_HEAP_GC);
    if (s->i < s->reuse_nobjects) {
      emit(s, TRACE_MALLOC, TRACE_DOMAIN_OBJ, take_id(s), s->reuse_size_bytes,
           NULL);
      list_append(s, &s->main);
      s->i++;
      return;
    }
    if (s->gc_reuse)
      emit_option(s, "object_heap", FT_HEAP_OBJECT);
    emit(s, TRACE_MARK, 0, 0, 0, "after_reuse");
    s->phase = PH_DONE;
    return;
  case PH_DONE:
    return;
  }
}

/* The events step() queues: every phase but the two fast ones.  Out of
 * line, because inlined into survivors_next its register saves and
 * restores were a fifth of the instructions of every fast-path event. */
static __attribute__((noinline)) as_status_t next_queued(survivors_src_t *s,
                                                         trace_event_t   *ev) {
  while (s->pending_at == s->npending) {
    if (s->phase == PH_DONE)
      return AS_DONE;
    s->npending = s->pending_at = 0;
    step(s);
  }
  *ev = s->pending[s->pending_at++];
  return AS_OK;
}

/* The build phase's mallocs while the list has room (no list growth
 * between them): at most max into ev, written straight, exactly what
 * step() would have queued one at a time. */
static inline size_t fill_build(survivors_src_t *s, trace_event_t *ev,
                                size_t max) {
  uint64_t room = s->main.allocated - s->main.size, left = s->nobjects - s->i;
  size_t   n = max < room ? max : (size_t)room;
  n = n < left ? n : (size_t)left;
  uint64_t t = s->t_ns, id = s->first_obj + s->i;
  for (size_t k = 0; k < n; k++, t += s->alloc_ns)
    trace_event_set(&ev[k], t, TRACE_MALLOC, TRACE_DOMAIN_OBJ, id + k,
                    s->size_bytes);
  s->t_ns = t;
  s->main.size += n;
  s->i += n;
  return n;
}

/* The free phase's frees, backwards past the survivors: at most max into
 * ev, as step() would have queued them. */
static inline size_t fill_free(survivors_src_t *s, trace_event_t *ev,
                               size_t max) {
  size_t   n = 0;
  uint64_t i = s->i, t = s->t_ns;
  while (n < max && i > 0) {
    uint64_t j = --i;
    if (!kept(s, j)) {
      trace_event_set(&ev[n++], t, TRACE_FREE, TRACE_DOMAIN_OBJ,
                      s->first_obj + j, 0);
      t += s->free_ns;
    }
  }
  s->i = i;
  s->t_ns = t;
  return n;
}

/* Up to max events into ev: a run of the two phases that make almost
 * every event, else one event step() queued; 0 at the end. */
static inline size_t fill(survivors_src_t *s, trace_event_t *ev, size_t max) {
  if (s->pending_at == s->npending) {
    size_t n = s->phase == PH_FREE    ? fill_free(s, ev, max)
               : s->phase == PH_BUILD ? fill_build(s, ev, max)
                                      : 0;
    if (n > 0)
      return n;
  }
  return next_queued(s, ev) == AS_OK;
}

static as_status_t survivors_next(trace_source_t *src, trace_event_t *ev,
                                  as_err_t *err) {
  (void)err;
  return fill((survivors_src_t *)src, ev, 1) ? AS_OK : AS_DONE;
}

/* Up to BATCH_EVENTS events at once: one call per batch instead of one
 * per event, and the fast phases' events written in a tight loop. */
static as_status_t survivors_batch(trace_source_t *src, trace_event_t **evs,
                                   size_t *n, as_err_t *err) {
  (void)err;
  survivors_src_t *s = (survivors_src_t *)src;
  size_t           k = 0, got;
  while (k < BATCH_EVENTS && (got = fill(s, s->batch + k, BATCH_EVENTS - k)))
    k += got;
  *evs = s->batch;
  *n = k;
  return k > 0 ? AS_OK : AS_DONE;
}

static void survivors_close(trace_source_t *src) {
  free(((survivors_src_t *)src)->kept);
  free(src);
}

static const trace_source_methods_t survivors_methods = {
    .next = survivors_next,
    .close = survivors_close,
    .batch = survivors_batch,
};

/* ---- Options ------------------------------------------------------------ */

enum {
  OPT_SIZE,
  OPT_TOTAL,
  OPT_PATTERN,
  OPT_FRACTION,
  OPT_EVERY,
  OPT_SEED,
  OPT_REUSE_SIZE,
  OPT_REUSE_TOTAL,
  OPT_SETTLE_MS,
  OPT_BUILD,
  OPT_ALLOC_AFTER,
  OPT_KIND,
  OPT_REUSE_KIND,
  OPT_ALLOC_NS,
  OPT_FREE_NS,
  OPT_COUNT
};

static const workload_option_t survivors_options[] = {
    [OPT_SIZE] = {"size", "64",
                  "sys.getsizeof of each bytes object, bytes (>= 35)"},
    [OPT_TOTAL] = {"total", "256", "MiB of objects to build"},
    [OPT_PATTERN] = {"pattern", "random",
                     "which objects survive: random, stride or oldest"},
    [OPT_FRACTION] = {"fraction", "1e-4",
                      "survivor fraction for random and oldest, 0..1"},
    [OPT_EVERY] = {"every", "1000", "stride: every n-th object survives"},
    [OPT_SEED] = {"seed", "1", "random: splitmix64 seed"},
    [OPT_REUSE_SIZE] = {"reuse-size", "0",
                        "then allocate objects of this size, bytes (0: no)"},
    [OPT_REUSE_TOTAL] = {"reuse-total", "256", "MiB to allocate in reuse"},
    [OPT_SETTLE_MS] = {"settle-ms", "0",
                       "idle with light allocation before `after`, ms"},
    [OPT_BUILD] = {"build", "default",
                   "CPython build whose requests are made: default or "
                   "ft (free-threaded)"},
    [OPT_ALLOC_AFTER] = {"alloc-after", "0",
                         "after `after`, one object of this many bytes and "
                         "the mark after_alloc 200 ms later (0: no)"},
    [OPT_KIND] = {"kind", "bytes",
                  "bytes, or tuple: GC objects in the GC heap "
                  "(--build ft only)"},
    [OPT_REUSE_KIND] = {"reuse-kind", "bytes",
                        "what the reuse phase allocates: bytes or tuple "
                        "(--build ft only)"},
    [OPT_ALLOC_NS] = {"alloc-ns", "0",
                      "virtual ns per object made (0: the cost model's; "
                      "a measured run gives its own)"},
    [OPT_FREE_NS] = {"free-ns", "0",
                     "virtual ns per object dropped (0: the cost "
                     "model's)"},
    [OPT_COUNT] = {NULL, NULL, NULL},
};

static as_status_t parse_u64(const char *opt, const char *v, uint64_t lo,
                             uint64_t hi, uint64_t *out, as_err_t *err) {
  char *end;
  errno = 0;
  if (v[0] < '0' || v[0] > '9')
    goto bad;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno != 0 || *end != '\0' || x < lo || x > hi)
    goto bad;
  *out = x;
  return AS_OK;
bad:
  return as_err_set(err, AS_EUSAGE,
                    "survivors: --%s expects an integer in %" PRIu64
                    "..%" PRIu64 ", got '%s'",
                    opt, lo, hi, v);
}

static as_status_t parse_double(const char *opt, const char *v, double lo,
                                double hi, bool lo_open, double *out,
                                as_err_t *err) {
  double x;
  if (!as_parse_real(v, &x) || x > hi || x < lo || (lo_open && x == lo))
    return as_err_set(err, AS_EUSAGE,
                      "survivors: --%s expects a number in %s%g..%g], got "
                      "'%s'",
                      opt, lo_open ? "(" : "[", lo, hi, v);
  *out = x;
  return AS_OK;
}

/* bytes or tuple; *tuple says which. */
static as_status_t parse_kind(const char *opt, const char *v, bool *tuple,
                              as_err_t *err) {
  *tuple = strcmp(v, "tuple") == 0;
  if (!*tuple && strcmp(v, "bytes") != 0)
    return as_err_set(err, AS_EUSAGE,
                      "survivors: --%s expects bytes or tuple, got '%s'", opt,
                      v);
  return AS_OK;
}

#define MIB       1048576.0
#define MAX_SIZE  (UINT64_C(1) << 30)
#define MAX_TOTAL (1048576.0) /* MiB: 1 TiB of objects */

static as_status_t survivors_open(const char *const *v, trace_source_t **out,
                                  as_err_t *err) {
  *out = NULL;
  /* Zeroed: each is set by its parser before use (gcc -O2 cannot see it). */
  uint64_t size = 0, every = 0, seed = 0, reuse_size = 0, settle_ms = 0,
           alloc_after = 0, alloc_ns = 0, free_ns = 0;
  double              total_mib = 0, fraction = 0, reuse_mib = 0;
  survivors_pattern_t pattern;
  as_status_t         rc;
  if ((rc = parse_u64("size", v[OPT_SIZE], SURVIVORS_MIN_SIZE, MAX_SIZE, &size,
                      err)) ||
      (rc = parse_double("total", v[OPT_TOTAL], 0, MAX_TOTAL, true, &total_mib,
                         err)) ||
      (rc = parse_double("fraction", v[OPT_FRACTION], 0, 1, false, &fraction,
                         err)) ||
      (rc = parse_u64("every", v[OPT_EVERY], 1, UINT64_MAX, &every, err)) ||
      (rc = parse_u64("seed", v[OPT_SEED], 0, UINT64_MAX, &seed, err)) ||
      (rc = parse_u64("reuse-size", v[OPT_REUSE_SIZE], 0, MAX_SIZE, &reuse_size,
                      err)) ||
      (rc = parse_double("reuse-total", v[OPT_REUSE_TOTAL], 0, MAX_TOTAL, true,
                         &reuse_mib, err)) ||
      (rc = parse_u64("settle-ms", v[OPT_SETTLE_MS], 0, UINT64_C(86400000),
                      &settle_ms, err)) ||
      (rc = parse_u64("alloc-after", v[OPT_ALLOC_AFTER], 0, MAX_SIZE,
                      &alloc_after, err)) ||
      (rc = parse_u64("alloc-ns", v[OPT_ALLOC_NS], 0, UINT64_C(1000000000),
                      &alloc_ns, err)) ||
      (rc = parse_u64("free-ns", v[OPT_FREE_NS], 0, UINT64_C(1000000000),
                      &free_ns, err)))
    return rc;
  bool ft = strcmp(v[OPT_BUILD], "ft") == 0;
  if (!ft && strcmp(v[OPT_BUILD], "default") != 0)
    return as_err_set(err, AS_EUSAGE,
                      "survivors: --build expects default or ft, got '%s'",
                      v[OPT_BUILD]);
  bool gc_objects = false, gc_reuse = false;
  if ((rc = parse_kind("kind", v[OPT_KIND], &gc_objects, err)) ||
      (rc = parse_kind("reuse-kind", v[OPT_REUSE_KIND], &gc_reuse, err)))
    return rc;
  if ((gc_objects || gc_reuse) && !ft)
    return as_err_set(err, AS_EUSAGE,
                      "survivors: --%s tuple needs --build ft (the heap of "
                      "GC objects is the free-threaded build's)",
                      gc_objects ? "kind" : "reuse-kind");
  if (!survivors_pattern_parse(v[OPT_PATTERN], &pattern))
    return as_err_set(err, AS_EUSAGE,
                      "survivors: --pattern expects random, stride or oldest, "
                      "got '%s'",
                      v[OPT_PATTERN]);
  if (reuse_size != 0 && reuse_size < SURVIVORS_MIN_SIZE)
    return as_err_set(err, AS_EUSAGE,
                      "survivors: --reuse-size expects 0 or an integer >= %d, "
                      "got '%s'",
                      SURVIVORS_MIN_SIZE, v[OPT_REUSE_SIZE]);
  uint64_t total_bytes = (uint64_t)(total_mib * MIB);
  uint64_t n = survivors_object_count(total_bytes, size);
  if (n == 0)
    return as_err_set(err, AS_EUSAGE,
                      "survivors: --total %s MiB holds no object of --size "
                      "%" PRIu64 " bytes",
                      v[OPT_TOTAL], size);

  survivors_src_t *s = calloc(1, sizeof *s);
  if (s == NULL)
    return as_err_set(err, AS_ENOMEM, "survivors: out of memory");
  s->base.methods = &survivors_methods;
  s->rule.pattern = pattern;
  s->rule.fraction = fraction;
  s->rule.every = every;
  s->rule.seed = seed;
  s->rule.oldest_count = (uint64_t)(fraction * (double)n);
  s->size_bytes = size;
  s->nobjects = n;
  s->reuse_size_bytes = reuse_size;
  s->reuse_nobjects =
      reuse_size
          ? survivors_object_count((uint64_t)(reuse_mib * MIB), reuse_size)
          : 0;
  s->settle_ns = settle_ms * UINT64_C(1000000);
  s->alloc_after = alloc_after;
  /* How fast CPython makes and drops an object: measured (sim/cost.h), or
   * the measured run's own pace, which decides which purge delays expire
   * while the list grows. */
  s->alloc_ns = alloc_ns ? alloc_ns : sim_cost_measured.python_alloc_ns;
  s->free_ns = free_ns ? free_ns : sim_cost_measured.python_free_ns;
  s->ft = ft;
  s->gc_objects = gc_objects;
  s->gc_reuse = gc_reuse;
  s->first_obj = ft ? ID_FT_FIRST_OBJ : ID_FIRST_OBJ;
  s->phase = ft ? PH_WARM : PH_START;
  s->main.id = ID_LIST_MAIN;
  s->main.alt_id = ID_FT_MAIN_ALT;
  s->keep.id = ID_LIST_KEEP;
  s->keep.alt_id = ID_FT_KEEP_ALT;
  s->fresh_id = s->first_obj + n;

  size_t used =
      (size_t)snprintf(s->base.name, sizeof s->base.name, "survivors");
  /* Every option of the study's program; the later ones only when set, so
   * the names of default-build runs stay as recorded. */
  for (int o = 0; o < OPT_COUNT && used < sizeof s->base.name; o++)
    if (o < OPT_BUILD || strcmp(v[o], survivors_options[o].default_value))
      used += (size_t)snprintf(s->base.name + used, sizeof s->base.name - used,
                               " --%s %s", survivors_options[o].name, v[o]);
  if (used >= sizeof s->base.name) {
    free(s);
    return as_err_set(err, AS_EUSAGE,
                      "survivors: option values too long (at most %zu bytes "
                      "in all)",
                      sizeof s->base.name - 1);
  }
  /* The build phase holds all n objects at once: the peak's floor. */
  char nbuf[32], bbuf[32];
  snprintf(nbuf, sizeof nbuf, "%" PRIu64, n);
  snprintf(bbuf, sizeof bbuf, "%" PRIu64, n * size);
  if ((rc = trace_meta_set(&s->base.meta, "kind", "workload", err)) ||
      (rc = trace_meta_set(&s->base.meta, "workload", s->base.name, err)) ||
      (rc = trace_meta_set(&s->base.meta, "objects", nbuf, err)) ||
      (rc = trace_meta_set(&s->base.meta, WORKLOAD_META_PEAK_OBJECTS, nbuf,
                           err)) ||
      (rc = trace_meta_set(&s->base.meta, WORKLOAD_META_PEAK_BYTES, bbuf,
                           err))) {
    free(s);
    return rc;
  }
  *out = &s->base;
  return AS_OK;
}

const workload_def_t workload_survivors = {
    .name = "survivors",
    .summary = "build small Python objects, keep a few, free the rest "
               "(the survivors study)",
    .options = survivors_options,
    .open = survivors_open,
};
