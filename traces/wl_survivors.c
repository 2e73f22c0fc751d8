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
 * python_alloc_ns, python_free_ns: measured), and a mark 1 us (reading
 * RSS), so marks have distinct times.  The optional
 * settle phase (--settle-ms) is an idle stretch in 50 ms steps with one
 * small allocation and free per step, standing in for the study's "waits
 * 2.5 s while doing some light allocation".  It is off by default because it
 * cannot change RSS under pymalloc or glibc: neither releases memory on a
 * clock (neither starts a thread or timer: glibc 2.36 trims only inside
 * free and malloc_trim), pymalloc frees arenas only inside free(), and
 * the light allocations land in pools the survivors already pin.  It matters
 * only for models with purge deadlines (mimalloc), where it is worth enabling.
 */
#include "workload.h"
#include "wl_survivors.h"

#include "../sim/cost.h"

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
  z          = (z ^ (z >> 30)) * SPLITMIX64_MUL1;
  z          = (z ^ (z >> 27)) * SPLITMIX64_MUL2;
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

#define ID_LIST_MAIN  0 /* the objects list, then the reuse list */
#define ID_LIST_KEEP  1 /* the survivors list */
#define ID_FIRST_OBJ  2 /* object i has id ID_FIRST_OBJ + i */
#define COST_ALLOC_NS sim_cost_measured.python_alloc_ns
#define COST_FREE_NS  sim_cost_measured.python_free_ns
#define COST_MARK_NS  1000
#define SETTLE_STEP_NS UINT64_C(50000000) /* 50 ms, one light allocation */
#define SETTLE_OBJ_BYTES 56               /* sys.getsizeof([]) on 3.11 */
#define PENDING_MAX   4

typedef enum phase_e {
  PH_START,
  PH_BUILD,
  PH_SELECT,
  PH_FREE,
  PH_SETTLE,
  PH_AFTER,
  PH_REUSE,
  PH_DONE
} phase_t;

/* A CPython list's ob_item as list_resize keeps it. */
typedef struct pylist_s {
  uint64_t id;        /* object id of ob_item */
  uint64_t size;      /* Py_SIZE */
  uint64_t allocated; /* slots; 0 while ob_item is NULL */
} pylist_t;

typedef struct survivors_src_s {
  trace_source_t   base; /* must be first */
  survivors_rule_t rule;
  uint64_t size_bytes;        /* request of each built object */
  uint64_t nobjects;          /* objects built */
  uint64_t reuse_size_bytes;  /* 0: no reuse phase */
  uint64_t reuse_nobjects;
  uint64_t settle_ns;         /* remaining settle time */
  phase_t  phase;
  uint64_t i;                 /* position in the current phase */
  uint64_t t_ns;              /* virtual clock */
  pylist_t main, keep;
  uint64_t next_free_obj;     /* lowest-free cursor over build objects */
  uint64_t fresh_id;          /* first id never used */
  uint64_t returned[PENDING_MAX]; /* ids freed after the free phase */
  size_t   nreturned;
  trace_event_t pending[PENDING_MAX]; /* generated, not yet returned */
  size_t        npending, pending_at;
} survivors_src_t;

static void emit(survivors_src_t *s, trace_op_t op, uint8_t domain,
                 uint64_t id, uint64_t size, const char *label) {
  /* Each step emits at most PENDING_MAX events; more is a generator bug. */
  if (s->npending >= PENDING_MAX)
    abort();
  trace_event_t *ev = &s->pending[s->npending++];
  memset(ev, 0, sizeof *ev);
  ev->t_ns   = s->t_ns;
  ev->op     = (uint8_t)op;
  ev->domain = domain;
  ev->id     = id;
  ev->size   = size;
  ev->label  = label;
  s->t_ns += op == TRACE_FREE   ? COST_FREE_NS
             : op == TRACE_MARK ? COST_MARK_NS
             : op == TRACE_IDLE ? size
                                : COST_ALLOC_NS;
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
  /* listobject.c:80-81: PyMem_Realloc(ob_item, new_allocated * 8). */
  emit(s, l->allocated == 0 ? TRACE_MALLOC : TRACE_REALLOC, TRACE_DOMAIN_MEM,
       l->id, new_allocated * 8, NULL);
  l->allocated = new_allocated;
  l->size      = newsize;
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
    uint64_t id        = s->returned[lo];
    s->returned[lo]    = s->returned[--s->nreturned];
    return id;
  }
  while (s->next_free_obj < s->nobjects &&
         survivors_is_kept(&s->rule, s->next_free_obj))
    s->next_free_obj++;
  if (s->next_free_obj < s->nobjects)
    return ID_FIRST_OBJ + s->next_free_obj++;
  return s->fresh_id++;
}

/* Generates the next step's events into s->pending. */
static void step(survivors_src_t *s) {
  switch (s->phase) {
  case PH_START:
    emit(s, TRACE_MARK, 0, 0, 0, "start");
    s->phase = PH_BUILD;
    s->i     = 0;
    return;
  case PH_BUILD:
    if (s->i < s->nobjects) {
      /* os.urandom(n) is evaluated before append() runs. */
      emit(s, TRACE_MALLOC, TRACE_DOMAIN_OBJ, ID_FIRST_OBJ + s->i,
           s->size_bytes, NULL);
      list_append(s, &s->main);
      s->i++;
      return;
    }
    emit(s, TRACE_MARK, 0, 0, 0, "peak");
    s->phase = PH_SELECT;
    s->i     = 0;
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
      while (s->i < s->nobjects) {
        bool kept = survivors_is_kept(&s->rule, s->i++);
        if (!kept)
          continue;
        size_t before = s->npending;
        list_append(s, &s->keep);
        if (s->npending != before)
          return;
      }
    }
    s->phase = PH_FREE;
    s->i     = s->nobjects;
    return;
  case PH_FREE:
    /* list_dealloc decrefs backwards (listobject.c:355-358). */
    while (s->i > 0) {
      uint64_t j = --s->i;
      if (!survivors_is_kept(&s->rule, j)) {
        emit(s, TRACE_FREE, TRACE_DOMAIN_OBJ, ID_FIRST_OBJ + j, 0, NULL);
        return;
      }
    }
    list_free(s, &s->main);
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
    s->phase = s->reuse_nobjects ? PH_REUSE : PH_DONE;
    s->i     = 0;
    return;
  case PH_REUSE:
    if (s->i < s->reuse_nobjects) {
      emit(s, TRACE_MALLOC, TRACE_DOMAIN_OBJ, take_id(s), s->reuse_size_bytes,
           NULL);
      list_append(s, &s->main);
      s->i++;
      return;
    }
    emit(s, TRACE_MARK, 0, 0, 0, "after_reuse");
    s->phase = PH_DONE;
    return;
  case PH_DONE:
    return;
  }
}

static as_status_t survivors_next(trace_source_t *src, trace_event_t *ev,
                                  as_err_t *err) {
  (void)err;
  survivors_src_t *s = (survivors_src_t *)src;
  /* Fast paths for the two phases that make almost every event: written
   * straight into *ev, exactly what step() would have queued. */
  if (s->pending_at == s->npending) {
    if (s->phase == PH_FREE) {
      while (s->i > 0) {
        uint64_t j = --s->i;
        if (!survivors_is_kept(&s->rule, j)) {
          *ev = (trace_event_t){.t_ns   = s->t_ns,
                                .op     = TRACE_FREE,
                                .domain = TRACE_DOMAIN_OBJ,
                                .id     = ID_FIRST_OBJ + j};
          s->t_ns += COST_FREE_NS;
          return AS_OK;
        }
      }
    } else if (s->phase == PH_BUILD && s->i < s->nobjects &&
               s->main.allocated > s->main.size) {
      *ev = (trace_event_t){.t_ns   = s->t_ns,
                            .op     = TRACE_MALLOC,
                            .domain = TRACE_DOMAIN_OBJ,
                            .id     = ID_FIRST_OBJ + s->i,
                            .size   = s->size_bytes};
      s->t_ns += COST_ALLOC_NS;
      s->main.size++;
      s->i++;
      return AS_OK;
    }
  }
  while (s->pending_at == s->npending) {
    if (s->phase == PH_DONE)
      return AS_DONE;
    s->npending = s->pending_at = 0;
    step(s);
  }
  *ev = s->pending[s->pending_at++];
  return AS_OK;
}

static void survivors_close(trace_source_t *src) {
  free(src);
}

static const trace_source_methods_t survivors_methods = {
    .next  = survivors_next,
    .close = survivors_close,
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
  OPT_COUNT
};

static const workload_option_t survivors_options[] = {
    [OPT_SIZE]        = {"size", "64",
                         "sys.getsizeof of each bytes object, bytes (>= 35)"},
    [OPT_TOTAL]       = {"total", "256", "MiB of objects to build"},
    [OPT_PATTERN]     = {"pattern", "random",
                         "which objects survive: random, stride or oldest"},
    [OPT_FRACTION]    = {"fraction", "1e-4",
                         "survivor fraction for random and oldest, 0..1"},
    [OPT_EVERY]       = {"every", "1000", "stride: every n-th object survives"},
    [OPT_SEED]        = {"seed", "1", "random: splitmix64 seed"},
    [OPT_REUSE_SIZE]  = {"reuse-size", "0",
                         "then allocate objects of this size, bytes (0: no)"},
    [OPT_REUSE_TOTAL] = {"reuse-total", "256", "MiB to allocate in reuse"},
    [OPT_SETTLE_MS]   = {"settle-ms", "0",
                         "idle with light allocation before `after`, ms"},
    [OPT_COUNT]       = {NULL, NULL, NULL},
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
  char *end;
  errno    = 0;
  double x = strtod(v, &end);
  if (end == v || *end != '\0' || errno != 0 || !isfinite(x) || x > hi ||
      x < lo || (lo_open && x == lo))
    return as_err_set(err, AS_EUSAGE,
                      "survivors: --%s expects a number in %s%g..%g], got "
                      "'%s'",
                      opt, lo_open ? "(" : "[", lo, hi, v);
  *out = x;
  return AS_OK;
}

#define MIB        1048576.0
#define MAX_SIZE   (UINT64_C(1) << 30)
#define MAX_TOTAL  (1048576.0) /* MiB: 1 TiB of objects */

static as_status_t survivors_open(const char *const *v, trace_source_t **out,
                                  as_err_t *err) {
  *out = NULL;
  /* Zeroed: each is set by its parser before use (gcc -O2 cannot see it). */
  uint64_t size = 0, every = 0, seed = 0, reuse_size = 0, settle_ms = 0;
  double   total_mib = 0, fraction = 0, reuse_mib = 0;
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
      (rc = parse_u64("reuse-size", v[OPT_REUSE_SIZE], 0, MAX_SIZE,
                      &reuse_size, err)) ||
      (rc = parse_double("reuse-total", v[OPT_REUSE_TOTAL], 0, MAX_TOTAL, true,
                         &reuse_mib, err)) ||
      (rc = parse_u64("settle-ms", v[OPT_SETTLE_MS], 0, UINT64_C(86400000),
                      &settle_ms, err)))
    return rc;
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
  uint64_t n           = survivors_object_count(total_bytes, size);
  if (n == 0)
    return as_err_set(err, AS_EUSAGE,
                      "survivors: --total %s MiB holds no object of --size "
                      "%" PRIu64 " bytes",
                      v[OPT_TOTAL], size);

  survivors_src_t *s = calloc(1, sizeof *s);
  if (s == NULL)
    return as_err_set(err, AS_ENOMEM, "survivors: out of memory");
  s->base.methods       = &survivors_methods;
  s->rule.pattern       = pattern;
  s->rule.fraction      = fraction;
  s->rule.every         = every;
  s->rule.seed          = seed;
  s->rule.oldest_count  = (uint64_t)(fraction * (double)n);
  s->size_bytes         = size;
  s->nobjects           = n;
  s->reuse_size_bytes   = reuse_size;
  s->reuse_nobjects     = reuse_size
                              ? survivors_object_count(
                                    (uint64_t)(reuse_mib * MIB), reuse_size)
                              : 0;
  s->settle_ns          = settle_ms * UINT64_C(1000000);
  s->phase              = PH_START;
  s->main.id            = ID_LIST_MAIN;
  s->keep.id            = ID_LIST_KEEP;
  s->fresh_id           = ID_FIRST_OBJ + n;

  size_t used = (size_t)snprintf(s->base.name, sizeof s->base.name,
                                 "survivors");
  for (int o = 0; o < OPT_COUNT && used < sizeof s->base.name; o++)
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
    .name    = "survivors",
    .summary = "build small Python objects, keep a few, free the rest "
               "(the survivors study)",
    .options = survivors_options,
    .open    = survivors_open,
};
