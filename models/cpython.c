/* models/cpython.c -- the CPython default (GIL) build: the obj and mem
 * domains go to pymalloc, everything pymalloc declines goes to the libc
 * model, as Objects/obmalloc.c routes it.
 *
 * Routing (CPython 3.11.2 / 3.14.7 Objects/obmalloc.c):
 *   - raw domain: PyMem_RawMalloc is malloc, mem and obj are pymalloc
 *     (3.11 :185-191 PYRAW_ALLOC MALLOC_ALLOC, PYOBJ_ALLOC PYMALLOC_ALLOC,
 *     PYMEM_ALLOC PYOBJ_ALLOC; 3.13.5 :315-318; 3.14 :370-372) -> libc;
 *   - obj/mem malloc and calloc of 1..512 bytes -> pymalloc; 0 bytes or more
 *     than 512 fall through to PyMem_RawMalloc/RawCalloc (pymalloc_alloc
 *     3.11 :1959-1964, _PyObject_Malloc :1996-2007, _PyObject_Calloc
 *     :2012-2028; 3.14 :2292-2297, :2329-2341, :2346-2363) -> libc;
 *   - realloc of a pymalloc block follows pymalloc_realloc (3.11
 *     :2301-2358; 3.14 :2637-2696): in place if the new size fits and
 *     4*nbytes > 3*size, else _PyObject_Malloc(nbytes) + memcpy + free, so a
 *     block growing past 512 bytes (or shrinking to 0) moves to libc;
 *   - realloc of a libc block stays in libc even when it shrinks to <= 512
 *     (PyMem_RawRealloc, 3.11 :2374; 3.14 :2712);
 *   - memalign has no obj/mem counterpart; it is always libc's.
 * pymalloc's own bookkeeping allocations (the arenas[] vector and the radix
 * tree's mid and bottom nodes) are PyMem_RawRealloc / PyMem_RawCalloc, so
 * they go to the libc child too, under ids 0..PYMALLOC_RAW_HANDLES-1; the
 * program's ids are shifted up by PYMALLOC_RAW_HANDLES on the way to libc.
 * Each id lives in exactly one child at a time.  pymalloc's own per-id table
 * says whether it holds an id (pymalloc_free_if_held, pymalloc_block_size_of),
 * and a bit per id says whether libc does, so an id in neither is dead; the
 * pymalloc path -- nearly every event of a Python program -- keeps no state
 * here at all.  Left out: the radix-tree entry writes (8 bytes per arena, plus
 * one mid-node entry per bottom node) into nodes that libc placed, because the
 * model interface does not expose a child's addresses.  That is at most one
 * OS page per 512 arenas (under 0.001% of the arenas' RSS); the nodes'
 * calloc itself, and the arenas[] vector, are modelled in full.
 *
 * Sections
 *   pymalloc's raw allocations, routed to libc
 *   Helpers
 *   Model methods
 */
#include "model.h"
#include "cpython.h"
#include "idset.h"
#include "pymalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Invariant: a live id is held by pymalloc, or by libc under id +
 * PYMALLOC_RAW_HANDLES with its bit set in in_libc, never both.  raw_live_*
 * count pymalloc's bookkeeping blocks in libc, which the program did not ask
 * for. */
typedef struct cpython_model_s cpython_model_t;
struct cpython_model_s {
  model_t  base;     /* must be first */
  model_t *pymalloc; /* small obj/mem requests */
  model_t *libc;     /* raw domain, large requests, pymalloc's own */
  idset_t  in_libc;  /* bit by object id: libc holds it */
  uint64_t raw_nbytes[PYMALLOC_RAW_HANDLES]; /* size of each raw block */
  uint64_t raw_live_bytes;                   /* sum of raw_nbytes */
  uint64_t raw_live_objects;                 /* raw blocks live in libc */
  const trace_event_t *serving; /* the event being served: its time and
                                   thread stamp pymalloc's raw requests */
  bool use_pymalloc;            /* false: PYTHONMALLOC=malloc */
};

static const model_option_t cpython_options[] = {
    CPYTHON_OPTIONS(MODEL_OPTION_ROW){0}};

/* ---- pymalloc's raw allocations, routed to libc ------------------------- */

static as_status_t raw_event(cpython_model_t *cm, trace_op_t op,
                             uint32_t handle, uint64_t prev_nbytes,
                             uint64_t nbytes, as_err_t *err) {
  trace_event_t ev = {
      .t_ns = cm->serving->t_ns,
      .id = handle,
      .size = nbytes,
      .prev_size = prev_nbytes,
      .thread = cm->serving->thread,
      .op = (uint8_t)op,
      .domain = TRACE_DOMAIN_RAW,
  };
  return op == TRACE_REALLOC ? model_realloc(cm->libc, &ev, err)
                             : model_alloc(cm->libc, &ev, err);
}

static as_status_t raw_calloc(void *user, uint32_t handle, uint64_t nbytes,
                              as_err_t *err) {
  cpython_model_t *cm = user;
  as_status_t      rc = raw_event(cm, TRACE_CALLOC, handle, 0, nbytes, err);
  if (rc != AS_OK)
    return rc;
  cm->raw_nbytes[handle] = nbytes;
  cm->raw_live_bytes += nbytes;
  cm->raw_live_objects++;
  return AS_OK;
}

static as_status_t raw_realloc(void *user, uint32_t handle, uint64_t old_nbytes,
                               uint64_t nbytes, as_err_t *err) {
  cpython_model_t *cm = user;
  /* realloc(NULL, n) is malloc(n) (the first arenas[] vector). */
  as_status_t rc = raw_event(cm, old_nbytes ? TRACE_REALLOC : TRACE_MALLOC,
                             handle, old_nbytes, nbytes, err);
  if (rc != AS_OK)
    return rc;
  if (old_nbytes == 0)
    cm->raw_live_objects++;
  cm->raw_live_bytes = cm->raw_live_bytes - cm->raw_nbytes[handle] + nbytes;
  cm->raw_nbytes[handle] = nbytes;
  return AS_OK;
}

/* ---- Helpers ------------------------------------------------------------ */

/* Records that libc holds id. */
static as_status_t set_in_libc(cpython_model_t *cm, uint64_t id,
                               as_err_t *err) {
  if (!idset_add(&cm->in_libc, id))
    return as_err_set(err, AS_ENOMEM, "cpython: out of memory for id %llu",
                      (unsigned long long)id);
  return AS_OK;
}

static inline bool held_by_libc(const cpython_model_t *cm, uint64_t id) {
  return idset_has(&cm->in_libc, id);
}

static inline void clear_in_libc(cpython_model_t *cm, uint64_t id) {
  idset_del(&cm->in_libc, id);
}

/* The event as the libc child sees it: the same, with the id shifted. */
static inline trace_event_t to_libc(const trace_event_t *ev) {
  trace_event_t le = *ev;
  le.id += PYMALLOC_RAW_HANDLES;
  return le;
}

static inline void note_event(cpython_model_t *cm, const trace_event_t *ev) {
  cm->serving = ev;
}

/* ---- Model methods ------------------------------------------------------ */

static void cpython_destroy(model_t *m) {
  cpython_model_t *cm = (cpython_model_t *)m;
  model_destroy(cm->pymalloc);
  model_destroy(cm->libc);
  idset_free(&cm->in_libc);
  free(cm);
}

as_status_t cpython_libc_check(const char *libc_spec, as_err_t *err) {
  char                   name[64];
  const model_methods_t *m;
  model_spec_name(libc_spec, name, sizeof name);
  if ((m = model_find(name)) == NULL ||
      !(m->composition || strcmp(name, "pymalloc") == 0))
    return AS_OK; /* an unknown name: model_create_from_spec says so */
  return as_err_set(err, AS_EUSAGE,
                    "cpython: libc model '%s' cannot serve malloc (use a "
                    "libc model such as glibc or ideal)",
                    libc_spec);
}

static as_status_t cpython_create(const model_opts_t *opts,
                                  const model_ctx_t *ctx, model_t **out,
                                  as_err_t *err) {
  *out = NULL;
  if (model_opt_i64(opts, CO_BUILD) == 1)
    return cpython_ft_create(opts, ctx, out, err);
  /* The default build has no mimalloc of its own.  Over a preloaded
   * mimalloc the MIMALLOC_* variables of a recorded run are that library's
   * (the libc spec carries them from the same environment), so they are
   * accepted and left to it; anywhere else they are a mistake. */
  const char *libc_name =
      ctx->libc_spec ? ctx->libc_spec : model_default_libc();
  bool libc_is_mimalloc = strncmp(libc_name, "mimalloc", 8) == 0 &&
                          (libc_name[8] == '\0' || libc_name[8] == ':');
  for (int k = CO_FIRST_MIMALLOC; k < CO_COUNT && !libc_is_mimalloc; k++)
    if (model_opt_was_set(opts, k))
      return as_err_set(err, AS_EUSAGE,
                        "cpython: %s is a mimalloc knob of build=ft; the "
                        "default build has no mimalloc",
                        opts->table[k].name);
  /* pymalloc models 3.10 to 3.14 (pymalloc.c says how each was checked); a
   * micro release is its minor version. */
  const char *version = model_opt_text(opts, CO_VERSION);
  char        minor[8];
  snprintf(minor, sizeof minor, "%.4s", version);
  if (model_opt_i64(opts, CO_PYTHONMALLOC) == 2)
    return as_err_set(err, AS_EUSAGE,
                      "cpython: pythonmalloc=mimalloc is modelled for "
                      "build=ft only (the default build's PYTHONMALLOC="
                      "mimalloc uses mimalloc's default heap, not modelled)");
  cpython_model_t *cm = calloc(1, sizeof *cm);
  if (cm == NULL)
    return as_err_set(err, AS_ENOMEM, "cpython: out of memory");
  cm->base.methods = &model_cpython_methods;
  cm->base.opts = *opts;
  /* The default build's provenance is its own knobs (cpython.h: build and
   * the mimalloc knobs come after them). */
  cm->base.opts.count = CO_BUILD;
  cm->use_pymalloc = model_opt_i64(opts, CO_PYTHONMALLOC) == 0;

  as_status_t rc;
  const char *libc_spec =
      ctx->libc_spec ? ctx->libc_spec : model_default_libc();
  rc = cpython_libc_check(libc_spec, err);
  if (rc == AS_OK)
    rc = model_create_from_spec(libc_spec, ctx, &cm->libc, err);
  if (rc != AS_OK)
    goto fail;

  char assign[32];
  snprintf(assign, sizeof assign, "version=%s", minor);
  model_opts_t popts;
  rc = model_opts_parse("pymalloc", model_pymalloc_methods.options, assign,
                        &popts, err);
  if (rc != AS_OK)
    goto fail;
  rc = model_pymalloc_methods.create(&popts, ctx, &cm->pymalloc, err);
  if (rc != AS_OK)
    goto fail;
  cm->pymalloc->methods = &model_pymalloc_methods;
  cm->pymalloc->opts = popts;
  pymalloc_set_raw(cm->pymalloc, &(pymalloc_raw_t){
                                     .user = cm,
                                     .calloc = raw_calloc,
                                     .realloc = raw_realloc,
                                     .write = NULL,
                                 });
  *out = &cm->base;
  return AS_OK;
fail:
  cpython_destroy(&cm->base);
  return rc;
}

static inline bool goes_to_pymalloc(const cpython_model_t *cm,
                                    const trace_event_t   *ev) {
  return cm->use_pymalloc && ev->domain != TRACE_DOMAIN_RAW &&
         ev->op != TRACE_MEMALIGN && ev->size >= 1 &&
         ev->size <= PYMALLOC_SMALL_REQUEST_THRESHOLD;
}

/* The libc halves of alloc and free, out of line so that the pymalloc
 * path, nearly every event of a Python program, needs no stack frame. */
static __attribute__((noinline)) as_status_t
libc_alloc(cpython_model_t *cm, const trace_event_t *ev, as_err_t *err) {
  trace_event_t le = to_libc(ev);
  as_status_t   rc = model_alloc(cm->libc, &le, err);
  return rc == AS_OK ? set_in_libc(cm, ev->id, err) : rc;
}

static __attribute__((noinline)) as_status_t
libc_free(cpython_model_t *cm, const trace_event_t *ev, as_err_t *err) {
  if (!held_by_libc(cm, ev->id))
    return as_err_set(err, AS_EINVAL, "cpython: free of dead id %llu",
                      (unsigned long long)ev->id);
  trace_event_t le = to_libc(ev);
  as_status_t   rc = model_free(cm->libc, &le, err);
  if (rc == AS_OK)
    clear_in_libc(cm, ev->id);
  return rc;
}

static as_status_t cpython_alloc(model_t *m, const trace_event_t *ev,
                                 as_err_t *err) {
  cpython_model_t *cm = (cpython_model_t *)m;
  note_event(cm, ev);
  if (goes_to_pymalloc(cm, ev))
    return model_alloc(cm->pymalloc, ev, err);
  return libc_alloc(cm, ev, err);
}

/* PyMem_RawFree / PyMem_RawRealloc (free / realloc) of a pymalloc block
 * hands the C library a pointer it never allocated: heap corruption or a
 * crash in the real process, so a trace that does it is refused.  (The
 * other way round, PyObject_Free of a raw block, works: pymalloc's
 * address_in_range sends it on to PyMem_RawFree.) */
static as_status_t raw_call_on_pymalloc_block(const trace_event_t *ev,
                                              as_err_t            *err) {
  return as_err_set(err, AS_EFORMAT,
                    "cpython: %s of object %llu in the raw domain, but "
                    "pymalloc allocated it (obj or mem domain): it must be "
                    "freed in the domain it was allocated in",
                    trace_op_name(ev->op), (unsigned long long)ev->id);
}

static as_status_t cpython_realloc(model_t *m, const trace_event_t *ev,
                                   as_err_t *err) {
  cpython_model_t *cm = (cpython_model_t *)m;
  note_event(cm, ev);
  uint64_t size = pymalloc_block_size_of(cm->pymalloc, ev->id);
  if (size != 0 && ev->domain == TRACE_DOMAIN_RAW)
    return raw_call_on_pymalloc_block(ev, err);
  if (size != 0) {
    uint64_t nbytes = ev->size;
    /* In place, or a new pymalloc block (3.11 :2335-2351; 3.14
     * :2672-2688). */
    if ((nbytes <= size && 4 * nbytes > 3 * size) ||
        (nbytes >= 1 && nbytes <= PYMALLOC_SMALL_REQUEST_THRESHOLD))
      return model_realloc(cm->pymalloc, ev, err);
    /* _PyObject_Malloc(nbytes) falls through to PyMem_RawMalloc, then
     * memcpy and _PyObject_Free of the old block (3.11 :2351-2355). */
    trace_event_t le = to_libc(ev);
    le.op = TRACE_MALLOC;
    le.prev_size = 0;
    as_status_t rc = model_alloc(cm->libc, &le, err);
    if (rc == AS_OK)
      rc = set_in_libc(cm, ev->id, err);
    if (rc != AS_OK)
      return rc;
    trace_event_t fe = *ev; /* prev_size: the pymalloc object's size */
    fe.op = TRACE_FREE;
    fe.size = 0;
    return model_free(cm->pymalloc, &fe, err);
  }
  if (!held_by_libc(cm, ev->id))
    return as_err_set(err, AS_EINVAL, "cpython: realloc of dead id %llu",
                      (unsigned long long)ev->id);
  trace_event_t le = to_libc(ev);
  return model_realloc(cm->libc, &le, err);
}

static as_status_t cpython_free(model_t *m, const trace_event_t *ev,
                                as_err_t *err) {
  cpython_model_t *cm = (cpython_model_t *)m;
  note_event(cm, ev);
  if (ev->domain == TRACE_DOMAIN_RAW &&
      pymalloc_block_size_of(cm->pymalloc, ev->id) != 0)
    return raw_call_on_pymalloc_block(ev, err);
  bool        held;
  as_status_t rc = pymalloc_free_if_held(cm->pymalloc, ev, &held, err);
  return held ? rc : libc_free(cm, ev, err);
}

/* Threads and malloc_trim concern libc only: obmalloc keeps no per-thread
 * state in the GIL build and never trims. */
static as_status_t cpython_thread(model_t *m, const trace_event_t *ev,
                                  as_err_t *err) {
  cpython_model_t *cm = (cpython_model_t *)m;
  return model_thread(cm->libc, ev, err);
}

static as_status_t cpython_trim(model_t *m, uint64_t pad, uint64_t now_ns,
                                as_err_t *err) {
  cpython_model_t *cm = (cpython_model_t *)m;
  return model_trim(cm->libc, pad, now_ns, err);
}

static bool cpython_locate(const model_t *m, uint64_t id, sim_addr_t *addr) {
  const cpython_model_t *cm = (const cpython_model_t *)m;
  if (model_locate(cm->pymalloc, id, addr))
    return true;
  return held_by_libc(cm, id) &&
         model_locate(cm->libc, id + PYMALLOC_RAW_HANDLES, addr);
}

/* Purges and run-time options are the libc allocator's (mallctl, mallopt,
 * mi_collect); obmalloc has neither. */
static as_status_t cpython_purge(model_t *m, const trace_event_t *ev,
                                 as_err_t *err) {
  cpython_model_t *cm = (cpython_model_t *)m;
  if (!model_has_purge(cm->libc))
    return AS_DONE; /* as the libc model alone: no notion (model.h) */
  return model_purge(cm->libc, ev, err);
}

static as_status_t cpython_set_option(model_t *m, const char *name,
                                      int64_t value, uint64_t now_ns,
                                      as_err_t *err) {
  cpython_model_t *cm = (cpython_model_t *)m;
  return model_set_option(cm->libc, name, value, now_ns, err);
}

/* Seeds are the libc allocator's. */
static as_status_t cpython_seed(model_t *m, const char *kind, uint64_t index,
                                uint64_t value, as_err_t *err) {
  return model_seed(((cpython_model_t *)m)->libc, kind, index, value, err);
}

/* Routed as an allocation of that domain would be (goes_to_pymalloc): a
 * pymalloc size class, else what libc gives. */
static uint64_t cpython_usable_size(const model_t *m, uint64_t size,
                                    uint8_t domain) {
  const cpython_model_t *cm = (const cpython_model_t *)m;
  trace_event_t ev = {.op = TRACE_MALLOC, .domain = domain, .size = size};
  if (goes_to_pymalloc(cm, &ev))
    return model_usable_size(cm->pymalloc, size, domain);
  return model_usable_size(cm->libc, size, TRACE_DOMAIN_RAW);
}

static size_t cpython_counters(const model_t *m, model_counter_t *out,
                               size_t cap) {
  const cpython_model_t *cm = (const cpython_model_t *)m;
  size_t                 n = model_counters(cm->pymalloc, out, cap);
  return n + model_counters(cm->libc, n < cap ? out + n : NULL,
                            n < cap ? cap - n : 0);
}

/* pymalloc's own blocks in libc, for the heap map: where each is, sorted
 * by address, and its size. */
typedef struct raw_walk_s raw_walk_t;
struct raw_walk_s {
  model_region_fn fn;
  void           *user;
  size_t          n;
  sim_addr_t      addr[PYMALLOC_RAW_HANDLES];
  uint64_t        nbytes[PYMALLOC_RAW_HANDLES];
};

static const model_mechanism_t cpython_mechanisms[] = {
    {"cpython.raw_meta", "pymalloc's own bookkeeping in libc's heap",
     "pymalloc's arenas[] vector and arena-map nodes are PyMem_RawRealloc "
     "and PyMem_RawCalloc blocks, which are malloc's (CPython 3.11 "
     "Objects/obmalloc.c:1459 and 1471, the nodes; new_arena, :1579-1676, "
     "the vector).",
     "nothing while pymalloc holds arenas", false},
    {NULL, NULL, NULL, NULL, false},
};

/* A libc region, less pymalloc's blocks inside it: they leave its live
 * counts, and a level-1 region that held only them is pymalloc's
 * bookkeeping, not the program's objects. */
static as_status_t raw_region(void *user, const model_region_t *r,
                              as_err_t *err) {
  const raw_walk_t *w = user;
  model_region_t    c = *r;
  size_t            lo = 0, hi = w->n, inside = 0;
  while (lo < hi) { /* the first block at or above the region's start */
    size_t mid = lo + (hi - lo) / 2;
    if (w->addr[mid] < r->addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (; lo < w->n && w->addr[lo] < r->addr + r->bytes && c.live_objects;
       lo++, inside++) {
    c.live_objects--;
    c.live_bytes -= w->nbytes[lo] < c.live_bytes ? w->nbytes[lo] : c.live_bytes;
  }
  if (inside && c.level == 1 && c.live_objects == 0 &&
      c.state == MODEL_REGION_LIVE) {
    c.state = MODEL_REGION_METADATA;
    c.mechanism = "cpython.raw_meta";
  }
  return w->fn(w->user, &c, err);
}

/* The heap map is the children's: pymalloc's arenas, then libc's heaps,
 * where pymalloc's own blocks (never freed) are told from the program's
 * objects by their addresses, so under any libc model. */
static as_status_t cpython_walk(const model_t *m, model_region_fn fn,
                                void *user, as_err_t *err) {
  const cpython_model_t *cm = (const cpython_model_t *)m;
  as_status_t            rc = model_walk(cm->pymalloc, fn, user, err);
  raw_walk_t            *w = rc == AS_OK ? calloc(1, sizeof *w) : NULL;
  if (rc != AS_OK)
    return rc;
  if (w == NULL)
    return as_err_set(err, AS_ENOMEM, "cpython: out of memory for a walk");
  *w = (raw_walk_t){.fn = fn, .user = user};
  for (uint32_t h = 0; h < PYMALLOC_RAW_HANDLES; h++) {
    sim_addr_t a;
    if (cm->raw_nbytes[h] == 0 || !model_locate(cm->libc, h, &a))
      continue;
    size_t i = w->n++; /* insertion: at most a few dozen blocks */
    for (; i > 0 && w->addr[i - 1] > a; i--) {
      w->addr[i] = w->addr[i - 1];
      w->nbytes[i] = w->nbytes[i - 1];
    }
    w->addr[i] = a;
    w->nbytes[i] = cm->raw_nbytes[h];
  }
  rc = model_walk(cm->libc, raw_region, w, err);
  free(w);
  return rc;
}

static void cpython_stats(const model_t *m, model_stats_t *out) {
  const cpython_model_t *cm = (const cpython_model_t *)m;
  model_stats_t          p, l;
  model_stats(cm->pymalloc, &p);
  model_stats(cm->libc, &l);
  memset(out, 0, sizeof *out);
  out->live_bytes = p.live_bytes + l.live_bytes - cm->raw_live_bytes;
  out->live_objects = p.live_objects + l.live_objects - cm->raw_live_objects;
  out->mapped_bytes = p.mapped_bytes + l.mapped_bytes;
  out->arenas = p.arenas; /* pymalloc arenas: what the formula counts */
  out->free_bytes = p.free_bytes + l.free_bytes;
}

static as_status_t cpython_check(const model_t *m, as_err_t *err) {
  const cpython_model_t *cm = (const cpython_model_t *)m;
  as_status_t            rc = model_check(cm->pymalloc, err);
  return rc != AS_OK ? rc : model_check(cm->libc, err);
}

/* A free or realloc: the prefetch of the child holding the object, libc's
 * under the id libc knows it by.  The bit tested first costs nothing when
 * libc holds no object of the program (a Python heap of small objects). */
static void cpython_prefetch(const model_t *m, const trace_event_t *ev) {
  const cpython_model_t *cm = (const cpython_model_t *)m;
  if (ev->op != TRACE_FREE && ev->op != TRACE_REALLOC)
    return;
  if (!idset_has(&cm->in_libc, ev->id)) {
    model_pymalloc_methods.prefetch(cm->pymalloc, ev);
    return;
  }
  void (*libc_prefetch)(const model_t *, const trace_event_t *) =
      cm->libc->methods->prefetch;
  if (libc_prefetch == NULL)
    return;
  trace_event_t le; /* the fields a prefetch reads (model.h) */
  le.op = ev->op;
  le.id = ev->id + PYMALLOC_RAW_HANDLES;
  libc_prefetch(cm->libc, &le);
}

const model_methods_t model_cpython_methods = {
    .name = "cpython",
    .summary = "CPython default build: pymalloc for obj/mem <= 512 B, "
               "the rest to libc",
    .options = cpython_options,
    .composition = true,
    .mechanisms = cpython_mechanisms,
    .create = cpython_create,
    .destroy = cpython_destroy,
    .alloc = cpython_alloc,
    .realloc = cpython_realloc,
    .free = cpython_free,
    .thread = cpython_thread,
    .trim = cpython_trim,
    .stats = cpython_stats,
    .locate = cpython_locate,
    .purge = cpython_purge,
    .set_option = cpython_set_option,
    .seed = cpython_seed,
    .counters = cpython_counters,
    .usable_size = cpython_usable_size,
    .walk = cpython_walk,
    .check = cpython_check,
    .prefetch = cpython_prefetch,
};

model_t *cpython_pymalloc_child(const model_t *m) {
  return ((const cpython_model_t *)m)->pymalloc;
}
model_t *cpython_libc_child(const model_t *m) {
  return ((const cpython_model_t *)m)->libc;
}
