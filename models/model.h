/* models/model.h -- the one interface every allocator model implements, in
 * the style of SQLite's sqlite3_vfs: a struct of function pointers, a static
 * registry searched by name, and wrappers that call sites use instead of the
 * slots (they handle optional NULL slots).
 *
 * Type map
 *   model_methods_t  the vtable: name, option table, create ... destroy
 *   model_t          an instance; every model's state begins with it
 *   model_ctx_t      what a model is bound to: kernel, timer queue, libc spec
 *   model_stats_t    what a model reports besides RSS
 *
 * A model owns bookkeeping only, never payload bytes.  It maps, touches and
 * releases pages through the kernel, and schedules clocked work (decay,
 * purge deadlines) as sim_timer_t's embedded in its own structs.
 */
#ifndef ALLOCSIM_MODEL_H
#define ALLOCSIM_MODEL_H

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
  uint64_t live_bytes;    /* bytes the program asked for and still holds */
  uint64_t live_objects;  /* objects the program still holds */
  uint64_t mapped_bytes;  /* RW address space the model holds */
  uint64_t arenas;        /* top-level regions held: pymalloc arenas, glibc
                             heaps, jemalloc extents, mimalloc segments */
  uint64_t free_bytes;    /* held by the allocator, free to the program */
};

/* Every model's private state begins with this header. */
struct model_s {
  const model_methods_t *methods; /* always the first field */
  model_opts_t           opts;    /* the parsed options, for provenance */
};

struct model_methods_s {
  const char           *name;    /* as on the command line: "glibc" */
  const char           *summary; /* one line for `allocsim models` */
  const model_option_t *options; /* table ending in a row with name NULL */

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
  as_status_t (*trim)(model_t *m, uint64_t pad, uint64_t now_ns,
                      as_err_t *err);

  void (*stats)(const model_t *m, model_stats_t *out);
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
void model_destroy(model_t *m);
/* "glibc:arena_max=2,..." with every option's effective value. */
void model_describe(const model_t *m, char *buf, size_t len);

#endif
