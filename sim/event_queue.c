/* sim/event_queue.c -- the timer heap: an array min-heap of timer pointers.
 *
 * Order is (due_ns, seq): seq is a queue-wide counter stamped on every push,
 * so equal due times fire in scheduling order (libuv's start_id tie-break)
 * and a re-armed timer counts as scheduled at the moment it was re-armed.
 * Each timer records its slot (heap_idx), which makes cancel and re-push
 * O(log n) without a search (libevent's min_heap).  The heap stores
 * pointers only: timers live inside their owners and are never copied.
 *
 * Left out on purpose: a d-ary heap or a timer wheel.  Queues here hold
 * tens of timers (decay epochs, purge deadlines, the RSS sampler), rarely
 * more than a few thousand, so the binary heap's simplicity wins.
 */
#include "event_queue.h"

#include "grow.h"

#include <assert.h>
#include <stdlib.h>

/* Invariants: heap[0..size) are queued timers, heap[i]->heap_idx == i, and
 * no child orders before its parent. */
struct sim_event_queue_s {
  sim_event_queue_head_t h;        /* the heap and its size (event_queue.h) */
  size_t                 capacity; /* slots allocated */
  uint64_t               next_seq; /* seq stamped on the next push */
};

_Static_assert(offsetof(sim_event_queue_t, h) == 0,
               "h must open sim_event_queue_t");

/* ---- Heap primitives ---------------------------------------------------- */

/* Whether a fires strictly before b. */
static int timer_before(const sim_timer_t *a, const sim_timer_t *b) {
  if (a->due_ns != b->due_ns) {
    return a->due_ns < b->due_ns;
  }
  return a->seq < b->seq;
}

static void heap_place(sim_event_queue_t *q, size_t idx, sim_timer_t *t) {
  q->h.heap[idx] = t;
  t->heap_idx = idx;
}

static void sift_up(sim_event_queue_t *q, size_t idx) {
  sim_timer_t *t = q->h.heap[idx];
  while (idx > 0) {
    size_t parent = (idx - 1) / 2;
    if (!timer_before(t, q->h.heap[parent])) {
      break;
    }
    heap_place(q, idx, q->h.heap[parent]);
    idx = parent;
  }
  heap_place(q, idx, t);
}

static void sift_down(sim_event_queue_t *q, size_t idx) {
  sim_timer_t *t = q->h.heap[idx];
  for (;;) {
    size_t child = 2 * idx + 1;
    if (child >= q->h.size) {
      break;
    }
    if (child + 1 < q->h.size &&
        timer_before(q->h.heap[child + 1], q->h.heap[child])) {
      child++;
    }
    if (!timer_before(q->h.heap[child], t)) {
      break;
    }
    heap_place(q, idx, q->h.heap[child]);
    idx = child;
  }
  heap_place(q, idx, t);
}

/* Restores heap order around slot idx after its timer's key changed. */
static void heap_fix(sim_event_queue_t *q, size_t idx) {
  if (idx > 0 && timer_before(q->h.heap[idx], q->h.heap[(idx - 1) / 2])) {
    sift_up(q, idx);
  } else {
    sift_down(q, idx);
  }
}

/* After every change to the heap. */
static void note_next_due(sim_event_queue_t *q) {
  q->h.next_due_ns = q->h.size > 0 ? q->h.heap[0]->due_ns : UINT64_MAX;
}

/* Takes the timer in slot idx out of the heap and marks it idle. */
static void heap_remove(sim_event_queue_t *q, size_t idx) {
  sim_timer_t *t = q->h.heap[idx];
  assert(idx < q->h.size && t->heap_idx == idx);
  q->h.size--;
  if (idx != q->h.size) {
    heap_place(q, idx, q->h.heap[q->h.size]);
    heap_fix(q, idx);
  }
  t->heap_idx = SIM_TIMER_IDLE;
  note_next_due(q);
}

/* ---- Public API --------------------------------------------------------- */

void sim_timer_init(sim_timer_t *t,
                    as_status_t (*fire)(sim_timer_t *, uint64_t, as_err_t *)) {
  t->due_ns = 0;
  t->seq = 0;
  t->heap_idx = SIM_TIMER_IDLE;
  t->fire = fire;
}

as_status_t sim_event_queue_create(sim_event_queue_t **out, as_err_t *err) {
  sim_event_queue_t *q = calloc(1, sizeof *q);
  *out = NULL;
  if (q == NULL) {
    return as_err_set(err, AS_ENOMEM, "event queue: cannot allocate %zu bytes",
                      sizeof *q);
  }
  q->h.next_due_ns = UINT64_MAX;
  *out = q;
  return AS_OK;
}

void sim_event_queue_destroy(sim_event_queue_t *q) {
  if (q == NULL) {
    return;
  }
  /* Timers belong to their owners; leave them idle so a stale cancel after
   * destroy is a harmless no-op rather than a use of freed memory. */
  for (size_t i = 0; i < q->h.size; i++) {
    q->h.heap[i]->heap_idx = SIM_TIMER_IDLE;
  }
  free(q->h.heap);
  free(q);
}

as_status_t sim_event_queue_push(sim_event_queue_t *q, sim_timer_t *t,
                                 uint64_t due_ns, as_err_t *err) {
  if (t->heap_idx != SIM_TIMER_IDLE) {
    /* Re-arm in place: new key, then one sift in whichever direction. */
    assert(t->heap_idx < q->h.size && q->h.heap[t->heap_idx] == t);
    t->due_ns = due_ns;
    t->seq = q->next_seq++;
    heap_fix(q, t->heap_idx);
    note_next_due(q);
    return AS_OK;
  }
  if (q->h.size == q->capacity) {
    sim_timer_t **heap =
        as_grow(q->h.heap, &q->capacity, q->h.size + 1, sizeof *heap, 16);
    if (heap == NULL) {
      return as_err_set(err, AS_ENOMEM,
                        "event queue: cannot grow the heap past %zu timers",
                        q->h.size);
    }
    q->h.heap = heap;
  }
  t->due_ns = due_ns;
  t->seq = q->next_seq++;
  heap_place(q, q->h.size, t);
  q->h.size++;
  sift_up(q, q->h.size - 1);
  note_next_due(q);
  return AS_OK;
}

void sim_event_queue_cancel(sim_event_queue_t *q, sim_timer_t *t) {
  if (t->heap_idx == SIM_TIMER_IDLE) {
    return;
  }
  heap_remove(q, t->heap_idx);
}

sim_timer_t *sim_event_queue_pop(sim_event_queue_t *q) {
  if (q->h.size == 0) {
    return NULL;
  }
  sim_timer_t *t = q->h.heap[0];
  heap_remove(q, 0);
  return t;
}

size_t sim_event_queue_size(const sim_event_queue_t *q) {
  return q->h.size;
}
