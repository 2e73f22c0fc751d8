/* tests/helpers/spy_model.h -- a model that records what reaches it, for
 * testing the engine and clock-driven policies with made-up clocks.
 *
 * The spy logs every call as "<what><id>@<t>" (a alloc, r realloc, f free,
 * trim, P purge, O option, T its timer) and keeps the flags of the last
 * allocation.  It places object id at SPY_REGION + id * SPY_SLOT in a
 * mapping of its own, so touch events land on pages a test can inspect; it
 * writes nothing itself.  Its timer re-arms every rearm_every ns while
 * rearms_left > 0, like a decay epoch.  spy_kernel_open() builds the
 * session around it with a plain 4 KiB-page kernel.
 */
#ifndef ALLOCSIM_TEST_SPY_MODEL_H
#define ALLOCSIM_TEST_SPY_MODEL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/engine.h"

#define SPY_SLOT    (UINT64_C(1) << 20) /* address space per object id */
#define SPY_OBJECTS 64                  /* ids the spy can place */

typedef struct spy_s spy_t;
struct spy_s {
  model_t            base;
  sim_event_queue_t *timers;
  sim_timer_t        timer;
  sim_addr_t         region;      /* SPY_OBJECTS * SPY_SLOT bytes */
  char               log[2048];   /* "a1@10 T0@20 f1@30 ..." */
  uint64_t           rearm_every; /* timer re-arms itself by this much */
  int                rearms_left;
  uint8_t            last_flags; /* ev->flags of the last alloc/realloc */
  /* When want_prev is set: the prev_size every free and realloc should
   * carry, in event order; mismatches counts those that did not. */
  const uint64_t *want_prev;
  size_t          nwant, seen, mismatches;
};

static inline void spy_check_prev(spy_t *s, const trace_event_t *ev) {
  if (s->want_prev == NULL)
    return;
  if (s->seen >= s->nwant || s->want_prev[s->seen] != ev->prev_size)
    s->mismatches++;
  s->seen++;
}

static inline void spy_note(spy_t *s, const char *what, uint64_t id,
                            uint64_t t) {
  size_t n = strlen(s->log);
  snprintf(s->log + n, sizeof s->log - n, "%s%s%llu@%llu", n ? " " : "", what,
           (unsigned long long)id, (unsigned long long)t);
}

static inline as_status_t spy_alloc(model_t *m, const trace_event_t *ev,
                                    as_err_t *err) {
  (void)err;
  spy_t *s = (spy_t *)m;
  s->last_flags = ev->flags;
  if (s->want_prev == NULL)
    spy_note(s, "a", ev->id, ev->t_ns);
  return AS_OK;
}
static inline as_status_t spy_realloc(model_t *m, const trace_event_t *ev,
                                      as_err_t *err) {
  (void)err;
  spy_t *s = (spy_t *)m;
  s->last_flags = ev->flags;
  spy_check_prev(s, ev);
  if (s->want_prev == NULL)
    spy_note(s, "r", ev->id, ev->t_ns);
  return AS_OK;
}
static inline as_status_t spy_free(model_t *m, const trace_event_t *ev,
                                   as_err_t *err) {
  (void)err;
  spy_check_prev((spy_t *)m, ev);
  if (((spy_t *)m)->want_prev == NULL)
    spy_note((spy_t *)m, "f", ev->id, ev->t_ns);
  return AS_OK;
}
static inline as_status_t spy_trim(model_t *m, uint64_t pad, uint64_t now,
                                   as_err_t *err) {
  (void)err;
  spy_note((spy_t *)m, "trim", pad, now);
  return AS_OK;
}
static inline as_status_t spy_purge(model_t *m, const trace_event_t *ev,
                                    as_err_t *err) {
  (void)err;
  spy_note((spy_t *)m, "P", ev->size, ev->t_ns);
  return AS_OK;
}
static inline as_status_t spy_set_option(model_t *m, const char *name,
                                         int64_t value, uint64_t now,
                                         as_err_t *err) {
  if (strcmp(name, "decay_ms") != 0)
    return as_err_set(err, AS_EINVAL, "spy: no run-time option %s", name);
  spy_note((spy_t *)m, "O", (uint64_t)value, now);
  return AS_OK;
}
static inline bool spy_locate(const model_t *m, uint64_t id, sim_addr_t *addr) {
  if (id >= SPY_OBJECTS)
    return false;
  *addr = ((const spy_t *)m)->region + id * SPY_SLOT;
  return true;
}
static inline void spy_stats(const model_t *m, model_stats_t *out) {
  (void)m;
  memset(out, 0, sizeof *out);
}
static inline void spy_destroy(model_t *m) {
  (void)m;
}

static inline as_status_t spy_fire(sim_timer_t *t, uint64_t now,
                                   as_err_t *err) {
  spy_t *s = SIM_CONTAINER_OF(t, spy_t, timer);
  spy_note(s, "T", 0, now);
  if (s->rearms_left-- > 0)
    return sim_event_queue_push(s->timers, t, now + s->rearm_every, err);
  return AS_OK;
}

static const model_methods_t spy_methods = {
    .name = "spy",
    .summary = "records calls",
    .alloc = spy_alloc,
    .realloc = spy_realloc,
    .free = spy_free,
    .trim = spy_trim,
    .stats = spy_stats,
    .destroy = spy_destroy,
    .locate = spy_locate,
    .purge = spy_purge,
    .set_option = spy_set_option,
};

/* Builds *session around *spy (zeroed first): a 4 KiB-page kernel, a timer
 * queue and the spy's region.  Close with spy_session_close. */
static inline as_status_t spy_session_open(sim_session_t *session, spy_t *spy,
                                           as_err_t *err) {
  memset(session, 0, sizeof *session);
  memset(spy, 0, sizeof *spy);
  as_status_t rc = sim_kernel_create(&(sim_kernel_config_t){.page_size = 4096},
                                     &session->kernel, err);
  if (rc == AS_OK)
    rc = sim_event_queue_create(&session->timers, err);
  if (rc == AS_OK)
    rc = sim_kernel_mmap(session->kernel, SPY_OBJECTS * SPY_SLOT, 0,
                         SIM_PROT_RW, SIM_OWNER_IDEAL, &spy->region, err);
  spy->base.methods = &spy_methods;
  spy->timers = session->timers;
  sim_timer_init(&spy->timer, spy_fire);
  session->model = &spy->base;
  return rc;
}

static inline void spy_session_close(sim_session_t *session) {
  sim_event_queue_destroy(session->timers);
  sim_kernel_destroy(session->kernel);
}

#endif
