/* analysis/sweep.c -- grid sweeps of a workload against a model (see
 * sweep.h for the contract).
 *
 * Sections
 *   Axes and values      parsing --vary, the effective value of an option
 *   Expansion            grid x seeds, workload arguments, early checks
 *   Running a point      session, engine, mark samples, formula
 *   Worker threads       a mutex-protected cursor and completion queue
 *   Storing              sweeps, runs and sweep_points rows
 *
 * Trade-off: workers are threads, not processes.  Every model and the
 * engine keep their state in the session (no mutable globals), so threads
 * share nothing but the read-only config and the points array, and a crash
 * takes the sweep down rather than one point; processes would isolate
 * crashes but need results sent back through pipes.  Sharding across
 * machines is left to running disjoint --vary lists into separate stores.
 */
#include "sweep.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../models/pymalloc.h"
#include "../engine/engine.h"
#include "../sim/units.h"
#include "formula.h"

/* ---- Axes and values ---------------------------------------------------- */

/* Whether a and b name the same option, '_' and '-' being the same. */
static bool same_name(const char *a, const char *b) {
  for (; *a && *b; a++, b++) {
    char x = *a == '_' ? '-' : *a, y = *b == '_' ? '-' : *b;
    if (x != y)
      return false;
  }
  return *a == *b;
}

static bool is_page_size(const char *name) {
  return same_name(name, "page_size");
}

static bool is_mmap_offset(const char *name) {
  return same_name(name, "mmap_offset");
}

/* Axes that configure the kernel rather than the workload. */
static bool is_kernel_axis(const char *name) {
  return is_page_size(name) || is_mmap_offset(name);
}

static bool parse_mmap_offset(const char *v, uint64_t *out) {
  char *end;
  errno                = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || *end || end == v || v[0] == '-' || x % 4096 != 0 ||
      x >= (UINT64_C(1) << 30))
    return false;
  *out = x;
  return true;
}

static const workload_option_t *find_option(const workload_def_t *wl,
                                            const char *name) {
  for (const workload_option_t *o = wl->options; o->name; o++)
    if (same_name(o->name, name))
      return o;
  return NULL;
}

void sweep_axis_free(sweep_axis_t *a) {
  for (size_t i = 0; i < a->count; i++)
    free(a->values[i]);
  free(a->values);
  memset(a, 0, sizeof *a);
}


as_status_t sweep_axis_parse(const workload_def_t *wl, const char *spec,
                             sweep_axis_t *out, as_err_t *err) {
  memset(out, 0, sizeof *out);
  const char *eq = strchr(spec, '=');
  if (eq == NULL || eq == spec || eq[1] == '\0')
    return as_err_set(err, AS_EUSAGE,
                      "--vary expects NAME=V1,V2,... such as "
                      "fraction=1e-5,1e-4, got '%s'",
                      spec);
  size_t nlen = (size_t)(eq - spec);
  if (nlen >= sizeof out->name)
    return as_err_set(err, AS_EUSAGE, "--vary: name too long in '%s'", spec);
  memcpy(out->name, spec, nlen);
  out->name[nlen] = '\0';
  const workload_option_t *opt = find_option(wl, out->name);
  if (!is_kernel_axis(out->name) && opt == NULL) {
    char known[512];
    size_t used = (size_t)snprintf(known, sizeof known, "page_size, mmap_offset");
    for (const workload_option_t *o = wl->options; o->name; o++)
      if (strcmp(o->name, "seed") != 0 && used < sizeof known)
        used += (size_t)snprintf(known + used, sizeof known - used, ", %s",
                                 o->name);
    as_err_set(err, AS_EUSAGE, "--vary: %s has no parameter '%s' (known: %s)",
               wl->name, out->name, known);
    memset(out, 0, sizeof *out);
    return AS_EUSAGE;
  }
  if (opt != NULL && strcmp(opt->name, "seed") == 0)
    return as_err_set(err, AS_EUSAGE,
                      "--vary: vary seeds with --seeds N, not --vary seed");
  if (opt != NULL)
    snprintf(out->name, sizeof out->name, "%s", opt->name);
  else
    snprintf(out->name, sizeof out->name, "%s",
             is_page_size(out->name) ? "page_size" : "mmap_offset");

  size_t n = 1;
  for (const char *c = eq + 1; *c; c++)
    n += *c == ',';
  out->values = calloc(n, sizeof *out->values);
  if (out->values == NULL)
    return as_err_set(err, AS_ENOMEM, "--vary: out of memory");
  const char *v = eq + 1;
  for (size_t i = 0; i < n; i++) {
    const char *comma = strchr(v, ',');
    size_t      vlen  = comma ? (size_t)(comma - v) : strlen(v);
    uint64_t    ps;
    if (vlen == 0) {
      as_err_set(err, AS_EUSAGE, "--vary %s: empty value in '%s'", out->name,
                 spec);
      goto fail;
    }
    if ((out->values[i] = strndup(v, vlen)) == NULL) {
      as_err_set(err, AS_ENOMEM, "--vary: out of memory");
      goto fail;
    }
    out->count++;
    if (is_page_size(out->name) && !as_parse_page_size(out->values[i], &ps)) {
      as_err_set(err, AS_EUSAGE,
                 "--vary page_size expects 4096, 16384 or 65536 (4K, 16K, "
                 "64K), got '%s'",
                 out->values[i]);
      goto fail;
    }
    if (is_mmap_offset(out->name) && !parse_mmap_offset(out->values[i], &ps)) {
      as_err_set(err, AS_EUSAGE,
                 "--vary mmap_offset expects a multiple of 4096 below 1 GiB, "
                 "got '%s'",
                 out->values[i]);
      goto fail;
    }
    v = comma ? comma + 1 : v + vlen;
  }
  return AS_OK;
fail:
  sweep_axis_free(out);
  return err ? err->code : AS_EUSAGE;
}

/* The value option name takes at point p: its axis, a fixed value, else
 * the workload's default (NULL if required and not given). */
static const char *effective(const sweep_config_t *c, const sweep_point_t *p,
                             const char *name) {
  for (size_t a = 0; a < c->naxes; a++)
    if (same_name(c->axes[a].name, name))
      return p->values[a];
  for (size_t f = 0; f < c->nfixed; f++)
    if (same_name(c->fixed_name[f], name))
      return c->fixed_value[f];
  const workload_option_t *o = find_option(c->workload, name);
  return o ? o->default_value : NULL;
}

bool sweep_point_mark(const sweep_point_t *p, const char *label,
                      uint64_t *rss_bytes) {
  for (size_t i = 0; i < p->nmarks; i++)
    if (strcmp(p->marks[i].label, label) == 0) {
      *rss_bytes = p->marks[i].rss_bytes;
      return true;
    }
  return false;
}

/* ---- Expansion ---------------------------------------------------------- */

static bool is_survivors(const sweep_config_t *c) {
  return strcmp(c->workload->name, "survivors") == 0;
}

/* Whether point p takes a seed: the workload has --seed, and for survivors
 * only the random pattern uses it. */
static bool seeded(const sweep_config_t *c, const sweep_point_t *p) {
  if (find_option(c->workload, "seed") == NULL)
    return false;
  for (size_t f = 0; f < c->nfixed; f++)
    if (same_name(c->fixed_name[f], "seed"))
      return false; /* the user fixed it */
  if (is_survivors(c)) {
    const char *pat = effective(c, p, "pattern");
    return pat != NULL && strcmp(pat, "random") == 0;
  }
  return true;
}

/* Builds p->args and the argv that opens the workload (pointing into
 * storage, which must hold 2 * SWEEP_MAX_FIXED + 2 * SWEEP_MAX_AXES + 2
 * entries of 128 bytes). */
static int point_argv(const sweep_config_t *c, const sweep_point_t *p,
                      char storage[][128], char **argv) {
  int argc = 0;
  for (const workload_option_t *o = c->workload->options; o->name; o++) {
    const char *v = NULL;
    for (size_t a = 0; a < c->naxes; a++)
      if (same_name(c->axes[a].name, o->name))
        v = p->values[a];
    for (size_t f = 0; v == NULL && f < c->nfixed; f++)
      if (same_name(c->fixed_name[f], o->name))
        v = c->fixed_value[f];
    char seedbuf[32];
    if (v == NULL && strcmp(o->name, "seed") == 0 && p->seed != 0) {
      snprintf(seedbuf, sizeof seedbuf, "%" PRIu64, p->seed);
      v = seedbuf;
    }
    if (v == NULL)
      continue;
    snprintf(storage[argc], 128, "--%s", o->name);
    argv[argc] = storage[argc];
    argc++;
    snprintf(storage[argc], 128, "%s", v);
    argv[argc] = storage[argc];
    argc++;
  }
  return argc;
}

static void point_args_text(sweep_point_t *p, int argc, char **argv) {
  size_t used = 0;
  p->args[0]  = '\0';
  for (int i = 0; i < argc && used < sizeof p->args; i++)
    used += (size_t)snprintf(p->args + used, sizeof p->args - used, "%s%s",
                             i ? " " : "", argv[i]);
}

#define ARGV_MAX (2 * SWEEP_MAX_FIXED + 2 * SWEEP_MAX_AXES + 2)

as_status_t sweep_expand(const sweep_config_t *c, sweep_point_t **out,
                         size_t *count, as_err_t *err) {
  *out   = NULL;
  *count = 0;
  size_t grid = 1;
  for (size_t a = 0; a < c->naxes; a++) {
    if (c->axes[a].count == 0 || grid > SIZE_MAX / c->axes[a].count)
      return as_err_set(err, AS_EUSAGE, "sweep: axis %s is empty or too big",
                        c->axes[a].name);
    grid *= c->axes[a].count;
  }
  unsigned seeds = c->seeds ? c->seeds : 1;
  if (grid > 1000000 / seeds)
    return as_err_set(err, AS_EUSAGE,
                      "sweep: %zu grid points x %u seeds is more than a "
                      "million runs",
                      grid, seeds);
  sweep_point_t *pts = calloc(grid * seeds, sizeof *pts);
  if (pts == NULL)
    return as_err_set(err, AS_ENOMEM, "sweep: out of memory");
  size_t n = 0;
  for (size_t g = 0; g < grid; g++) {
    sweep_point_t base = {0};
    base.point         = g;
    base.page_size     = c->kernel.page_size;
    size_t rest        = g;
    for (size_t a = c->naxes; a-- > 0;) {
      base.values[a] = c->axes[a].values[rest % c->axes[a].count];
      rest /= c->axes[a].count;
      if (is_page_size(c->axes[a].name))
        as_parse_page_size(base.values[a], &base.page_size);
      if (is_mmap_offset(c->axes[a].name))
        parse_mmap_offset(base.values[a], &base.mmap_offset);
    }
    unsigned ns = seeded(c, &base) ? seeds : 1;
    for (unsigned s = 0; s < ns; s++) {
      sweep_point_t *p = &pts[n++];
      *p               = base;
      p->seed          = seeded(c, &base) ? s + 1 : 0;
      char  storage[ARGV_MAX][128];
      char *argv[ARGV_MAX];
      int   argc = point_argv(c, p, storage, argv);
      point_args_text(p, argc, argv);
      if (s == 0) {
        /* Open the workload once per grid point: bad values fail now. */
        trace_source_t *src;
        as_status_t     rc =
            workload_open_argv(c->workload, argc, argv, &src, err);
        if (rc != AS_OK) {
          free(pts);
          return rc;
        }
        trace_source_close(src);
      }
    }
  }
  *out   = pts;
  *count = n;
  return AS_OK;
}

/* ---- Running a point ---------------------------------------------------- */

typedef struct run_ctx_s {
  sweep_point_t *p;
  sim_session_t *s;
} run_ctx_t;

/* Counter name of *model, or -1 when the model has no such counter. */
static int64_t counter_or_none(const model_t *m, const char *name) {
  uint64_t v;
  return model_counter_get(m, name, &v) ? (int64_t)v : -1;
}

static as_status_t on_sample(void *user, const sim_sample_t *smp,
                             as_err_t *err) {
  (void)err;
  run_ctx_t     *ctx = user;
  sweep_point_t *p   = ctx->p;
  if (smp->kind != SIM_SAMPLE_MARK && smp->kind != SIM_SAMPLE_FINAL)
    return AS_OK;
  if (p->nsamples < sizeof p->samples / sizeof p->samples[0])
    store_sample_from_sim(&p->samples[p->nsamples++], smp);
  if (smp->kind == SIM_SAMPLE_MARK && p->nmarks < SWEEP_MAX_MARKS) {
    sweep_mark_t *mk = &p->marks[p->nmarks++];
    snprintf(mk->label, sizeof mk->label, "%s", smp->label ? smp->label : "");
    mk->rss_bytes = smp->rss_bytes;
    const model_t *m = ctx->s->model;
    if (strcmp(mk->label, "after") == 0)
      p->arenas_pinned = counter_or_none(m, "pymalloc.arenas_pinned");
    if (strcmp(mk->label, "peak") == 0) {
      p->arenas_peak    = counter_or_none(m, "pymalloc.arenas");
      p->unaligned_peak = counter_or_none(m, "pymalloc.arenas_unaligned");
    }
  }
  return AS_OK;
}

/* The formula for a survivors point, if the workload is survivors and the
 * model's unit is one the formula knows. */
static void point_formula(const sweep_config_t *c, sweep_point_t *p,
                          uint64_t page_bytes) {
  if (!is_survivors(c))
    return;
  formula_input_t in = {0};
  const char     *pat = effective(c, p, "pattern");
  char           *end;
  in.size_bytes       = strtoull(effective(c, p, "size"), &end, 10);
  in.total_bytes =
      (uint64_t)(strtod(effective(c, p, "total"), &end) * 1048576.0);
  in.fraction = strtod(effective(c, p, "fraction"), &end);
  in.every    = strtoull(effective(c, p, "every"), &end, 10);
  if (pat == NULL || !survivors_pattern_parse(pat, &in.pattern))
    return;
  /* mmap returns 16 KiB-aligned arenas only with OS pages >= 16 KiB. */
  in.arena_aligned = p->page_size >= PYMALLOC_POOL_SIZE;
  in.page_bytes = page_bytes; /* the model's formula unit (model.h) */
  formula_result_t r;
  if (formula_survivors(&in, &r, NULL) == AS_OK) {
    p->have_formula       = true;
    p->formula_kept_bytes = r.kept_bytes;
    p->formula_sd_bytes   = r.sd_bytes;
  }
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

as_status_t sweep_run_point(const sweep_config_t *c, sweep_point_t *p,
                            as_err_t *err) {
  as_err_t local = {0};
  if (err == NULL)
    err = &local;
  p->nmarks = p->nsamples = 0;
  p->arenas_pinned = p->arenas_peak = p->unaligned_peak = -1;
  p->have_kept = p->have_formula = false;
  p->error[0]                    = '\0';
  char  storage[ARGV_MAX][128];
  char *argv[ARGV_MAX];
  int   argc = point_argv(c, p, storage, argv);

  sim_kernel_config_t kcfg = c->kernel;
  kcfg.page_size           = p->page_size;
  trace_source_t  *src     = NULL;
  sim_session_t    sess;
  bool             have_session = false;
  sim_run_result_t res          = {0};
  double           t0           = now_seconds();
  /* The same layout rule as `compare --layouts` (sim/kernel.h). */
  as_status_t rc = sim_kernel_config_offset_layout(&kcfg, p->mmap_offset, err);
  if (rc == AS_OK)
    rc = workload_open_argv(c->workload, argc, argv, &src, err);
  if (rc == AS_OK) {
    rc = sim_session_open(c->model, c->libc, &kcfg, &sess, err);
    have_session = rc == AS_OK;
  }
  uint64_t page_bytes = 0;
  if (rc == AS_OK) {
    page_bytes = sess.model->methods->formula_page_bytes;
    snprintf(p->model_desc, sizeof p->model_desc, "%s", sess.model_desc);
    run_ctx_t           ctx = {.p = p, .s = &sess};
    sim_engine_config_t ecfg = {.on_sample = on_sample, .user = &ctx};
    rc = sim_engine_run(&ecfg, &sess, src, &res, err);
  }
  p->seconds        = now_seconds() - t0;
  p->events         = res.events;
  p->peak_rss_bytes = res.peak_rss_bytes;
  if (have_session)
    sim_session_close(&sess);
  trace_source_close(src);
  p->status = rc;
  if (rc != AS_OK) {
    snprintf(p->error, sizeof p->error, "%s", err->msg);
    return rc;
  }
  uint64_t start, after;
  if (sweep_point_mark(p, "start", &start) &&
      sweep_point_mark(p, "after", &after)) {
    p->have_kept  = true;
    p->kept_bytes = (int64_t)after - (int64_t)start;
  }
  point_formula(c, p, page_bytes);
  return AS_OK;
}

/* ---- Worker threads ----------------------------------------------------- */

typedef struct pool_s {
  pthread_mutex_t       mu;
  pthread_cond_t        cv;
  const sweep_config_t *c;
  sweep_point_t        *points;
  size_t                n;
  size_t                next;    /* next point to start */
  size_t               *done;    /* finished indices, in completion order */
  size_t                ndone;   /* entries in done */
  bool                  stop;    /* no new points */
} pool_t;

static void *worker(void *arg) {
  pool_t *pool = arg;
  for (;;) {
    pthread_mutex_lock(&pool->mu);
    size_t i = pool->stop ? pool->n : pool->next;
    if (i < pool->n)
      pool->next++;
    pthread_mutex_unlock(&pool->mu);
    if (i >= pool->n)
      return NULL;
    sweep_run_point(pool->c, &pool->points[i], NULL);
    pthread_mutex_lock(&pool->mu);
    pool->done[pool->ndone++] = i;
    pthread_cond_signal(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
  }
}

as_status_t sweep_run(const sweep_config_t *c, sweep_point_t *points,
                      size_t n, sweep_done_fn done, void *user,
                      as_err_t *err) {
  unsigned jobs = c->jobs;
  if (jobs == 0) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    jobs        = online > 0 ? (unsigned)online : 1;
  }
  if (jobs > n)
    jobs = n ? (unsigned)n : 1;
  as_status_t rc = AS_OK;
  if (jobs <= 1) {
    for (size_t i = 0; i < n && rc == AS_OK; i++) {
      sweep_run_point(c, &points[i], NULL);
      rc = done(user, &points[i], i + 1, n, err);
    }
    return rc;
  }
  pool_t pool = {.c = c, .points = points, .n = n};
  pool.done   = calloc(n, sizeof *pool.done);
  pthread_t *tids = calloc(jobs, sizeof *tids);
  if (pool.done == NULL || tids == NULL) {
    free(pool.done);
    free(tids);
    return as_err_set(err, AS_ENOMEM, "sweep: out of memory");
  }
  pthread_mutex_init(&pool.mu, NULL);
  pthread_cond_init(&pool.cv, NULL);
  unsigned started = 0;
  for (; started < jobs; started++)
    if (pthread_create(&tids[started], NULL, worker, &pool) != 0)
      break;
  if (started == 0) {
    rc = as_err_set(err, AS_ENOMEM, "sweep: cannot start a worker thread");
    pool.stop = true;
  }
  /* Report every point that was started: all n, or after a stop only those
   * already running (pool.next counts starts). */
  size_t reported = 0;
  pthread_mutex_lock(&pool.mu);
  for (;;) {
    size_t expected = pool.stop ? pool.next : n;
    if (reported >= expected)
      break;
    while (reported == pool.ndone)
      pthread_cond_wait(&pool.cv, &pool.mu);
    size_t i = pool.done[reported++];
    pthread_mutex_unlock(&pool.mu);
    as_status_t drc =
        rc == AS_OK ? done(user, &points[i], reported, n, err) : AS_OK;
    pthread_mutex_lock(&pool.mu);
    if (drc != AS_OK) {
      rc        = drc;
      pool.stop = true;
    }
  }
  pthread_mutex_unlock(&pool.mu);
  for (unsigned t = 0; t < started; t++)
    pthread_join(tids[t], NULL);
  pthread_cond_destroy(&pool.cv);
  pthread_mutex_destroy(&pool.mu);
  free(pool.done);
  free(tids);
  return rc;
}

/* ---- Storing ------------------------------------------------------------ */

/* Appends s to buf as a JSON string. */
static size_t json_str(char *buf, size_t len, size_t used, const char *s) {
  if (used < len)
    buf[used] = '"';
  used++;
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    char          esc[8];
    if (ch == '"' || ch == '\\')
      snprintf(esc, sizeof esc, "\\%c", ch);
    else if (ch < 0x20)
      snprintf(esc, sizeof esc, "\\u%04x", ch);
    else
      esc[0] = (char)ch, esc[1] = '\0';
    for (char *e = esc; *e; e++, used++)
      if (used < len)
        buf[used] = *e;
  }
  if (used < len)
    buf[used] = '"';
  used++;
  if (len > 0)
    buf[used < len ? used : len - 1] = '\0';
  return used;
}

/* A value as a JSON number if it reads as a finite one, else a string. */
static size_t json_value(char *buf, size_t len, size_t used, const char *v) {
  char  *end;
  double d = strtod(v, &end);
  if (end != v && *end == '\0' && isfinite(d) && v[0] != '+' &&
      strchr(v, 'x') == NULL && strchr(v, 'X') == NULL)
    return used + (size_t)snprintf(buf + (used < len ? used : len),
                                   used < len ? len - used : 0, "%s", v);
  return json_str(buf, len, used, v);
}

#define APPEND(...)                                                            \
  used += (size_t)snprintf(buf + (used < len ? used : len),                   \
                           used < len ? len - used : 0, __VA_ARGS__)

void sweep_point_json(const sweep_config_t *c, const sweep_point_t *p,
                      char *buf, size_t len) {
  size_t used = 0;
  APPEND("{");
  for (size_t a = 0; a < c->naxes; a++) {
    if (is_kernel_axis(c->axes[a].name))
      continue;
    used = json_str(buf, len, used, c->axes[a].name);
    APPEND(":");
    used = json_value(buf, len, used, p->values[a]);
    APPEND(",");
  }
  APPEND("\"page_size\":%" PRIu64 ",\"mmap_offset\":%" PRIu64
         ",\"seed\":%" PRIu64 ",\"args\":",
         p->page_size, p->mmap_offset, p->seed);
  used = json_str(buf, len, used, p->args);
  if (p->have_formula)
    APPEND(",\"formula_sd_bytes\":%.17g", p->formula_sd_bytes);
  APPEND("}");
}

as_status_t sweep_store_begin(store_t *s, const sweep_config_t *c,
                              int64_t *sweep_id, as_err_t *err) {
  char   buf[8192];
  size_t len = sizeof buf, used = 0;
  APPEND("{\"vary\":{");
  for (size_t a = 0; a < c->naxes; a++) {
    used = json_str(buf, len, used, c->axes[a].name);
    APPEND(":[");
    for (size_t v = 0; v < c->axes[a].count; v++) {
      used = json_value(buf, len, used, c->axes[a].values[v]);
      APPEND(v + 1 < c->axes[a].count ? "," : "");
    }
    APPEND(a + 1 < c->naxes ? "]," : "]");
  }
  APPEND("},\"fixed\":{");
  for (size_t f = 0; f < c->nfixed; f++) {
    used = json_str(buf, len, used, c->fixed_name[f]);
    APPEND(":");
    used = json_value(buf, len, used, c->fixed_value[f]);
    APPEND(f + 1 < c->nfixed ? "," : "");
  }
  APPEND("},\"seeds\":%u,\"model\":", c->seeds ? c->seeds : 1);
  used = json_str(buf, len, used, c->model);
  APPEND(",\"libc\":");
  if (c->libc)
    used = json_str(buf, len, used, c->libc);
  else
    APPEND("null");
  APPEND(",\"page_size\":%" PRIu64 ",\"thp\":%s}", c->kernel.page_size,
         c->kernel.thp ? "true" : "false");
  if (used >= len)
    return as_err_set(err, AS_EINVAL, "sweep: parameters too long to store");

  as_status_t rc = store_begin(s, err);
  if (rc != AS_OK)
    return rc;
  sqlite3      *db   = store_db(s);
  sqlite3_stmt *stmt = NULL;
  int           src  = sqlite3_prepare_v2(
      db, "INSERT INTO sweeps(workload, params) VALUES(?1, ?2)", -1, &stmt,
      NULL);
  if (src == SQLITE_OK) {
    sqlite3_bind_text(stmt, 1, c->workload->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 2, buf, -1, SQLITE_TRANSIENT);
    src = sqlite3_step(stmt) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
  }
  if (src != SQLITE_OK) {
    rc = as_err_set(err, AS_ESTORE, "%s: cannot record the sweep: %s",
                    store_path(s), sqlite3_errmsg(db));
    sqlite3_finalize(stmt);
    store_rollback(s);
    return rc;
  }
  *sweep_id = sqlite3_last_insert_rowid(db);
  sqlite3_finalize(stmt);
  return store_commit(s, err);
}

as_status_t sweep_store_point(store_t *s, int64_t sweep_id,
                              const sweep_config_t *c, const sweep_point_t *p,
                              as_err_t *err) {
  char params[2048];
  sweep_point_json(c, p, params, sizeof params);
  char source[600], sid[32], pt[32], seed[32];
  snprintf(source, sizeof source, "%s %s", c->workload->name, p->args);
  snprintf(sid, sizeof sid, "%" PRId64, sweep_id);
  snprintf(pt, sizeof pt, "%" PRIu64, p->point);
  snprintf(seed, sizeof seed, "%" PRIu64, p->seed);
  int64_t    run_id = 0;
  bool       have_run = false;
  as_status_t rc;
  if (p->status == AS_OK) {
    store_kv_t  meta[] = {{"sweep_id", sid},
                          {"sweep_point", pt},
                          {"sweep_seed", seed},
                          {"workload", source}};
    store_run_t run    = {.kind       = "simulated",
                          .model      = p->model_desc,
                          .options    = c->libc,
                          .page_size  = p->page_size,
                          .source     = source,
                          .command    = c->command ? c->command : "sweep",
                          .meta       = meta,
                          .meta_count = sizeof meta / sizeof meta[0]};
    rc = store_write_run(s, &run, p->samples, p->nsamples, &run_id, err);
    if (rc != AS_OK)
      return rc;
    have_run = true;
  }
  if ((rc = store_begin(s, err)) != AS_OK)
    return rc;
  sqlite3      *db   = store_db(s);
  sqlite3_stmt *stmt = NULL;
  int           src  = sqlite3_prepare_v2(
      db,
      "INSERT INTO sweep_points(sweep_id, point, seed, params_json, model, "
      "page_size, simulated_kept_bytes, formula_kept_bytes, arenas_pinned, "
      "run_id) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
      -1, &stmt, NULL);
  if (src == SQLITE_OK) {
    sqlite3_bind_int64(stmt, 1, sweep_id);
    sqlite3_bind_int64(stmt, 2, (sqlite3_int64)p->point);
    sqlite3_bind_int64(stmt, 3, (sqlite3_int64)p->seed);
    sqlite3_bind_text(stmt, 4, params, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt, 5, p->model_desc[0] ? p->model_desc : c->model,
                      -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(stmt, 6, (sqlite3_int64)p->page_size);
    if (p->status == AS_OK && p->have_kept)
      sqlite3_bind_int64(stmt, 7, p->kept_bytes);
    else
      sqlite3_bind_null(stmt, 7);
    if (p->have_formula)
      sqlite3_bind_double(stmt, 8, p->formula_kept_bytes);
    else
      sqlite3_bind_null(stmt, 8);
    if (p->status == AS_OK && p->arenas_pinned >= 0)
      sqlite3_bind_int64(stmt, 9, p->arenas_pinned);
    else
      sqlite3_bind_null(stmt, 9);
    if (have_run)
      sqlite3_bind_int64(stmt, 10, run_id);
    else
      sqlite3_bind_null(stmt, 10);
    src = sqlite3_step(stmt) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
  }
  if (src != SQLITE_OK) {
    rc = as_err_set(err, AS_ESTORE, "%s: cannot record sweep point %" PRIu64
                                    ": %s",
                    store_path(s), p->point, sqlite3_errmsg(db));
    sqlite3_finalize(stmt);
    store_rollback(s);
    return rc;
  }
  sqlite3_finalize(stmt);
  return store_commit(s, err);
}
