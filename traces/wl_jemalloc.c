/* traces/wl_jemalloc.c -- the workloads of scripts/measure/jemalloc/ (see
 * wl_jemalloc.h): decay and lab-decay.
 *
 * Every program writes each byte it allocates (memset), as the simulator
 * assumes, and runs on one thread.  Times: the program's own clock where
 * it has one (the 100 ms sample deadlines, the lab's request period), the
 * measured phase durations the run recorded (--alloc-time, --free-time,
 * --batch-every) spread evenly over the phase's calls, else the cost model
 * (sim/cost.h: a C malloc that writes its block, plus one page fault per
 * fresh page, and a free).  jemalloc's decay reads the clock only inside
 * the allocator, so the spacing of calls inside a phase barely matters; the
 * phase boundaries and the sample deadlines do.
 */
#include "wl_jemalloc.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/cost.h"
#include "../sim/units.h"

#define SAMPLE_NS UINT64_C(100000000) /* the programs' 100 ms series */
#define MAX_COUNT UINT64_C(100000000)
#define MAX_SIZE  (UINT64_C(1) << 40)

/* ---- Common -------------------------------------------------------------- */

typedef enum jwl_kind_e { JWL_DECAY, JWL_LAB } jwl_kind_t;
typedef enum jwl_after_e { AFTER_IDLE, AFTER_TINY, AFTER_BUSY } jwl_after_t;

typedef struct jwl_src_s jwl_src_t;
struct jwl_src_s {
  trace_source_t base; /* must be first */
  jwl_kind_t     kind;
  uint64_t       pc, i, k; /* step, counter in it, sample number */
  uint64_t       t_ns;     /* clock of the next event */
  char           label[16];
  /* decay */
  uint64_t    count, size, seconds, batch, batch_every_ns;
  uint64_t    alloc_ns, free_ns; /* phase durations, 0 = cost model */
  jwl_after_t after;
  uint64_t    t_freed, batch_no;
  /* lab-decay */
  uint64_t period_ns, burst, spike, spike_every, hold, nperiods, rng;
  int64_t  spike_free_at;
  uint64_t period;
};

static void put(jwl_src_t *s, trace_event_t *ev, trace_op_t op, uint64_t id,
                uint64_t size, const char *label) {
  memset(ev, 0, sizeof *ev);
  ev->t_ns = s->t_ns;
  ev->op = (uint8_t)op;
  ev->id = id;
  ev->size = size;
  ev->label = label;
  ev->domain = TRACE_DOMAIN_RAW;
}

static void mark(jwl_src_t *s, trace_event_t *ev, const char *label) {
  put(s, ev, TRACE_MARK, 0, 0, label);
}

/* sK: the K-th 100 ms sample. */
static void sample_mark(jwl_src_t *s, trace_event_t *ev) {
  snprintf(s->label, sizeof s->label, "s%" PRIu64, s->k);
  mark(s, ev, s->label);
}

/* The cost model's C malloc of size bytes written in full, with a fault
 * per page (fresh memory: the pessimistic case for a first allocation). */
static uint64_t alloc_cost(uint64_t size) {
  return sim_cost_c_alloc_ns(&sim_cost_measured, size) +
         (size + 4095) / 4096 * sim_cost_measured.fault_ns;
}

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

static void jwl_close(trace_source_t *src) {
  jwl_src_t *s = (jwl_src_t *)src;
  free(s);
}

/* ---- decay (je_decay.c) --------------------------------------------------
 * start; COUNT mallocs; allocated; COUNT frees in the same order; freed;
 * then for k = 1 .. 10 * SECONDS: (tiny) one malloc(16) at the deadline
 * freed + k * 100 ms, or (busy) every burst that starts before it -- BATCH
 * mallocs of SIZE then BATCH frees, one burst every BATCH_EVERY -- and the
 * mark sK; end. */

static as_status_t decay_next(jwl_src_t *s, trace_event_t *ev) {
  switch (s->pc) {
  case 0:
    mark(s, ev, "start");
    s->pc++;
    return AS_OK;
  case 1: /* mallocs */
    put(s, ev, TRACE_MALLOC, s->i, s->size, NULL);
    s->t_ns += s->alloc_ns ? s->alloc_ns / s->count : alloc_cost(s->size);
    if (++s->i == s->count)
      s->pc++, s->i = 0;
    return AS_OK;
  case 2:
    mark(s, ev, "allocated");
    s->pc++;
    return AS_OK;
  case 3: /* frees */
    put(s, ev, TRACE_FREE, s->i, 0, NULL);
    s->t_ns += s->free_ns ? s->free_ns / s->count : sim_cost_measured.free_ns;
    if (++s->i == s->count)
      s->pc++, s->i = 0;
    return AS_OK;
  case 4:
    mark(s, ev, "freed");
    s->t_freed = s->t_ns;
    s->pc++, s->k = 1, s->i = 0;
    return AS_OK;
  case 5: { /* what happens before sample k */
    uint64_t deadline = s->t_freed + s->k * SAMPLE_NS;
    if (s->after == AFTER_BUSY) {
      uint64_t start = s->t_freed + s->batch_no * s->batch_every_ns;
      if (s->i > 0 || start < deadline) {
        if (s->i == 0 && s->t_ns < start)
          s->t_ns = start;
        uint64_t step = s->batch_every_ns / (2 * s->batch);
        if (s->i < s->batch)
          put(s, ev, TRACE_MALLOC, s->i, s->size, NULL);
        else
          put(s, ev, TRACE_FREE, s->i - s->batch, 0, NULL);
        s->t_ns += step ? step : 1;
        if (++s->i == 2 * s->batch)
          s->i = 0, s->batch_no++;
        return AS_OK;
      }
    }
    if (s->t_ns < deadline)
      s->t_ns = deadline;
    if (s->after == AFTER_TINY && s->i == 0) {
      put(s, ev, TRACE_MALLOC, s->count + s->k, 16, NULL);
      s->i = 1;
      return AS_OK;
    }
    sample_mark(s, ev);
    s->i = 0;
    if (s->k++ == 10 * s->seconds)
      s->pc++;
    return AS_OK;
  }
  case 6:
    mark(s, ev, "end");
    s->pc++;
    return AS_OK;
  default:
    return AS_DONE;
  }
}

/* ---- lab-decay (je_lab_decay.c) ------------------------------------------
 * Every PERIOD from start: (every SPIKE_S seconds, unless a spike is held)
 * SPIKE mallocs held for HOLD periods; BURST mallocs, then BURST frees; the
 * held spike freed when due; every 100 ms the mark sK.  Sizes 256 B .. 64
 * KiB, log-uniform: 256 * 2^(8u), u from the top 53 bits of splitmix64,
 * drawn in call order. */

static uint64_t lab_size(uint64_t *rng) {
  double u = (double)(splitmix64(rng) >> 11) / 9007199254740992.0;
  return (uint64_t)(256.0 * exp2(8.0 * u));
}

enum {
  LAB_SPIKE_ALLOC,
  LAB_BURST_ALLOC,
  LAB_BURST_FREE,
  LAB_SPIKE_FREE,
  LAB_SAMPLE,
  LAB_NEXT
};

static as_status_t lab_next(jwl_src_t *s, trace_event_t *ev) {
  for (;;) {
    if (s->pc == 0) {
      mark(s, ev, "start");
      s->pc = 1, s->period = 0, s->i = LAB_SPIKE_ALLOC, s->k = 0;
      s->spike_free_at = -1;
      return AS_OK;
    }
    if (s->pc == 2) {
      mark(s, ev, "end");
      s->pc = 3;
      return AS_OK;
    }
    if (s->pc == 3)
      return AS_DONE;
    uint64_t start = s->period * s->period_ns; /* the period's deadline */
    switch (s->i) {
    case LAB_SPIKE_ALLOC:
      if (s->k == 0) {
        if (s->t_ns < start)
          s->t_ns = start;
        if (!(s->period % s->spike_every == 0 && s->spike > 0 &&
              s->spike_free_at < 0)) {
          s->i = LAB_BURST_ALLOC;
          continue;
        }
      }
      if (s->k < s->spike) {
        uint64_t size = lab_size(&s->rng);
        put(s, ev, TRACE_MALLOC, s->burst + s->k, size, NULL);
        s->t_ns += sim_cost_c_alloc_ns(&sim_cost_measured, size);
        s->k++;
        return AS_OK;
      }
      s->spike_free_at = (int64_t)(s->period + s->hold);
      s->i = LAB_BURST_ALLOC, s->k = 0;
      continue;
    case LAB_BURST_ALLOC:
      if (s->k < s->burst) {
        uint64_t size = lab_size(&s->rng);
        put(s, ev, TRACE_MALLOC, s->k, size, NULL);
        s->t_ns += sim_cost_c_alloc_ns(&sim_cost_measured, size);
        s->k++;
        return AS_OK;
      }
      s->i = LAB_BURST_FREE, s->k = 0;
      continue;
    case LAB_BURST_FREE:
      if (s->k < s->burst) {
        put(s, ev, TRACE_FREE, s->k++, 0, NULL);
        s->t_ns += sim_cost_measured.free_ns;
        return AS_OK;
      }
      s->i = LAB_SPIKE_FREE, s->k = 0;
      continue;
    case LAB_SPIKE_FREE:
      if (s->spike_free_at == (int64_t)s->period && s->k < s->spike) {
        put(s, ev, TRACE_FREE, s->burst + s->k++, 0, NULL);
        s->t_ns += sim_cost_measured.free_ns;
        return AS_OK;
      }
      if (s->spike_free_at == (int64_t)s->period)
        s->spike_free_at = -1;
      s->i = LAB_SAMPLE, s->k = 0;
      continue;
    case LAB_SAMPLE:
      s->i = LAB_NEXT;
      if ((s->period + 1) % (SAMPLE_NS / s->period_ns) == 0) {
        s->k = (s->period + 1) / (SAMPLE_NS / s->period_ns);
        sample_mark(s, ev);
        s->k = 0;
        return AS_OK;
      }
      continue;
    default: /* LAB_NEXT */
      s->i = LAB_SPIKE_ALLOC, s->k = 0;
      if (++s->period == s->nperiods)
        s->pc = 2;
      continue;
    }
  }
}

/* ---- Sources ------------------------------------------------------------- */

static as_status_t jwl_next(trace_source_t *src, trace_event_t *ev,
                            as_err_t *err) {
  (void)err;
  jwl_src_t *s = (jwl_src_t *)src;
  switch (s->kind) {
  case JWL_DECAY:
    return decay_next(s, ev);
  default:
    return lab_next(s, ev);
  }
}

static const trace_source_methods_t jwl_methods = {
    .next = jwl_next,
    .close = jwl_close,
};

static as_status_t jwl_new(jwl_kind_t kind, const char *args, jwl_src_t **out,
                           as_err_t *err) {
  *out = NULL;
  jwl_src_t *s = calloc(1, sizeof *s);
  if (s == NULL)
    return as_err_set(err, AS_ENOMEM, "%s: out of memory", args);
  s->base.methods = &jwl_methods;
  s->kind = kind;
  snprintf(s->base.name, sizeof s->base.name, "%s", args);
  as_status_t rc = trace_meta_set(&s->base.meta, "kind", "workload", err);
  if (rc == AS_OK)
    rc = trace_meta_set(&s->base.meta, "workload", args, err);
  if (rc == AS_OK)
    rc =
        trace_meta_set(&s->base.meta, "generator", "traces/wl_jemalloc.c", err);
  if (rc != AS_OK) {
    free(s);
    return rc;
  }
  *out = s;
  return AS_OK;
}

/* A decimal u64 in [lo, hi], naming workload and option on error. */
static as_status_t parse_u64(const char *wl, const char *name, const char *text,
                             uint64_t lo, uint64_t hi, uint64_t *out,
                             as_err_t *err) {
  uint64_t v;
  if (text != NULL &&
      as_parse_number(text, strlen(text), NULL, &v) == AS_NUM_OK && v >= lo &&
      v <= hi) {
    *out = v;
    return AS_OK;
  }
  return as_err_set(err, AS_EUSAGE,
                    "%s: --%s must be an integer in [%" PRIu64 ", %" PRIu64
                    "], got '%s'",
                    wl, name, lo, hi, text ? text : "(null)");
}

/* A duration ("56.7ms", "0" = not given). */
static as_status_t parse_time(const char *wl, const char *name,
                              const char *text, uint64_t *out, as_err_t *err) {
  if (text != NULL && as_parse_duration_ns(text, out))
    return AS_OK;
  return as_err_set(err, AS_EUSAGE,
                    "%s: --%s must be a duration such as 56.7ms, got '%s'", wl,
                    name, text ? text : "(null)");
}

static const workload_option_t decay_options[] = {
    {"count", "20000", "objects allocated, written and freed"},
    {"size", "4096", "bytes per object"},
    {"after", "idle", "what follows the free: idle | tiny | busy"},
    {"seconds", "12", "how long it goes on, sampled every 100 ms"},
    {"batch", "100", "busy: objects per burst"},
    {"batch-every", "0",
     "busy: time from one burst to the next (0: the cost model's)"},
    {"alloc-time", "0", "duration of the allocation phase (0: cost model)"},
    {"free-time", "0", "duration of the free phase (0: cost model)"},
    {NULL, NULL, NULL},
};

static as_status_t decay_open(const char *const *v, trace_source_t **out,
                              as_err_t *err) {
  uint64_t count = 0, size = 0, seconds = 0, batch = 0, every = 0, at = 0,
           ft = 0;
  as_status_t rc;
  *out = NULL;
  const char *wl = "decay";
  if ((rc = parse_u64(wl, "count", v[0], 1, MAX_COUNT, &count, err)) ||
      (rc = parse_u64(wl, "size", v[1], 1, MAX_SIZE, &size, err)) ||
      (rc = parse_u64(wl, "seconds", v[3], 1, 86400, &seconds, err)) ||
      (rc = parse_u64(wl, "batch", v[4], 1, count, &batch, err)) ||
      (rc = parse_time(wl, "batch-every", v[5], &every, err)) ||
      (rc = parse_time(wl, "alloc-time", v[6], &at, err)) ||
      (rc = parse_time(wl, "free-time", v[7], &ft, err)))
    return rc;
  jwl_after_t after;
  if (strcmp(v[2], "idle") == 0)
    after = AFTER_IDLE;
  else if (strcmp(v[2], "tiny") == 0)
    after = AFTER_TINY;
  else if (strcmp(v[2], "busy") == 0)
    after = AFTER_BUSY;
  else
    return as_err_set(err, AS_EUSAGE,
                      "decay: --after must be idle, tiny or busy, got '%s'",
                      v[2]);
  if (every == 0)
    every = batch * (alloc_cost(size) + sim_cost_measured.free_ns);
  char args[256];
  snprintf(args, sizeof args,
           "decay --count %" PRIu64 " --size %" PRIu64 " --after %s "
           "--seconds %" PRIu64 " --batch %" PRIu64 " --batch-every %" PRIu64
           "ns --alloc-time %" PRIu64 "ns --free-time %" PRIu64 "ns",
           count, size, v[2], seconds, batch, every, at, ft);
  jwl_src_t *s;
  if ((rc = jwl_new(JWL_DECAY, args, &s, err)) != AS_OK)
    return rc;
  s->count = count, s->size = size, s->after = after, s->seconds = seconds;
  s->batch = batch, s->batch_every_ns = every;
  s->alloc_ns = at, s->free_ns = ft;
  *out = &s->base;
  return AS_OK;
}

static const workload_option_t lab_options[] = {
    {"seconds", "20", "how long the service runs"},
    {"period-ms", "50", "ms between request bursts (divides 100)"},
    {"burst", "200", "objects allocated and freed per burst"},
    {"spike", "5000", "objects of a spike (0: none)"},
    {"spike-s", "5", "seconds between spikes"},
    {"hold-ms", "1000", "how long a spike is held"},
    {"seed", "1", "splitmix64 seed of the sizes"},
    {NULL, NULL, NULL},
};

static as_status_t lab_open(const char *const *v, trace_source_t **out,
                            as_err_t *err) {
  uint64_t seconds = 0, period = 0, burst = 0, spike = 0, spike_s = 0, hold = 0,
           seed = 0;
  as_status_t rc;
  *out = NULL;
  const char *wl = "lab-decay";
  if ((rc = parse_u64(wl, "seconds", v[0], 1, 86400, &seconds, err)) ||
      (rc = parse_u64(wl, "period-ms", v[1], 1, 100, &period, err)) ||
      (rc = parse_u64(wl, "burst", v[2], 0, 1000000, &burst, err)) ||
      (rc = parse_u64(wl, "spike", v[3], 0, 1000000, &spike, err)) ||
      (rc = parse_u64(wl, "spike-s", v[4], 1, 86400, &spike_s, err)) ||
      (rc = parse_u64(wl, "hold-ms", v[5], 0, 86400000, &hold, err)) ||
      (rc = parse_u64(wl, "seed", v[6], 0, UINT64_MAX, &seed, err)))
    return rc;
  if (100 % period != 0)
    return as_err_set(err, AS_EUSAGE,
                      "lab-decay: --period-ms must divide 100, got %" PRIu64,
                      period);
  char args[256];
  snprintf(args, sizeof args,
           "lab-decay --seconds %" PRIu64 " --period-ms %" PRIu64
           " --burst %" PRIu64 " --spike %" PRIu64 " --spike-s %" PRIu64
           " --hold-ms %" PRIu64 " --seed %" PRIu64,
           seconds, period, burst, spike, spike_s, hold, seed);
  jwl_src_t *s;
  if ((rc = jwl_new(JWL_LAB, args, &s, err)) != AS_OK)
    return rc;
  s->period_ns = period * UINT64_C(1000000);
  s->burst = burst, s->spike = spike, s->rng = seed;
  s->spike_every = spike_s * 1000 / period;
  s->hold = hold / period;
  s->nperiods = seconds * 1000 / period;
  *out = &s->base;
  return AS_OK;
}

const workload_def_t workload_decay = {
    .name = "decay",
    .summary = "free 20,000 x 4 KiB, then idle / tiny mallocs / busy: when "
               "jemalloc returns pages",
    .options = decay_options,
    .open = decay_open,
};

const workload_def_t workload_lab_decay = {
    .name = "lab-decay",
    .summary = "the course notes' decay trade-off lab: request bursts and "
               "periodic spikes",
    .options = lab_options,
    .open = lab_open,
};
