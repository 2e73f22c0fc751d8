/* traces/wl_churn_purge.c -- churn of three small sizes, idle, then the
 * explicit purges: what does fragmentation keep, and what does a purge
 * give back?
 *
 * The sequence of scripts/measure/jemalloc/je_churn.c and
 * scripts/measure/mimalloc/churn.c:
 *   - 150,000 x 512 B, 100,000 x 1 KiB and 50,000 x 2 KiB objects allocated
 *     in a shuffled order (Fisher-Yates: for i from 299,999 down to 1, swap
 *     i with splitmix64() % (i + 1), the draws being survivors_splitmix64_at
 *     (seed, 0), (seed, 1), ... of traces/wl_survivors.h), each written;
 *   - every KEEP-EVERY-th object in allocation order is kept, the others
 *     freed in allocation order;
 *   - IDLE of nothing (with SAMPLE-EVERY > 0, the marks s1, s2, ... at
 *     freed + k * SAMPLE-EVERY up to the end of the idle: je_churn.c samples
 *     its RSS every 100 ms), then a `purge tcache` event (jemalloc's
 *     thread.tcache.flush; nothing for allocators without a thread cache)
 *     and a `purge all` event (jemalloc's arena.<all>.purge, mimalloc's
 *     mi_collect(true); glibc has no such event and takes malloc_trim(0) as
 *     `trim`, which is what the programs call without jemalloc or mimalloc).
 * Marks: start, allocated, freed, [s1 .. sN,] idle_end, tcache_flushed,
 * purged.
 *
 * Virtual time: the allocations and the frees take --alloc-time and
 * --free-time when given (the measured programs record theirs), else the
 * cost model's C malloc with the write and free (sim/cost.h), spread evenly.
 */
#include "wl_churn_purge.h"

#include "../sim/cost.h"
#include "../sim/units.h"
#include "wl_emit.h"
#include "wl_survivors.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_512 UINT64_C(150000)
#define N_1K  UINT64_C(100000)
#define N_2K  UINT64_C(50000)
#define N_ALL (N_512 + N_1K + N_2K)

typedef enum churn_step_e {
  CS_START,
  CS_ALLOC,
  CS_ALLOCATED,
  CS_FREE,
  CS_FREED,
  CS_SAMPLE,
  CS_IDLE_END,
  CS_FLUSH,
  CS_FLUSHED,
  CS_PURGE,
  CS_PURGED,
  CS_DONE
} churn_step_t;

typedef struct churn_src_s churn_src_t;
struct churn_src_s {
  trace_source_t base; /* must be first */
  uint64_t       seed, keep_every, idle_ns, alloc_ns, free_ns, sample_ns;
  uint16_t      *sizes; /* N_ALL sizes in allocation order */
  churn_step_t   step;
  uint64_t       i, freed; /* allocation index; frees made */
  uint64_t       t_ns, phase0;
  uint64_t       k;         /* the next idle sample */
  char           label[24]; /* its mark, "sK" */
};

/* The programs' shuffle of the three counts. */
static void shuffle_sizes(uint16_t *sizes, uint64_t seed) {
  uint64_t k = 0;
  for (uint64_t i = 0; i < N_512; i++)
    sizes[k++] = 512;
  for (uint64_t i = 0; i < N_1K; i++)
    sizes[k++] = 1024;
  for (uint64_t i = 0; i < N_2K; i++)
    sizes[k++] = 2048;
  uint64_t draw = 0;
  for (uint64_t i = N_ALL - 1; i > 0; i--) {
    uint64_t j = survivors_splitmix64_at(seed, draw++) % (i + 1);
    uint16_t t = sizes[i];
    sizes[i] = sizes[j];
    sizes[j] = t;
  }
}

/* Time of step i of n in a phase of total ns (0: cost_each per step). */
static uint64_t at(const churn_src_t *s, uint64_t total, uint64_t i, uint64_t n,
                   uint64_t cost_each) {
  return total == 0 ? s->phase0 + i * cost_each : s->phase0 + total * i / n;
}

static as_status_t churn_next(trace_source_t *src, trace_event_t *ev,
                              as_err_t *err) {
  (void)err;
  churn_src_t *s = (churn_src_t *)src;
  switch (s->step) {
  case CS_START:
    wl_event_set(ev, s->t_ns, TRACE_MARK, 0, 0, "start");
    s->step = CS_ALLOC, s->i = 0, s->phase0 = s->t_ns;
    return AS_OK;
  case CS_ALLOC: {
    uint64_t size = s->sizes[s->i];
    s->t_ns = at(s, s->alloc_ns, s->i, N_ALL,
                 sim_cost_c_alloc_ns(&sim_cost_measured, 1024));
    wl_event_set(ev, s->t_ns, TRACE_MALLOC, s->i, size, NULL);
    if (++s->i == N_ALL) {
      s->step = CS_ALLOCATED;
      s->t_ns =
          s->phase0 +
          (s->alloc_ns ? s->alloc_ns
                       : N_ALL * sim_cost_c_alloc_ns(&sim_cost_measured, 1024));
    }
    return AS_OK;
  }
  case CS_ALLOCATED:
    wl_event_set(ev, s->t_ns, TRACE_MARK, 0, 0, "allocated");
    s->step = CS_FREE, s->i = 0, s->phase0 = s->t_ns;
    return AS_OK;
  case CS_FREE: {
    uint64_t n = N_ALL - (N_ALL + s->keep_every - 1) / s->keep_every;
    while (s->i < N_ALL && s->i % s->keep_every == 0)
      s->i++;
    if (s->i == N_ALL) {
      s->t_ns =
          s->phase0 + (s->free_ns ? s->free_ns : n * sim_cost_measured.free_ns);
      s->step = CS_FREED;
      return churn_next(src, ev, err);
    }
    s->t_ns = at(s, s->free_ns, s->freed, n, sim_cost_measured.free_ns);
    wl_event_set(ev, s->t_ns, TRACE_FREE, s->i, 0, NULL);
    s->i++, s->freed++;
    return AS_OK;
  }
  case CS_FREED:
    wl_event_set(ev, s->t_ns, TRACE_MARK, 0, 0, "freed");
    s->phase0 = s->t_ns, s->k = 1;
    s->step = CS_SAMPLE;
    return AS_OK;
  case CS_SAMPLE:
    if (s->sample_ns > 0 && s->k * s->sample_ns <= s->idle_ns) {
      s->t_ns = s->phase0 + s->k * s->sample_ns;
      snprintf(s->label, sizeof s->label, "s%" PRIu64, s->k++);
      wl_event_set(ev, s->t_ns, TRACE_MARK, 0, 0, s->label);
      return AS_OK;
    }
    s->t_ns = s->phase0 + s->idle_ns;
    s->step = CS_IDLE_END;
    return churn_next(src, ev, err);
  case CS_IDLE_END:
    wl_event_set(ev, s->t_ns, TRACE_MARK, 0, 0, "idle_end");
    s->step = CS_FLUSH;
    return AS_OK;
  case CS_FLUSH:
    wl_event_set(ev, s->t_ns, TRACE_PURGE, TRACE_ALL_ARENAS, TRACE_PURGE_TCACHE,
                 NULL);
    s->step = CS_FLUSHED;
    return AS_OK;
  case CS_FLUSHED:
    wl_event_set(ev, s->t_ns, TRACE_MARK, 0, 0, "tcache_flushed");
    s->step = CS_PURGE;
    return AS_OK;
  case CS_PURGE:
    wl_event_set(ev, s->t_ns, TRACE_PURGE, TRACE_ALL_ARENAS, TRACE_PURGE_ALL,
                 NULL);
    s->step = CS_PURGED;
    return AS_OK;
  case CS_PURGED:
    wl_event_set(ev, s->t_ns, TRACE_MARK, 0, 0, "purged");
    s->step = CS_DONE;
    return AS_OK;
  default:
    return AS_DONE;
  }
}

static void churn_close(trace_source_t *src) {
  churn_src_t *s = (churn_src_t *)src;
  free(s->sizes);
  free(s);
}

static const trace_source_methods_t churn_methods = {.next = churn_next,
                                                     .close = churn_close};

static const workload_option_t churn_options[] = {
    {"seed", "1", "seed of the shuffle"},
    {"idle", "10s", "idle time after the frees"},
    {"keep-every", "20", "keep every Nth object in allocation order"},
    {"alloc-time", "0", "duration of the allocations (0: the cost model)"},
    {"free-time", "0", "duration of the frees (0: the cost model)"},
    {"sample-every", "0", "a mark sK every so often in the idle (0: none)"},
    {NULL, NULL, NULL},
};

static as_status_t churn_open(const char *const *values, trace_source_t **out,
                              as_err_t *err) {
  *out = NULL;
  churn_src_t s = {0};
  if (as_parse_number(values[0], strlen(values[0]), NULL, &s.seed) != AS_NUM_OK)
    return wl_bad_option("churn-purge", "seed", "a non-negative integer",
                         values[0], err);
  if (!as_parse_duration_ns(values[1], &s.idle_ns))
    return wl_bad_option("churn-purge", "idle", "a duration (10s, 500ms)",
                         values[1], err);
  if (as_parse_number(values[2], strlen(values[2]), NULL, &s.keep_every) !=
          AS_NUM_OK ||
      s.keep_every == 0)
    return wl_bad_option("churn-purge", "keep-every", "a positive integer",
                         values[2], err);
  if (!as_parse_duration_ns(values[3], &s.alloc_ns))
    return wl_bad_option("churn-purge", "alloc-time", "a duration", values[3],
                         err);
  if (!as_parse_duration_ns(values[4], &s.free_ns))
    return wl_bad_option("churn-purge", "free-time", "a duration", values[4],
                         err);
  if (!as_parse_duration_ns(values[5], &s.sample_ns))
    return wl_bad_option("churn-purge", "sample-every", "a duration (100ms, 0)",
                         values[5], err);
  churn_src_t *p = calloc(1, sizeof *p);
  uint16_t    *sizes = malloc(N_ALL * sizeof *sizes);
  if (p == NULL || sizes == NULL) {
    free(p);
    free(sizes);
    return as_err_set(err, AS_ENOMEM, "churn-purge: out of memory");
  }
  *p = s;
  p->sizes = sizes;
  shuffle_sizes(sizes, s.seed);
  p->base.methods = &churn_methods;
  snprintf(p->base.name, sizeof p->base.name,
           "churn-purge --seed %" PRIu64 " --idle %s --keep-every %" PRIu64
           " --alloc-time %s --free-time %s%s%s",
           p->seed, values[1], p->keep_every, values[3], values[4],
           p->sample_ns ? " --sample-every " : "",
           p->sample_ns ? values[5] : "");
  as_status_t rc = wl_describe(&p->base, "traces/wl_churn_purge.c", err);
  if (rc != AS_OK) {
    churn_close(&p->base);
    return rc;
  }
  *out = &p->base;
  return AS_OK;
}

const workload_def_t workload_churn_purge = {
    .name = "churn-purge",
    .summary = "churn of 512 B / 1 KiB / 2 KiB, 1 in 20 kept, idle, then "
               "the explicit purges",
    .options = churn_options,
    .open = churn_open,
};
