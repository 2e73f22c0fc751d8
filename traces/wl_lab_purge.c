/* traces/wl_lab_purge.c -- the purge lab: a burst, then idle, then an
 * explicit collect; does freed memory come back, and what makes it?
 *
 * The exact sequence of scripts/measure/mimalloc/burst.c: COUNT blocks of
 * SIZE bytes allocated and written, all freed, then IDLE with one of
 *   none       nothing;
 *   unrelated  every EVERY, malloc + write + free of 100,000 bytes (a size
 *              the burst did not use: mimalloc needs a new medium page);
 *   same       every EVERY, malloc + write + free of SIZE bytes;
 * then mi_collect(false) (a `purge decay` event), 500 ms, mi_collect(true)
 * (`purge all`), 500 ms.  Marks: start, allocated, freed, idle_end,
 * collected, collected_force, end, and a tick every EVERY where the program
 * samples RSS: idle_tick from freed to idle_end (after that step's
 * activity), collect_tick and force_tick through the 500 ms after each
 * collect.  compare pairs marks by label and occurrence, so every sample of
 * a measured run is checked.
 *
 * Run it under purge delays 0 / default / long (`--model
 * mimalloc:purge_delay=0`, ...) with and without activity: allocators that
 * purge only when something triggers it (mimalloc, jemalloc without a
 * background thread) keep the burst's memory through an idle stretch
 * whatever the delay, and give it back on the first trigger after it
 * expires; docs/models/mimalloc.md shows the grid.
 *
 * Virtual time.  The burst and the frees take --alloc-time and --free-time
 * when given (the measured program records its own), else the cost model's
 * C malloc with the write and free (sim/cost.h); the activity runs every
 * EVERY after the `freed` mark, as the program's absolute deadlines do.
 */
#include "wl_lab_purge.h"

#include "../sim/cost.h"
#include "../sim/units.h"
#include "wl_emit.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UNRELATED_SIZE   UINT64_C(100000)          /* burst.c UNRELATED_SIZE */
#define AFTER_COLLECT_NS (UINT64_C(500) * 1000000) /* burst.c 0.5 s */
#define MAX_COUNT        UINT64_C(100000000)

typedef enum activity_e { ACT_NONE, ACT_UNRELATED, ACT_SAME } activity_t;
static const char *const activity_names[] = {"none", "unrelated", "same"};

/* Program steps, in order. */
typedef enum step_e {
  ST_START,
  ST_ALLOC,
  ST_ALLOCATED,
  ST_FREE,
  ST_FREED,
  ST_IDLE,
  ST_IDLE_END,
  ST_COLLECT,
  ST_COLLECTED,
  ST_WAIT1,
  ST_COLLECT_FORCE,
  ST_COLLECTED_FORCE,
  ST_WAIT2,
  ST_END,
  ST_DONE
} step_t;

typedef struct purge_src_s purge_src_t;
struct purge_src_s {
  trace_source_t base; /* must be first */
  uint64_t       size, count, idle_ns, every_ns;
  uint64_t       alloc_ns, free_ns; /* whole phases; 0 = cost model */
  activity_t     activity;
  step_t         step;
  uint64_t       i; /* loop counter within a step */
  uint64_t       t_ns;
  uint64_t       from_ns; /* start of the current ticking phase */
  uint64_t       phase0;  /* start of the current timed phase */
};

/* The time of event i of n in a phase lasting total ns that began at
 * phase0 (evenly spread), or the cost model's pace when total is 0. */
static uint64_t phase_time(const purge_src_t *s, uint64_t total, uint64_t i,
                           uint64_t n, uint64_t cost_each) {
  if (total == 0)
    return s->phase0 + i * cost_each;
  return s->phase0 + total * i / n;
}

static as_status_t purge_next(trace_source_t *src, trace_event_t *ev,
                              as_err_t *err);

/* One event of a phase lasting dur_ns from s->from_ns: at from + k *
 * every (k = 1, 2, ... while within the phase; absolute deadlines, as the
 * program sleeps) the activity's malloc, its free one cost-model step
 * later, then the mark `tick`.  At the end, the clock moves to the phase's end
 * and the step to `next`, whose event is returned. */
static as_status_t tick_phase(purge_src_t *s, trace_event_t *ev,
                              uint64_t dur_ns, activity_t activity,
                              uint64_t act_size, const char *tick,
                              step_t next) {
  uint64_t per = activity == ACT_NONE ? 1 : 3; /* events per tick */
  uint64_t k = s->i / per + 1;
  uint64_t due = s->from_ns + k * s->every_ns;
  if (due > s->from_ns + dur_ns) {
    if (s->t_ns < s->from_ns + dur_ns)
      s->t_ns = s->from_ns + dur_ns;
    s->step = next;
    return purge_next(&s->base, ev, NULL);
  }
  switch (s->i % per + (per == 1 ? 2 : 0)) {
  case 0:
    s->t_ns = due;
    wl_event_set(ev, s->t_ns, TRACE_MALLOC, 0, act_size, NULL);
    break;
  case 1:
    s->t_ns = due + sim_cost_c_alloc_ns(&sim_cost_measured, act_size);
    wl_event_set(ev, s->t_ns, TRACE_FREE, 0, 0, NULL);
    break;
  default:
    if (s->t_ns < due)
      s->t_ns = due;
    wl_event_set(ev, s->t_ns, TRACE_MARK, 0, 0, tick);
    break;
  }
  s->i++;
  return AS_OK;
}

static as_status_t purge_next(trace_source_t *src, trace_event_t *ev,
                              as_err_t *err) {
  (void)err;
  purge_src_t *s = (purge_src_t *)src;
  uint64_t     act = s->activity == ACT_SAME ? s->size : UNRELATED_SIZE;
  switch (s->step) {
  case ST_START:
    wl_event_set(ev, s->t_ns, TRACE_MARK, 0, 0, "start");
    s->step = ST_ALLOC, s->i = 0, s->phase0 = s->t_ns;
    return AS_OK;
  case ST_ALLOC:
    s->t_ns = phase_time(s, s->alloc_ns, s->i, s->count,
                         sim_cost_c_alloc_ns(&sim_cost_measured, s->size));
    wl_event_set(ev, s->t_ns, TRACE_MALLOC, s->i, s->size, NULL);
    if (++s->i == s->count) {
      s->step = ST_ALLOCATED;
      s->t_ns = s->alloc_ns ? s->phase0 + s->alloc_ns
                            : s->t_ns + sim_cost_c_alloc_ns(&sim_cost_measured,
                                                            s->size);
    }
    return AS_OK;
  case ST_ALLOCATED:
    wl_event_set(ev, s->t_ns, TRACE_MARK, 0, 0, "allocated");
    s->step = ST_FREE, s->i = 0, s->phase0 = s->t_ns;
    return AS_OK;
  case ST_FREE:
    s->t_ns =
        phase_time(s, s->free_ns, s->i, s->count, sim_cost_measured.free_ns);
    wl_event_set(ev, s->t_ns, TRACE_FREE, s->i, 0, NULL);
    if (++s->i == s->count) {
      s->step = ST_FREED;
      s->t_ns = s->free_ns ? s->phase0 + s->free_ns
                           : s->t_ns + sim_cost_measured.free_ns;
    }
    return AS_OK;
  case ST_FREED:
    wl_event_set(ev, s->t_ns, TRACE_MARK, 0, 0, "freed");
    s->from_ns = s->t_ns;
    s->step = ST_IDLE, s->i = 0;
    return AS_OK;
  case ST_IDLE:
    return tick_phase(s, ev, s->idle_ns, s->activity, act, "idle_tick",
                      ST_IDLE_END);
  case ST_IDLE_END:
    wl_event_set(ev, s->t_ns, TRACE_MARK, 0, 0, "idle_end");
    s->step = ST_COLLECT;
    return AS_OK;
  case ST_COLLECT:
    wl_event_set(ev, s->t_ns, TRACE_PURGE, TRACE_ALL_ARENAS, TRACE_PURGE_DECAY,
                 NULL);
    s->step = ST_COLLECTED;
    return AS_OK;
  case ST_COLLECTED:
    wl_event_set(ev, s->t_ns, TRACE_MARK, 0, 0, "collected");
    s->from_ns = s->t_ns;
    s->step = ST_WAIT1, s->i = 0;
    return AS_OK;
  case ST_WAIT1:
    return tick_phase(s, ev, AFTER_COLLECT_NS, ACT_NONE, 0, "collect_tick",
                      ST_COLLECT_FORCE);
  case ST_COLLECT_FORCE:
    wl_event_set(ev, s->t_ns, TRACE_PURGE, TRACE_ALL_ARENAS, TRACE_PURGE_ALL,
                 NULL);
    s->step = ST_COLLECTED_FORCE;
    return AS_OK;
  case ST_COLLECTED_FORCE:
    wl_event_set(ev, s->t_ns, TRACE_MARK, 0, 0, "collected_force");
    s->from_ns = s->t_ns;
    s->step = ST_WAIT2, s->i = 0;
    return AS_OK;
  case ST_WAIT2:
    return tick_phase(s, ev, AFTER_COLLECT_NS, ACT_NONE, 0, "force_tick",
                      ST_END);
  case ST_END:
    wl_event_set(ev, s->t_ns, TRACE_MARK, 0, 0, "end");
    s->step = ST_DONE;
    return AS_OK;
  default:
    return AS_DONE;
  }
}

static void purge_close(trace_source_t *src) {
  free(src);
}

static const trace_source_methods_t purge_methods = {.next = purge_next,
                                                     .close = purge_close};

static const workload_option_t purge_options[] = {
    {"size", "4096", "bytes per block of the burst"},
    {"count", "20000", "blocks in the burst"},
    {"activity", "none", "during the idle: none | unrelated | same"},
    {"idle", "12s", "idle time after the frees"},
    {"every", "100ms", "period of the activity"},
    {"alloc-time", "0", "duration of the allocations (0: the cost model)"},
    {"free-time", "0", "duration of the frees (0: the cost model)"},
    {NULL, NULL, NULL},
};

static as_status_t purge_open(const char *const *values, trace_source_t **out,
                              as_err_t *err) {
  *out = NULL;
  purge_src_t s = {0};
  if (!as_parse_bytes(values[0], &s.size) || s.size == 0)
    return wl_bad_option("lab-purge", "size", "a size of at least 1 byte",
                         values[0], err);
  if (as_parse_number(values[1], strlen(values[1]), NULL, &s.count) !=
          AS_NUM_OK ||
      s.count == 0 || s.count > MAX_COUNT)
    return wl_bad_option("lab-purge", "count", "an integer in [1, 100000000]",
                         values[1], err);
  int a = 0;
  while (a < 3 && strcmp(values[2], activity_names[a]) != 0)
    a++;
  if (a == 3)
    return wl_bad_option("lab-purge", "activity", "none, unrelated or same",
                         values[2], err);
  s.activity = (activity_t)a;
  if (!as_parse_duration_ns(values[3], &s.idle_ns))
    return wl_bad_option("lab-purge", "idle", "a duration (12s, 500ms)",
                         values[3], err);
  if (!as_parse_duration_ns(values[4], &s.every_ns) || s.every_ns == 0)
    return wl_bad_option("lab-purge", "every", "a positive duration", values[4],
                         err);
  if (!as_parse_duration_ns(values[5], &s.alloc_ns))
    return wl_bad_option("lab-purge", "alloc-time", "a duration", values[5],
                         err);
  if (!as_parse_duration_ns(values[6], &s.free_ns))
    return wl_bad_option("lab-purge", "free-time", "a duration", values[6],
                         err);
  purge_src_t *p = calloc(1, sizeof *p);
  if (p == NULL)
    return as_err_set(err, AS_ENOMEM, "lab-purge: out of memory");
  *p = s;
  p->base.methods = &purge_methods;
  snprintf(p->base.name, sizeof p->base.name,
           "lab-purge --size %" PRIu64 " --count %" PRIu64
           " --activity %s --idle %s --every %s --alloc-time %s"
           " --free-time %s",
           p->size, p->count, activity_names[a], values[3], values[4],
           values[5], values[6]);
  as_status_t rc = wl_describe(&p->base, "traces/wl_lab_purge.c", err);
  if (rc != AS_OK) {
    free(p);
    return rc;
  }
  *out = &p->base;
  return AS_OK;
}

const workload_def_t workload_lab_purge = {
    .name = "lab-purge",
    .summary = "a burst, idle with or without activity, then collects: "
               "purges need a trigger",
    .options = purge_options,
    .open = purge_open,
};
