/* analysis/compare.h -- predicted against measured RSS for a recorded run.
 *
 * A measured run is replayed (its trace, or the synthetic workload its
 * provenance names) against a model chosen from its environment, and the
 * prediction is compared with the measurement at every mark and over the
 * time series.
 *
 * Baseline rule (stated in every report): measured RSS includes what the
 * program holds before and outside the trace (interpreter, libraries,
 * stacks), which no trace explains.  So
 *     predicted(t) = simulated(t) + offset,
 *     offset       = measured(anchor) - simulated(anchor),
 * the start-up offset, reported on its own and never counted as model
 * error.  The anchor is the first of these marks the run has:
 *   "__main__"  a CPython capture at the end of interpreter start-up (the
 *               recorder marks it when CPython starts the program);
 *   "main"      a C capture at entry to main(), after ld.so mapped the
 *               libraries and the runtime ran its constructors;
 *   "hooked"    a CPython capture from before "__main__" existed: where
 *               the domain hook was installed (the interpreter allocated
 *               through pymalloc arenas the trace cannot see until then);
 * and otherwise the run's first sample with a measured value (a
 * measured-run file's first mark).  The error at the anchor is zero by
 * construction; samples before it appear in the marks table but not in the
 * series statistics (they measure what the trace cannot explain).
 *
 * Memory no allocator holds: a capture also measures, at every sample, the
 * resident bytes of program and library images, static data, the main
 * stack and the program's own file mmaps (traces/capture/memmap.c; stored
 * as the measured samples' owner "baseline").  Their growth after the
 * anchor is no model's to predict; compare reports it per mark and a
 * second error, the allocator error = predicted + that growth - measured,
 * with its own series statistics.  The plain error stays the headline.
 *
 * Pairing: a trace replay emits a simulated sample at every mark and rss
 * event of the trace, so the k-th measured sample is paired with the
 * simulated sample of the same event, in trace order -- aligned by the
 * events between samples, not by their times or indexes.  A workload has
 * its own virtual clock: only marks are paired, by label and occurrence.
 *
 * Layouts: where mmap puts things is randomised by ASLR, and for pymalloc it
 * decides which arenas are 16 KiB aligned (64 pools instead of 63), so one
 * replay is one draw.  By default, and with opts.layouts = N > 1, the run
 * is replayed N times, layout k with the simulated mmap_top lowered by k OS
 * pages
 * (sim_kernel_config_offset_layout, the rule of `sweep --vary
 * mmap_offset`), k = 0 .. N-1.  Offsets repeat modulo the 16 KiB pool, so
 * N is at most COMPARE_LAYOUT_SPAN_BYTES / page size (4 with 4 KiB pages, 1
 * with 16 KiB and 64 KiB pages).  Each layout gets its own baseline offset;
 * a mark's prediction is the mean over layouts, with the min and max kept,
 * and the series statistics use the mean.  Layout 0 is the default layout,
 * so N = 1 is exactly the single replay.
 *
 * Type map
 *   compare_opts_t    model/libc overrides, layouts and where to store
 *   compare_mark_t    one mark: measured, predicted (mean, min, max), error
 *   compare_series_t  statistics over aligned (measured, predicted) pairs
 *   compare_point_t   one aligned pair of the series
 *   compare_layout_t  one layout's replay: offset, statistics, stored ids
 *   compare_result_t  everything compare_run found
 */
#ifndef ALLOCSIM_COMPARE_H
#define ALLOCSIM_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../sim/kernel.h"
#include "../sim/status.h"
#include "store.h"

/* Marks liballocsim_capture.so records, in the order compare prefers them
 * as the anchor: CPython's end of start-up, C's main(), the CPython hook. */
#define COMPARE_PY_MAIN_MARK "__main__"
#define COMPARE_MAIN_MARK    "main"
#define COMPARE_HOOK_MARK    "hooked"

/* Layouts are distinct modulo this span: the pymalloc pool whose alignment
 * an arena is tested for (3.11 obmalloc.c:973,977: POOL_SIZE, 16 KiB;
 * models/pymalloc.h PYMALLOC_POOL_SIZE, checked in compare.c). */
#define COMPARE_LAYOUT_SPAN_BYTES 16384
/* The most layouts: the span over the smallest OS page (4096). */
#define COMPARE_MAX_LAYOUTS 4

/* What a command replaying one address layout (explain, advise, map,
 * report) says of it with page_size-byte pages: the default one, and how
 * many replay averages by default.  Writes it to buf; returns buf. */
const char *compare_one_layout_note(uint64_t page_size, char *buf, size_t len);

typedef struct compare_opts_s compare_opts_t;
struct compare_opts_s {
  const char *model;     /* model spec; NULL: cpython for Python runs, the
                            preloaded allocator if modelled, else glibc */
  const char *libc;      /* libc spec; NULL: glibc with the run's MALLOC_* /
                            GLIBC_TUNABLES knobs */
  uint64_t page_size;    /* 0: the run's */
  bool     no_zero_page; /* read faults get pages of their own, whatever
                            the run's provenance says */
  const char *kernel;    /* kernel release whose placement of large
                            mappings to model (uname -r); NULL: the run's */
  unsigned layouts;      /* address layouts to replay, 1 ..
                            COMPARE_LAYOUT_SPAN_BYTES / page size;
                            0: all of them (4 with 4 KiB pages); 1: the
                            default layout only */
  bool store;            /* write a simulated run and a comparisons row
                            per layout */
  const char *command;   /* command line stored with the simulated run */
};

typedef struct compare_mark_s compare_mark_t;
struct compare_mark_s {
  char     label[64];
  uint64_t t_ns; /* the measured run's time */
  uint64_t measured_rss_bytes;
  uint64_t simulated_rss_bytes;     /* before the baseline offset; with
                                       layouts, the mean rounded */
  int64_t predicted_rss_bytes;      /* simulated + offset; with layouts, the
                                       mean over them, rounded */
  int64_t  predicted_min_rss_bytes; /* smallest over layouts */
  int64_t  predicted_max_rss_bytes; /* largest over layouts */
  int64_t  predicted_by_layout[COMPARE_MAX_LAYOUTS]; /* [k]: layout k's */
  unsigned layouts;              /* layouts that predicted this mark: all of
                                    them, or 0 (error_pct_of_peak is NAN) */
  int64_t error_bytes;           /* predicted (mean) - measured */
  double  error_pct_of_peak;     /* 100 * error / peak measured */
  int64_t other_growth_bytes;    /* capture: measured bytes no allocator
                                    holds, minus those at the anchor */
  int64_t allocator_error_bytes; /* error + other_growth, less the model's
                                    own baseline-owner growth (compare.c
                                    own_grown): the model's error on allocator
                                    memory alone */
  double allocator_error_pct_of_peak;
};

/* What stands behind the largest error of a series. */
typedef enum compare_max_note_e {
  COMPARE_MAX_PLAIN,  /* nothing found: the model's */
  COMPARE_MAX_STEEP,  /* the curves are one sample apart on a steep
                         change: the measured value lies between the
                         predictions at the neighbouring samples, or the
                         prediction between the neighbouring measurements */
  COMPARE_MAX_RELEASE /* a trim or purge lies between this sample and a
                         neighbour: RSS was moving while it was read */
} compare_max_note_t;

/* "", "one sample apart on a steep change", "next to a trim or purge". */
const char *compare_max_note_text(compare_max_note_t n);

typedef struct compare_series_s compare_series_t;
struct compare_series_s {
  size_t   points;                 /* aligned pairs at or after the anchor */
  double   mean_abs_error_bytes;   /* NAN if points == 0 */
  double   median_abs_error_bytes; /* NAN if points == 0 */
  double   p95_abs_error_bytes;    /* 95th percentile; NAN if points == 0 */
  double   max_abs_error_bytes;    /* NAN if points == 0 */
  uint64_t max_error_t_ns;         /* when the largest error was measured */
  compare_max_note_t max_note;     /* what stands behind it */
  double             slope;        /* predicted on measured; NAN if undefined */
  double             intercept_bytes; /* NAN if undefined */
  double             r2;              /* 1 - SSres/SStot of predicted; NAN if
                                         undefined (fewer than 3 points, or no
                                         variance) */
};

/* One layout's replay, compared on its own. */
/* One aligned sample of the series (from the anchor on). */
typedef struct compare_point_s compare_point_t;
struct compare_point_s {
  uint64_t t_ns;
  uint64_t measured_rss_bytes;
  int64_t  predicted_rss_bytes; /* with layouts, the mean, rounded */
};

typedef struct compare_layout_s compare_layout_t;
struct compare_layout_s {
  uint64_t         mmap_offset_bytes; /* mmap_top lowered by k pages */
  int64_t          offset_bytes;      /* this layout's baseline offset */
  compare_series_t series;            /* its predictions alone */
  int64_t          simulated_run_id;  /* 0 unless stored */
  int64_t          comparison_id;     /* 0 unless stored */
};

typedef struct compare_result_s compare_result_t;
struct compare_result_s {
  int64_t measured_run_id;
  int64_t simulated_run_id;  /* 0 unless stored; layout 0's */
  int64_t comparison_id;     /* 0 unless stored; layout 0's */
  char    model[512];        /* model_describe() of the model used */
  char    model_spec[256];   /* as chosen: "cpython" */
  char    libc_spec[256];    /* as chosen: "glibc:arena_max=2" */
  char    source[512];       /* trace path or workload */
  char    alignment[64];     /* "rss events in order" or "marks by
                                 label" */
  char     anchor_label[64]; /* anchor mark, or "" */
  uint64_t anchor_t_ns;
  int64_t  offset_bytes; /* the start-up offset (with layouts, the mean
                            of theirs, rounded) */
  uint64_t page_size;
  bool     zero_page;  /* the model's kernel maps the zero page on reads */
  char     thp[16];    /* the model's THP mode: always, madvise or never */
  char     kernel[96]; /* the release modelled, or "" */
  sim_thp_align_t thp_align; /* its placement of large mappings */
  uint64_t        mmap_top;  /* the measured process's probed mmap top the model
                                starts from (provenance mmap_top), or 0 */
  uint64_t peak_measured_rss_bytes;
  uint64_t final_measured_rss_bytes;  /* the last measured sample */
  int64_t  peak_predicted_rss_bytes;  /* the largest (mean) prediction
                                         at a measured sample from the
                                         anchor on */
  int64_t  final_predicted_rss_bytes; /* at the last measured sample */
  uint64_t skipped_events;            /* bad frees/reallocs the replay
                                         skipped (lenient) */
  compare_mark_t  *marks;             /* owned; free with compare_result_free */
  size_t           nmarks;
  compare_series_t series;            /* of the mean prediction */
  bool             has_other;         /* a capture that measured what no
                                         allocator holds (images, static data,
                                         stacks, file mmaps) */
  compare_series_t allocator_series;  /* of predicted + other growth: the
                                         model's error on allocator memory */
  int64_t final_other_growth_bytes;   /* at the last sample */
  int64_t peak_other_growth_bytes;    /* at the measured peak (from
                                         the anchor on) */
  uint64_t anchor_measured_rss_bytes; /* the measured sample there */
  char     own_malloc[128];           /* the capture's "own_malloc": the object
                                         whose malloc bound ahead of the
                                         recorder (its calls are not in the
                                         trace), or "" */
  bool python;                        /* the run is a CPython process's
                                         (provenance python) */
  char truncated[64];                 /* why the recording stopped early
                                         (capture_end, or "the trace ends
                                         early") when the run's provenance
                                         says truncated=1, else "" */
  compare_point_t *points;            /* owned: the series, in order */
  size_t           npoints;
  unsigned         nlayouts;                     /* >= 1 */
  compare_layout_t layouts[COMPARE_MAX_LAYOUTS]; /* [0 .. nlayouts) */
};

/* Statistics over n aligned pairs (measured[i], predicted[i]) taken at
 * t_ns[i] (may be NULL: times 0): mean, median, 95th percentile and max
 * absolute error with the time of the max and what stands behind it
 * (release[i], may be NULL: a trim or purge lies between pair i and pair
 * i + 1), and the least-squares fit predicted = intercept + slope *
 * measured with its R^2 (GSL gsl_fit_linear, gsl_stats_mean,
 * gsl_stats_median_from_sorted_data, gsl_stats_quantile_from_sorted_data).
 * Never fails: undefined values are NAN. */
void compare_series_stats(const double *measured, const double *predicted,
                          const uint64_t *t_ns, const bool *release, size_t n,
                          compare_series_t *out);

/* The anchor of the baseline rule (above) for measured samples ms and the
 * nsim samples sim of a replay, both in order: is_trace pairs them by rss
 * event (a replay of the captured trace), else marks by label and
 * occurrence (a workload).  *ms_at is the anchor's index in ms and *sim_at
 * that of its simulated sample, both SIZE_MAX when no measured sample
 * lines up.  Fails only for want of memory.  Every command that adds the
 * start-up offset (report's plots too) anchors here, so they agree. */
as_status_t compare_find_anchor(const store_sample_t *ms, size_t nms,
                                const store_sample_t *sim, size_t nsim,
                                bool is_trace, size_t *ms_at, size_t *sim_at,
                                as_err_t *err);

/* Replays measured run run_id of s and compares (see the file comment),
 * under o->layouts address layouts.
 * AS_ESTORE for a missing run, AS_EINVAL for a run that is not measured,
 * has nothing to replay, or whose trace no longer matches its SHA-256, and
 * for more layouts than COMPARE_LAYOUT_SPAN_BYTES / page size allows.
 * With o->store each layout's simulated run and comparisons row (its own
 * statistics) are written in s.
 * Free res with compare_result_free (also after a failure). */
as_status_t compare_run(store_t *s, int64_t run_id, const compare_opts_t *o,
                        compare_result_t *res, as_err_t *err);
void        compare_result_free(compare_result_t *res);

#endif
