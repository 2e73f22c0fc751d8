/* analysis/lab.c -- running a lab (analysis/lab.h): each variant replayed
 * once, its marks of interest turned into steps with their counters and
 * heap map, and a measured run attached by mark label. */
#include "lab.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    size_t      w   = end ? (size_t)(end - p) : strlen(p);
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
    *unit  = "bytes";
  } else if (strcmp(name, "kernel.page_faults") == 0) {
    *value = calls.faults;
  } else if (strcmp(name, "kernel.mmap_calls") == 0) {
    *value = calls.mmap;
  } else if (strcmp(name, "kernel.munmap_calls") == 0) {
    *value = calls.munmap;
  } else if (strcmp(name, "kernel.madvise_calls") == 0) {
    *value = calls.madvise;
  } else {
    return false;
  }
  return true;
}

/* The lab's counters as the kernel and the model report them now (and
 * their units). */
static void read_counters(const lab_pass_t *p, lab_step_t *st) {
  model_counter_t c[MODEL_COUNTERS_MAX];
  size_t n = model_counters(p->session->model, c, MODEL_COUNTERS_MAX);
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
        st->counter[k]        = c[i].value;
        st->has_counter[k]    = true;
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

static as_status_t on_sample(void *user, const sim_sample_t *s,
                             as_err_t *err) {
  lab_pass_t *p = user;
  if (s->kind != SIM_SAMPLE_MARK || s->label == NULL)
    return AS_OK;
  if (!p->anchored) {
    snprintf(p->vr->anchor, sizeof p->vr->anchor, "%s", s->label);
    p->vr->anchor_sim_rss = s->rss_bytes;
    p->anchored           = true;
  }
  if (p->v->map_at != NULL && listed(p->v->map_at, s->label) &&
      !map_drawn(p->vr, s->label)) {
    if (p->vr->nmaps == LAB_MAX_MAPS)
      return as_err_set(err, AS_EINVAL, "lab %s: more than %d heap maps",
                        p->def->name, LAB_MAX_MAPS);
    size_t      k  = p->vr->nmaps;
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
  st->variant  = p->vi;
  st->t_ns     = s->t_ns;
  st->sim_rss  = s->rss_bytes;
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
    return as_err_set(err, AS_EINVAL, "lab trace %s: path too long",
                      v->trace);
  return trace_open(path, src, err);
}

static as_status_t simulate_variant(const lab_def_t *def, size_t vi,
                                    const lab_opts_t *o, lab_result_t *r,
                                    as_err_t *err) {
  const lab_variant_t  *v  = &def->variants[vi];
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
  lab_pass_t p = {.def     = def,
                  .v       = v,
                  .vi      = vi,
                  .ncells  = o->map_cells ? o->map_cells : 48,
                  .r       = r,
                  .vr      = vr,
                  .session = &s,
                  .brk0    = sim_kernel_brk_current(s.kernel)};
  sim_engine_config_t cfg = {.on_sample = on_sample, .user = &p};
  sim_run_result_t    res;
  rc = sim_engine_run(&cfg, &s, src, &res, err);
  if (rc == AS_OK && v->map_at != NULL && vr->nmaps == 0)
    rc = as_err_set(err, AS_EINVAL, "lab %s: the run has none of the marks "
                    "'%s'", def->name, v->map_at);
  sim_session_close(&s);
  trace_source_close(src);
  vr->ran = rc == AS_OK;
  return rc;
}

as_status_t lab_simulate(const lab_def_t *def, const lab_opts_t *o,
                         lab_result_t *out, as_err_t *err) {
  memset(out, 0, sizeof *out);
  out->def = def;
  for (size_t vi = 0; vi < lab_variant_count(def); vi++) {
    lab_variant_result_t *vr = &out->variants[vi];
    if (!lab_variant_runnable(&def->variants[vi], vr->missing,
                              sizeof vr->missing))
      continue;
    as_status_t rc = simulate_variant(def, vi, o, out, err);
    if (rc != AS_OK)
      return rc;
  }
  return AS_OK;
}

/* ---- Measurements ------------------------------------------------------- */

/* Measured RSS at the first occurrence of each mark of a measured run. */
typedef struct measured_marks_s measured_marks_t;
struct measured_marks_s {
  size_t   n;
  char     label[LAB_MAX_STEPS][64];
  uint64_t rss[LAB_MAX_STEPS];
  bool     has_rss[LAB_MAX_STEPS];
};

static const measured_marks_t *find_mark(const measured_marks_t *m,
                                         const char *label, uint64_t *rss) {
  for (size_t i = 0; i < m->n; i++)
    if (m->has_rss[i] && strcmp(m->label[i], label) == 0) {
      *rss = m->rss[i];
      return m;
    }
  return NULL;
}

static as_status_t read_measured(const char *path, measured_marks_t *m,
                                 char *note, size_t note_len, as_err_t *err) {
  trace_source_t *src = NULL;
  as_status_t     rc  = trace_open(path, &src, err);
  if (rc != AS_OK)
    return rc;
  memset(m, 0, sizeof *m);
  bool          last_was_mark = false;
  trace_event_t ev;
  while ((rc = trace_source_next(src, &ev, err)) == AS_OK) {
    if (ev.op == TRACE_MARK && m->n < LAB_MAX_STEPS) {
      snprintf(m->label[m->n++], sizeof m->label[0], "%s", ev.label);
      last_was_mark = true;
      continue;
    }
    if (ev.op == TRACE_RSS && last_was_mark) {
      m->rss[m->n - 1]     = ev.size;
      m->has_rss[m->n - 1] = true;
    }
    last_was_mark = false;
  }
  if (rc == AS_DONE)
    rc = AS_OK;
  const char *machine = trace_meta_get(&src->meta, "machine");
  const char *libc    = trace_meta_get(&src->meta, "glibc");
  if (libc == NULL)
    libc = trace_meta_get(&src->meta, "libc");
  snprintf(note, note_len, "%s%s%s", machine ? machine : "",
           machine && libc ? ", " : "", libc ? libc : "");
  trace_source_close(src);
  return rc;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* The median of the RSS at label over the runs that have it (the lower
 * middle of an even count); false when none has it. */
static bool median_at(const measured_marks_t *runs, size_t n,
                      const char *label, uint64_t *out) {
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
    rc = read_measured(paths[i], &runs[i], vr->measured_note,
                       sizeof vr->measured_note, err);
    if (rc == AS_OK && find_mark(&runs[i], vr->anchor, &anchor) == NULL)
      rc = as_err_set(err, AS_EINVAL,
                      "%s: no mark '%s' with its rss (the run's first mark, "
                      "where measured and simulated are anchored)",
                      paths[i], vr->anchor);
  }
  if (rc == AS_OK) {
    median_at(runs, n, vr->anchor, &anchor);
    vr->baseline      = (int64_t)anchor - (int64_t)vr->anchor_sim_rss;
    vr->measured      = true;
    vr->measured_runs = n;
    snprintf(vr->measured_source, sizeof vr->measured_source, "%s",
             paths[0]);
    for (size_t i = 0; i < r->nsteps; i++) {
      lab_step_t *st = &r->steps[i];
      if (st->variant != vi ||
          !median_at(runs, n, st->mark, &st->measured_rss))
        continue;
      st->measured      = true;
      st->predicted_rss = (uint64_t)((int64_t)st->sim_rss + vr->baseline);
    }
  }
  free(runs);
  return rc;
}

void lab_result_free(lab_result_t *r) {
  for (size_t i = 0; i < LAB_MAX_VARIANTS; i++)
    for (size_t k = 0; k < LAB_MAX_MAPS; k++)
      heapmap_free(&r->variants[i].map[k]);
}
