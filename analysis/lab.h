/* analysis/lab.h -- the course: the lab exercises of the allocator course
 * notes (section 20) as simulations a student runs with `allocsim lab`.
 *
 * A lab states what it shows and asks a question before anything runs,
 * then replays one or more variants (a workload or a trace against a model
 * spec: "MALLOC_ARENA_MAX=1" is a variant), reporting at each mark of
 * interest the simulated RSS and the counters that explain it, with a heap
 * map at the mark where the mechanism is visible, and ends with what to
 * notice.  Each variant names the real program that does the same on a
 * Linux machine (built by CMake under labs/, see scripts/measure/labs/), so
 * `allocsim lab NAME --measure` can print measured RSS next to simulated.
 *
 * The table (analysis/labs.c) is data: adding a lab adds a row.  A lab
 * lists the models it needs; variants whose model is not registered in this
 * build are skipped and named, never an error, so a lab comes alive when its
 * model lands.
 */
#ifndef ALLOCSIM_LAB_H
#define ALLOCSIM_LAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../engine/engine.h"
#include "heapmap.h"

#define LAB_MAX_VARIANTS 10
#define LAB_MAX_STEPS    64
#define LAB_MAX_COUNTERS 6
#define LAB_MAX_MEASURED 2 /* measured-only columns */
#define LAB_MAX_MAPS     3
#define LAB_MAX_RUNS     15 /* measured runs of one variant (--repeat) */

/* One configuration the lab runs: a workload line or a trace file, a model
 * spec, and the real program that does the same. */
typedef struct lab_variant_s lab_variant_t;
struct lab_variant_s {
  const char *label;    /* "MALLOC_ARENA_MAX=1"; "" when the lab has one */
  const char *workload; /* `allocsim run` line, or NULL when trace is set */
  const char *trace;    /* a trace file under the source tree's data/ */
  const char *model;    /* model spec */
  const char *libc;     /* libc spec of a composition, or NULL */
  const char *marks;    /* marks reported as steps, space-separated;
                           NULL = every mark of the run */
  const char *anchor;   /* the mark where measured and simulated are
                           anchored (NULL: the run's first; a capture's
                           first is `hooked`, which the program does not
                           measure) */
  const char *map_at;   /* marks whose heap map is drawn (at most
                           LAB_MAX_MAPS, space-separated), or NULL */
  /* The real program (--measure): a file of the labs directory (a C
   * program built by CMake, or a Python script run by --python) and its
   * arguments, where {out} is the measured-run file it writes. */
  const char *program;
  const char *args;
  const char *env;      /* NAME=VALUE ... set for the program (others of
                           the allocators' knobs are unset) */
  const char *preload;  /* model whose library LD_PRELOAD loads, or NULL */
  const char *library;  /* that library's file-name prefix when it is not
                           the model's preload ("libtcmalloc_minimal") */
  const char *recorded; /* the measured runs of the repository for it, a
                           glob pattern under data/ ("measured/lab-arenas-
                           r*.trace": repeated runs), or NULL */
};

typedef enum lab_kind_e {
  LAB_REPLAY, /* variants replayed, steps at their marks */
  LAB_SIZES   /* usable size against requested size for every model */
} lab_kind_t;

typedef struct lab_def_s lab_def_t;
struct lab_def_s {
  const char *name;  /* `allocsim lab NAME` */
  const char *title; /* one line */
  const char *notes; /* where the course notes treat it */
  lab_kind_t  kind;
  const char *shows;                /* what the lab shows (a paragraph) */
  const char *question;             /* asked before anything runs */
  const char *table;                /* a fixed table printed with the question
                                       (the glibc arena-cap versions), or NULL */
  const char *const *models;        /* models it needs, NULL-terminated */
  const char *const *counters;      /* counters shown per step, NULL-terminated:
                                       the model's ("glibc.arenas") or the
                                       kernel's: kernel.brk_bytes (the program
                                       break above its start), kernel.page_faults,
                                       kernel.mmap_calls, kernel.munmap_calls,
                                       kernel.madvise_calls, kernel.cost_us (the
                                       calls and faults priced by sim/cost.h's
                                       measured cost model, microseconds) */
  const char *const *measured_keys; /* provenance keys of a measured run
                                  shown with it, NULL-terminated (the
                                  program's own view: "arenas",
                                  "pymalloc_after"), or NULL */
  const char *const *measured_columns;      /* quantities per mark that only
                                       the real program measures (time, its
                                       allocator's own counts), at most
                                       LAB_MAX_MEASURED, NULL-terminated: the
                                       provenance "<column>=MARK:NUMBER ...",
                                       the least over the runs, each shown as
                                       a column; or NULL */
  const char   *notice;                     /* what to notice (a paragraph) */
  const char   *doc;                        /* its page under docs/course/ */
  lab_variant_t variants[LAB_MAX_VARIANTS]; /* ends at label NULL */
};

/* The labs, in course order. */
const lab_def_t *const *lab_registry(size_t *count);
/* The lab called name, or NULL. */
const lab_def_t *lab_find(const char *name);
/* Number of variants of def. */
size_t lab_variant_count(const lab_def_t *def);
/* Whether variant's models (model and libc) are registered; if not, the
 * first missing model's name goes to missing. */
bool lab_variant_runnable(const lab_variant_t *v, char *missing, size_t len);
/* The models def needs that this build lacks, comma-separated into buf
 * ("" when none); returns how many. */
size_t lab_missing_models(const lab_def_t *def, char *buf, size_t len);

/* ---- Results ------------------------------------------------------------ */

typedef struct lab_step_s lab_step_t;
struct lab_step_s {
  char     label[128]; /* "variant: mark", or the mark alone */
  char     mark[64];
  size_t   variant;
  uint64_t t_ns;
  uint64_t sim_rss; /* simulated RSS (the simulated program's own) */
  uint64_t sim_live;
  uint64_t counter[LAB_MAX_COUNTERS];
  bool     has_counter[LAB_MAX_COUNTERS];
  bool     measured;      /* the fields below are set */
  uint64_t measured_rss;  /* RSS the real program read at this mark */
  uint64_t predicted_rss; /* sim_rss + the variant's baseline: measured
                             minus simulated at the run's first mark (the
                             program itself, which no trace describes) */
  bool   has_measured_value[LAB_MAX_MEASURED]; /* measured_columns */
  double measured_value[LAB_MAX_MEASURED];
};

/* A size-class ladder: the requests at which the usable size changes, and
 * the usable size from there on (malloc_usable_size of 1..LAB_LADDER_MAX). */
#define LAB_LADDER_MAX (UINT64_C(256) << 10) /* the notes' section 8 sweep */
typedef struct lab_rung_s lab_rung_t;
struct lab_rung_s {
  uint64_t request; /* the first request of the class */
  uint64_t usable;  /* what it and the requests up to the next rung get */
};
typedef struct lab_ladder_s lab_ladder_t;
struct lab_ladder_s {
  size_t      n, cap;
  lab_rung_t *rung;          /* ascending requests, rung[0].request == 1 */
  double      mean_waste_1k; /* mean usable - request over 1..1024 */
};
/* A run of classes a constant step apart: requests first..last get
 * usable_first, usable_first + step, ... usable_last. */
typedef struct lab_segment_s lab_segment_t;
struct lab_segment_s {
  uint64_t request_first, request_last;
  uint64_t usable_first, usable_last, step, classes;
};
/* The i-th segment of l from *pos on (pos starts at 0); false at the end. */
bool lab_ladder_segment(const lab_ladder_t *l, size_t *pos, lab_segment_t *out);
/* The usable size l gives request (0 above the sweep). */
uint64_t lab_ladder_usable(const lab_ladder_t *l, uint64_t request);

typedef struct lab_variant_result_s lab_variant_result_t;
struct lab_variant_result_s {
  bool ran;         /* false: a model is missing */
  char missing[32]; /* that model */
  char model_desc[512];
  char anchor[64];             /* the run's first mark: where measured and
                                  simulated are anchored */
  uint64_t     anchor_sim_rss; /* simulated RSS there */
  int64_t      baseline;       /* measured minus simulated there */
  size_t       nmaps;
  char         map_label[LAB_MAX_MAPS][64]; /* the mark of each map */
  heapmap_t    map[LAB_MAX_MAPS];
  lab_ladder_t ladder;          /* LAB_SIZES: the model's */
  lab_ladder_t measured_ladder; /* LAB_SIZES: the program's (n = 0: none) */
  uint64_t     ladder_diff;     /* first request whose usable size the two
                                   disagree on, 0 when they agree */
  bool   measured;
  size_t measured_runs;        /* files the medians are over */
  char   measured_source[512]; /* the (first) measured-run file */
  char   measured_note[256];   /* provenance worth printing */
  char   measured_meta[512];   /* the def's measured_keys of the first
                                  run, "key=value" lines */
};

typedef struct lab_result_s lab_result_t;
struct lab_result_s {
  const lab_def_t *def;
  size_t           nsteps;
  lab_step_t       steps[LAB_MAX_STEPS];
  const char      *counter_unit[LAB_MAX_COUNTERS]; /* as the model
                               reports it ("bytes", "count"); NULL until
                               a step has the counter */
  lab_variant_result_t variants[LAB_MAX_VARIANTS];
};

typedef struct lab_opts_s lab_opts_t;
struct lab_opts_s {
  const char *source_dir; /* where data/ is (traces of variants) */
  size_t      map_cells;  /* heap map cells per row */
};

/* Replays every runnable variant of def; steps in variant order, marks in
 * run order.  Free with lab_result_free. */
as_status_t lab_simulate(const lab_def_t *def, const lab_opts_t *o,
                         lab_result_t *out, as_err_t *err);
/* Reads the n measured-run files paths[] (marks, each followed by its rss:
 * repeated runs of one variant; for LAB_SIZES also paths[0] + ".ladder",
 * "request usable" lines written by the program, compared with the model's
 * ladder) as the measurement of variant vi and fills
 * its steps' measured fields with the median over the runs that have the
 * mark; a step whose mark no file has stays unmeasured.  The baseline is
 * the median measured RSS at the run's first mark minus the simulated one
 * (AS_EINVAL if a file lacks that mark). */
as_status_t lab_attach_measured(lab_result_t *r, size_t vi,
                                const char *const *paths, size_t n,
                                as_err_t *err);
/* Attaches the repository's measurement of variant vi: the files matching
 * its `recorded` pattern under source_dir/data/ (sorted; at most
 * LAB_MAX_RUNS).  AS_OK with nothing attached when the variant has none or
 * did not run. */
as_status_t lab_attach_recorded(lab_result_t *r, size_t vi,
                                const char *source_dir, as_err_t *err);
void        lab_result_free(lab_result_t *r);

#endif
