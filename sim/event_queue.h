/* sim/event_queue.h -- the timer heap behind the engine's virtual clock.
 *
 * An array min-heap ordered by (due_ns, seq): equal due times fire in the
 * order they were scheduled (libuv's start_id tie-break).  Timers are
 * embedded in their owners (a model's arena, a sampler) and found again with
 * SIM_CONTAINER_OF; each keeps its heap slot so cancel is O(log n).
 */
#ifndef ALLOCSIM_EVENT_QUEUE_H
#define ALLOCSIM_EVENT_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define SIM_CONTAINER_OF(ptr, type, member)                                    \
  ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

#define SIM_TIMER_IDLE SIZE_MAX /* heap_idx of a timer not in the queue */

typedef struct sim_timer_s sim_timer_t;
struct sim_timer_s {
  uint64_t due_ns;   /* virtual time at which the timer fires */
  uint64_t seq;      /* insertion order; breaks ties between equal due_ns */
  size_t   heap_idx; /* slot in the heap, or SIM_TIMER_IDLE */
  /* Called once when due; may re-arm itself with sim_event_queue_push. */
  as_status_t (*fire)(sim_timer_t *self, uint64_t now_ns, as_err_t *err);
};

typedef struct sim_event_queue_s sim_event_queue_t;

/* The part of sim_event_queue_t that the inline peek reads, its first
 * member, so that the engine's test for a due timer before every event
 * costs no call.  Only sim/event_queue.c writes it.  heap[0..size) are the
 * queued timers, heap[0] the earliest. */
typedef struct sim_event_queue_head_s sim_event_queue_head_t;
struct sim_event_queue_head_s {
  sim_timer_t **heap;        /* the array heap */
  size_t        size;        /* timers queued */
  uint64_t      next_due_ns; /* heap[0]'s due_ns, UINT64_MAX when empty:
                                the engine's test before every trace
                                event is one load */
};

/* Initialises t as idle with the given callback. */
void sim_timer_init(sim_timer_t *t,
                    as_status_t (*fire)(sim_timer_t *, uint64_t, as_err_t *));

as_status_t sim_event_queue_create(sim_event_queue_t **out, as_err_t *err);
void        sim_event_queue_destroy(sim_event_queue_t *q);

/* Schedules t at due_ns; a timer already queued is moved (re-armed). */
as_status_t sim_event_queue_push(sim_event_queue_t *q, sim_timer_t *t,
                                 uint64_t due_ns, as_err_t *err);
/* Removes t if queued; a no-op for an idle timer. */
void sim_event_queue_cancel(sim_event_queue_t *q, sim_timer_t *t);
/* The earliest timer, or NULL; peek leaves it queued, pop makes it idle. */
static inline sim_timer_t *sim_event_queue_peek(const sim_event_queue_t *q) {
  const sim_event_queue_head_t *h =
      (const sim_event_queue_head_t *)(const void *)q;
  return h->size > 0 ? h->heap[0] : NULL;
}
/* When the first timer is due; UINT64_MAX if none is queued. */
static inline uint64_t sim_event_queue_next_due(const sim_event_queue_t *q) {
  return ((const sim_event_queue_head_t *)(const void *)q)->next_due_ns;
}
sim_timer_t *sim_event_queue_pop(sim_event_queue_t *q);
size_t       sim_event_queue_size(const sim_event_queue_t *q);

#endif
