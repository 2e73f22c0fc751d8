/* models/model.h -- the one interface every allocator model implements, in
 * the style of SQLite's sqlite3_vfs: a struct of function pointers, a static
 * registry searched by name, and wrappers that call sites use instead of the
 * slots (they handle optional NULL slots).
 *
 * Type map
 *   model_methods_t  the vtable: name, option table, create ... destroy
 *   model_t          an instance; every model's state begins with it
 *   model_ctx_t      what a model is bound to: kernel, timer queue, libc spec
 *   model_stats_t    what every model reports besides RSS
 *   model_counter_t  a named counter only some models have (explain, sweeps)
 *   model_region_t   one region of a heap map (model_walk)
 *
 * A model owns bookkeeping only, never payload bytes.  It maps, touches and
 * releases pages through the kernel, and schedules clocked work (decay,
 * purge deadlines) as sim_timer_t's embedded in its own structs; it may
 * also act on the event that triggers its policy (jemalloc's ticks,
 * mimalloc's purge on a later free), since every call carries the time.
 *
 * Writes.  The program writes every byte it allocates (malloc, memalign,
 * realloc growth) unless the event has TRACE_FLAG_UNWRITTEN: then the model
 * writes only what the allocator itself writes (headers, free-list links,
 * memset of reused memory for calloc) and the engine applies the trace's
 * touch events through model_locate.  calloc of memory fresh from the
 * kernel is zero already and is never written by the allocator.
 *
 * Names.  A model's counters are named "<model>.<counter>" (glibc.arenas,
 * pymalloc.arenas_pinned), so a composition reports its children's as they
 * are and callers look a counter up by name, never a model by its name.
 */
#ifndef ALLOCSIM_MODEL_H
#define ALLOCSIM_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../sim/event_queue.h"
#include "../sim/kernel.h"
#include "../traces/event.h"
#include "options.h"

typedef struct model_s         model_t;
typedef struct model_methods_s model_methods_t;
typedef struct model_ctx_s     model_ctx_t;
typedef struct model_stats_s   model_stats_t;

struct model_ctx_s {
  sim_kernel_t      *kernel;    /* shared by every model of a composition */
  sim_event_queue_t *timers;    /* where models schedule clocked work */
  const char        *libc_spec; /* compositions' libc ("glibc:arena_max=2");
                                   NULL = the default libc model */
};

struct model_stats_s {
  uint64_t live_bytes;   /* bytes the program asked for and still holds */
  uint64_t live_objects; /* objects the program still holds */
  uint64_t mapped_bytes; /* RW address space the model holds */
  uint64_t arenas;       /* top-level regions held: pymalloc arenas, glibc
                            heaps, jemalloc extents, mimalloc segments */
  uint64_t free_bytes;   /* held by the allocator, free to the program */
};

/* A named counter.  name is "<model>.<counter>"; unit is "bytes", "pages",
 * "count", ...; help is one line. */
typedef struct model_counter_s model_counter_t;
struct model_counter_s {
  char        name[48];
  uint64_t    value;
  const char *unit;
  const char *help;
};

/* A heap-map region.  level 0 is an allocator's top-level unit (pymalloc
 * arena, glibc heap or mmapped chunk, jemalloc extent, mimalloc segment);
 * level 1 a unit inside it (pool, chunk, slab, page).  Whether its pages
 * are resident is the kernel's to say (sim_kernel_is_resident). */
typedef enum model_region_state_e {
  MODEL_REGION_LIVE,     /* holds the program's objects */
  MODEL_REGION_FREE,     /* free, kept by the allocator */
  MODEL_REGION_CACHED,   /* free, in a per-thread or size-class cache */
  MODEL_REGION_RELEASED, /* free, its pages given back (purged, trimmed) */
  MODEL_REGION_RESERVED, /* address space without access (PROT_NONE) */
  MODEL_REGION_METADATA  /* the allocator's own bookkeeping */
} model_region_state_t;

typedef struct model_region_s model_region_t;
struct model_region_s {
  sim_addr_t  addr;
  uint64_t    bytes;
  uint64_t    live_bytes;   /* the program's bytes in it */
  uint64_t    live_objects; /* the program's objects in it */
  const char *kind;         /* "arena", "pool", "heap", "chunk", ... */
  const char *mechanism;    /* level 1: why its bytes are held, a key of
                               the model's mechanisms table ("glibc.top");
                               level 0: NULL */
  uint8_t level;            /* 0 or 1 (above) */
  uint8_t state;            /* model_region_state_t */
};

/* Why an allocator holds memory, for explain: level-1 regions name one of
 * these.  Level-1 regions never overlap, so resident bytes attributed to
 * them, plus what no region covers, add up to RSS. */
typedef struct model_mechanism_s model_mechanism_t;
struct model_mechanism_s {
  const char *key;         /* "glibc.binned" */
  const char *label;       /* "free chunks inside the heap" */
  const char *why;         /* one sentence: why the allocator keeps it */
  const char *released_by; /* what would give it back, or "nothing" */
  bool        live;        /* holds the program's objects (live bytes and
                              their overhead), not free memory */
};

/* Called for each region, level-0 regions before the level-1 regions
 * inside them, in address order within a level-0 region; a non-OK return
 * stops the walk and is returned. */
typedef as_status_t (*model_region_fn)(void *user, const model_region_t *r,
                                       as_err_t *err);

/* Every model's private state begins with this header. */
struct model_s {
  const model_methods_t *methods; /* always the first field */
  model_opts_t           opts;    /* the parsed options, for provenance */
};

struct model_methods_s {
  const char           *name;        /* as on the command line: "glibc" */
  const char           *summary;     /* one line for `allocsim models` */
  const model_option_t *options;     /* table ending in a row with name NULL */
  bool                  composition; /* forwards (some) requests to the
                                    libc model of ctx->libc_spec */
  const char *preload;               /* file name prefix of the library that
                                        LD_PRELOAD puts in place for this model
                                        ("libjemalloc"), or NULL */
  const char *const *unmodelled_env; /* settings the library reads that
                                        change what it keeps resident and the
                                        model does not: "SPELLING=DEFAULT"
                                        (spelled as option rows' env), NULL
                                        at the end; a run that sets one
                                        otherwise is not predicted
                                        (models/env.h) */
  const char *const *neutral_env;    /* keys of strict list variables the
                                        library reads that change neither what
                                        it maps nor what it writes while the
                                        program runs (reports, aborts):
                                        "VAR:key", NULL at the end; accepted
                                        and ignored (models/env.h) */
  const model_mechanism_t *mechanisms; /* what walk's regions name; ends
                                    with a row whose key is NULL; NULL if
                                    the model has no walk */
  uint64_t formula_page_bytes;         /* the unit the survivors
                               formula counts: 0 = a pymalloc arena of
                               pools, else the size of the allocator
                               page one survivor pins (mimalloc) */

  /* Builds an instance bound to ctx from parsed options. */
  as_status_t (*create)(const model_opts_t *opts, const model_ctx_t *ctx,
                        model_t **out, as_err_t *err);
  void (*destroy)(model_t *m);

  /* malloc, calloc and memalign events; ev->id names the new object.  The
   * engine guarantees the id is not live. */
  as_status_t (*alloc)(model_t *m, const trace_event_t *ev, as_err_t *err);
  /* realloc of the live object ev->id (ev->prev_size bytes) to ev->size. */
  as_status_t (*realloc)(model_t *m, const trace_event_t *ev, as_err_t *err);
  /* free of the live object ev->id of ev->prev_size bytes. */
  as_status_t (*free)(model_t *m, const trace_event_t *ev, as_err_t *err);

  /* Optional (may be NULL): thread_start and thread_exit events. */
  as_status_t (*thread)(model_t *m, const trace_event_t *ev, as_err_t *err);
  /* Optional (may be NULL): the program called malloc_trim(pad). */
  as_status_t (*trim)(model_t *m, uint64_t pad, uint64_t now_ns, as_err_t *err);

  void (*stats)(const model_t *m, model_stats_t *out);

  /* Optional: where the live object id's payload starts, for touch
   * events; false if id is not live in m.  NULL: the model places no
   * objects (ideal), and the engine counts touch events as ignored. */
  bool (*locate)(const model_t *m, uint64_t id, sim_addr_t *addr);

  /* Optional (may be NULL): a purge event (trace_purge_kind_t in ev->size,
   * arena or TRACE_ALL_ARENAS in ev->id).  NULL: the model has no such
   * notion; the engine counts the event (an error under --strict).  A slot
   * may return AS_DONE to say the same for this instance (a composition
   * whose libc child has no purge), with the same effect. */
  as_status_t (*purge)(model_t *m, const trace_event_t *ev, as_err_t *err);
  /* Optional: a run-time option change (mallopt, mallctl write) of the
   * model's own knob name to value.  A knob the model cannot change at run
   * time is AS_EINVAL naming it.  NULL: counted as for purge. */
  as_status_t (*set_option)(model_t *m, const char *name, int64_t value,
                            uint64_t now_ns, as_err_t *err);
  /* Optional: a seed of the real allocator's randomness that the run
   * recorded (option "seed.KIND.INDEX", traces/event.h), for the thread or
   * arena INDEX.  AS_OK for a KIND the model has no use for; NULL: every
   * seed is ignored. */
  as_status_t (*seed)(model_t *m, const char *kind, uint64_t index,
                      uint64_t value, as_err_t *err);
  /* Optional: fills up to cap counters, returns how many the model has. */
  size_t (*counters)(const model_t *m, model_counter_t *out, size_t cap);
  /* Optional: walks the heap map (model_region_t). */
  as_status_t (*walk)(const model_t *m, model_region_fn fn, void *user,
                      as_err_t *err);
  /* Optional: bytes a request of size in domain really gets
   * (malloc_usable_size), for the size-class lab; 0 = not modelled. */
  uint64_t (*usable_size)(const model_t *m, uint64_t size, uint8_t domain);
  /* Optional (may be NULL): walks the model's whole state and checks its
   * invariants (lists, counters, what it says is resident against the
   * kernel); AS_OK, or AS_EINVAL naming the first broken one.  Expensive:
   * for tests and the model fuzz target (tests/fuzz/fuzz_models.c), which
   * call it on every model in the registry. */
  as_status_t (*check)(const model_t *m, as_err_t *err);
  /* Optional: starts loading the records serving ev will read (the engine
   * calls it a few events ahead of serving ev), so that their cache misses
   * overlap the events in between.  Reads only ev->op and ev->id (a
   * composition passes its child an event with just those set); changes
   * nothing; ev may never be served (the replay can stop first). */
  void (*prefetch)(const model_t *m, const trace_event_t *ev);
};

/* ---- Registry ----------------------------------------------------------- */

/* The model registered under name, or NULL. */
const model_methods_t *model_find(const char *name);
/* All registered models, in display order; *count receives their number. */
const model_methods_t *const *model_registry(size_t *count);
/* The libc model compositions use when ctx->libc_spec is NULL. */
const char *model_default_libc(void);

/* Parses "name[:key=value,...]" and creates the model.  Errors name the
 * unknown model (listing known ones) or the bad option. */
as_status_t model_create_from_spec(const char *spec, const model_ctx_t *ctx,
                                   model_t **out, as_err_t *err);

/* The model name of spec (up to ':') into buf. */
void model_spec_name(const char *spec, char *buf, size_t len);
/* Whether spec names a registered model that composes a libc model under
 * it (cpython), so that a libc spec beside it says something. */
bool model_spec_composes(const char *spec);
/* AS_EUSAGE unless spec, as typed by a user, is NAME or NAME:ITEM,ITEM...
 * with no empty item ("glibc:", "glibc:,", "glibc:a=1,,b=2" are refused).
 * model_create_from_spec skips empty items, which specs built from parts
 * (model_spec_with) may hold, so only user input is checked with this. */
as_status_t model_spec_check_syntax(const char *spec, as_err_t *err);
/* spec with the options in add ("k=v,k=v") into out, replacing any that
 * spec already sets; false if out is too small. */
bool model_spec_with(const char *spec, const char *add, char *out, size_t len);

/* ---- Dispatch wrappers (call sites use only these) ---------------------- */

static inline as_status_t model_alloc(model_t *m, const trace_event_t *ev,
                                      as_err_t *err) {
  return m->methods->alloc(m, ev, err);
}
static inline as_status_t model_realloc(model_t *m, const trace_event_t *ev,
                                        as_err_t *err) {
  return m->methods->realloc(m, ev, err);
}
static inline as_status_t model_free(model_t *m, const trace_event_t *ev,
                                     as_err_t *err) {
  return m->methods->free(m, ev, err);
}
static inline as_status_t model_thread(model_t *m, const trace_event_t *ev,
                                       as_err_t *err) {
  return m->methods->thread ? m->methods->thread(m, ev, err) : AS_OK;
}
static inline as_status_t model_trim(model_t *m, uint64_t pad, uint64_t now_ns,
                                     as_err_t *err) {
  return m->methods->trim ? m->methods->trim(m, pad, now_ns, err) : AS_OK;
}
static inline void model_stats(const model_t *m, model_stats_t *out) {
  m->methods->stats(m, out);
}
static inline bool model_locate(const model_t *m, uint64_t id,
                                sim_addr_t *addr) {
  return m->methods->locate != NULL && m->methods->locate(m, id, addr);
}
static inline bool model_has_locate(const model_t *m) {
  return m->methods->locate != NULL;
}
/* Whether the model has the notion of purge events / run-time options. */
static inline bool model_has_purge(const model_t *m) {
  return m->methods->purge != NULL;
}
static inline bool model_has_set_option(const model_t *m) {
  return m->methods->set_option != NULL;
}
/* A purge event; AS_OK doing nothing when the model has no such notion. */
static inline as_status_t model_purge(model_t *m, const trace_event_t *ev,
                                      as_err_t *err) {
  return m->methods->purge ? m->methods->purge(m, ev, err) : AS_OK;
}
/* m's seed method, or AS_OK when it has none. */
as_status_t model_seed(model_t *m, const char *kind, uint64_t index,
                       uint64_t value, as_err_t *err);
/* A run-time option change; AS_EINVAL when the model has no such notion. */
as_status_t model_set_option(model_t *m, const char *name, int64_t value,
                             uint64_t now_ns, as_err_t *err);
/* The model's counters (none when it has no counters slot). */
static inline size_t model_counters(const model_t *m, model_counter_t *out,
                                    size_t cap) {
  return m->methods->counters ? m->methods->counters(m, out, cap) : 0;
}
/* A region that is a unit by itself (an mmapped chunk, a thread stack, a
 * metadata block): fn sees r as the level-0 unit, without its mechanism,
 * then as the unit's one level-1 region. */
as_status_t model_walk_single(model_region_t r, model_region_fn fn, void *user,
                              as_err_t *err);

/* malloc_usable_size of a fresh request of size bytes in domain; 0 when
 * the model does not say (no usable_size slot) or declines the request. */
static inline uint64_t model_usable_size(const model_t *m, uint64_t size,
                                         uint8_t domain) {
  return m->methods->usable_size ? m->methods->usable_size(m, size, domain) : 0;
}

/* Walks m's heap map; AS_OK with no call when the model has no walk. */
static inline as_status_t model_walk(const model_t *m, model_region_fn fn,
                                     void *user, as_err_t *err) {
  return m->methods->walk ? m->methods->walk(m, fn, user, err) : AS_OK;
}
/* The mechanism row called key ("glibc.top"), from whichever registered
 * model declares it, or NULL.  Keys carry their model's name, so a
 * composition's regions find their children's rows. */
const model_mechanism_t *model_mechanism_find(const char *key);
/* The most counters a model (or a composition of models) reports. */
#define MODEL_COUNTERS_MAX 128
/* The counter called name; false if the model has none of that name. */
bool model_counter_get(const model_t *m, const char *name, uint64_t *value);
/* Appends a counter "<prefix>.<name>" to out if n < cap; returns n + 1. */
size_t model_counter_put(model_counter_t *out, size_t n, size_t cap,
                         const char *prefix, const char *name, uint64_t value,
                         const char *unit, const char *help);
static inline as_status_t model_check(const model_t *m, as_err_t *err) {
  return m->methods->check ? m->methods->check(m, err) : AS_OK;
}
void model_destroy(model_t *m);
/* "glibc:arena_max=2,..." with every option's effective value. */
void model_describe(const model_t *m, char *buf, size_t len);

#endif
