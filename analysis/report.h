/* analysis/report.h -- one self-contained HTML file that shows a run:
 * RSS over time predicted against measured with its marks, the breakdown
 * by owner stacked over time, heap maps at the marks, what holds memory
 * (explain) and what would release it (advise); or, for a sweep, kept
 * memory against survivor fraction with the simulation, the formula and
 * the measured runs.
 *
 * Plots are drawn by gnuplot (its svg terminal, inlined into the page, and
 * pngcairo for --png): a plotting program people know and can rerun on
 * the data files the report writes beside its scripts, instead of SVG
 * built by hand here.  The page loads nothing from the network.
 */
#ifndef ALLOCSIM_REPORT_H
#define ALLOCSIM_REPORT_H

#include <stdint.h>

#include "explain.h"
#include "store.h"

typedef struct report_opts_s report_opts_t;
struct report_opts_s {
  const char *out_html; /* the page to write (atomically) */
  const char *png_dir;  /* also write each plot as PNG here, or NULL */
  const char *title;    /* page title */
  const char *gnuplot;  /* the gnuplot binary (default "gnuplot") */
};

/* A report of one replay target: o's model on the source open() gives,
 * with measured samples (may be NULL) from a recorded run.  same_clock:
 * the source's timestamps are the measured run's (a captured trace), else
 * (a workload) measured marks are placed at the simulated marks. */
as_status_t report_replay(const report_opts_t *ro, const explain_opts_t *o,
                          explain_open_fn open, void *user,
                          const store_sample_t *measured, size_t nmeasured,
                          bool same_clock, const char *source_name,
                          as_err_t *err);

/* A report of sweep sweep_id of store s: kept memory against survivor
 * fraction per object size and page size, with the formula and the
 * measured survivors runs the store holds. */
as_status_t report_sweep(const report_opts_t *ro, store_t *s, int64_t sweep_id,
                         as_err_t *err);

#endif
