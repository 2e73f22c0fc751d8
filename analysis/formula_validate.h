/* analysis/formula_validate.h -- the (1 - p)^k formula checked against the
 * measured survivors runs of a store.
 *
 * Every measured run whose provenance names the survivors workload is a
 * point: its measured kept memory (RSS at `after` minus RSS at `start`,
 * both measured), the simulation's (the same run replayed as `allocsim
 * compare` replays it) and the formula's at the geometry's k.  Points of
 * the random pattern are grouped by model, object size and page size; in
 * each group with two or more points the effective objects per unit k is
 * fitted to the measurements by nonlinear least squares (GSL
 * multifit_nlinear, on ln k so k stays positive),
 *     measured_i ~ objects_i / k * (1 - (1 - p_i)^k) * unit_bytes,
 * with a 95 % confidence interval from the fit's covariance and Student's t
 * on n - 1 degrees of freedom.  A k fitted well inside the interval around
 * the geometry's k says the formula's mechanism (a unit is freed only if
 * none of its k objects survived) is what the real allocator does.
 *
 * The unit is a pymalloc arena, or a page of the model's
 * formula_page_bytes (mimalloc-style models).  Runs the formula does not
 * cover (other survivors options, such as --reuse-size) are listed as
 * skipped with the reason.
 */
#ifndef ALLOCSIM_FORMULA_VALIDATE_H
#define ALLOCSIM_FORMULA_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../traces/wl_survivors.h"
#include "store.h"

typedef struct fv_point_s fv_point_t;
struct fv_point_s {
  int64_t             run_id;
  char                source[256]; /* the run's trace or workload */
  char                model[128];  /* the run's model spec */
  uint64_t            page_size;   /* OS page of the run */
  uint64_t            size_bytes;  /* --size */
  uint64_t            total_bytes; /* --total */
  survivors_pattern_t pattern;
  double              fraction;   /* random, oldest */
  uint64_t            every;      /* stride */
  uint64_t            objects;    /* objects built */
  uint64_t            unit_bytes; /* arena or page */
  uint64_t            k_geometry; /* the formula's k */
  double              measured_kept_bytes;
  double              simulated_kept_bytes;
  double              formula_kept_bytes; /* at k_geometry */
  double              formula_sd_bytes;
  double              fitted_kept_bytes; /* at the group's fitted k; NAN
                                            when not fitted */
  size_t group;                          /* index, or SIZE_MAX */
};

typedef struct fv_group_s fv_group_t;
struct fv_group_s {
  char     model[128];
  uint64_t page_size, size_bytes, unit_bytes;
  uint64_t k_geometry;     /* formula's k at this page size */
  uint64_t k_geometry_alt; /* pymalloc: k of the other arena kind (64 pools
                              where k_geometry has 63); 0 otherwise */
  size_t npoints;
  bool   fitted; /* false: fewer than 2 points, or no convergence */
  double k_fit;
  double k_lo, k_hi;          /* 95 % confidence interval */
  double rms_formula_bytes;   /* rms of measured - formula (geometry k) */
  double rms_fitted_bytes;    /* rms of measured - formula (fitted k) */
  double rms_simulated_bytes; /* rms of measured - simulated */
};

typedef struct fv_skip_s fv_skip_t;
struct fv_skip_s {
  int64_t run_id;
  char    why[256];
};

typedef struct fv_result_s fv_result_t;
struct fv_result_s {
  fv_point_t *points;
  size_t      npoints, points_cap;
  fv_group_t *groups;
  size_t      ngroups, groups_cap;
  fv_skip_t  *skipped;
  size_t      nskipped, skipped_cap;
};

/* Collects, replays, evaluates and fits as above.  layouts is passed to
 * the replays as compare's --layouts (0 or 1: the default layout).  Free
 * *out with fv_result_free, also after a failure. */
as_status_t formula_validate(store_t *s, unsigned layouts, fv_result_t *out,
                             as_err_t *err);
void        fv_result_free(fv_result_t *r);

/* Fits k to the n points (fraction, objects, unit_bytes, measured kept)
 * starting from k0; false if GSL does not converge or n < 2. */
bool fv_fit_k(const double *fraction, const double *objects,
              const double *measured, size_t n, double unit_bytes, double k0,
              double *k, double *k_lo, double *k_hi);

#endif
