/* engine/engine.h -- the discrete-event engine: replays a trace source against
 * a model, merging trace events with the timers models schedule, and samples
 * RSS at every mark, every sample_every_ns of virtual time and at the end.
 *
 * Same-time ordering: timers due at t fire before the trace event stamped t,
 * in (due, seq) order; timers scheduled for <= now during dispatch fire in
 * the same instant.  A chain of more than SIM_ENGINE_MAX_SAME_INSTANT timers
 * in one instant is an error, never a hang.
 *
 * The engine owns the table of live objects (their sizes, by id), so it
 * validates every free, realloc and touch and keeps live_bytes; models keep
 * only their own bookkeeping.
 *
 * Unwritten allocations.  A trace whose provenance has touch_threshold=N
 * says that allocations of N bytes or more were not necessarily written:
 * the engine flags them TRACE_FLAG_UNWRITTEN for the model, and applies the
 * trace's touch events to the pages of the object they name (found with
 * model_locate).  N must be at least the simulated OS page size.
 *
 * Settling.  After the last event the clock runs on for settle_ns: timers
 * due in that stretch fire (decay epochs, background purges) and periodic
 * samples continue, as if the program sat idle.
 */
#ifndef ALLOCSIM_ENGINE_H
#define ALLOCSIM_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "../models/model.h"
#include "../traces/event.h"
#include "../sim/event_queue.h"
#include "../sim/kernel.h"

#define SIM_ENGINE_MAX_SAME_INSTANT 100000
/* Events between two reads of the simulator's RSS (sim/host.h): a read
 * costs a few microseconds, 65536 events tens of milliseconds. */
#define SIM_ENGINE_MEMORY_CHECK_EVERY 65536

typedef enum sim_sample_kind_e {
  SIM_SAMPLE_MARK,     /* a mark event: label set */
  SIM_SAMPLE_PERIODIC, /* every sample_every_ns */
  SIM_SAMPLE_MEASURED, /* an rss event carried in the trace */
  SIM_SAMPLE_FINAL     /* after the last event */
} sim_sample_kind_t;

typedef struct sim_sample_s sim_sample_t;
struct sim_sample_s {
  uint64_t          t_ns;
  sim_sample_kind_t kind;
  const char       *label;               /* mark label, else NULL; valid only
                                            during the callback */
  uint64_t rss_bytes;                    /* predicted */
  uint64_t live_bytes;                   /* program's live bytes */
  uint64_t measured_rss_bytes;           /* MEASURED only, else 0 */
  uint64_t owner_bytes[SIM_OWNER_COUNT]; /* predicted, by owner */
};

typedef as_status_t (*sim_sample_fn)(void *user, const sim_sample_t *s,
                                     as_err_t *err);

typedef struct sim_engine_config_s sim_engine_config_t;
struct sim_engine_config_s {
  uint64_t sample_every_ns;       /* 0: no periodic samples */
  uint64_t settle_ns;             /* the clock runs on this long after the
                                     last event, firing timers and sampling */
  bool lenient;                   /* count and skip bad frees and reallocs */
  bool strict;                    /* purge, option and touch events the model
                                     has no notion of are errors, not counted
                                     no-ops */
  sim_sample_fn on_sample;        /* may be NULL */
  void         *user;             /* passed to on_sample */
  uint64_t      max_memory_bytes; /* the simulator's own memory bound
                                     (--max-memory): checked every
                                     SIM_ENGINE_MEMORY_CHECK_EVERY events
                                     and before the id table grows; 0: none */
  uint64_t max_samples;           /* samples on_sample may receive in all,
                                     checked before the clock moves (so
                                     --sample-every 1ns up to t=2^63 is
                                     refused at that event); 0: no bound */
};

typedef struct sim_run_result_s sim_run_result_t;
struct sim_run_result_s {
  uint64_t events; /* trace events consumed */
  uint64_t timers_fired;
  uint64_t peak_rss_bytes;
  uint64_t peak_t_ns;
  uint64_t peak_live_bytes;
  uint64_t final_rss_bytes;
  uint64_t final_live_bytes;
  uint64_t final_t_ns;
  uint64_t skipped_bad_free;     /* lenient only: free of a dead id */
  uint64_t skipped_bad_realloc;  /* lenient only: realloc of a dead id */
  uint64_t skipped_double_alloc; /* lenient only: alloc of a live id */
  uint64_t ignored_events;       /* purge, option or touch events the model
                                    has no notion of (not under strict) */
  uint64_t unwritten_allocs;     /* allocations left to touch events */
  uint32_t max_threads;          /* most threads running at once, the main
                                    one included */
};

/* A kernel, a timer queue and a model built together, torn down together. */
typedef struct sim_session_s sim_session_t;
struct sim_session_s {
  sim_kernel_t      *kernel;
  sim_event_queue_t *timers;
  model_t           *model;
  char               model_desc[512]; /* model_describe() of the model */
};

/* Builds a session for model_spec ("cpython:version=3.11") with libc_spec
 * (NULL: default) on a kernel configured by kcfg (NULL: defaults). */
as_status_t sim_session_open(const char *model_spec, const char *libc_spec,
                             const sim_kernel_config_t *kcfg,
                             sim_session_t *out, as_err_t *err);
void        sim_session_close(sim_session_t *s);

/* Replays src to its end.  Errors from the source, the model or a bad event
 * stop the run and are returned; *result holds what was done until then.
 * Every error names the source and the event (index and time); a model's
 * message is prefixed with them.  Refused too: an allocation larger than
 * the simulated address space, an idle that runs the clock past 2^64 - 1
 * ns, and (AS_ENOMEM) simulator memory over cfg->max_memory_bytes. */
as_status_t sim_engine_run(const sim_engine_config_t *cfg, sim_session_t *s,
                           trace_source_t *src, sim_run_result_t *result,
                           as_err_t *err);

#endif
