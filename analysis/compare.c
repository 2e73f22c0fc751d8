/* analysis/compare.c -- replays a measured run and compares predicted with
 * measured RSS, at marks and over the time series (rule in compare.h).
 *
 * Alignment: a trace replay goes through the run's own rss events, and the
 * engine emits a sample at each, so the k-th measured sample (each comes
 * from one rss event: record.h) is paired with the simulated sample of the
 * k-th rss event.  Pairing by order, not by time, keeps samples that share
 * a timestamp apart (a heaptrack import's events between two 10 ms ticks,
 * an oracle's samples taken while one call ran).  A synthetic workload has
 * its own virtual clock, unrelated to the measured wall clock, so only marks
 * are paired, by label and occurrence.
 *
 * Not done here: choosing between several plausible models.  The model
 * follows the run's provenance or the caller; a wrong guess shows up as
 * error, which is the point of comparing.
 *
 * Layouts (compare.h): the replay runs once per layout; each layout is
 * paired, anchored and (optionally) stored on its own, then the marks and
 * the series take the mean over layouts, with the min and max per mark.
 *
 * Sections: statistics, provenance, replay, alignment, storing, one
 * layout's replay, entry point.
 */
#include "compare.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_fit.h>
#include <gsl/gsl_statistics_double.h>
#include <gsl/gsl_sort.h>
#include <inttypes.h>
#include <stdarg.h>
#include <limits.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../models/model.h"
#include "../models/pymalloc.h"
#include "../engine/engine.h"
#include "../sim/json.h"
#include "../sim/sha256.h"
#include "../traces/trace_io.h"
#include "../traces/workload.h"
#include "record.h"
#include "runsrc.h"

/* ---- Statistics -----------------------------------------------------------
 */

const char *compare_max_note_text(compare_max_note_t n) {
  switch (n) {
  case COMPARE_MAX_STEEP:
    return "one sample apart on a steep change";
  case COMPARE_MAX_RELEASE:
    return "next to a trim or purge (RSS moving while read)";
  case COMPARE_MAX_PLAIN:
    break;
  }
  return "";
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Whether curve a changes steeply around point k -- its neighbours k-1 and
 * k+1 (at an end: k and its one neighbour) differ by at least half of
 * err -- and v, the other curve's value at k, lies within that change (by
 * tol): the two curves are one sample apart there. */
static bool one_sample_apart(const double *a, size_t n, size_t k, double v,
                             double err, double tol) {
  if (n < 2)
    return false;
  double x = k > 0 ? a[k - 1] : a[k], y = k + 1 < n ? a[k + 1] : a[k];
  double lo = fmin(x, y), hi = fmax(x, y);
  return hi - lo >= err / 2 && v >= lo - tol && v <= hi + tol;
}

/* Why pair k, the largest error, is off: a release beside it, or the two
 * curves one sample apart on a steep change. */
static compare_max_note_t max_note(const double *measured,
                                   const double *predicted, const bool *release,
                                   size_t n, size_t k, double typical) {
  if (release != NULL &&
      ((k > 0 && release[k - 1]) || (k + 1 < n && release[k])))
    return COMPARE_MAX_RELEASE;
  double err = fabs(predicted[k] - measured[k]);
  if (one_sample_apart(predicted, n, k, measured[k], err, typical) ||
      one_sample_apart(measured, n, k, predicted[k], err, typical))
    return COMPARE_MAX_STEEP;
  return COMPARE_MAX_PLAIN;
}

void compare_series_stats(const double *measured, const double *predicted,
                          const uint64_t *t_ns, const bool *release, size_t n,
                          compare_series_t *out) {
  memset(out, 0, sizeof *out);
  out->points = n;
  out->mean_abs_error_bytes = NAN;
  out->median_abs_error_bytes = NAN;
  out->p95_abs_error_bytes = NAN;
  out->max_abs_error_bytes = NAN;
  out->slope = NAN;
  out->intercept_bytes = NAN;
  out->r2 = NAN;
  if (n == 0)
    return;
  double *abs_err = malloc(n * sizeof *abs_err);
  if (abs_err == NULL)
    return;
  size_t kmax = 0;
  for (size_t i = 0; i < n; i++) {
    abs_err[i] = fabs(predicted[i] - measured[i]);
    if (abs_err[i] > abs_err[kmax])
      kmax = i;
  }
  out->mean_abs_error_bytes = gsl_stats_mean(abs_err, 1, n);
  out->max_abs_error_bytes = abs_err[kmax];
  out->max_error_t_ns = t_ns != NULL ? t_ns[kmax] : 0;
  qsort(abs_err, n, sizeof *abs_err, cmp_double);
  out->median_abs_error_bytes =
      gsl_stats_median_from_sorted_data(abs_err, 1, n);
  out->p95_abs_error_bytes =
      gsl_stats_quantile_from_sorted_data(abs_err, 1, n, 0.95);
  out->max_note = out->max_abs_error_bytes > 2 * out->median_abs_error_bytes
                      ? max_note(measured, predicted, release, n, kmax,
                                 out->median_abs_error_bytes)
                      : COMPARE_MAX_PLAIN;
  free(abs_err);
  if (n < 3)
    return;
  double c0, c1, cov00, cov01, cov11, sumsq;
  if (gsl_fit_linear(measured, 1, predicted, 1, n, &c0, &c1, &cov00, &cov01,
                     &cov11, &sumsq) != GSL_SUCCESS ||
      !isfinite(c1))
    return;
  double mean_y = gsl_stats_mean(predicted, 1, n);
  double tss = 0;
  for (size_t i = 0; i < n; i++)
    tss += (predicted[i] - mean_y) * (predicted[i] - mean_y);
  double var_x = gsl_stats_variance(measured, 1, n);
  if (!(var_x > 0))
    return;
  out->slope = c1;
  out->intercept_bytes = c0;
  out->r2 = tss > 0 ? 1.0 - sumsq / tss : NAN;
}

/* ---- Replay -----------------------------------------------------------------
 */

/* One replay's samples; release[i]: a trim or purge came between sample
 * i - 1 and sample i. */
typedef struct simlog_s simlog_t;
struct simlog_s {
  store_sample_t *v;
  bool           *release;
  size_t          n, cap;
  bool            release_pending;
};

static as_status_t on_sample(void *user, const sim_sample_t *s, as_err_t *err) {
  simlog_t *l = user;
  if (l->n == l->cap) {
    size_t          cap = l->cap ? 2 * l->cap : 256;
    store_sample_t *v = realloc(l->v, cap * sizeof *v);
    if (v == NULL)
      return as_err_set(err, AS_ENOMEM, "out of memory for samples");
    l->v = v;
    bool *r = realloc(l->release, cap * sizeof *r);
    if (r == NULL)
      return as_err_set(err, AS_ENOMEM, "out of memory for samples");
    l->release = r;
    l->cap = cap;
  }
  l->release[l->n] = l->release_pending;
  l->release_pending = false;
  store_sample_from_sim(&l->v[l->n++], s);
  return AS_OK;
}

static void simlog_free(simlog_t *l) {
  free(l->v);
  free(l->release);
  memset(l, 0, sizeof *l);
}

/* A source that passes a trace through, noting trims and purges in the
 * simulated samples (what moved RSS between two samples). */
typedef struct watch_src_s watch_src_t;
struct watch_src_s {
  trace_source_t  base; /* must be first */
  trace_source_t *inner;
  simlog_t       *log;
};

static as_status_t watch_next(trace_source_t *src, trace_event_t *ev,
                              as_err_t *err) {
  watch_src_t *w = (watch_src_t *)src;
  as_status_t  rc = trace_source_next(w->inner, ev, err);
  if (rc == AS_OK && (ev->op == TRACE_TRIM || ev->op == TRACE_PURGE))
    w->log->release_pending = true;
  return rc;
}

static void watch_close(trace_source_t *src) {
  (void)src; /* the watched source is closed by its opener */
}

static void watch_where(const trace_source_t *src, char *buf, size_t len) {
  trace_source_where(((const watch_src_t *)src)->inner, buf, len);
}

static const trace_source_methods_t watch_methods = {
    .next = watch_next, .close = watch_close, .where = watch_where};

/* ---- Alignment
 * ---------------------------------------------------------------- */

/* Whether measured sample m came from an rss event: every measured-kind
 * sample, and a mark that had one (record.h). */
static bool from_rss_event(const store_sample_t *m) {
  return m->kind == SIM_SAMPLE_MEASURED ||
         (m->kind == SIM_SAMPLE_MARK && m->measured_rss_bytes != 0);
}

/* rel[i]: a trim or purge came between measured sample i and the next one
 * paired after it. */
static void releases_between(const simlog_t *sim, const size_t *pair,
                             size_t nms, bool *rel) {
  size_t prev = SIZE_MAX;
  for (size_t i = 0; i < nms; i++) {
    rel[i] = false;
    if (pair[i] == SIZE_MAX)
      continue;
    if (prev != SIZE_MAX)
      for (size_t j = pair[prev] + 1; j <= pair[i] && j < sim->n; j++)
        rel[prev] = rel[prev] || sim->release[j];
    prev = i;
  }
}

/* Growth of what no allocator holds from the anchor to measured sample i
 * (0 for runs that did not measure it: compare.h). */
static int64_t other_growth(const store_sample_t *ms, size_t i, size_t anchor) {
  return (int64_t)ms[i].owner_bytes[SIM_OWNER_BASELINE] -
         (int64_t)ms[anchor].owner_bytes[SIM_OWNER_BASELINE];
}

/* The anchor (compare.h): the first of the preferred marks the run has,
 * else the first measured sample that lines up; SIZE_MAX if none. */
static size_t find_anchor(const store_sample_t *ms, size_t nms,
                          const size_t *pair) {
  static const char *const prefer[] = {COMPARE_PY_MAIN_MARK, COMPARE_MAIN_MARK,
                                       COMPARE_HOOK_MARK};
  for (size_t k = 0; k < sizeof prefer / sizeof prefer[0]; k++)
    for (size_t i = 0; i < nms; i++)
      if (pair[i] != SIZE_MAX && ms[i].kind == SIM_SAMPLE_MARK &&
          strcmp(ms[i].label, prefer[k]) == 0)
        return i;
  for (size_t i = 0; i < nms; i++)
    if (pair[i] != SIZE_MAX)
      return i;
  return SIZE_MAX;
}

/* The k-th (0-based) of the n simulated samples sim that is a mark
 * labelled label, or SIZE_MAX. */
static size_t sim_mark(const store_sample_t *sim, size_t n, const char *label,
                       size_t k) {
  for (size_t i = 0; i < n; i++)
    if (sim[i].kind == SIM_SAMPLE_MARK && strcmp(sim[i].label, label) == 0 &&
        k-- == 0)
      return i;
  return SIZE_MAX;
}

/* Occurrence number of measured sample i's label among earlier marks. */
static size_t occurrence(const store_sample_t *m, size_t i) {
  size_t k = 0;
  for (size_t j = 0; j < i; j++)
    k += m[j].kind == SIM_SAMPLE_MARK && strcmp(m[j].label, m[i].label) == 0;
  return k;
}

/* Pairs measured samples with simulated ones: a trace's samples of rss
 * events with the replay's samples of the same rss events, in order (one
 * scan: they are in trace order), a workload's marks by label and
 * occurrence.  pair[i] = SIZE_MAX for a sample with no measurement. */
static void pair_samples(const store_sample_t *ms, size_t nms,
                         const store_sample_t *sim, size_t nsim, bool is_trace,
                         size_t *pair) {
  size_t scan = 0;
  for (size_t i = 0; i < nms; i++) {
    pair[i] = SIZE_MAX;
    if (is_trace && from_rss_event(&ms[i])) {
      while (scan < nsim && sim[scan].kind != SIM_SAMPLE_MEASURED)
        scan++;
      if (scan < nsim)
        pair[i] = scan++;
    } else if (!is_trace && ms[i].kind == SIM_SAMPLE_MARK) {
      pair[i] = sim_mark(sim, nsim, ms[i].label, occurrence(ms, i));
    }
    if (ms[i].measured_rss_bytes == 0)
      pair[i] = SIZE_MAX;
  }
}

as_status_t compare_find_anchor(const store_sample_t *ms, size_t nms,
                                const store_sample_t *sim, size_t nsim,
                                bool is_trace, size_t *ms_at, size_t *sim_at,
                                as_err_t *err) {
  size_t *pair = malloc((nms ? nms : 1) * sizeof *pair);
  if (pair == NULL)
    return as_err_set(err, AS_ENOMEM, "out of memory");
  pair_samples(ms, nms, sim, nsim, is_trace, pair);
  *ms_at = find_anchor(ms, nms, pair);
  *sim_at = *ms_at == SIZE_MAX ? SIZE_MAX : pair[*ms_at];
  free(pair);
  return AS_OK;
}

/* ---- Storing
 * ------------------------------------------------------------------ */

/* Stores layout k's simulated run sim and its comparisons row (the layout's
 * own offset and statistics), and records their ids in res->layouts[k].
 * With one layout the rows are what they were before layouts existed. */
static as_status_t store_comparison(store_t *s, compare_result_t *res,
                                    unsigned k, const simlog_t *sim,
                                    const compare_opts_t *o, as_err_t *err) {
  compare_layout_t *lay = &res->layouts[k];
  char              off[32], anchor_t[32], mrun[32], mmap_off[32], nlay[16];
  as_format_fits(off, sizeof off, "%" PRId64, lay->offset_bytes);
  as_format_fits(anchor_t, sizeof anchor_t, "%" PRIu64, res->anchor_t_ns);
  as_format_fits(mrun, sizeof mrun, "%" PRId64, res->measured_run_id);
  as_format_fits(mmap_off, sizeof mmap_off, "%" PRIu64, lay->mmap_offset_bytes);
  as_format_fits(nlay, sizeof nlay, "%u", res->nlayouts);
  store_kv_t meta[] = {
      {"kind", "simulated"},
      {"compare_measured_run", mrun},
      {"baseline_rule", "predicted = simulated + measured(anchor) - "
                        "simulated(anchor)"},
      {"baseline_offset_bytes", off},
      {"baseline_anchor_label", res->anchor_label},
      {"baseline_anchor_t_ns", anchor_t},
      {"alignment", res->alignment},
      /* Only with several layouts (below): which one this run is. */
      {"mmap_offset", mmap_off},
      {"compare_layouts", nlay},
  };
  size_t nmeta = sizeof meta / sizeof meta[0];
  if (res->nlayouts == 1)
    nmeta -= 2;
  store_run_t run = {
      .kind = "simulated",
      .model = res->model,
      .options = res->libc_spec,
      .page_size = res->page_size,
      .source = res->source,
      .command = o->command ? o->command : "allocsim compare",
      .meta = meta,
      .meta_count = nmeta,
  };
  as_status_t rc =
      store_write_run(s, &run, sim->v, sim->n, &lay->simulated_run_id, err);
  if (rc != AS_OK)
    return rc;
  char model[512], libc[512]; /* free-text values may hold any byte */
  if (!as_json_escape(res->model_spec, model, sizeof model) ||
      !as_json_escape(res->libc_spec, libc, sizeof libc))
    return as_err_set(err, AS_EINVAL, "model or libc spec too long to store");
  if ((rc = store_begin(s, err)) != AS_OK)
    return rc;
  sqlite3      *db = store_db(s);
  sqlite3_stmt *st = NULL;
  char          params[1024], layout_params[96] = "";
  if (res->nlayouts > 1)
    as_format_fits(layout_params, sizeof layout_params,
                   ", \"mmap_offset\": %" PRIu64 ", \"layouts\": %u",
                   lay->mmap_offset_bytes, res->nlayouts);
  as_format_fits(params, sizeof params,
                 "{\"alignment\": \"%s\", \"baseline_offset_bytes\": %" PRId64
                 ", \"anchor_t_ns\": %" PRIu64 ", \"model\": \"%s\", \"libc\": "
                 "\"%s\"%s}",
                 res->alignment, lay->offset_bytes, res->anchor_t_ns, model,
                 libc, layout_params);
  int src = sqlite3_prepare_v2(
      db,
      "INSERT INTO comparisons(measured_run_id, simulated_run_id, "
      "mean_abs_error_bytes, max_abs_error_bytes, slope, r2, "
      "intercept_bytes, points, params) VALUES (?,?,?,?,?,?,?,?,?)",
      -1, &st, NULL);
  if (src == SQLITE_OK) {
    const compare_series_t *x = &lay->series;
    double vals[5] = {x->mean_abs_error_bytes, x->max_abs_error_bytes, x->slope,
                      x->r2, x->intercept_bytes};
    sqlite3_bind_int64(st, 1, res->measured_run_id);
    sqlite3_bind_int64(st, 2, lay->simulated_run_id);
    for (int i = 0; i < 5; i++) {
      if (isfinite(vals[i]))
        sqlite3_bind_double(st, 3 + i, vals[i]);
      else
        sqlite3_bind_null(st, 3 + i);
    }
    sqlite3_bind_int64(st, 8, (sqlite3_int64)x->points);
    sqlite3_bind_text(st, 9, params, -1, SQLITE_TRANSIENT);
    src = sqlite3_step(st);
    if (src == SQLITE_DONE)
      src = SQLITE_OK;
  }
  if (src != SQLITE_OK) {
    rc = as_err_set(err, AS_ESTORE, "%s: storing the comparison: %s",
                    store_path(s), sqlite3_errmsg(db));
    sqlite3_finalize(st);
    store_rollback(s);
    return rc;
  }
  sqlite3_finalize(st);
  lay->comparison_id = sqlite3_last_insert_rowid(db);
  return store_commit(s, err);
}

/* ---- One layout's replay
 * ------------------------------------------------------ */

_Static_assert(COMPARE_LAYOUT_SPAN_BYTES == PYMALLOC_POOL_SIZE,
               "layouts repeat modulo the pymalloc pool");
_Static_assert(COMPARE_MAX_LAYOUTS * 4096 == COMPARE_LAYOUT_SPAN_BYTES,
               "one layout per smallest OS page in the span");

const char *compare_one_layout_note(uint64_t page_size, char *buf, size_t len) {
  uint64_t n = COMPARE_LAYOUT_SPAN_BYTES / page_size;
  if (n > 1)
    snprintf(buf, len,
             "the default one only; replay, run and sweep average %" PRIu64
             " by default, so their RSS can differ (replay --layouts 1 "
             "matches this)",
             n);
  else
    snprintf(buf, len,
             "the default one (the only one that differs with %" PRIu64
             "-byte pages)",
             page_size);
  return buf;
}

/* Replays the run once on the kernel layout kcfg, appending its samples to
 * *sim.  Sets res->source, res->model, res->alignment and
 * res->skipped_events (the same for every layout). */
static as_status_t replay(store_t *s, const store_run_record_t *rec,
                          const run_meta_t          *meta,
                          const sim_kernel_config_t *kcfg,
                          compare_result_t *res, simlog_t *sim, bool *is_trace,
                          as_err_t *err) {
  trace_source_t *src = NULL;
  sim_session_t   session;
  as_status_t     rc = run_open_source(s, rec, meta, &src, res->source,
                                       sizeof res->source, is_trace, err);
  if (rc != AS_OK) {
    trace_source_close(src);
    return rc;
  }
  as_format_fits(res->alignment, sizeof res->alignment, "%s",
                 *is_trace ? "rss events in order" : "marks by label");
  rc = sim_session_open(res->model_spec, res->libc_spec, kcfg, &session, err);
  if (rc != AS_OK) {
    trace_source_close(src);
    return rc;
  }
  as_format_fits(res->model, sizeof res->model, "%s", session.model_desc);
  sim_engine_config_t cfg = {.sample_every_ns = 0,
                             .lenient = true,
                             .on_sample = on_sample,
                             .user = sim};
  sim_run_result_t    r;
  watch_src_t         w = {.base = *src, .inner = src, .log = sim};
  w.base.methods = &watch_methods;
  rc = sim_engine_run(&cfg, &session, &w.base, &r, err);
  if (rc == AS_OK) {
    res->skipped_events =
        r.skipped_bad_free + r.skipped_bad_realloc + r.skipped_double_alloc;
  }
  sim_session_close(&session);
  trace_source_close(src);
  return rc;
}

/* ---- Entry point
 * -------------------------------------------------------------- */

void compare_result_free(compare_result_t *res) {
  free(res->marks);
  free(res->points);
  res->marks = NULL;
  res->nmarks = 0;
  res->points = NULL;
  res->npoints = 0;
}

as_status_t compare_run(store_t *s, int64_t run_id, const compare_opts_t *o,
                        compare_result_t *res, as_err_t *err) {
  memset(res, 0, sizeof *res);
  res->measured_run_id = run_id;
  store_run_record_t rec;
  run_meta_t         meta = {0};
  store_sample_t    *ms = NULL;
  size_t             nms = 0;
  simlog_t           sim = {0};
  double            *xs = NULL, *ys = NULL;
  size_t            *pair = NULL;
  int64_t           *pred = NULL;     /* [k * nms + i]: layout k, sample i */
  bool              *has = NULL;      /* pred[k * nms + i] is defined */
  uint64_t          *ts = NULL;       /* the series' times */
  double            *ys_alloc = NULL; /* predicted + other growth */
  /* [k * nms + i]: the model's own memory of the program (owner baseline:
   * libstdc++ text, musl's donated data) grown since the anchor, which a
   * capture measures as other: the allocator view takes it out, so it is
   * not counted twice. */
  int64_t    *own_grown = NULL;
  bool       *rel = NULL;       /* the series' releases after a point */
  bool       *rel_after = NULL; /* by measured sample */
  as_status_t rc = store_read_run(s, run_id, &rec, err);
  if (rc != AS_OK)
    return rc;
  if (strcmp(rec.kind, "measured") != 0) {
    rc = as_err_set(err, AS_EINVAL, "%s: run %" PRId64 " is %s, not measured",
                    store_path(s), run_id, rec.kind);
    goto done;
  }
  if ((rc = run_meta_read(s, run_id, &meta, err)) != AS_OK ||
      (rc = store_read_samples(s, run_id, &ms, &nms, err)) != AS_OK)
    goto done;

  /* Model and libc: the caller's, else the run's (record_run_specs).  For
   * a run predicted by its libc model alone ("model=glibc" beside
   * "libc=glibc:arena_max=1", as the C labs record it), the libc spec is the
   * model, knobs included, and --libc names the model. */
  char run_model[sizeof res->model_spec];
  if ((rc = record_run_specs(run_meta_get, &meta, o->model, o->libc, run_model,
                             sizeof run_model, res->libc_spec,
                             sizeof res->libc_spec, err)) != AS_OK) {
    char msg[sizeof err->msg];
    as_format_fits(msg, sizeof msg,
                   "%.200s: run %" PRId64 ": provenance: %.300s", store_path(s),
                   run_id, err->msg);
    rc = as_err_set(err, rc, "%s", msg);
    goto done;
  }
  size_t name_len = strcspn(res->libc_spec, ":");
  bool   libc_alone = strcmp(run_model, res->libc_spec) == 0 ||
                    (strlen(run_model) == name_len &&
                     strncmp(run_model, res->libc_spec, name_len) == 0);
  if (o->libc != NULL)
    as_format_fits(res->libc_spec, sizeof res->libc_spec, "%s", o->libc);
  const char *model = o->model != NULL ? o->model
                      : libc_alone     ? res->libc_spec
                                       : run_model;
  as_format_fits(res->model_spec, sizeof res->model_spec, "%s", model);
  const char *mspec = res->model_spec, *lspec = res->libc_spec;
  char        where[320];
  as_format_fits(where, sizeof where, "%.200s: run %" PRId64, store_path(s),
                 run_id);
  if ((o->model != NULL || o->libc != NULL) &&
      (rc = record_specs_with_facts(run_meta_get, &meta, where, &mspec,
                                    res->model_spec, sizeof res->model_spec,
                                    &lspec, res->libc_spec,
                                    sizeof res->libc_spec, err)) != AS_OK)
    goto done;

  sim_kernel_config_t kcfg;
  sim_kernel_config_default(&kcfg);
  res->page_size = o->page_size ? o->page_size : rec.page_size;
  if (res->page_size != 4096 && res->page_size != 16384 &&
      res->page_size != 65536)
    res->page_size = 4096;
  kcfg.page_size = res->page_size;
  /* Whether the measured machine's kernel maps the zero page on a read
   * fault (capture and oracle record it: traces/machine.h). */
  const char *zp = run_meta_get(&meta, "zero_page");
  kcfg.zero_page =
      !o->no_zero_page && !(zp != NULL && strcmp(zp, "false") == 0);
  res->zero_page = kcfg.zero_page;
  /* The measured machine's THP mode (provenance thp, machine.h); without
   * it the default, madvise (Debian's and Ubuntu's). */
  sim_kernel_config_set_thp(&kcfg, run_meta_get(&meta, "thp"));
  as_format_fits(res->thp, sizeof res->thp, "%s",
                 sim_thp_mode_name(sim_kernel_config_thp_mode(&kcfg)));
  /* The measured process's initial break, when its provenance has it
   * (start_brk, from /proc/self/stat): the heap then starts where it did,
   * which decides which 2 GiB stretches tcmalloc's pagemap covers. */
  const char *own = run_meta_get(&meta, "own_malloc");
  as_format_fits(res->own_malloc, sizeof res->own_malloc, "%s",
                 own != NULL ? own : "");
  const char *python = run_meta_get(&meta, "python");
  res->python = python != NULL && *python != '\0';
  const char *cut = run_meta_get(&meta, "truncated");
  const char *capture_end = run_meta_get(&meta, "capture_end");
  if (cut != NULL && strcmp(cut, "1") == 0)
    as_format_fits(res->truncated, sizeof res->truncated, "%s",
                   capture_end != NULL && strcmp(capture_end, "complete") != 0
                       ? capture_end
                       : "the trace ends early");
  const char *sb = run_meta_get(&meta, "start_brk");
  if (sb != NULL) {
    char              *end;
    unsigned long long v = strtoull(sb, &end, 10);
    if (*end == '\0' && v > 0 && v < kcfg.mmap_top)
      kcfg.brk_start = v;
  }
  /* The measured machine's CLOCK_MONOTONIC at t = 0 (oracle runs record
   * it): mimalloc's millisecond clock then ticks where it did. */
  const char *co = run_meta_get(&meta, "clock_origin_ns");
  if (co != NULL) {
    char              *end;
    unsigned long long v = strtoull(co, &end, 10);
    if (*end == '\0')
      kcfg.clock_origin_ns = v;
  }
  /* The measured kernel's placement of large anonymous mappings (Linux
   * 6.7+ aligns them to 2 MiB), from its release (provenance kernel). */
  const char *release =
      o->kernel != NULL ? o->kernel : run_meta_get(&meta, "kernel");
  sim_kernel_config_set_release(&kcfg, release);
  as_format_fits(res->kernel, sizeof res->kernel, "%s",
                 release != NULL ? release : "");
  res->thp_align = kcfg.thp_align;
  /* Where the measured process's next anonymous mapping would have ended
   * (mmap_top, probed by the recorder): mappings then sit where they did
   * modulo 2 MiB, which decides, with THP, which blocks fault in whole. */
  const char *mt = run_meta_get(&meta, "mmap_top");
  if (mt != NULL) {
    char              *end;
    unsigned long long v = strtoull(mt, &end, 10);
    if (*end == '\0' && v % 4096 == 0 && v > kcfg.brk_start &&
        v < UINT64_C(1) << SIM_KERNEL_TASK_SIZE_BITS)
      kcfg.mmap_top = res->mmap_top = v;
  }

  /* Specs the run's provenance holds wrong (neither --model nor --libc
   * given) are a bad input naming the store and run, not a usage error. */
  if (o->model == NULL && o->libc == NULL) {
    sim_session_t probe;
    rc = sim_session_open(res->model_spec, res->libc_spec, &kcfg, &probe, err);
    if (rc == AS_OK)
      sim_session_close(&probe);
    else if (rc == AS_EUSAGE) {
      char msg[sizeof err->msg];
      as_format_fits(msg, sizeof msg,
                     "%.200s: run %" PRId64
                     ": provenance model '%.80s': %.200s",
                     store_path(s), run_id, res->model_spec, err->msg);
      rc = as_err_set(err, AS_EFORMAT, "%s", msg);
    }
    if (rc != AS_OK)
      goto done;
  }

  /* Layouts: mmap_top lowered by 0, 1, ... OS pages, distinct modulo the
   * pool (compare.h). */
  uint64_t most = COMPARE_LAYOUT_SPAN_BYTES / res->page_size;
  if (most < 1)
    most = 1;
  /* A measured mmap top is the layout, unless CPython ran: the extension
   * modules it loads map between its arenas, by amounts the trace does
   * not show, so the layouts below it are as likely. */
  if (res->mmap_top != 0 && run_meta_get(&meta, "python") == NULL)
    most = 1;
  unsigned nlayouts = o->layouts ? o->layouts : (unsigned)most;
  if (nlayouts > most) {
    rc = as_err_set(err, AS_EINVAL,
                    "%u layouts asked for, but with %" PRIu64 "-byte OS "
                    "pages only %" PRIu64 " differ modulo the %d-byte "
                    "pymalloc pool",
                    nlayouts, res->page_size, most, COMPARE_LAYOUT_SPAN_BYTES);
    goto done;
  }
  res->nlayouts = nlayouts;

  for (size_t i = 0; i < nms; i++)
    if (ms[i].measured_rss_bytes > res->peak_measured_rss_bytes)
      res->peak_measured_rss_bytes = ms[i].measured_rss_bytes;
  size_t cells = (nms ? nms : 1) * nlayouts;
  pair = malloc((nms ? nms : 1) * sizeof *pair);
  ts = malloc((nms ? nms : 1) * sizeof *ts);
  ys_alloc = malloc((nms ? nms : 1) * sizeof *ys_alloc);
  rel = malloc((nms ? nms : 1) * sizeof *rel);
  rel_after = malloc((nms ? nms : 1) * sizeof *rel_after);
  pred = calloc(cells, sizeof *pred);
  has = calloc(cells, sizeof *has);
  own_grown = calloc(cells, sizeof *own_grown);
  xs = malloc((nms ? nms : 1) * sizeof *xs);
  ys = malloc((nms ? nms : 1) * sizeof *ys);
  if (pair == NULL || pred == NULL || has == NULL || xs == NULL || ys == NULL ||
      ts == NULL || rel == NULL || rel_after == NULL || ys_alloc == NULL ||
      own_grown == NULL) {
    rc = as_err_set(err, AS_ENOMEM, "out of memory");
    goto done;
  }

  size_t anchor = SIZE_MAX;
  for (unsigned k = 0; k < nlayouts; k++) {
    compare_layout_t   *lay = &res->layouts[k];
    sim_kernel_config_t kc = kcfg;
    bool                is_trace;
    lay->mmap_offset_bytes = k * res->page_size;
    if ((rc = sim_kernel_config_offset_layout(&kc, lay->mmap_offset_bytes,
                                              err)) != AS_OK ||
        (rc = replay(s, &rec, &meta, &kc, res, &sim, &is_trace, err)) != AS_OK)
      goto done;
    if (sim.n == 0) {
      rc = as_err_set(err, AS_EINVAL,
                      "run %" PRId64 ": the replay produced no "
                      "samples",
                      run_id);
      goto done;
    }

    /* Pair measured samples with simulated ones. */
    pair_samples(ms, nms, sim.v, sim.n, is_trace, pair);
    size_t a = find_anchor(ms, nms, pair);
    if (a == SIZE_MAX) {
      rc = as_err_set(err, AS_EINVAL,
                      "run %" PRId64 ": no measured sample lines up with the "
                      "replay (%s)",
                      run_id, res->alignment);
      goto done;
    }
    if (k == 0) {
      anchor = a;
      as_format_fits(res->anchor_label, sizeof res->anchor_label, "%s",
                     ms[a].kind == SIM_SAMPLE_MARK ? ms[a].label : "");
      res->anchor_t_ns = ms[a].t_ns;
    } else if (a != anchor) {
      /* Samples and marks come from the trace, not the layout, so this
       * would be an engine bug; refuse rather than mix two baselines. */
      rc = as_err_set(err, AS_EINVAL,
                      "run %" PRId64 ": layout %u (mmap_top -%" PRIu64
                      ") anchors at sample %zu, layout 0 at %zu",
                      run_id, k, lay->mmap_offset_bytes, a, anchor);
      goto done;
    }
    lay->offset_bytes =
        (int64_t)ms[a].measured_rss_bytes - (int64_t)sim.v[pair[a]].rss_bytes;

    /* This layout's predictions, and its own statistics. */
    size_t npts = 0;
    if (k == 0)
      releases_between(&sim, pair, nms, rel_after);
    for (size_t i = 0; i < nms; i++) {
      if (pair[i] == SIZE_MAX)
        continue;
      int64_t p = (int64_t)sim.v[pair[i]].rss_bytes + lay->offset_bytes;
      pred[k * nms + i] = p;
      has[k * nms + i] = true;
      own_grown[k * nms + i] =
          (int64_t)sim.v[pair[i]].owner_bytes[SIM_OWNER_BASELINE] -
          (int64_t)sim.v[pair[a]].owner_bytes[SIM_OWNER_BASELINE];
      if (i >= anchor) {
        xs[npts] = (double)ms[i].measured_rss_bytes;
        ys[npts] = (double)p;
        ts[npts] = ms[i].t_ns;
        rel[npts] = rel_after[i];
        npts++;
      }
    }
    compare_series_stats(xs, ys, ts, rel, npts, &lay->series);
    if (o->store && (rc = store_comparison(s, res, k, &sim, o, err)) != AS_OK)
      goto done;
    sim.n = 0; /* the next layout reuses the buffer */
  }
  res->simulated_run_id = res->layouts[0].simulated_run_id;
  res->comparison_id = res->layouts[0].comparison_id;
  double offset_sum = 0;
  for (unsigned k = 0; k < nlayouts; k++)
    offset_sum += (double)res->layouts[k].offset_bytes;
  double offset_mean = offset_sum / nlayouts;
  res->offset_bytes = (int64_t)llround(offset_mean);

  /* Marks and the series, from the mean over layouts. */
  size_t nmarks = 0;
  for (size_t i = 0; i < nms; i++)
    nmarks += ms[i].kind == SIM_SAMPLE_MARK;
  res->marks = calloc(nmarks ? nmarks : 1, sizeof *res->marks);
  res->points = calloc(nms ? nms : 1, sizeof *res->points);
  if (res->marks == NULL || res->points == NULL) {
    rc = as_err_set(err, AS_ENOMEM, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < nms; i++)
    res->has_other =
        res->has_other || ms[i].owner_bytes[SIM_OWNER_BASELINE] != 0;
  res->anchor_measured_rss_bytes = ms[anchor].measured_rss_bytes;
  uint64_t peak_from_anchor = 0;
  for (size_t i = anchor; i < nms; i++)
    if (ms[i].measured_rss_bytes > peak_from_anchor) {
      peak_from_anchor = ms[i].measured_rss_bytes;
      res->peak_other_growth_bytes = other_growth(ms, i, anchor);
    }
  size_t npts = 0; /* the series starts at the anchor */
  double peak =
      res->peak_measured_rss_bytes ? (double)res->peak_measured_rss_bytes : 1.0;
  for (size_t i = 0; i < nms; i++) {
    unsigned n = 0;
    double   sum = 0, own_sum = 0;
    int64_t  lo = INT64_MAX, hi = INT64_MIN;
    for (unsigned k = 0; k < nlayouts; k++) {
      if (!has[k * nms + i])
        continue;
      int64_t p = pred[k * nms + i];
      n++;
      sum += (double)p;
      own_sum += (double)own_grown[k * nms + i];
      lo = p < lo ? p : lo;
      hi = p > hi ? p : hi;
    }
    bool   all = n == nlayouts; /* a sample is predicted by all or none */
    double mean = all ? sum / nlayouts : 0;
    /* What the allocator view adds: other growth measured, less the model's
     * own share of it. */
    double other_net =
        all ? (double)other_growth(ms, i, anchor) - own_sum / nlayouts : 0;
    if (ms[i].kind == SIM_SAMPLE_MARK) {
      compare_mark_t *mk = &res->marks[res->nmarks++];
      as_format_fits(mk->label, sizeof mk->label, "%s", ms[i].label);
      mk->t_ns = ms[i].t_ns;
      mk->measured_rss_bytes = ms[i].measured_rss_bytes;
      if (all) {
        mk->layouts = nlayouts;
        mk->predicted_rss_bytes = (int64_t)llround(mean);
        mk->simulated_rss_bytes = (uint64_t)llround(mean - offset_mean);
        mk->predicted_min_rss_bytes = lo;
        mk->predicted_max_rss_bytes = hi;
        for (unsigned k = 0; k < nlayouts; k++)
          mk->predicted_by_layout[k] = pred[k * nms + i];
        mk->error_bytes =
            mk->predicted_rss_bytes - (int64_t)ms[i].measured_rss_bytes;
        mk->error_pct_of_peak = 100.0 * (double)mk->error_bytes / peak;
        mk->other_growth_bytes = other_growth(ms, i, anchor);
        mk->allocator_error_bytes =
            mk->error_bytes + (int64_t)llround(other_net);
        mk->allocator_error_pct_of_peak =
            100.0 * (double)mk->allocator_error_bytes / peak;
      } else {
        mk->error_pct_of_peak = NAN; /* unmatched or unmeasured */
      }
    }
    if (all && i >= anchor) {
      xs[npts] = (double)ms[i].measured_rss_bytes;
      ys[npts] = mean;
      ys_alloc[npts] = mean + other_net;
      ts[npts] = ms[i].t_ns;
      rel[npts] = rel_after[i];
      npts++;
      res->points[res->npoints++] = (compare_point_t){
          ms[i].t_ns, ms[i].measured_rss_bytes, (int64_t)llround(mean)};
    }
    if (all && ms[i].measured_rss_bytes != 0) {
      res->final_measured_rss_bytes = ms[i].measured_rss_bytes;
      res->final_predicted_rss_bytes = (int64_t)llround(mean);
      res->final_other_growth_bytes = other_growth(ms, i, anchor);
    }
  }
  compare_series_stats(xs, ys, ts, rel, npts, &res->series);
  /* The predicted peak where the measured one was looked for: at the
   * measured samples (the replay's own peak may fall between them). */
  res->peak_predicted_rss_bytes = 0;
  for (size_t i = 0; i < npts; i++)
    if (ys[i] > (double)res->peak_predicted_rss_bytes)
      res->peak_predicted_rss_bytes = (int64_t)llround(ys[i]);
  compare_series_stats(xs, ys_alloc, ts, rel, npts, &res->allocator_series);

done:
  free(xs);
  free(ys);
  free(ts);
  free(ys_alloc);
  free(rel);
  free(rel_after);
  free(pair);
  free(pred);
  free(has);
  free(own_grown);
  simlog_free(&sim);
  free(ms);
  run_meta_free(&meta);
  store_run_record_free(&rec);
  return rc;
}
