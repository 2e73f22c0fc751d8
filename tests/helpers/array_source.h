/* tests/helpers/array_source.h -- a trace source over an array of events,
 * so engine and model tests state their input inline. */
#ifndef ALLOCSIM_TEST_ARRAY_SOURCE_H
#define ALLOCSIM_TEST_ARRAY_SOURCE_H

#include <stdio.h>
#include <stdlib.h>

#include "../../traces/event.h"

typedef struct array_source_s array_source_t;
struct array_source_s {
  trace_source_t       base; /* must be first */
  const trace_event_t *events;
  size_t               count;
  size_t               next;
};

static inline as_status_t array_source_next(trace_source_t *src,
                                            trace_event_t *ev, as_err_t *err) {
  array_source_t *a = (array_source_t *)src;
  (void)err;
  if (a->next == a->count)
    return AS_DONE;
  *ev = a->events[a->next++];
  return AS_OK;
}

static inline void array_source_close(trace_source_t *src) {
  (void)src; /* lives on the test's stack */
}

static const trace_source_methods_t array_source_methods = {
    .next = array_source_next,
    .close = array_source_close,
};

static inline void array_source_init(array_source_t      *a,
                                     const trace_event_t *events,
                                     size_t               count) {
  *a = (array_source_t){.events = events, .count = count};
  a->base.methods = &array_source_methods;
  snprintf(a->base.name, sizeof a->base.name, "array");
}

/* The same events for a replay that opens its source again (explain and
 * advise replay more than once): pass array_replay_open and the replay. */
typedef struct array_replay_s array_replay_t;
struct array_replay_s {
  const trace_event_t *evs;
  size_t               n;
  array_source_t       src;
};

static inline as_status_t array_replay_open(void *user, trace_source_t **src,
                                            as_err_t *err) {
  (void)err;
  array_replay_t *f = user;
  array_source_init(&f->src, f->evs, f->n);
  *src = &f->src.base;
  return AS_OK;
}

#define EV_MALLOC(t, id_, sz)                                                  \
  { .t_ns = (t), .op = TRACE_MALLOC, .id = (id_), .size = (sz) }
#define EV_FREE(t, id_)                                                        \
  { .t_ns = (t), .op = TRACE_FREE, .id = (id_) }
#define EV_REALLOC(t, id_, sz)                                                 \
  { .t_ns = (t), .op = TRACE_REALLOC, .id = (id_), .size = (sz) }
#define EV_MARK(t, lbl)                                                        \
  { .t_ns = (t), .op = TRACE_MARK, .label = (lbl) }
#define EV_IDLE(t, d)                                                          \
  { .t_ns = (t), .op = TRACE_IDLE, .size = (d) }

#endif
