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
#include <limits.h>
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
#include "../traces/trace_io.h"
#include "../sim/json.h"
#include "../sim/reserve.h"
#include "../sim/sha256.h"
#include "record.h"
#include "runsrc.h"
#include "../sim/units.h"
#include "formula.h"

/* ---- Axes and values ---------------------------------------------------- */

/* The model and libc a trace's provenance implies ("" for libc: the
 * model's default), and its header, read once for all its points. */
typedef struct trace_specs_s trace_specs_t;
struct trace_specs_s {
  char         model[256];
  char         libc[256];
  trace_meta_t meta;
};

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
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || *end || end == v || v[0] == '-' || x % 4096 != 0 ||
      x >= (UINT64_C(1) << 30))
    return false;
  *out = x;
  return true;
}

static const workload_option_t *find_option(const workload_def_t *wl,
                                            const char           *name) {
  for (const workload_option_t *o = wl->options; o->name; o++)
    if (same_name(o->name, name))
      return o;
  return NULL;
}

/* "model" and "libc" axes take model specs. */
static bool is_spec_axis(const char *name) {
  return strcmp(name, "model") == 0 || strcmp(name, "libc") == 0;
}

/* name is MODEL.OPTION: *m and *row receive the model and the option's row
 * (*m NULL when name has no dot).  AS_EUSAGE when the model is not
 * registered (*m NULL) or has no such option (*m set). */
static as_status_t is_model_option(const char *name, const model_methods_t **m,
                                   int *row) {
  const char *dot = strchr(name, '.');
  *m = NULL;
  if (dot == NULL)
    return AS_OK;
  char model[48];
  snprintf(model, sizeof model, "%.*s", (int)(dot - name), name);
  if ((*m = model_find(model)) == NULL)
    return AS_EUSAGE;
  *row = model_option_find((*m)->options, dot + 1, strlen(dot + 1));
  return *row < 0 ? AS_EUSAGE : AS_OK;
}

static as_status_t check_option_value(const model_methods_t *m, int row,
                                      const char *v, as_err_t *err) {
  model_opts_t o;
  as_status_t  rc = model_opts_parse(m->name, m->options, NULL, &o, err);
  if (rc == AS_OK)
    rc = model_opts_set(m->name, &o, row, v, strlen(v), err);
  return rc;
}

/* A model axis value as typed: a spec the model code would take, but
 * written wrong ("glibc:"), is refused (model_spec_check_syntax). */
static as_status_t check_axis_spec_syntax(const char *axis, const char *spec,
                                          as_err_t *err) {
  as_err_t why = {0};
  if (model_spec_check_syntax(spec, &why) == AS_OK)
    return AS_OK;
  return as_err_set(err, AS_EUSAGE, "--vary %s '%s': %s", axis, spec, why.msg);
}

/* A model axis value names a registered model with valid options. */
static as_status_t check_spec(const char *axis, const char *spec,
                              as_err_t *err) {
  char name[64];
  model_spec_name(spec, name, sizeof name);
  const model_methods_t *m = model_find(name);
  if (m == NULL)
    return as_err_set(err, AS_EUSAGE, "--vary %s: unknown model '%s'", axis,
                      name);
  const char  *colon = strchr(spec, ':');
  model_opts_t o;
  return model_opts_parse(name, m->options, colon ? colon + 1 : NULL, &o, err);
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
  const workload_option_t *opt = wl ? find_option(wl, out->name) : NULL;
  const model_methods_t   *opt_model = NULL;
  int                      opt_row = -1;
  if (is_model_option(out->name, &opt_model, &opt_row) != AS_OK) {
    as_status_t rc = as_err_set(
        err, AS_EUSAGE, "--vary %s: %s", out->name,
        opt_model == NULL ? "no registered model of that name"
                          : "that model has no such option (allocsim models)");
    memset(out, 0, sizeof *out);
    return rc;
  }
  if (!is_kernel_axis(out->name) && !is_spec_axis(out->name) &&
      opt_model == NULL && opt == NULL) {
    char   known[512];
    size_t used = (size_t)snprintf(known, sizeof known,
                                   "page_size, mmap_offset, model, libc, "
                                   "MODEL.OPTION");
    for (const workload_option_t *o = wl ? wl->options : NULL; o && o->name;
         o++)
      if (strcmp(o->name, "seed") != 0 && used < sizeof known)
        used += (size_t)snprintf(known + used, sizeof known - used, ", %s",
                                 o->name);
    as_err_set(err, AS_EUSAGE, "--vary: %s has no parameter '%s' (known: %s)",
               wl ? wl->name : "a trace sweep", out->name, known);
    memset(out, 0, sizeof *out);
    return AS_EUSAGE;
  }
  if (opt != NULL && strcmp(opt->name, "seed") == 0)
    return as_err_set(err, AS_EUSAGE,
                      "--vary: vary seeds with --seeds N, not --vary seed");
  if (opt != NULL)
    snprintf(out->name, sizeof out->name, "%s", opt->name);
  else if (is_kernel_axis(out->name))
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
    size_t      vlen = comma ? (size_t)(comma - v) : strlen(v);
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
    if (opt_model != NULL &&
        check_option_value(opt_model, opt_row, out->values[i], err) != AS_OK)
      goto fail;
    if (is_spec_axis(out->name) &&
        (check_axis_spec_syntax(out->name, out->values[i], err) != AS_OK ||
         check_spec(out->name, out->values[i], err) != AS_OK))
      goto fail;
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
  return c->workload != NULL && strcmp(c->workload->name, "survivors") == 0;
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
  p->args[0] = '\0';
  for (int i = 0; i < argc && used < sizeof p->args; i++)
    used += (size_t)snprintf(p->args + used, sizeof p->args - used, "%s%s",
                             i ? " " : "", argv[i]);
}

#define ARGV_MAX (2 * SWEEP_MAX_FIXED + 2 * SWEEP_MAX_AXES + 2)

/* The point's specs with the machine facts its trace recorded for the
 * knobs they leave unset (runsrc.h record_specs_with_facts): a sweep of a
 * CPython 3.11 capture with --model cpython replays 3.11.  meta is the
 * trace's header, read once per trace (open_trace_source), not per point. */
static as_status_t point_facts(sweep_point_t *p, trace_meta_t *meta,
                               as_err_t *err) {
  const char *model = p->model, *libc = p->libc[0] ? p->libc : NULL;
  return record_specs_with_facts(trace_meta_lookup, meta, p->trace, &model,
                                 p->model, sizeof p->model, &libc, p->libc,
                                 sizeof p->libc, err);
}

/* The point's model and libc specs: the model and libc axes (else the
 * config's), with each MODEL.OPTION axis value added to whichever of the
 * two is that model.  A composition's libc is its libc spec or the default
 * libc model. */
static as_status_t point_specs(const sweep_config_t *c, sweep_point_t *p,
                               trace_specs_t *ts, as_err_t *err) {
  const char *model = c->model ? c->model : ts->model;
  const char *libc = c->libc || c->model ? c->libc
                     : ts->libc[0]       ? ts->libc
                                         : NULL;
  for (size_t a = 0; a < c->naxes; a++) {
    if (strcmp(c->axes[a].name, "model") == 0)
      model = p->values[a];
    if (strcmp(c->axes[a].name, "libc") == 0)
      libc = p->values[a];
  }
  char name[64], lname[64];
  model_spec_name(model, name, sizeof name);
  const model_methods_t *m = model_find(name);
  bool                   composed = m != NULL && m->composition;
  snprintf(p->model, sizeof p->model, "%s", model);
  snprintf(p->libc, sizeof p->libc, "%s",
           composed ? (libc ? libc : model_default_libc()) : "");
  model_spec_name(p->libc, lname, sizeof lname);
  for (size_t a = 0; a < c->naxes; a++) {
    const char *dot = strchr(c->axes[a].name, '.');
    if (dot == NULL)
      continue;
    size_t nl = (size_t)(dot - c->axes[a].name);
    char   add[128], tmp[384];
    snprintf(add, sizeof add, "%s=%s", dot + 1, p->values[a]);
    char  *target = NULL;
    size_t tlen = 0;
    if (strlen(name) == nl && strncmp(name, c->axes[a].name, nl) == 0)
      target = p->model, tlen = sizeof p->model;
    else if (composed && strlen(lname) == nl &&
             strncmp(lname, c->axes[a].name, nl) == 0)
      target = p->libc, tlen = sizeof p->libc;
    if (target == NULL)
      continue; /* that model is not simulated at this point */
    if (!model_spec_with(target, add, tmp, sizeof tmp) || strlen(tmp) >= tlen)
      return as_err_set(err, AS_EUSAGE, "model spec too long");
    snprintf(target, tlen, "%s", tmp);
  }
  return p->trace != NULL ? point_facts(p, &ts->meta, err) : AS_OK;
}

/* The point's key: the SHA-256 of what decides its result. */
static unsigned layouts_for(const sweep_config_t *c, const sweep_point_t *p);

/* The point's key: the SHA-256 of what decides its result (the number of
 * layouts averaged only when above 1, so single-layout keys are those of
 * sweeps made before layouts were averaged), and of a trace's file name
 * when another trace has its content (trace_ident). */
static void point_key(const sweep_config_t *c, sweep_point_t *p,
                      const char *trace_ident) {
  char     text[2048 + PATH_MAX], lay[32] = "";
  unsigned n = layouts_for(c, p);
  if (n > 1)
    snprintf(lay, sizeof lay, "|layouts=%u", n);
  snprintf(text, sizeof text,
           "allocsim-sweep-point-1|%s|%s|model=%s|libc=%s|page=%" PRIu64
           "|offset=%" PRIu64 "|seed=%" PRIu64 "%s",
           p->trace ? "trace" : c->workload->name,
           p->trace ? trace_ident : p->args, p->model, p->libc, p->page_size,
           p->mmap_offset, p->seed, lay);
  as_sha256_hex(text, strlen(text), p->key);
}

static int by_key(const void *a, const void *b) {
  const sweep_point_t *const *x = a, *const *y = b;
  int                         c = strcmp((*x)->key, (*y)->key);
  return c ? c : (*x < *y ? -1 : *x > *y);
}

/* Drops points whose key an earlier point has, keeping the order; writes
 * the spec key (the SHA-256 of the sorted distinct keys). */
static as_status_t dedupe(sweep_point_t *pts, size_t *n, char spec_key[65],
                          as_err_t *err) {
  sweep_point_t **by = malloc((*n ? *n : 1) * sizeof *by);
  bool           *dup = calloc(*n ? *n : 1, sizeof *dup);
  char           *keys = malloc(*n * 64 + 1);
  if (by == NULL || dup == NULL || keys == NULL) {
    free(by), free(dup), free(keys);
    return as_err_set(err, AS_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < *n; i++)
    by[i] = &pts[i];
  qsort(by, *n, sizeof *by, by_key);
  size_t used = 0;
  for (size_t i = 0; i < *n; i++) {
    if (i > 0 && strcmp(by[i]->key, by[i - 1]->key) == 0) {
      dup[by[i] - pts] = true; /* the earlier one sorted first */
      continue;
    }
    memcpy(keys + used, by[i]->key, 64);
    used += 64;
  }
  keys[used] = '\0';
  if (spec_key != NULL)
    as_sha256_hex(keys, used, spec_key);
  size_t k = 0;
  for (size_t i = 0; i < *n; i++)
    if (!dup[i])
      pts[k++] = pts[i];
  *n = k;
  free(by), free(dup), free(keys);
  return AS_OK;
}

/* The grid's point g: its axis values, page size and layout. */
static void grid_point(const sweep_config_t *c, size_t g, sweep_point_t *p) {
  memset(p, 0, sizeof *p);
  p->point = g;
  p->page_size = c->kernel.page_size;
  size_t rest = g;
  for (size_t a = c->naxes; a-- > 0;) {
    p->values[a] = c->axes[a].values[rest % c->axes[a].count];
    rest /= c->axes[a].count;
    if (is_page_size(c->axes[a].name))
      as_parse_page_size(p->values[a], &p->page_size);
    if (is_mmap_offset(c->axes[a].name))
      parse_mmap_offset(p->values[a], &p->mmap_offset);
  }
}

/* Fills one point of the workload or trace t (NULL: the workload) and,
 * for the first seed, checks that its workload and model open. */
static as_status_t fill_point(const sweep_config_t *c, sweep_point_t *p,
                              const char *trace, const char *trace_ident,
                              trace_specs_t *ts, bool first_seed,
                              as_err_t *err) {
  p->trace = trace;
  if (trace != NULL) {
    snprintf(p->args, sizeof p->args, "%s", trace);
  } else {
    char  storage[ARGV_MAX][128];
    char *argv[ARGV_MAX];
    int   argc = point_argv(c, p, storage, argv);
    point_args_text(p, argc, argv);
    if (first_seed) {
      trace_source_t *src;
      as_status_t rc = workload_open_argv(c->workload, argc, argv, &src, err);
      if (rc != AS_OK)
        return rc;
      trace_source_close(src);
    }
  }
  as_status_t rc = point_specs(c, p, ts, err);
  if (rc == AS_OK && first_seed)
    rc = check_spec("model", p->model, err);
  if (rc == AS_OK && first_seed && p->libc[0] != '\0')
    rc = check_spec("libc", p->libc, err);
  point_key(c, p, trace_ident);
  return rc;
}

/* Checks that trace has an allocation to replay (a measured-run file, marks
 * and measured RSS only, would report zeros), and reads its header and the
 * model and libc specs its provenance implies (for sweeps without --model)
 * into *ts. */
static as_status_t open_trace_source(const sweep_config_t *c, const char *trace,
                                     trace_specs_t *ts, as_err_t *err) {
  trace_source_t *src;
  as_status_t     rc = trace_open(trace, &src, err);
  if (rc != AS_OK)
    return rc;
  ts->meta = src->meta;
  rc = record_run_specs(trace_meta_lookup, &src->meta, c->model, c->libc,
                        ts->model, sizeof ts->model, ts->libc, sizeof ts->libc,
                        err);
  trace_event_t ev;
  bool          alloc = false;
  while (rc == AS_OK && !alloc &&
         (rc = trace_source_next(src, &ev, err)) == AS_OK)
    alloc = ev.op == TRACE_MALLOC || ev.op == TRACE_CALLOC ||
            ev.op == TRACE_MEMALIGN || ev.op == TRACE_REALLOC;
  trace_source_close(src);
  if (rc == AS_DONE)
    rc = as_err_set(err, AS_EINVAL,
                    "%s: no allocation to replay (a measured-run file? "
                    "sweep the workload its header names, or record it and "
                    "use compare)",
                    trace);
  return rc;
}

/* Refuses a fixed option the workload does not have: point_argv passes
 * only the workload's own options, so it would be silently dropped. */
static as_status_t check_fixed(const sweep_config_t *c, as_err_t *err) {
  for (size_t f = 0; c->workload != NULL && f < c->nfixed; f++)
    if (find_option(c->workload, c->fixed_name[f]) == NULL) {
      char   known[512];
      size_t used = 0;
      known[0] = '\0';
      for (const workload_option_t *o = c->workload->options;
           o->name && used < sizeof known; o++)
        used += (size_t)snprintf(known + used, sizeof known - used, "%s--%s",
                                 used ? ", " : "", o->name);
      return as_err_set(err, AS_EUSAGE, "%s: unknown option '--%s' (known: %s)",
                        c->workload->name, c->fixed_name[f], known);
    }
  return AS_OK;
}

/* Whether point p simulates the model called name (its model or libc). */
static bool simulates(const sweep_point_t *p, const char *name, size_t len) {
  char m[64], l[64];
  model_spec_name(p->model, m, sizeof m);
  model_spec_name(p->libc, l, sizeof l);
  return (strlen(m) == len && strncmp(m, name, len) == 0) ||
         (strlen(l) == len && strncmp(l, name, len) == 0);
}

/* Whether the ", "-separated list has the item name. */
static bool listed(const char *list, const char *name) {
  size_t nl = strlen(name);
  for (const char *s = list; *s != '\0';) {
    size_t len = strcspn(s, ",");
    if (len == nl && strncmp(s, name, nl) == 0)
      return true;
    s += len;
    s += *s == ',' ? 2 : 0; /* past ", " */
  }
  return false;
}

/* Appends p's model and libc names to list (", "-separated) if absent. */
static void list_models(const sweep_point_t *p, char *list, size_t len) {
  char names[2][64];
  model_spec_name(p->model, names[0], sizeof names[0]);
  model_spec_name(p->libc, names[1], sizeof names[1]);
  for (int i = 0; i < 2; i++) {
    size_t used = strlen(list);
    if (names[i][0] != '\0' && !listed(list, names[i]))
      snprintf(list + used, len - used, "%s%s", used ? ", " : "", names[i]);
  }
}

/* The ", "-separated names of the models the n points simulate. */
static void list_all_models(const sweep_point_t *pts, size_t n, char *list,
                            size_t len) {
  list[0] = '\0';
  for (size_t i = 0; i < n; i++)
    list_models(&pts[i], list, len);
}

/* A MODEL.OPTION axis whose model no point simulates would only repeat
 * the same points, which dedupe then hides: a usage error instead. */
static as_status_t check_option_axes(const sweep_config_t *c,
                                     const sweep_point_t *pts, size_t n,
                                     as_err_t *err) {
  for (size_t a = 0; a < c->naxes; a++) {
    const char *dot = strchr(c->axes[a].name, '.');
    if (dot == NULL)
      continue;
    size_t nl = (size_t)(dot - c->axes[a].name);
    bool   used = false;
    for (size_t i = 0; i < n && !used; i++)
      used = simulates(&pts[i], c->axes[a].name, nl);
    if (used)
      continue;
    char list[512];
    list_all_models(pts, n, list, sizeof list);
    return as_err_set(err, AS_EUSAGE,
                      "--vary %s: no point simulates %.*s (the points "
                      "simulate %s); add it with --model, --libc or a model "
                      "or libc axis",
                      c->axes[a].name, (int)nl, c->axes[a].name, list);
  }
  return AS_OK;
}

/* A libc (fixed or an axis) that no point forwards to would be dropped
 * without a word, as replay refuses it: a usage error instead. */
static as_status_t check_libc_used(const sweep_config_t *c,
                                   const sweep_point_t *pts, size_t n,
                                   as_err_t *err) {
  const char *given = c->libc ? "--libc" : NULL;
  for (size_t a = 0; a < c->naxes && given == NULL; a++)
    if (strcmp(c->axes[a].name, "libc") == 0)
      given = "--vary libc";
  for (size_t i = 0; i < n && given != NULL; i++)
    if (pts[i].libc[0] != '\0')
      return AS_OK;
  if (given == NULL)
    return AS_OK;
  char list[512];
  list_all_models(pts, n, list, sizeof list);
  return as_err_set(err, AS_EUSAGE,
                    "%s%s%s: no point's model forwards to a libc (the points "
                    "simulate %s, which serve malloc themselves); a libc is "
                    "the one a composition such as cpython forwards to",
                    given, c->libc ? " " : "", c->libc ? c->libc : "", list);
}

/* What identifies trace t in its points' keys: the SHA-256 of its content
 * (sha[t]), and its file name too when an earlier trace of the sweep has
 * the same content, so that each file keeps its own points, rows and
 * stored runs instead of dedupe folding them into the first file's. */
static void trace_ident(const sweep_config_t *c, size_t t, char sha[][65],
                        char *out, size_t len) {
  bool twin = false;
  for (size_t u = 0; u < t && !twin; u++)
    twin = strcmp(sha[u], sha[t]) == 0 && strcmp(c->traces[u], c->traces[t]);
  if (twin)
    snprintf(out, len, "%s|file=%s", sha[t], c->traces[t]);
  else
    snprintf(out, len, "%s", sha[t]);
}

as_status_t sweep_expand(const sweep_config_t *c, sweep_point_t **out,
                         size_t *count, char spec_key[65], as_err_t *err) {
  *out = NULL;
  *count = 0;
  as_status_t rc = check_fixed(c, err);
  if (rc != AS_OK)
    return rc;
  size_t grid = 1;
  for (size_t a = 0; a < c->naxes; a++) {
    if (c->axes[a].count == 0 || grid > SIZE_MAX / c->axes[a].count)
      return as_err_set(err, AS_EUSAGE, "axis %s is empty or too big",
                        c->axes[a].name);
    for (size_t b = 0; b < a; b++)
      if (strcmp(c->axes[a].name, c->axes[b].name) == 0)
        return as_err_set(err, AS_EUSAGE,
                          "--vary %s is given twice (list every value "
                          "in one --vary)",
                          c->axes[a].name);
    grid *= c->axes[a].count;
  }
  size_t   sources = c->workload ? 1 : c->ntraces;
  unsigned seeds = c->seeds ? c->seeds : 1;
  if (sources == 0)
    return as_err_set(err, AS_EUSAGE, "no workload and no trace");
  if (grid > 1000000 / seeds / sources)
    return as_err_set(err, AS_EUSAGE,
                      "%zu sources x %zu grid points x %u seeds is "
                      "more than a million runs",
                      sources, grid, seeds);
  sweep_point_t *pts = calloc(sources * grid * seeds, sizeof *pts);
  if (pts == NULL)
    return as_err_set(err, AS_ENOMEM, "out of memory");
  size_t n = 0;
  char   sha[SWEEP_MAX_TRACES][65] = {""};
  rc = AS_OK;
  for (size_t t = 0; t < sources && rc == AS_OK; t++) {
    const char   *trace = c->workload ? NULL : c->traces[t];
    char          ident[65 + PATH_MAX] = "";
    trace_specs_t ts = {.model = "", .libc = ""};
    if (trace != NULL && trace_path_reads_once(trace)) {
      rc = as_err_set(err, AS_EINVAL,
                      "%s: expected a trace file: a sweep reads each trace "
                      "once per point and again on --resume, and a pipe or "
                      "FIFO can be read only once (copy it to a file)",
                      trace);
      break;
    }
    if (trace != NULL &&
        ((rc = open_trace_source(c, trace, &ts, err)) != AS_OK ||
         (rc = as_sha256_file(trace, sha[t], err)) != AS_OK))
      break;
    if (trace != NULL)
      trace_ident(c, t, sha, ident, sizeof ident);
    for (size_t g = 0; g < grid && rc == AS_OK; g++) {
      sweep_point_t base;
      grid_point(c, g, &base);
      bool     has_seed = trace == NULL && seeded(c, &base);
      unsigned ns = has_seed ? seeds : 1;
      for (unsigned k = 0; k < ns && rc == AS_OK; k++) {
        sweep_point_t *p = &pts[n++];
        *p = base;
        p->point = t * grid + g;
        p->seed = has_seed ? k + 1 : 0;
        rc = fill_point(c, p, trace, ident, &ts, k == 0, err);
      }
    }
  }
  if (rc == AS_OK)
    rc = check_option_axes(c, pts, n, err);
  if (rc == AS_OK)
    rc = check_libc_used(c, pts, n, err);
  if (rc == AS_OK)
    rc = dedupe(pts, &n, spec_key, err);
  if (rc != AS_OK) {
    free(pts);
    return rc;
  }
  *out = pts;
  *count = n;
  return AS_OK;
}

size_t sweep_shard(sweep_point_t *points, size_t n, unsigned index,
                   unsigned count) {
  if (count <= 1)
    return n;
  size_t k = 0;
  for (size_t i = index; i < n; i += count)
    points[k++] = points[i];
  return k;
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
  sweep_point_t *p = ctx->p;
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
      p->arenas_peak = counter_or_none(m, "pymalloc.arenas");
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
  in.size_bytes = strtoull(effective(c, p, "size"), &end, 10);
  in.total_bytes =
      (uint64_t)(strtod(effective(c, p, "total"), &end) * 1048576.0);
  in.fraction = strtod(effective(c, p, "fraction"), &end);
  in.every = strtoull(effective(c, p, "every"), &end, 10);
  if (pat == NULL || !survivors_pattern_parse(pat, &in.pattern))
    return;
  /* mmap returns 16 KiB-aligned arenas only with OS pages >= 16 KiB. */
  in.arena_aligned = p->page_size >= PYMALLOC_POOL_SIZE;
  in.page_bytes = page_bytes; /* the model's formula unit (model.h) */
  formula_result_t r;
  if (formula_survivors(&in, &r, NULL) == AS_OK) {
    p->have_formula = true;
    p->formula_kept_bytes = r.kept_bytes;
    p->formula_sd_bytes = r.sd_bytes;
  }
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs point p on the layout with mmap_top lowered by mmap_offset. */
static as_status_t run_layout(const sweep_config_t *c, sweep_point_t *p,
                              uint64_t mmap_offset, as_err_t *err) {
  p->nmarks = p->nsamples = 0;
  p->arenas_pinned = p->arenas_peak = p->unaligned_peak = -1;
  p->have_kept = p->have_formula = false;
  p->error[0] = '\0';
  char  storage[ARGV_MAX][128];
  char *argv[ARGV_MAX];
  int   argc = p->trace ? 0 : point_argv(c, p, storage, argv);

  sim_kernel_config_t kcfg = c->kernel;
  kcfg.page_size = p->page_size;
  trace_source_t  *src = NULL;
  sim_session_t    sess;
  bool             have_session = false;
  sim_run_result_t res = {0};
  double           t0 = now_seconds();
  /* The same layout rule as `compare --layouts` (sim/kernel.h). */
  as_status_t rc = sim_kernel_config_offset_layout(&kcfg, mmap_offset, err);
  if (rc == AS_OK)
    rc = p->trace ? trace_open(p->trace, &src, err)
                  : workload_open_argv(c->workload, argc, argv, &src, err);
  if (rc == AS_OK) {
    rc = sim_session_open(p->model, p->libc[0] ? p->libc : NULL, &kcfg, &sess,
                          err);
    have_session = rc == AS_OK;
  }
  uint64_t page_bytes = 0;
  if (rc == AS_OK) {
    page_bytes = sess.model->methods->formula_page_bytes;
    snprintf(p->model_desc, sizeof p->model_desc, "%s", sess.model_desc);
    run_ctx_t           ctx = {.p = p, .s = &sess};
    sim_engine_config_t ecfg = {.on_sample = on_sample,
                                .user = &ctx,
                                .max_memory_bytes = kcfg.max_memory_bytes};
    rc = sim_engine_run(&ecfg, &sess, src, &res, err);
  }
  p->seconds = now_seconds() - t0;
  p->events = res.events;
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
    p->have_kept = true;
    p->kept_bytes = (int64_t)after - (int64_t)start;
  }
  p->kept_min_bytes = p->kept_max_bytes = p->kept_bytes;
  point_formula(c, p, page_bytes);
  return AS_OK;
}

/* The layouts point p is averaged over (sweep_config_t.layouts). */
static unsigned layouts_for(const sweep_config_t *c, const sweep_point_t *p) {
  for (size_t a = 0; a < c->naxes; a++)
    if (is_mmap_offset(c->axes[a].name))
      return 1;
  if (c->layouts != 0)
    return c->layouts;
  uint64_t n = PYMALLOC_POOL_SIZE / p->page_size;
  return n < 1 ? 1 : (unsigned)n;
}

static int64_t mean_i64(int64_t sum, unsigned n) {
  return (int64_t)llround((double)sum / n);
}

/* Adds layout q's results to the sums in acc (marks and samples: RSS and
 * owners; counters; peak); false if its samples do not line up. */
static bool add_layout(sweep_point_t *acc, const sweep_point_t *q) {
  if (q->nmarks != acc->nmarks || q->nsamples != acc->nsamples)
    return false;
  for (size_t i = 0; i < q->nmarks; i++)
    acc->marks[i].rss_bytes += q->marks[i].rss_bytes;
  for (size_t i = 0; i < q->nsamples; i++) {
    acc->samples[i].rss_bytes += q->samples[i].rss_bytes;
    for (int o = 0; o < SIM_OWNER_COUNT; o++)
      acc->samples[i].owner_bytes[o] += q->samples[i].owner_bytes[o];
  }
  acc->arenas_pinned += q->arenas_pinned;
  acc->arenas_peak += q->arenas_peak;
  acc->unaligned_peak += q->unaligned_peak;
  acc->peak_rss_bytes += q->peak_rss_bytes;
  acc->seconds += q->seconds;
  if (q->kept_bytes < acc->kept_min_bytes)
    acc->kept_min_bytes = q->kept_bytes;
  if (q->kept_bytes > acc->kept_max_bytes)
    acc->kept_max_bytes = q->kept_bytes;
  return true;
}

static void take_means(sweep_point_t *p, unsigned n) {
  for (size_t i = 0; i < p->nmarks; i++)
    p->marks[i].rss_bytes = (p->marks[i].rss_bytes + n / 2) / n;
  for (size_t i = 0; i < p->nsamples; i++) {
    p->samples[i].rss_bytes = (p->samples[i].rss_bytes + n / 2) / n;
    for (int o = 0; o < SIM_OWNER_COUNT; o++)
      p->samples[i].owner_bytes[o] = (p->samples[i].owner_bytes[o] + n / 2) / n;
  }
  /* Counters are -1 where the model has none: then -n / n stays -1. */
  p->arenas_pinned = mean_i64(p->arenas_pinned, n);
  p->arenas_peak = mean_i64(p->arenas_peak, n);
  p->unaligned_peak = mean_i64(p->unaligned_peak, n);
  p->peak_rss_bytes = (p->peak_rss_bytes + n / 2) / n;
  uint64_t start, after;
  if (p->have_kept && sweep_point_mark(p, "start", &start) &&
      sweep_point_mark(p, "after", &after))
    p->kept_bytes = (int64_t)after - (int64_t)start;
}

as_status_t sweep_run_point(const sweep_config_t *c, sweep_point_t *p,
                            as_err_t *err) {
  as_err_t local = {0};
  if (err == NULL)
    err = &local;
  unsigned    n = layouts_for(c, p);
  as_status_t rc = run_layout(c, p, p->mmap_offset, err);
  p->layouts = 1;
  if (rc != AS_OK || n == 1)
    return rc;
  sweep_point_t *q = malloc(sizeof *q);
  if (q == NULL) {
    p->status = as_err_set(err, AS_ENOMEM, "out of memory");
    return p->status;
  }
  for (unsigned k = 1; k < n && rc == AS_OK; k++) {
    *q = *p;
    rc = run_layout(c, q, p->mmap_offset + k * p->page_size, err);
    if (rc == AS_OK && !add_layout(p, q))
      rc = as_err_set(err, AS_EINVAL,
                      "layout %u gave other marks than layout 0 (an engine "
                      "bug)",
                      k);
    if (rc != AS_OK) {
      p->status = rc;
      snprintf(p->error, sizeof p->error, "%s", err->msg);
    }
  }
  free(q);
  if (rc == AS_OK) {
    take_means(p, n);
    p->layouts = n;
  }
  return rc;
}

/* ---- Worker threads ----------------------------------------------------- */

typedef struct pool_s {
  pthread_mutex_t       mu;
  pthread_cond_t        cv;
  const sweep_config_t *c;
  sweep_point_t        *points;
  size_t                n;
  size_t                next;  /* next point to start */
  size_t               *done;  /* finished indices, in completion order */
  size_t                ndone; /* entries in done */
  bool                  stop;  /* no new points */
} pool_t;

static void *worker(void *arg) {
  pool_t *pool = arg;
  as_reserve_reuse_begin();
  for (;;) {
    pthread_mutex_lock(&pool->mu);
    bool   stop = pool->stop || (pool->c->stop && *pool->c->stop);
    size_t i = stop ? pool->n : pool->next;
    if (i < pool->n)
      pool->next++;
    else
      pthread_cond_signal(&pool->cv); /* wake the reporter to see the end */
    pthread_mutex_unlock(&pool->mu);
    if (i >= pool->n) {
      as_reserve_reuse_end();
      return NULL;
    }
    sweep_run_point(pool->c, &pool->points[i], NULL);
    pool->points[i].ran = true;
    pthread_mutex_lock(&pool->mu);
    pool->done[pool->ndone++] = i;
    pthread_cond_signal(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
  }
}

as_status_t sweep_run(const sweep_config_t *c, sweep_point_t *points, size_t n,
                      sweep_done_fn done, void *user, as_err_t *err) {
  unsigned jobs = c->jobs;
  if (jobs == 0) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    jobs = online > 0 ? (unsigned)online : 1;
  }
  if (jobs > n)
    jobs = n ? (unsigned)n : 1;
  as_status_t rc = AS_OK;
  if (jobs <= 1) {
    as_reserve_reuse_begin();
    for (size_t i = 0; i < n && rc == AS_OK && !(c->stop && *c->stop); i++) {
      sweep_run_point(c, &points[i], NULL);
      points[i].ran = true;
      rc = done(user, &points[i], i + 1, n, err);
    }
    as_reserve_reuse_end();
    return rc;
  }
  pool_t pool = {.c = c, .points = points, .n = n};
  pool.done = calloc(n, sizeof *pool.done);
  pthread_t *tids = calloc(jobs, sizeof *tids);
  if (pool.done == NULL || tids == NULL) {
    free(pool.done);
    free(tids);
    return as_err_set(err, AS_ENOMEM, "out of memory");
  }
  pthread_mutex_init(&pool.mu, NULL);
  pthread_cond_init(&pool.cv, NULL);
  unsigned started = 0;
  for (; started < jobs; started++)
    if (pthread_create(&tids[started], NULL, worker, &pool) != 0)
      break;
  if (started == 0) {
    rc = as_err_set(err, AS_ENOMEM, "cannot start a worker thread");
    pool.stop = true;
  }
  /* Report every point that was started: all n, or after a stop only those
   * already running (pool.next counts starts). */
  size_t reported = 0;
  pthread_mutex_lock(&pool.mu);
  for (;;) {
    bool   stop = pool.stop || (c->stop && *c->stop);
    size_t expected = stop ? pool.next : n;
    if (reported >= expected)
      break;
    if (reported == pool.ndone) {
      pthread_cond_wait(&pool.cv, &pool.mu);
      continue;
    }
    size_t i = pool.done[reported++];
    pthread_mutex_unlock(&pool.mu);
    as_status_t drc =
        rc == AS_OK ? done(user, &points[i], reported, n, err) : AS_OK;
    pthread_mutex_lock(&pool.mu);
    if (drc != AS_OK) {
      rc = drc;
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

/* Appends s to buf as a JSON string (sim/json.h: valid UTF-8). */
static size_t json_str(char *buf, size_t len, size_t used, const char *s) {
  if (used < len)
    buf[used] = '"';
  used++;
  char piece[AS_JSON_PIECE_MAX];
  while (*s) {
    s += as_json_piece(s, piece);
    for (char *e = piece; *e; e++, used++)
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
  used += (size_t)snprintf(buf + (used < len ? used : len),                    \
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
         ",\"seed\":%" PRIu64 ",",
         p->page_size, p->mmap_offset, p->seed);
  if (p->layouts > 1)
    APPEND("\"layouts\":%u,\"kept_min_bytes\":%" PRId64
           ",\"kept_max_bytes\":%" PRId64 ",",
           p->layouts, p->kept_min_bytes, p->kept_max_bytes);
  APPEND("\"args\":");
  used = json_str(buf, len, used, p->args);
  APPEND(",\"model_spec\":");
  used = json_str(buf, len, used, p->model);
  if (p->libc[0] != '\0') {
    APPEND(",\"libc_spec\":");
    used = json_str(buf, len, used, p->libc);
  }
  if (p->have_formula)
    APPEND(",\"formula_sd_bytes\":%.17g", p->formula_sd_bytes);
  APPEND("}");
}

/* The sweep's parameters as stored in sweeps.params (JSON). */
static bool sweep_params_json(const sweep_config_t *c, char *buf, size_t len) {
  size_t used = 0;
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
  APPEND("},\"traces\":[");
  for (size_t t = 0; t < c->ntraces; t++) {
    used = json_str(buf, len, used, c->traces[t]);
    APPEND(t + 1 < c->ntraces ? "," : "");
  }
  APPEND("],\"seeds\":%u,\"model\":", c->seeds ? c->seeds : 1);
  if (c->model) /* NULL: each trace's own (see point_specs) */
    used = json_str(buf, len, used, c->model);
  else
    APPEND("null");
  APPEND(",\"libc\":");
  if (c->libc)
    used = json_str(buf, len, used, c->libc);
  else
    APPEND("null");
  APPEND(",\"page_size\":%" PRIu64 ",\"thp\":%s", c->kernel.page_size,
         c->kernel.thp ? "true" : "false");
  /* Only where not the default, so that older sweeps keep their keys. */
  if (c->kernel.memory_pressure)
    APPEND(",\"memory_pressure\":true");
  if (!c->kernel.zero_page)
    APPEND(",\"zero_page\":false");
  if (c->kernel.thp_align != SIM_THP_ALIGN_NONE)
    APPEND(",\"thp_align\":%d", (int)c->kernel.thp_align);
  APPEND("}");
  return used < len;
}

/* Prepares sql on s's database; AS_ESTORE naming what on failure. */
static as_status_t prepare_sql(store_t *s, const char *sql, const char *what,
                               sqlite3_stmt **st, as_err_t *err) {
  if (sqlite3_prepare_v2(store_db(s), sql, -1, st, NULL) == SQLITE_OK)
    return AS_OK;
  *st = NULL;
  return as_err_set(err, AS_ESTORE, "%s: %s: %s", store_path(s), what,
                    sqlite3_errmsg(store_db(s)));
}

/* Steps a write statement to its end and finalizes it. */
static as_status_t step_done(store_t *s, sqlite3_stmt *st, const char *what,
                             as_err_t *err) {
  as_status_t rc = AS_OK;
  if (sqlite3_step(st) != SQLITE_DONE)
    rc = as_err_set(err, AS_ESTORE, "%s: %s: %s", store_path(s), what,
                    sqlite3_errmsg(store_db(s)));
  sqlite3_finalize(st);
  return rc;
}

/* The latest sweep with spec key and shard, or 0. */
static int64_t latest_sweep(store_t *s, const char *spec_key,
                            const char *shard) {
  sqlite3_stmt *st = NULL;
  int64_t       id = 0;
  if (prepare_sql(s,
                  "SELECT max(id) FROM sweeps WHERE spec_key = ?1 AND "
                  "coalesce(shard, '') = ?2",
                  "finding the sweep", &st, NULL) == AS_OK) {
    sqlite3_bind_text(st, 1, spec_key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, shard ? shard : "", -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) == SQLITE_ROW)
      id = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  return id;
}

/* Writes a new sweeps row; *id receives it. */
static as_status_t insert_sweep(store_t *s, const sweep_config_t *c,
                                const sweep_store_info_t *info,
                                const char *params, const char *host,
                                int64_t *id, as_err_t *err) {
  sqlite3_stmt *st;
  as_status_t   rc = prepare_sql(
        s,
        "INSERT INTO sweeps(workload, params, spec_key, state, total_points, "
          "shard, host, pid, allocsim_version, uid) VALUES(?1, ?2, ?3, "
          "'running', ?4, ?5, ?6, ?7, ?8, lower(hex(randomblob(16))))",
        "recording the sweep", &st, err);
  if (rc != AS_OK)
    return rc;
  sqlite3_bind_text(st, 1, c->workload ? c->workload->name : "trace", -1,
                    SQLITE_STATIC);
  sqlite3_bind_text(st, 2, params, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 3, info->spec_key, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 4, (sqlite3_int64)info->total_points);
  if (info->shard)
    sqlite3_bind_text(st, 5, info->shard, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 6, host, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 7, getpid());
  sqlite3_bind_text(st, 8, ALLOCSIM_VERSION, -1, SQLITE_STATIC);
  rc = step_done(s, st, "recording the sweep", err);
  *id = sqlite3_last_insert_rowid(store_db(s));
  return rc;
}

as_status_t sweep_store_begin(store_t *s, const sweep_config_t *c,
                              const sweep_store_info_t *info, int64_t *sweep_id,
                              as_err_t *err) {
  char params[8192], host[256] = "";
  if (!sweep_params_json(c, params, sizeof params))
    return as_err_set(err, AS_EINVAL, "parameters too long to store");
  gethostname(host, sizeof host - 1);
  as_status_t rc = store_begin(s, err);
  if (rc != AS_OK)
    return rc;
  int64_t id = info->resume ? latest_sweep(s, info->spec_key, info->shard) : 0;
  if (id != 0) {
    sqlite3_stmt *st;
    rc = prepare_sql(s,
                     "UPDATE sweeps SET state = 'running', host = ?1, "
                     "pid = ?2, finished_at = NULL WHERE id = ?3",
                     "resuming the sweep", &st, err);
    if (rc == AS_OK) {
      sqlite3_bind_text(st, 1, host, -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(st, 2, getpid());
      sqlite3_bind_int64(st, 3, id);
      rc = step_done(s, st, "resuming the sweep", err);
    }
  } else {
    rc = insert_sweep(s, c, info, params, host, &id, err);
  }
  if (rc != AS_OK) {
    store_rollback(s);
    return rc;
  }
  *sweep_id = id;
  return store_commit(s, err);
}

as_status_t sweep_store_finish(store_t *s, int64_t sweep_id, const char *state,
                               as_err_t *err) {
  as_status_t   rc = store_begin(s, err);
  sqlite3_stmt *st;
  if (rc == AS_OK)
    rc = prepare_sql(s,
                     "UPDATE sweeps SET state = ?1, pid = NULL, finished_at = "
                     "strftime('%Y-%m-%dT%H:%M:%fZ','now') WHERE id = ?2",
                     "finishing the sweep", &st, err);
  if (rc == AS_OK) {
    sqlite3_bind_text(st, 1, state, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, sweep_id);
    rc = step_done(s, st, "finishing the sweep", err);
  }
  if (rc != AS_OK) {
    store_rollback(s);
    return rc;
  }
  return store_commit(s, err);
}

as_status_t sweep_skip_done(store_t *s, const char *spec_key,
                            sweep_point_t *points, size_t *n, as_err_t *err) {
  sqlite3_stmt *st = NULL;
  int           rc = sqlite3_prepare_v2(
                store_db(s),
                "SELECT 1 FROM sweep_points p JOIN sweeps w ON w.id = p.sweep_id "
                          "WHERE w.spec_key = ?1 AND p.key = ?2 AND p.run_id IS NOT NULL LIMIT 1",
                -1, &st, NULL);
  if (rc != SQLITE_OK)
    return as_err_set(err, AS_ESTORE, "%s: %s", store_path(s),
                      sqlite3_errmsg(store_db(s)));
  size_t k = 0;
  for (size_t i = 0; i < *n; i++) {
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, spec_key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, points[i].key, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_ROW)
      points[k++] = points[i];
  }
  sqlite3_finalize(st);
  *n = k;
  return AS_OK;
}

as_status_t sweep_store_point(store_t *s, int64_t sweep_id,
                              const sweep_config_t *c, const sweep_point_t *p,
                              as_err_t *err) {
  char params[2048];
  sweep_point_json(c, p, params, sizeof params);
  char source[600], sid[32], pt[32], seed[32];
  snprintf(source, sizeof source, "%s %s",
           p->trace ? "trace" : c->workload->name, p->args);
  snprintf(sid, sizeof sid, "%" PRId64, sweep_id);
  snprintf(pt, sizeof pt, "%" PRIu64, p->point);
  snprintf(seed, sizeof seed, "%" PRIu64, p->seed);
  int64_t     run_id = 0;
  as_status_t rc = store_begin(s, err);
  if (rc != AS_OK)
    return rc;
  if (p->status == AS_OK) {
    store_kv_t  meta[] = {{"sweep_id", sid},
                          {"sweep_point", pt},
                          {"sweep_seed", seed},
                          {"sweep_point_key", p->key},
                          {p->trace ? "trace" : "workload", source}};
    store_run_t run = {.kind = "simulated",
                       .model = p->model_desc,
                       .options = p->libc[0] ? p->libc : NULL,
                       .page_size = p->page_size,
                       .source = source,
                       .command = c->command ? c->command : "sweep",
                       .meta = meta,
                       .meta_count = sizeof meta / sizeof meta[0]};
    rc = store_write_run(s, &run, p->samples, p->nsamples, &run_id, err);
  }
  sqlite3_stmt *stmt = NULL;
  if (rc == AS_OK)
    rc = prepare_sql(
        s,
        "INSERT OR REPLACE INTO sweep_points(sweep_id, point, seed, "
        "params_json, model, page_size, simulated_kept_bytes, "
        "formula_kept_bytes, arenas_pinned, run_id, key) VALUES(?1, ?2, ?3, "
        "?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        "recording a sweep point", &stmt, err);
  if (rc == AS_OK) {
    sqlite3_bind_int64(stmt, 1, sweep_id);
    sqlite3_bind_int64(stmt, 2, (sqlite3_int64)p->point);
    sqlite3_bind_int64(stmt, 3, (sqlite3_int64)p->seed);
    sqlite3_bind_text(stmt, 4, params, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt, 5, p->model_desc[0] ? p->model_desc : p->model, -1,
                      SQLITE_TRANSIENT);
    sqlite3_bind_int64(stmt, 6, (sqlite3_int64)p->page_size);
    if (p->status == AS_OK && p->have_kept)
      sqlite3_bind_int64(stmt, 7, p->kept_bytes);
    if (p->have_formula)
      sqlite3_bind_double(stmt, 8, p->formula_kept_bytes);
    if (p->status == AS_OK && p->arenas_pinned >= 0)
      sqlite3_bind_int64(stmt, 9, p->arenas_pinned);
    if (p->status == AS_OK)
      sqlite3_bind_int64(stmt, 10, run_id);
    sqlite3_bind_text(stmt, 11, p->key, -1, SQLITE_TRANSIENT);
    rc = step_done(s, stmt, "recording a sweep point", err);
  }
  if (rc != AS_OK) {
    store_rollback(s);
    return rc;
  }
  return store_commit(s, err);
}
