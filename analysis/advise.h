/* analysis/advise.h -- remedies simulated, not guessed: re-run a trace with
 * each change a user could make (call malloc_trim, set an allocator knob,
 * switch PYTHONMALLOC, preload another allocator) and rank them by the
 * memory they save at a mark, with what they cost.
 *
 * A remedy is one of: events inserted into the trace (trim or purge at the
 * mark or periodically), options added to the libc model or the top model,
 * or another libc model.  Remedies that do not apply (an option the model
 * lacks, a model that is not registered) are left out of the ranking;
 * remedies that fail to simulate are reported with their error.
 */
#ifndef ALLOCSIM_ADVISE_H
#define ALLOCSIM_ADVISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "explain.h"

#define ADVISE_MAX_REMEDIES 32

typedef struct advise_outcome_s advise_outcome_t;
struct advise_outcome_s {
  uint64_t rss_at_mark; /* RSS at the mark's first occurrence */
  uint64_t rss_at_end;
  uint64_t peak_rss;
  uint64_t syscalls; /* mmap+munmap+mremap+mprotect+brk+madvise */
  uint64_t faults;   /* pages made resident */
  uint64_t cost_ns;  /* the cost model's price of those */
};

/* A periodic remedy judged at a mark, when one of its calls fell between
 * the mark before and that mark and another timing of the calls would put
 * none there (the two marks less than a period apart): its saving at the
 * mark is decided by when the calls fall, which a real program's timer
 * thread (when it starts, how fast the program ran) sets, not the trace. */
typedef struct advise_timing_s advise_timing_t;
struct advise_timing_s {
  bool     decides;
  char     prev_mark[64];  /* the mark before */
  uint64_t prev_before_ns; /* ... this long before the mark */
  uint64_t call_before_ns; /* the last call, this long before the mark */
  int64_t  saving_at_mark; /* the calls shifted to the mark before, so
                              that none falls between the two */
};

typedef struct advise_remedy_s advise_remedy_t;
struct advise_remedy_s {
  char             name[96];         /* "malloc_trim(0) at after_free" */
  char             env_or_call[160]; /* what the user does */
  char             model[512];       /* the spec simulated */
  char             libc[256];
  unsigned         changes;    /* 1, or 2 for a combined remedy */
  bool             ok;         /* simulated */
  char             error[512]; /* why not, when !ok */
  advise_outcome_t out;
  int64_t          saving_at_mark; /* baseline - remedy, bytes */
  int64_t          saving_at_end;
  int64_t          saving_at_peak;
  int64_t          extra_syscalls;
  int64_t          extra_faults;
  int64_t          extra_cost_ns;
  advise_timing_t  timing; /* periodic remedies */
};

typedef struct advise_result_s advise_result_t;
struct advise_result_s {
  char             mark[64]; /* the mark remedies are judged at; "end" */
  bool             at_end;   /* ... judged at the trace's end instead */
  char             model[512];
  char             libc[256];
  advise_outcome_t baseline;
  bool             has_measured;     /* the trace carries the RSS measured */
  uint64_t         measured_at_mark; /* at the mark (a capture does) */
  uint32_t         max_threads;      /* most threads of the trace running at
                                        once: above 1, remedies that change
                                        contention are predicted with the
                                        interleaving it recorded */
  size_t n;                          /* remedies, ranked: single changes before
                                        combinations, each by saving at the mark
                                        (equal savings: the cheaper first);
                                        failed ones last */
  advise_remedy_t remedies[ADVISE_MAX_REMEDIES];
};

/* Simulates the baseline (o->model, o->libc) and every applicable remedy
 * on the source open() gives, judged at o->at (or, if NULL, the mark or
 * the trace's end with the largest RSS - live gap; a trace with no marks
 * at its end). */
as_status_t advise_trace(const explain_opts_t *o, explain_open_fn open,
                         void *user, advise_result_t *out, as_err_t *err);

#endif
