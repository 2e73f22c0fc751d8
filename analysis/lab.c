/* analysis/lab.c -- running a lab (analysis/lab.h): each variant replayed
 * once, its marks of interest turned into steps with their counters and
 * heap map, and a measured run attached by mark label. */
#include "lab.h"

#include <inttypes.h>
#include <stdio.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/cost.h"
#include "../sim/reserve.h"
#include "../sim/grow.h"
#include "../traces/trace_io.h"
#include "../traces/workload.h"

/* ---- The table ---------------------------------------------------------- */

size_t lab_variant_count(const lab_def_t *def) {
  size_t n = 0;
  while (n < LAB_MAX_VARIANTS && def->variants[n].label != NULL)
    n++;
  return n;
}

const lab_def_t *lab_find(const char *name) {
  size_t                  n;
  const lab_def_t *const *labs = lab_registry(&n);
  for (size_t i = 0; i < n; i++)
    if (strcmp(labs[i]->name, name) == 0)
      return labs[i];
  return NULL;
}

/* Whether the model named by spec (up to ':') is registered; its name goes
 * to name. */
static bool spec_registered(const char *spec, char *name, size_t len) {
  model_spec_name(spec, name, len);
  return model_find(name) != NULL;
}

bool lab_variant_runnable(const lab_variant_t *v, char *missing, size_t len) {
  if (!spec_registered(v->model, missing, len))
    return false;
  if (v->libc != NULL && !spec_registered(v->libc, missing, len))
    return false;
  if (v->preload != NULL && model_find(v->preload) == NULL) {
    snprintf(missing, len, "%s", v->preload);
    return false;
  }
  missing[0] = '\0';
  return true;
}

size_t lab_missing_models(const lab_def_t *def, char *buf, size_t len) {
  size_t n = 0, used = 0;
  buf[0] = '\0';
  for (size_t i = 0; def->models[i] != NULL; i++)
    if (model_find(def->models[i]) == NULL) {
      int w = snprintf(buf + used, len - used, "%s%s", n ? ", " : "",
                       def->models[i]);
      if (w > 0 && (size_t)w < len - used)
        used += (size_t)w;
      n++;
    }
  return n;
}

/* ---- Ladders ------------------------------------------------------------ */

/* Appends (request, usable) when usable differs from the last rung's. */
static as_status_t ladder_add(lab_ladder_t *l, uint64_t request,
                              uint64_t usable, as_err_t *err) {
  if (l->n > 0 && l->rung[l->n - 1].usable == usable)
    return AS_OK;
  if (l->n > 0 && request <= l->rung[l->n - 1].request)
    return as_err_set(err, AS_EINVAL,
                      "ladder: request %" PRIu64 " after %" PRIu64
                      " (requests must ascend)",
                      request, l->rung[l->n - 1].request);
  lab_rung_t *r = as_grow(l->rung, &l->cap, l->n + 1, sizeof *r, 256);
  if (r == NULL)
    return as_err_set(err, AS_ENOMEM, "ladder: out of memory");
  l->rung = r;
  l->rung[l->n++] = (lab_rung_t){request, usable};
  return AS_OK;
}

uint64_t lab_ladder_usable(const lab_ladder_t *l, uint64_t request) {
  if (l->n == 0 || request < l->rung[0].request || request > LAB_LADDER_MAX)
    return 0;
  size_t lo = 0, hi = l->n; /* the last rung with rung.request <= request */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (l->rung[mid].request <= request)
      lo = mid;
    else
      hi = mid;
  }
  return l->rung[lo].usable;
}

static void ladder_finish(lab_ladder_t *l) {
  double waste = 0;
  for (uint64_t n = 1; n <= 1024; n++)
    waste += (double)lab_ladder_usable(l, n) - (double)n;
  l->mean_waste_1k = waste / 1024.0;
}

bool lab_ladder_segment(const lab_ladder_t *l, size_t *pos,
                        lab_segment_t *out) {
  size_t i = *pos;
  if (i >= l->n)
    return false;
  size_t   j = i;
  uint64_t step = i + 1 < l->n ? l->rung[i + 1].usable - l->rung[i].usable : 0;
  if (i + 1 < l->n && l->rung[i + 1].usable > l->rung[i].usable)
    while (j + 1 < l->n && l->rung[j + 1].usable > l->rung[j].usable &&
           l->rung[j + 1].usable - l->rung[j].usable == step)
      j++;
  else
    step = 0;
  out->request_first = l->rung[i].request;
  out->request_last =
      j + 1 < l->n ? l->rung[j + 1].request - 1 : LAB_LADDER_MAX;
  out->usable_first = l->rung[i].usable;
  out->usable_last = l->rung[j].usable;
  out->step = j > i ? step : 0;
  out->classes = j - i + 1;
  *pos = j + 1;
  return true;
}

/* The model's ladder, fresh: before any request changes its state (a
 * freed mmapped chunk moves glibc's threshold).  A composition answers for
 * PyObject_Malloc, the others for malloc. */
static as_status_t model_ladder(const sim_session_t *s, lab_ladder_t *l,
                                as_err_t *err) {
  uint8_t domain =
      s->model->methods->composition ? TRACE_DOMAIN_OBJ : TRACE_DOMAIN_RAW;
  if (s->model->methods->usable_size == NULL)
    return AS_OK;
  for (uint64_t n = 1; n <= LAB_LADDER_MAX; n++) {
    as_status_t rc =
        ladder_add(l, n, model_usable_size(s->model, n, domain), err);
    if (rc != AS_OK)
      return rc;
  }
  ladder_finish(l);
  return AS_OK;
}

/* path's "request usable" lines ('#' starts a comment). */
static as_status_t read_ladder(const char *path, lab_ladder_t *l,
                               as_err_t *err) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return as_err_set(err, AS_EINVAL,
                      "%s: cannot open the ladder the lab "
                      "program writes",
                      path);
  char        line[256];
  as_status_t rc = AS_OK;
  for (unsigned lineno = 1; rc == AS_OK && fgets(line, sizeof line, f);
       lineno++) {
    unsigned long long req, usable;
    char               extra;
    if (line[0] == '#' || line[0] == '\n')
      continue;
    if (sscanf(line, "%llu %llu %c", &req, &usable, &extra) != 2)
      rc = as_err_set(err, AS_EINVAL, "%s:%u: expected 'request usable'", path,
                      lineno);
    else
      rc = ladder_add(l, req, usable, err);
  }
  fclose(f);
  if (rc == AS_OK && (l->n == 0 || l->rung[0].request != 1))
    rc = as_err_set(err, AS_EINVAL, "%s: the ladder must start at request 1",
                    path);
  if (rc == AS_OK)
    ladder_finish(l);
  return rc;
}

/* The first request (from 1 to the end of b's sweep) a and b disagree on;
 * 0 when they agree. */
static uint64_t ladder_first_difference(const lab_ladder_t *a,
                                        const lab_ladder_t *b) {
  size_t i = 0, k = 0;
  while (i < a->n || k < b->n) {
    uint64_t ra = i < a->n ? a->rung[i].request : UINT64_MAX;
    uint64_t rb = k < b->n ? b->rung[k].request : UINT64_MAX;
    uint64_t r = ra < rb ? ra : rb;
    if (lab_ladder_usable(a, r) != lab_ladder_usable(b, r))
      return r;
    i += ra == r;
    k += rb == r;
  }
  return 0;
}

static void ladder_free(lab_ladder_t *l) {
  free(l->rung);
  memset(l, 0, sizeof *l);
}

/* ---- Simulating --------------------------------------------------------- */

/* Whether label is one of the space-separated words of list (NULL: all). */
static bool listed(const char *list, const char *label) {
  if (list == NULL)
    return true;
  size_t n = strlen(label);
  for (const char *p = list; *p != '\0';) {
    while (*p == ' ')
      p++;
    const char *end = strchr(p, ' ');
    size_t      w = end ? (size_t)(end - p) : strlen(p);
    if (w == n && w > 0 && strncmp(p, label, n) == 0)
      return true;
    p += w;
  }
  return false;
}

typedef struct lab_pass_s lab_pass_t;
struct lab_pass_s {
  const lab_def_t      *def;
  const lab_variant_t  *v;
  size_t                vi;
  size_t                ncells;
  lab_result_t         *r;
  lab_variant_result_t *vr;
  sim_session_t        *session;
  sim_addr_t            brk0;
  bool                  anchored;
};

/* The kernel's counters a lab may show beside the model's: the program
 * break above its start and the calls a policy costs. */
static bool kernel_counter(const lab_pass_t *p, const char *name,
                           uint64_t *value, const char **unit) {
  sim_kernel_calls_t calls;
  sim_kernel_calls(p->session->kernel, &calls);
  *unit = "count";
  if (strcmp(name, "kernel.brk_bytes") == 0) {
    *value = sim_kernel_brk_current(p->session->kernel) - p->brk0;
    *unit = "bytes";
  } else if (strcmp(name, "kernel.page_faults") == 0) {
    *value = calls.faults;
  } else if (strcmp(name, "kernel.mmap_calls") == 0) {
    *value = calls.mmap;
  } else if (strcmp(name, "kernel.munmap_calls") == 0) {
    *value = calls.munmap;
  } else if (strcmp(name, "kernel.madvise_calls") == 0) {
    *value = calls.madvise;
  } else if (strcmp(name, "kernel.cost_us") == 0) {
    /* the latency proxy: what the calls and faults so far cost */
    *value = sim_cost_kernel_ns(&sim_cost_measured, &calls) / 1000;
  } else {
    return false;
  }
  return true;
}

/* The lab's counters as the kernel and the model report them now (and
 * their units). */
static void read_counters(const lab_pass_t *p, lab_step_t *st) {
  model_counter_t c[MODEL_COUNTERS_MAX];
  size_t          n = model_counters(p->session->model, c, MODEL_COUNTERS_MAX);
  if (n > MODEL_COUNTERS_MAX)
    n = MODEL_COUNTERS_MAX;
  for (size_t k = 0; k < LAB_MAX_COUNTERS && p->def->counters != NULL &&
                     p->def->counters[k] != NULL;
       k++) {
    const char *name = p->def->counters[k];
    if (kernel_counter(p, name, &st->counter[k], &p->r->counter_unit[k])) {
      st->has_counter[k] = true;
      continue;
    }
    for (size_t i = 0; i < n; i++)
      if (strcmp(c[i].name, name) == 0) {
        st->counter[k] = c[i].value;
        st->has_counter[k] = true;
        p->r->counter_unit[k] = c[i].unit;
      }
  }
}

/* Whether the map at label has been drawn (a mark can repeat). */
static bool map_drawn(const lab_variant_result_t *vr, const char *label) {
  for (size_t k = 0; k < vr->nmaps; k++)
    if (strcmp(vr->map_label[k], label) == 0)
      return true;
  return false;
}

static as_status_t on_sample(void *user, const sim_sample_t *s, as_err_t *err) {
  lab_pass_t *p = user;
  if (s->kind != SIM_SAMPLE_MARK || s->label == NULL)
    return AS_OK;
  if (!p->anchored &&
      (p->v->anchor == NULL || strcmp(p->v->anchor, s->label) == 0)) {
    snprintf(p->vr->anchor, sizeof p->vr->anchor, "%s", s->label);
    p->vr->anchor_sim_rss = s->rss_bytes;
    p->anchored = true;
  }
  if (p->v->map_at != NULL && listed(p->v->map_at, s->label) &&
      !map_drawn(p->vr, s->label)) {
    if (p->vr->nmaps == LAB_MAX_MAPS)
      return as_err_set(err, AS_EINVAL, "lab %s: more than %d heap maps",
                        p->def->name, LAB_MAX_MAPS);
    size_t      k = p->vr->nmaps;
    as_status_t rc = heapmap_build(p->session, p->ncells, &p->vr->map[k], err);
    if (rc != AS_OK)
      return rc;
    snprintf(p->vr->map_label[k], sizeof p->vr->map_label[k], "%s", s->label);
    p->vr->nmaps++;
  }
  if (!listed(p->v->marks, s->label))
    return AS_OK;
  if (p->r->nsteps == LAB_MAX_STEPS)
    return as_err_set(err, AS_EINVAL, "lab %s: more than %d steps",
                      p->def->name, LAB_MAX_STEPS);
  lab_step_t *st = &p->r->steps[p->r->nsteps++];
  memset(st, 0, sizeof *st);
  if (p->v->label[0] != '\0')
    snprintf(st->label, sizeof st->label, "%s: %s", p->v->label, s->label);
  else
    snprintf(st->label, sizeof st->label, "%s", s->label);
  snprintf(st->mark, sizeof st->mark, "%s", s->label);
  st->variant = p->vi;
  st->t_ns = s->t_ns;
  st->sim_rss = s->rss_bytes;
  st->sim_live = s->live_bytes;
  read_counters(p, st);
  return AS_OK;
}

static as_status_t open_variant(const lab_variant_t *v, const lab_opts_t *o,
                                trace_source_t **src, as_err_t *err) {
  if (v->workload != NULL)
    return workload_open_line(v->workload, src, err);
  char path[1024];
  if (!as_format_fits(path, sizeof path, "%s/data/%s",
                      o->source_dir ? o->source_dir : ".", v->trace))
    return as_err_set(err, AS_EINVAL, "lab trace %s: path too long", v->trace);
  return trace_open(path, src, err);
}

static as_status_t simulate_variant(const lab_def_t *def, size_t vi,
                                    const lab_opts_t *o, lab_result_t *r,
                                    as_err_t *err) {
  const lab_variant_t  *v = &def->variants[vi];
  lab_variant_result_t *vr = &r->variants[vi];
  trace_source_t       *src = NULL;
  sim_session_t         s;
  as_status_t           rc = open_variant(v, o, &src, err);
  if (rc != AS_OK)
    return rc;
  rc = sim_session_open(v->model, v->libc, NULL, &s, err);
  if (rc != AS_OK) {
    trace_source_close(src);
    return rc;
  }
  snprintf(vr->model_desc, sizeof vr->model_desc, "%s", s.model_desc);
  if (def->kind == LAB_SIZES &&
      (rc = model_ladder(&s, &vr->ladder, err)) != AS_OK) {
    sim_session_close(&s);
    trace_source_close(src);
    return rc;
  }
  lab_pass_t          p = {.def = def,
                           .v = v,
                           .vi = vi,
                           .ncells = o->map_cells ? o->map_cells : 48,
                           .r = r,
                           .vr = vr,
                           .session = &s,
                           .brk0 = sim_kernel_brk_current(s.kernel)};
  sim_engine_config_t cfg = {.on_sample = on_sample, .user = &p};
  sim_run_result_t    res;
  rc = sim_engine_run(&cfg, &s, src, &res, err);
  if (rc == AS_OK && v->map_at != NULL && vr->nmaps == 0)
    rc = as_err_set(err, AS_EINVAL,
                    "lab %s: the run has none of the marks "
                    "'%s'",
                    def->name, v->map_at);
  sim_session_close(&s);
  trace_source_close(src);
  vr->ran = rc == AS_OK;
  return rc;
}

as_status_t lab_simulate(const lab_def_t *def, const lab_opts_t *o,
                         lab_result_t *out, as_err_t *err) {
  memset(out, 0, sizeof *out);
  out->def = def;
  as_status_t rc = AS_OK;
  /* Variants one after another: each takes over the tables the previous
   * one freed (sim/reserve.h). */
  as_reserve_reuse_begin();
  for (size_t vi = 0; vi < lab_variant_count(def) && rc == AS_OK; vi++) {
    lab_variant_result_t *vr = &out->variants[vi];
    if (lab_variant_runnable(&def->variants[vi], vr->missing,
                             sizeof vr->missing))
      rc = simulate_variant(def, vi, o, out, err);
  }
  as_reserve_reuse_end();
  return rc;
}

/* ---- Measurements ------------------------------------------------------- */

/* Measured RSS at the first occurrence of each mark of a measured run. */
/* Marks a measured-run file may have: a program that marks every sample
 * (the decay lab's 120 idle ticks) has more marks than a lab has steps. */
#define MEASURED_MAX_MARKS 1024

typedef struct measured_marks_s measured_marks_t;
struct measured_marks_s {
  size_t   n;
  char     label[MEASURED_MAX_MARKS][64];
  uint64_t rss[MEASURED_MAX_MARKS];
  bool     has_rss[MEASURED_MAX_MARKS];
  double   value[LAB_MAX_MEASURED][MEASURED_MAX_MARKS]; /* measured_columns */
  bool     has_value[LAB_MAX_MEASURED][MEASURED_MAX_MARKS];
};

/* The value of mark in a column's provenance "MARK:NUMBER MARK:NUMBER ...";
 * false when the mark is not there or its number does not parse. */
static bool column_value(const char *list, const char *mark, double *out) {
  size_t mlen = strlen(mark);
  for (const char *p = list; *p != '\0';) {
    p += strspn(p, " ");
    size_t word = strcspn(p, " ");
    if (word > mlen && strncmp(p, mark, mlen) == 0 && p[mlen] == ':') {
      char *end;
      *out = strtod(p + mlen + 1, &end);
      return end == p + word && end != p + mlen + 1;
    }
    p += word;
  }
  return false;
}

/* Reads every column's value at every mark of m from meta. */
static void read_columns(const trace_meta_t *meta, const char *const *columns,
                         measured_marks_t *m) {
  for (size_t c = 0;
       columns != NULL && columns[c] != NULL && c < LAB_MAX_MEASURED; c++) {
    const char *list = trace_meta_get(meta, columns[c]);
    for (size_t i = 0; list != NULL && i < m->n; i++)
      m->has_value[c][i] = column_value(list, m->label[i], &m->value[c][i]);
  }
}

/* The least of the runs' values of column c at label; false when none has
 * it. */
static bool least_value_at(const measured_marks_t *runs, size_t n, size_t c,
                           const char *label, double *out) {
  bool any = false;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < runs[i].n; k++)
      if (runs[i].has_value[c][k] && strcmp(runs[i].label[k], label) == 0 &&
          (!any || runs[i].value[c][k] < *out)) {
        *out = runs[i].value[c][k];
        any = true;
      }
  return any;
}

static const measured_marks_t *find_mark(const measured_marks_t *m,
                                         const char *label, uint64_t *rss) {
  for (size_t i = 0; i < m->n; i++)
    if (m->has_rss[i] && strcmp(m->label[i], label) == 0) {
      *rss = m->rss[i];
      return m;
    }
  return NULL;
}

/* The values of keys (NULL-terminated, may be NULL) in meta as
 * "key=value" lines into buf. */
static void measured_meta(const trace_meta_t *meta, const char *const *keys,
                          char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t k = 0; keys != NULL && keys[k] != NULL; k++) {
    const char *v = trace_meta_get(meta, keys[k]);
    if (v == NULL || used >= len)
      continue;
    int n = snprintf(buf + used, len - used, "%s=%s\n", keys[k], v);
    used += n > 0 ? (size_t)n : 0;
  }
}

/* Reads path's marks and rss into m; when vr is not NULL, also its note
 * (machine, libc) and the values of keys. */
static as_status_t read_measured(const char *path, const lab_def_t *def,
                                 measured_marks_t *m, lab_variant_result_t *vr,
                                 as_err_t *err) {
  trace_source_t *src = NULL;
  as_status_t     rc = trace_open(path, &src, err);
  if (rc != AS_OK)
    return rc;
  memset(m, 0, sizeof *m);
  bool          last_was_mark = false;
  trace_event_t ev;
  while ((rc = trace_source_next(src, &ev, err)) == AS_OK) {
    if (ev.op == TRACE_MARK && m->n < MEASURED_MAX_MARKS) {
      snprintf(m->label[m->n++], sizeof m->label[0], "%s", ev.label);
      last_was_mark = true;
      continue;
    }
    if (ev.op == TRACE_RSS && last_was_mark) {
      m->rss[m->n - 1] = ev.size;
      m->has_rss[m->n - 1] = true;
    }
    last_was_mark = false;
  }
  if (rc == AS_DONE)
    rc = AS_OK;
  const char *machine = trace_meta_get(&src->meta, "machine");
  const char *libc = trace_meta_get(&src->meta, "glibc");
  if (libc == NULL)
    libc = trace_meta_get(&src->meta, "libc");
  if (vr != NULL) {
    snprintf(vr->measured_note, sizeof vr->measured_note, "%s%s%s",
             machine ? machine : "", machine && libc ? ", " : "",
             libc ? libc : "");
    measured_meta(&src->meta, def->measured_keys, vr->measured_meta,
                  sizeof vr->measured_meta);
  }
  read_columns(&src->meta, def->measured_columns, m);
  trace_source_close(src);
  return rc;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* The median of the RSS at label over the runs that have it (the lower
 * middle of an even count); false when none has it. */
static bool median_at(const measured_marks_t *runs, size_t n, const char *label,
                      uint64_t *out) {
  uint64_t v[LAB_MAX_RUNS];
  size_t   k = 0;
  for (size_t i = 0; i < n && k < LAB_MAX_RUNS; i++)
    if (find_mark(&runs[i], label, &v[k]) != NULL)
      k++;
  if (k == 0)
    return false;
  qsort(v, k, sizeof v[0], cmp_u64);
  *out = v[(k - 1) / 2];
  return true;
}

as_status_t lab_attach_measured(lab_result_t *r, size_t vi,
                                const char *const *paths, size_t n,
                                as_err_t *err) {
  lab_variant_result_t *vr = &r->variants[vi];
  if (n == 0 || n > LAB_MAX_RUNS)
    return as_err_set(err, AS_EINVAL, "lab: 1 to %d measured runs, got %zu",
                      LAB_MAX_RUNS, n);
  measured_marks_t *runs = calloc(n, sizeof *runs);
  if (runs == NULL)
    return as_err_set(err, AS_ENOMEM, "%s: out of memory", paths[0]);
  as_status_t rc = AS_OK;
  uint64_t    anchor = 0;
  for (size_t i = 0; i < n && rc == AS_OK; i++) {
    rc = read_measured(paths[i], r->def, &runs[i], i == 0 ? vr : NULL, err);
    if (rc == AS_OK && find_mark(&runs[i], vr->anchor, &anchor) == NULL)
      rc = as_err_set(err, AS_EINVAL,
                      "%s: no mark '%s' with its rss (the run's first mark, "
                      "where measured and simulated are anchored)",
                      paths[i], vr->anchor);
  }
  if (rc == AS_OK && r->def->kind == LAB_SIZES) {
    char path[1024];
    if (!as_format_fits(path, sizeof path, "%s.ladder", paths[0]))
      rc = as_err_set(err, AS_EINVAL, "%s: path too long", paths[0]);
    else
      rc = read_ladder(path, &vr->measured_ladder, err);
    if (rc == AS_OK)
      vr->ladder_diff =
          ladder_first_difference(&vr->ladder, &vr->measured_ladder);
  }
  if (rc == AS_OK) {
    median_at(runs, n, vr->anchor, &anchor);
    vr->baseline = (int64_t)anchor - (int64_t)vr->anchor_sim_rss;
    vr->measured = true;
    vr->measured_runs = n;
    snprintf(vr->measured_source, sizeof vr->measured_source, "%s", paths[0]);
    for (size_t i = 0; i < r->nsteps; i++) {
      lab_step_t *st = &r->steps[i];
      if (st->variant != vi || !median_at(runs, n, st->mark, &st->measured_rss))
        continue;
      st->measured = true;
      st->predicted_rss = (uint64_t)((int64_t)st->sim_rss + vr->baseline);
      for (size_t c = 0; c < LAB_MAX_MEASURED; c++)
        st->has_measured_value[c] =
            least_value_at(runs, n, c, st->mark, &st->measured_value[c]);
    }
  }
  free(runs);
  return rc;
}

as_status_t lab_attach_recorded(lab_result_t *r, size_t vi,
                                const char *source_dir, as_err_t *err) {
  const char *rec = r->def->variants[vi].recorded;
  if (rec == NULL || !r->variants[vi].ran)
    return AS_OK;
  char pattern[1024];
  if (!as_format_fits(pattern, sizeof pattern, "%s/data/%s", source_dir, rec))
    return as_err_set(err, AS_EINVAL, "%s/data/%s: path too long", source_dir,
                      rec);
  glob_t g;
  int    grc = glob(pattern, 0, NULL, &g);
  if (grc == GLOB_NOMATCH)
    return as_err_set(err, AS_EINVAL,
                      "%s: no recorded run (scripts/measure/labs/run.sh "
                      "records them)",
                      pattern);
  if (grc != 0)
    return as_err_set(err, AS_ENOMEM, "%s: glob failed", pattern);
  size_t      n = g.gl_pathc < LAB_MAX_RUNS ? g.gl_pathc : LAB_MAX_RUNS;
  as_status_t rc =
      lab_attach_measured(r, vi, (const char *const *)g.gl_pathv, n, err);
  globfree(&g);
  return rc;
}

void lab_result_free(lab_result_t *r) {
  for (size_t i = 0; i < LAB_MAX_VARIANTS; i++) {
    for (size_t k = 0; k < LAB_MAX_MAPS; k++)
      heapmap_free(&r->variants[i].map[k]);
    ladder_free(&r->variants[i].ladder);
    ladder_free(&r->variants[i].measured_ladder);
  }
}
