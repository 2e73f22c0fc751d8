/* traces/wl_churn.c -- the `churn` workload (traces/wl_churn.h): a fixed
 * working set of mixed-size objects freed and replaced at random, the
 * steady state most long-running C services reach, and the benchmark
 * traces' churn.  A state machine over the phases, one event per call.
 */
#include "wl_churn.h"

#include "../sim/cost.h"
#include "wl_emit.h"
#include "wl_survivors.h" /* survivors_splitmix64_at */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum churn_phase_e {
  CHURN_START,  /* mark start */
  CHURN_FILL,   /* malloc ids 0 .. live-1 */
  CHURN_FILLED, /* mark filled */
  CHURN_STEP,   /* pick an id: realloc it, or free it ... */
  CHURN_REFILL, /* ... and malloc its replacement */
  CHURN_END,    /* mark end */
  CHURN_DONE
} churn_phase_t;

typedef struct churn_src_s churn_src_t;
struct churn_src_s {
  trace_source_t base; /* must be first */
  uint64_t       live, steps, realloc_every, seed;
  bool           small; /* sizes up to 4 KiB only */
  churn_phase_t  phase;
  uint64_t       i;      /* fill: next id; steps: steps done */
  uint64_t       picked; /* the id the current step freed */
  uint64_t       draws;  /* splitmix64 outputs used */
  uint64_t       t_ns;
};

/* A draw uniform in [0, k) without a division (Lemire's multiply-shift). */
static uint64_t churn_below(churn_src_t *s, uint64_t k) {
  return (survivors_splitmix64_at(s->seed, s->draws++) >> 32) * k >> 32;
}

static uint64_t churn_size(churn_src_t *s) {
  uint64_t r = churn_below(s, 100);
  if (r < 60)
    return 16 + churn_below(s, 241);
  if (r < 90 || s->small)
    return 256 + churn_below(s, 3841);
  if (r < 99)
    return 4096 + churn_below(s, 61441);
  return 65536 + churn_below(s, 458753);
}

static void churn_event(churn_src_t *s, trace_event_t *ev, trace_op_t op,
                        uint64_t id, uint64_t size, const char *label) {
  trace_event_set(ev, s->t_ns, (uint8_t)op, TRACE_DOMAIN_RAW, id, size);
  ev->label = label;
  if (op == TRACE_FREE)
    s->t_ns += sim_cost_measured.free_ns;
  else if (op != TRACE_MARK)
    s->t_ns += sim_cost_c_alloc_ns(&sim_cost_measured, size);
}

static as_status_t churn_next(trace_source_t *src, trace_event_t *ev,
                              as_err_t *err) {
  (void)err;
  churn_src_t *s = (churn_src_t *)src;
  switch (s->phase) {
  case CHURN_START:
    churn_event(s, ev, TRACE_MARK, 0, 0, "start");
    s->phase = CHURN_FILL;
    return AS_OK;
  case CHURN_FILL:
    churn_event(s, ev, TRACE_MALLOC, s->i, churn_size(s), NULL);
    if (++s->i == s->live)
      s->phase = CHURN_FILLED, s->i = 0;
    return AS_OK;
  case CHURN_FILLED:
    churn_event(s, ev, TRACE_MARK, 0, 0, "filled");
    s->phase = s->steps ? CHURN_STEP : CHURN_END;
    return AS_OK;
  case CHURN_STEP:
    s->picked = churn_below(s, s->live);
    if (s->realloc_every != 0 && s->i % s->realloc_every == 0) {
      churn_event(s, ev, TRACE_REALLOC, s->picked, churn_size(s), NULL);
      if (++s->i == s->steps)
        s->phase = CHURN_END;
    } else {
      churn_event(s, ev, TRACE_FREE, s->picked, 0, NULL);
      s->phase = CHURN_REFILL;
    }
    return AS_OK;
  case CHURN_REFILL:
    churn_event(s, ev, TRACE_MALLOC, s->picked, churn_size(s), NULL);
    s->phase = ++s->i == s->steps ? CHURN_END : CHURN_STEP;
    return AS_OK;
  case CHURN_END:
    churn_event(s, ev, TRACE_MARK, 0, 0, "end");
    s->phase = CHURN_DONE;
    return AS_OK;
  case CHURN_DONE:
    break;
  }
  return AS_DONE;
}

static void churn_close(trace_source_t *src) {
  free(src);
}

static const trace_source_methods_t churn_methods = {
    .next = churn_next,
    .close = churn_close,
};

static const workload_option_t churn_options[] = {
    {"live", "50000", "objects live throughout (the working set)"},
    {"steps", "5000000",
     "replacements after the fill (free + malloc, or a "
     "realloc)"},
    {"sizes", "mixed",
     "mixed (16 B-512 KiB, 1 % mmapped) or small "
     "(16 B-4 KiB)"},
    {"realloc-every", "16", "every n-th step is a realloc (0: none)"},
    {"seed", "1", "splitmix64 seed"},
    {NULL, NULL, NULL},
};

#define CHURN_MAX_LIVE  (UINT64_C(1) << 32)
#define CHURN_MAX_STEPS (UINT64_C(1) << 40)

static as_status_t churn_open(const char *const *values, trace_source_t **out,
                              as_err_t *err) {
  uint64_t    live = 0, steps = 0, every = 0, seed = 0;
  as_status_t rc;
  *out = NULL;
  if ((rc = wl_parse_u64("churn", values[0], "live", 1, CHURN_MAX_LIVE, &live,
                         err)) != AS_OK ||
      (rc = wl_parse_u64("churn", values[1], "steps", 0, CHURN_MAX_STEPS,
                         &steps, err)) != AS_OK ||
      (rc = wl_parse_u64("churn", values[3], "realloc-every", 0, UINT32_MAX,
                         &every, err)) != AS_OK ||
      (rc = wl_parse_u64("churn", values[4], "seed", 0, UINT64_MAX, &seed,
                         err)) != AS_OK)
    return rc;
  bool small = strcmp(values[2], "small") == 0;
  if (!small && strcmp(values[2], "mixed") != 0)
    return as_err_set(err, AS_EUSAGE,
                      "churn: --sizes expects mixed or small, got '%s'",
                      values[2]);
  churn_src_t *s = calloc(1, sizeof *s);
  if (s == NULL)
    return as_err_set(err, AS_ENOMEM, "churn: out of memory");
  s->base.methods = &churn_methods;
  s->live = live, s->steps = steps, s->realloc_every = every, s->seed = seed;
  s->small = small;
  snprintf(s->base.name, sizeof s->base.name,
           "churn --live %" PRIu64 " --steps %" PRIu64 " --sizes %s "
           "--realloc-every %" PRIu64 " --seed %" PRIu64,
           live, steps, small ? "small" : "mixed", every, seed);
  if ((rc = trace_meta_set(&s->base.meta, "kind", "workload", err)) != AS_OK ||
      (rc = trace_meta_set(&s->base.meta, "workload", s->base.name, err)) !=
          AS_OK ||
      (rc = trace_meta_set(&s->base.meta, "generator", "traces/wl_churn.c",
                           err)) != AS_OK) {
    free(s);
    return rc;
  }
  *out = &s->base;
  return AS_OK;
}

const workload_def_t workload_churn = {
    .name = "churn",
    .summary = "a C service's steady churn: a fixed working set of mixed "
               "sizes freed and replaced at random (the benchmark's churn)",
    .options = churn_options,
    .open = churn_open,
};
