/* analysis/formula_validate.c -- the (1 - p)^k formula against measured
 * survivors runs (see formula_validate.h). */
#include "formula_validate.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_vector.h>
#include <sqlite3.h>

#include "../models/model.h"
#include "../sim/grow.h"
#include "compare.h"
#include "formula.h"
#include "record.h"
#include "runsrc.h"

/* ------------------------------------------------------------------ fit */

typedef struct fit_data_s fit_data_t;
struct fit_data_s {
  const double *fraction, *objects, *measured;
  size_t        n;
  double        unit_bytes;
};

/* The formula's kept bytes for one point and its derivative in x = ln k. */
static double kept_at(double p, double objects, double unit, double k,
                      double *d_dx) {
  double survive_none = exp(k * log1p(-p)); /* (1 - p)^k */
  double q = 1.0 - survive_none;
  if (d_dx)
    *d_dx = objects * unit * (-q / k - survive_none * log1p(-p));
  return objects / k * q * unit;
}

static int fit_residuals(const gsl_vector *x, void *user, gsl_vector *f) {
  const fit_data_t *d = user;
  double            k = exp(gsl_vector_get(x, 0));
  for (size_t i = 0; i < d->n; i++)
    gsl_vector_set(
        f, i,
        kept_at(d->fraction[i], d->objects[i], d->unit_bytes, k, NULL) -
            d->measured[i]);
  return GSL_SUCCESS;
}

static int fit_jacobian(const gsl_vector *x, void *user, gsl_matrix *J) {
  const fit_data_t *d = user;
  double            k = exp(gsl_vector_get(x, 0));
  for (size_t i = 0; i < d->n; i++) {
    double d_dx;
    kept_at(d->fraction[i], d->objects[i], d->unit_bytes, k, &d_dx);
    gsl_matrix_set(J, i, 0, d_dx);
  }
  return GSL_SUCCESS;
}

bool fv_fit_k(const double *fraction, const double *objects,
              const double *measured, size_t n, double unit_bytes, double k0,
              double *k, double *k_lo, double *k_hi) {
  if (n < 2 || k0 <= 0)
    return false;
  fit_data_t               d = {.fraction = fraction,
                                .objects = objects,
                                .measured = measured,
                                .n = n,
                                .unit_bytes = unit_bytes};
  gsl_multifit_nlinear_fdf fdf = {
      .f = fit_residuals, .df = fit_jacobian, .n = n, .p = 1, .params = &d};
  gsl_multifit_nlinear_parameters params =
      gsl_multifit_nlinear_default_parameters();
  gsl_multifit_nlinear_workspace *w =
      gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &params, n, 1);
  gsl_vector *x0 = gsl_vector_alloc(1);
  gsl_matrix *covar = gsl_matrix_alloc(1, 1);
  gsl_vector_set(x0, 0, log(k0));
  gsl_error_handler_t *old = gsl_set_error_handler_off();
  int                  info;
  int                  status = gsl_multifit_nlinear_init(x0, &fdf, w);
  if (status == GSL_SUCCESS)
    status = gsl_multifit_nlinear_driver(200, 1e-10, 1e-10, 1e-10, NULL, NULL,
                                         &info, w);
  bool ok = status == GSL_SUCCESS;
  if (ok) {
    double x = gsl_vector_get(w->x, 0);
    double ssr = 0;
    gsl_blas_ddot(w->f, w->f, &ssr);
    gsl_multifit_nlinear_covar(gsl_multifit_nlinear_jac(w), 0.0, covar);
    double dof = (double)(n - 1);
    double se = sqrt(ssr / dof * gsl_matrix_get(covar, 0, 0));
    double t = gsl_cdf_tdist_Pinv(0.975, dof);
    *k = exp(x);
    *k_lo = exp(x - t * se);
    *k_hi = exp(x + t * se);
    ok = isfinite(*k) && isfinite(*k_lo) && isfinite(*k_hi);
  }
  gsl_set_error_handler(old);
  gsl_matrix_free(covar);
  gsl_vector_free(x0);
  gsl_multifit_nlinear_free(w);
  return ok;
}

/* -------------------------------------------------------- the points */

static as_status_t skip(fv_result_t *r, int64_t run_id, as_err_t *err,
                        const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static as_status_t skip(fv_result_t *r, int64_t run_id, as_err_t *err,
                        const char *fmt, ...) {
  fv_skip_t *v =
      as_grow(r->skipped, &r->skipped_cap, r->nskipped + 1, sizeof *v, 8);
  if (!v)
    return as_err_set(err, AS_ENOMEM, "formula --validate: out of memory");
  r->skipped = v;
  fv_skip_t *s = &r->skipped[r->nskipped++];
  s->run_id = run_id;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->why, sizeof s->why, fmt, ap);
  va_end(ap);
  return AS_OK;
}

static bool parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || *end || errno || s[0] == '-')
    return false;
  *out = v;
  return true;
}

/* Reads the survivors arguments of workload string w ("survivors --size 64
 * --total 256 ...") into p; on failure, why names what is not covered. */
static bool parse_workload(const char *w, fv_point_t *p, char *why,
                           size_t why_len) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", w);
  p->size_bytes = 64; /* the workload's defaults (traces/wl_survivors.c) */
  p->total_bytes = UINT64_C(256) << 20;
  p->pattern = SURVIVORS_RANDOM;
  p->fraction = 1e-4;
  p->every = 1000;
  char *save = NULL, *tok = strtok_r(buf, " ", &save);
  for (tok = strtok_r(NULL, " ", &save); tok;
       tok = strtok_r(NULL, " ", &save)) {
    char    *val = strtok_r(NULL, " ", &save);
    uint64_t u = 0;
    char    *end = NULL;
    bool     ok = val != NULL;
    if (ok && strcmp(tok, "--size") == 0)
      ok = parse_u64(val, &p->size_bytes);
    else if (ok && strcmp(tok, "--total") == 0) {
      /* MiB, fractions allowed, as traces/wl_survivors.c reads it */
      double mib = strtod(val, &end);
      ok = end != val && *end == '\0' && mib > 0 && mib < 0x1p40;
      p->total_bytes = ok ? (uint64_t)(mib * 1048576.0) : 0;
    } else if (ok && strcmp(tok, "--pattern") == 0)
      ok = survivors_pattern_parse(val, &p->pattern);
    else if (ok && strcmp(tok, "--fraction") == 0) {
      p->fraction = strtod(val, &end);
      ok = end != val && *end == '\0';
    } else if (ok && strcmp(tok, "--every") == 0)
      ok = parse_u64(val, &p->every);
    else if (ok && strcmp(tok, "--seed") == 0)
      ok = parse_u64(val, &u);
    else {
      snprintf(why, why_len, "%s %s: the formula does not cover it", tok,
               val ? val : "");
      return false;
    }
    if (!ok) {
      snprintf(why, why_len, "%s: cannot read '%s'", tok, val ? val : "");
      return false;
    }
  }
  return true;
}

/* The measured and simulated kept memory of run p->run_id. */
static as_status_t replay_kept(store_t *s, unsigned layouts, fv_point_t *p,
                               bool *have, as_err_t *err) {
  compare_opts_t        o = {.layouts = layouts};
  compare_result_t      res = {0};
  as_status_t           rc = compare_run(s, p->run_id, &o, &res, err);
  const compare_mark_t *start = NULL, *after = NULL;
  for (size_t i = 0; rc == AS_OK && i < res.nmarks; i++) {
    if (!start && strcmp(res.marks[i].label, "start") == 0)
      start = &res.marks[i];
    if (strcmp(res.marks[i].label, "after") == 0)
      after = &res.marks[i];
  }
  *have = start && after;
  if (*have) {
    p->measured_kept_bytes =
        (double)after->measured_rss_bytes - (double)start->measured_rss_bytes;
    p->simulated_kept_bytes =
        (double)after->simulated_rss_bytes - (double)start->simulated_rss_bytes;
  }
  compare_result_free(&res);
  return rc;
}

/* The model's unit: mimalloc-style pages of formula_page_bytes, else 0
 * (pymalloc arenas). */
static uint64_t model_page_bytes(const char *spec) {
  char name[64];
  snprintf(name, sizeof name, "%.*s", (int)strcspn(spec, ":"), spec);
  const model_methods_t *m = model_find(name);
  return m ? m->formula_page_bytes : 0;
}

static as_status_t evaluate_formula(fv_point_t *p, as_err_t *err) {
  formula_input_t  in = {.size_bytes = p->size_bytes,
                         .total_bytes = p->total_bytes,
                         .pattern = p->pattern,
                         .fraction = p->fraction,
                         .every = p->every,
                         .page_bytes = model_page_bytes(p->model),
                         .arena_aligned = p->page_size >= 16384};
  formula_result_t out;
  as_status_t      rc = formula_survivors(&in, &out, err);
  if (rc != AS_OK)
    return rc;
  p->objects = out.objects;
  p->unit_bytes = out.unit_bytes;
  p->k_geometry = out.k;
  p->formula_kept_bytes = out.kept_bytes;
  p->formula_sd_bytes = out.sd_bytes;
  p->fitted_kept_bytes = NAN;
  p->group = SIZE_MAX;
  return AS_OK;
}

/* The model that predicts the run, as compare picks it from provenance
 * (so PYTHONMALLOC=malloc shows as pythonmalloc=malloc); *covered is false
 * when that model has no unit the formula knows. */
static as_status_t effective_model(store_t *s, fv_point_t *p, bool *covered,
                                   as_err_t *err) {
  run_meta_t  meta = {0};
  char        libc[256];
  as_status_t rc = run_meta_read(s, p->run_id, &meta, err);
  if (rc == AS_OK)
    rc = record_run_specs(run_meta_get, &meta, NULL, NULL, p->model,
                          sizeof p->model, libc, sizeof libc, err);
  run_meta_free(&meta);
  *covered = strstr(p->model, "pythonmalloc=malloc") == NULL;
  return rc;
}

/* Measured survivors runs of a program; not `allocsim oracle`'s replays of
 * the workload's calls on an allocator alone (provenance source "allocsim
 * oracle"), which have no pymalloc for the formula to describe. */
static const char RUNS_SQL[] =
    "SELECT r.id, r.model, r.page_size, r.source, m.value FROM runs r "
    "JOIN run_meta m ON m.run_id = r.id AND m.key = 'workload' "
    "WHERE r.kind = 'measured' AND "
    "(m.value = 'survivors' OR m.value LIKE 'survivors %') AND NOT EXISTS "
    "(SELECT 1 FROM run_meta o WHERE o.run_id = r.id AND o.key = 'source' "
    "AND o.value = 'allocsim oracle') ORDER BY r.id";

/* One measured survivors run: a point, or a skip with the reason. */
static as_status_t add_run(store_t *s, unsigned layouts, sqlite3_stmt *st,
                           fv_result_t *r, as_err_t *err) {
  fv_point_t p = {.run_id = sqlite3_column_int64(st, 0)};
  snprintf(p.model, sizeof p.model, "%s",
           (const char *)sqlite3_column_text(st, 1));
  p.page_size = (uint64_t)sqlite3_column_int64(st, 2);
  snprintf(p.source, sizeof p.source, "%s",
           (const char *)sqlite3_column_text(st, 3));
  char why[256];
  if (!parse_workload((const char *)sqlite3_column_text(st, 4), &p, why,
                      sizeof why))
    return skip(r, p.run_id, err, "%s", why);
  bool        covered = true;
  as_status_t rc = effective_model(s, &p, &covered, err);
  if (rc != AS_OK)
    return rc;
  if (!covered)
    return skip(r, p.run_id, err,
                "%s: no pymalloc arenas, the formula does not apply", p.model);
  as_err_t ferr = {0};
  rc = evaluate_formula(&p, &ferr);
  if (rc != AS_OK)
    return skip(r, p.run_id, err, "%s", ferr.msg);
  bool have;
  if ((rc = replay_kept(s, layouts, &p, &have, err)) != AS_OK)
    return rc;
  if (!have)
    return skip(r, p.run_id, err, "no 'start' and 'after' marks");
  fv_point_t *v =
      as_grow(r->points, &r->points_cap, r->npoints + 1, sizeof *v, 16);
  if (!v)
    return as_err_set(err, AS_ENOMEM, "formula --validate: out of memory");
  r->points = v;
  r->points[r->npoints++] = p;
  return AS_OK;
}

static as_status_t collect(store_t *s, unsigned layouts, fv_result_t *r,
                           as_err_t *err) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(store_db(s), RUNS_SQL, -1, &st, NULL) != SQLITE_OK)
    return as_err_set(err, AS_ESTORE, "%s: %s", store_path(s),
                      sqlite3_errmsg(store_db(s)));
  as_status_t rc = AS_OK;
  int         step;
  while (rc == AS_OK && (step = sqlite3_step(st)) == SQLITE_ROW)
    rc = add_run(s, layouts, st, r, err);
  if (rc == AS_OK && step != SQLITE_DONE)
    rc = as_err_set(err, AS_ESTORE, "%s: %s", store_path(s),
                    sqlite3_errmsg(store_db(s)));
  sqlite3_finalize(st);
  return rc;
}

/* ------------------------------------------------------------- groups */

static size_t group_of(fv_result_t *r, const fv_point_t *p, as_err_t *err) {
  for (size_t g = 0; g < r->ngroups; g++) {
    const fv_group_t *q = &r->groups[g];
    if (strcmp(q->model, p->model) == 0 && q->page_size == p->page_size &&
        q->size_bytes == p->size_bytes && q->unit_bytes == p->unit_bytes)
      return g;
  }
  fv_group_t *v =
      as_grow(r->groups, &r->groups_cap, r->ngroups + 1, sizeof *v, 8);
  if (!v) {
    as_err_set(err, AS_ENOMEM, "formula --validate: out of memory");
    return SIZE_MAX;
  }
  r->groups = v;
  fv_group_t *g = &r->groups[r->ngroups];
  memset(g, 0, sizeof *g);
  snprintf(g->model, sizeof g->model, "%s", p->model);
  g->page_size = p->page_size;
  g->size_bytes = p->size_bytes;
  g->unit_bytes = p->unit_bytes;
  g->k_geometry = p->k_geometry;
  if (model_page_bytes(p->model) == 0) {
    /* pymalloc: the other arena kind (aligned or not) */
    formula_input_t  in = {.size_bytes = p->size_bytes,
                           .total_bytes = p->total_bytes,
                           .fraction = p->fraction,
                           .arena_aligned = p->page_size < 16384};
    formula_result_t out;
    as_err_t         ignored = {0};
    if (formula_survivors(&in, &out, &ignored) == AS_OK)
      g->k_geometry_alt = out.k;
  }
  return r->ngroups++;
}

static double rms(const double *a, const double *b, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; i++)
    sum += (a[i] - b[i]) * (a[i] - b[i]);
  return n ? sqrt(sum / (double)n) : NAN;
}

/* Fits group g over its points (indices idx) and fills the residuals. */
static void fit_group(fv_result_t *r, fv_group_t *g, const size_t *idx,
                      size_t n, double *buf) {
  double *fraction = buf, *objects = buf + n, *measured = buf + 2 * n,
         *formula = buf + 3 * n, *simulated = buf + 4 * n,
         *fitted = buf + 5 * n;
  for (size_t i = 0; i < n; i++) {
    const fv_point_t *p = &r->points[idx[i]];
    fraction[i] = p->fraction;
    objects[i] = (double)p->objects;
    measured[i] = p->measured_kept_bytes;
    formula[i] = p->formula_kept_bytes;
    simulated[i] = p->simulated_kept_bytes;
  }
  g->npoints = n;
  g->rms_formula_bytes = rms(measured, formula, n);
  g->rms_simulated_bytes = rms(measured, simulated, n);
  g->fitted = fv_fit_k(fraction, objects, measured, n, (double)g->unit_bytes,
                       (double)g->k_geometry, &g->k_fit, &g->k_lo, &g->k_hi);
  if (!g->fitted) {
    g->rms_fitted_bytes = NAN;
    return;
  }
  for (size_t i = 0; i < n; i++) {
    fitted[i] =
        kept_at(fraction[i], objects[i], (double)g->unit_bytes, g->k_fit, NULL);
    r->points[idx[i]].fitted_kept_bytes = fitted[i];
  }
  g->rms_fitted_bytes = rms(measured, fitted, n);
}

static as_status_t fit_groups(fv_result_t *r, as_err_t *err) {
  for (size_t i = 0; i < r->npoints; i++) {
    if (r->points[i].pattern != SURVIVORS_RANDOM)
      continue;
    size_t g = group_of(r, &r->points[i], err);
    if (g == SIZE_MAX)
      return AS_ENOMEM;
    r->points[i].group = g;
  }
  size_t *idx = malloc((r->npoints + 1) * sizeof *idx);
  double *buf = malloc((6 * r->npoints + 1) * sizeof *buf);
  if (!idx || !buf) {
    free(idx);
    free(buf);
    return as_err_set(err, AS_ENOMEM, "formula --validate: out of memory");
  }
  for (size_t g = 0; g < r->ngroups; g++) {
    size_t n = 0;
    for (size_t i = 0; i < r->npoints; i++)
      if (r->points[i].group == g)
        idx[n++] = i;
    fit_group(r, &r->groups[g], idx, n, buf);
  }
  free(idx);
  free(buf);
  return AS_OK;
}

as_status_t formula_validate(store_t *s, unsigned layouts, fv_result_t *out,
                             as_err_t *err) {
  memset(out, 0, sizeof *out);
  as_status_t rc = collect(s, layouts, out, err);
  if (rc == AS_OK)
    rc = fit_groups(out, err);
  return rc;
}

void fv_result_free(fv_result_t *r) {
  free(r->points);
  free(r->groups);
  free(r->skipped);
  memset(r, 0, sizeof *r);
}
