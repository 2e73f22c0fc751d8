/* analysis/advise.c -- remedies simulated and ranked (see advise.h).
 *
 * The remedy table names, for each change a user can make, the allocator
 * it applies to, how it changes the simulation and how the user makes it.
 * Which remedies apply is decided by trying them: a model that is not
 * registered, or an option a model does not have, makes the session fail
 * to open with AS_EUSAGE, and that remedy is left out, so models added
 * later bring their remedies into play by existing.
 */
#include "advise.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/cost.h"
#include "../sim/reserve.h"
#include "../traces/insert.h"

typedef enum remedy_kind_e {
  RK_INSERT,     /* arg: an --insert spec, MARK standing for the mark */
  RK_LIBC_OPTS,  /* arg: options added to the libc model */
  RK_MODEL_OPTS, /* arg: options added to the top model */
  RK_LIBC_SWAP   /* arg: another libc model spec */
} remedy_kind_t;

typedef struct remedy_row_s remedy_row_t;
struct remedy_row_s {
  const char   *libc; /* applies when the libc model is this (NULL: any) */
  const char   *top;  /* ... and the top model is this (NULL: any) */
  remedy_kind_t kind;
  const char   *arg;
  const char   *name; /* MARK stands for the mark */
  const char   *env;  /* what the user does */
  const char   *also; /* an --insert spec combined with the change, or NULL */
};

static const remedy_row_t remedy_rows[] = {
    {"glibc", NULL, RK_INSERT, "trim@MARK", "malloc_trim(0) at MARK",
     "call malloc_trim(0) there (Python: ctypes.CDLL(None).malloc_trim(0))",
     NULL},
    {"glibc", NULL, RK_INSERT, "trim@every:1s", "malloc_trim(0) every second",
     "a thread that calls malloc_trim(0) once a second", NULL},
    {"glibc", NULL, RK_LIBC_OPTS, "arena_max=2", "MALLOC_ARENA_MAX=2",
     "MALLOC_ARENA_MAX=2", NULL},
    {"glibc", NULL, RK_LIBC_OPTS, "arena_max=1", "MALLOC_ARENA_MAX=1",
     "MALLOC_ARENA_MAX=1", NULL},
    /* A ladder of mmap thresholds: requests at or above it are mmapped
     * (glibc 2.36 malloc/malloc.c:2573-2592 in sysmalloc) and unmapped at
     * free (munmap_chunk, 3036-3063), at the price of a page-rounded
     * mapping each; which step pays depends on the program's sizes. */
    {"glibc", NULL, RK_LIBC_OPTS, "mmap_threshold=512",
     "MALLOC_MMAP_THRESHOLD_=512", "MALLOC_MMAP_THRESHOLD_=512", NULL},
    {"glibc", NULL, RK_LIBC_OPTS, "mmap_threshold=4096",
     "MALLOC_MMAP_THRESHOLD_=4096", "MALLOC_MMAP_THRESHOLD_=4096", NULL},
    {"glibc", NULL, RK_LIBC_OPTS, "mmap_threshold=65536",
     "MALLOC_MMAP_THRESHOLD_=65536", "MALLOC_MMAP_THRESHOLD_=65536", NULL},
    {"glibc", NULL, RK_LIBC_OPTS, "trim_threshold=131072",
     "MALLOC_TRIM_THRESHOLD_=131072",
     "MALLOC_TRIM_THRESHOLD_=131072 (also freezes the dynamic thresholds)",
     NULL},
    {NULL, "cpython", RK_MODEL_OPTS, "pythonmalloc=malloc",
     "PYTHONMALLOC=malloc", "PYTHONMALLOC=malloc", NULL},
    {"glibc", "cpython", RK_MODEL_OPTS, "pythonmalloc=malloc",
     "PYTHONMALLOC=malloc + malloc_trim(0) at MARK",
     "PYTHONMALLOC=malloc, and call malloc_trim(0) there", "trim@MARK"},
    {NULL, NULL, RK_LIBC_SWAP, "jemalloc", "jemalloc, defaults",
     "LD_PRELOAD=libjemalloc.so.2", NULL},
    {NULL, NULL, RK_LIBC_SWAP, "jemalloc:dirty_decay_ms=0,muzzy_decay_ms=0",
     "jemalloc, immediate decay",
     "LD_PRELOAD=libjemalloc.so.2 MALLOC_CONF=dirty_decay_ms:0,"
     "muzzy_decay_ms:0",
     NULL},
    {NULL, NULL, RK_LIBC_SWAP, "jemalloc:background_thread=true",
     "jemalloc, background threads",
     "LD_PRELOAD=libjemalloc.so.2 MALLOC_CONF=background_thread:true", NULL},
    {NULL, NULL, RK_LIBC_SWAP, "mimalloc", "mimalloc, defaults",
     "LD_PRELOAD=libmimalloc.so.2", NULL},
    /* Debian 12's libmimalloc.so.2 is 2.0.9 (the model's default), which
     * reads MIMALLOC_DECOMMIT_DELAY; 2.1 renamed it purge_delay (v2.1.2
     * src/options.c:78) and 2.0.9 ignores that name. */
    {NULL, NULL, RK_LIBC_SWAP, "mimalloc:decommit_delay=0",
     "mimalloc, immediate decommit",
     "LD_PRELOAD=libmimalloc.so.2 MIMALLOC_DECOMMIT_DELAY=0 (mimalloc 2.0.9; "
     "MIMALLOC_PURGE_DELAY=0 from 2.1)",
     NULL},
    {NULL, NULL, RK_LIBC_SWAP, "tcmalloc", "tcmalloc, defaults",
     "LD_PRELOAD=libtcmalloc_minimal.so.4", NULL},
    {"jemalloc", NULL, RK_INSERT, "purge@MARK", "jemalloc purge at MARK",
     "mallctl(\"arena.4096.purge\", ...) there", NULL},
    {"jemalloc", NULL, RK_LIBC_OPTS, "dirty_decay_ms=1000",
     "dirty_decay_ms=1000", "MALLOC_CONF=dirty_decay_ms:1000", NULL},
    /* mimalloc purges freed pages only when the program later touches the
     * same segment or calls mi_collect (models/mimalloc.c): no purge delay,
     * or a collect where the program goes idle.  Of the two delay rows
     * only the version's own spelling opens (2.0.9 v2.0.9 src/options.c:88
     * decommit_delay, 2.1+ purge_delay). */
    {"mimalloc", NULL, RK_LIBC_OPTS, "decommit_delay=0",
     "MIMALLOC_DECOMMIT_DELAY=0", "MIMALLOC_DECOMMIT_DELAY=0", NULL},
    {"mimalloc", NULL, RK_LIBC_OPTS, "purge_delay=0", "MIMALLOC_PURGE_DELAY=0",
     "MIMALLOC_PURGE_DELAY=0", NULL},
    {"mimalloc", NULL, RK_INSERT, "purge:decay@MARK",
     "mi_collect(false) at MARK", "call mi_collect(false) there", NULL},
    {"mimalloc", NULL, RK_INSERT, "purge@MARK", "mi_collect(true) at MARK",
     "call mi_collect(true) there", NULL},
    {"mimalloc", NULL, RK_INSERT, "purge:decay@every:1s",
     "mi_collect(false) every second",
     "call mi_collect(false) once a second on the main thread", NULL},
    {"tcmalloc", NULL, RK_INSERT, "purge@MARK", "ReleaseFreeMemory at MARK",
     "call MallocExtension_ReleaseFreeMemory() there", NULL},
};

/* ---- Specs -------------------------------------------------------------- */

/* ---- One simulation ----------------------------------------------------- */

typedef struct probe_s probe_t;
struct probe_s {
  const char *mark; /* RSS at its first occurrence */
  bool        seen;
  uint64_t    rss;
  uint64_t    t_ns;         /* the mark's time */
  char        prev[64];     /* the mark before it, "" if none */
  uint64_t    prev_t_ns;    /* ... and its time */
  bool        has_measured; /* a measured RSS sample at the mark's time */
  uint64_t    measured;
  bool        has_origin; /* a replay with inserts: */
  uint64_t    origin_ns;  /* the first event's time, periodic ones' zero */
  uint64_t    best_gap;   /* widest RSS - live gap at a mark */
  char        best[64];
  uint64_t    end_gap;       /* the RSS - live gap at the end */
  bool        has_last;      /* a measured RSS sample: the last one */
  uint64_t    last_measured; /* ... its RSS */
  uint64_t    last_t_ns;     /* ... and time */
  uint64_t    end_t_ns;      /* the trace's last event's time */
};

static as_status_t probe_sample(void *user, const sim_sample_t *s,
                                as_err_t *err) {
  (void)err;
  probe_t *p = user;
  explain_take_measured(s, p->seen, p->t_ns, &p->has_measured, &p->measured);
  if (s->kind == SIM_SAMPLE_MEASURED) {
    p->has_last = true;
    p->last_measured = s->measured_rss_bytes;
    p->last_t_ns = s->t_ns;
  }
  if (s->kind != SIM_SAMPLE_MARK || s->label == NULL)
    return AS_OK;
  uint64_t gap =
      s->rss_bytes > s->live_bytes ? s->rss_bytes - s->live_bytes : 0;
  if (p->best[0] == '\0' || gap > p->best_gap) {
    p->best_gap = gap;
    snprintf(p->best, sizeof p->best, "%s", s->label);
  }
  if (p->mark != NULL && !p->seen) {
    if (strcmp(s->label, p->mark) == 0) {
      p->seen = true;
      p->rss = s->rss_bytes;
      p->t_ns = s->t_ns;
    } else {
      snprintf(p->prev, sizeof p->prev, "%s", s->label);
      p->prev_t_ns = s->t_ns;
    }
  }
  return AS_OK;
}

static as_status_t simulate(const explain_opts_t *o, explain_open_fn open,
                            void *user, const char *model, const char *libc,
                            const trace_insert_t *ins, size_t nins,
                            probe_t *probe, advise_outcome_t *out,
                            uint32_t *max_threads, as_err_t *err) {
  trace_source_t *src;
  sim_session_t   s;
  as_status_t     rc = sim_session_open(model, libc, &o->kernel, &s, err);
  if (rc != AS_OK)
    return rc;
  if ((rc = open(user, &src, err)) == AS_OK && nins > 0)
    rc = trace_insert_wrap(src, ins, nins, &src, err);
  if (rc != AS_OK) {
    sim_session_close(&s);
    return rc;
  }
  sim_engine_config_t cfg = {.settle_ns = o->settle_ns,
                             .lenient = o->lenient,
                             .on_sample = probe_sample,
                             .user = probe};
  sim_run_result_t    r;
  rc = sim_engine_run(&cfg, &s, src, &r, err);
  if (rc == AS_OK) {
    sim_kernel_calls_t c;
    sim_kernel_calls(s.kernel, &c);
    out->rss_at_mark = probe->seen ? probe->rss : r.final_rss_bytes;
    out->rss_at_end = r.final_rss_bytes;
    probe->end_t_ns = r.final_t_ns;
    probe->end_gap = r.final_rss_bytes > r.final_live_bytes
                         ? r.final_rss_bytes - r.final_live_bytes
                         : 0;
    out->peak_rss = r.peak_rss_bytes;
    out->syscalls =
        c.mmap + c.munmap + c.mremap + c.mprotect + c.brk + c.madvise;
    out->faults = c.faults;
    out->cost_ns = sim_cost_kernel_ns(&sim_cost_measured, &c);
    if (max_threads != NULL)
      *max_threads = r.max_threads;
    if (nins > 0)
      probe->has_origin = trace_insert_origin(src, &probe->origin_ns);
  }
  trace_source_close(src);
  sim_session_close(&s);
  return rc;
}

static as_status_t no_op_at(void *user, const sim_session_t *s,
                            const sim_sample_t *at, as_err_t *err) {
  (void)user, (void)s, (void)at, (void)err;
  return AS_OK;
}

/* ---- Remedies ----------------------------------------------------------- */

/* s with every "MARK" replaced by mark. */
static void fill_mark(const char *s, const char *mark, char *out, size_t len) {
  size_t used = 0;
  out[0] = '\0';
  while (*s != '\0' && used + 1 < len) {
    if (strncmp(s, "MARK", 4) == 0) {
      used += (size_t)snprintf(out + used, len - used, "%s", mark);
      s += 4;
    } else {
      out[used++] = *s++;
      out[used] = '\0';
    }
  }
}

/* Sets r's specs for row on top of the baseline; false if the row does not
 * apply to this baseline. */
static bool remedy_specs(const remedy_row_t *row, bool composed,
                         const char *model, const char *libc,
                         advise_remedy_t *r) {
  char top[64], lib[64], swap[64];
  model_spec_name(model, top, sizeof top);
  model_spec_name(composed ? libc : model, lib, sizeof lib);
  if ((row->libc != NULL && strcmp(row->libc, lib) != 0) ||
      (row->top != NULL && strcmp(row->top, top) != 0))
    return false;
  snprintf(r->model, sizeof r->model, "%s", model);
  snprintf(r->libc, sizeof r->libc, "%s", libc);
  char  *target = composed ? r->libc : r->model;
  size_t target_len = composed ? sizeof r->libc : sizeof r->model;
  switch (row->kind) {
  case RK_INSERT:
    return true;
  case RK_LIBC_OPTS:
    return model_spec_with(composed ? libc : model, row->arg, target,
                           target_len);
  case RK_MODEL_OPTS:
    return model_spec_with(model, row->arg, r->model, sizeof r->model);
  case RK_LIBC_SWAP: {
    model_spec_name(row->arg, swap, sizeof swap);
    if (strcmp(swap, lib) != 0) {
      snprintf(target, target_len, "%s", row->arg);
      return true;
    }
    /* Already that allocator: the row's settings, if it has any and the
     * baseline does not run with them already (a jemalloc run gets
     * "immediate decay" as MALLOC_CONF, not as a swap). */
    const char *opts = strchr(row->arg, ':');
    const char *base = composed ? libc : model;
    return opts != NULL &&
           model_spec_with(base, opts + 1, target, target_len) &&
           strcmp(target, base) != 0;
  }
  }
  return false;
}

/* Fills r->timing for a periodic remedy ins simulated with probe p: when
 * its last call before the mark fell after the mark before, and the two
 * are less than a period apart, simulates it again with the calls shifted
 * so that one falls at the mark before and none between them. */
static as_status_t periodic_timing(const explain_opts_t *o,
                                   explain_open_fn open, void *user,
                                   bool composed, trace_insert_t ins,
                                   const probe_t          *p,
                                   const advise_outcome_t *baseline,
                                   advise_remedy_t *r, as_err_t *err) {
  uint64_t period = ins.every_ns;
  if (period == 0 || !p->seen || !p->has_origin || p->prev[0] == '\0' ||
      p->t_ns - p->prev_t_ns >= period || p->t_ns - p->origin_ns < period)
    return AS_OK;
  uint64_t last_call =
      p->origin_ns + (p->t_ns - p->origin_ns) / period * period;
  if (last_call <= p->prev_t_ns)
    return AS_OK;
  /* Nonzero: the mark before is not the first event, as the marks are
   * less than a period apart and the mark a period or more after it. */
  ins.phase_ns = (p->prev_t_ns - p->origin_ns) % period;
  probe_t          again = {.mark = p->mark};
  advise_outcome_t shifted;
  as_status_t rc = simulate(o, open, user, r->model, composed ? r->libc : NULL,
                            &ins, 1, &again, &shifted, NULL, err);
  if (rc != AS_OK)
    return rc;
  advise_timing_t *t = &r->timing;
  t->decides = true;
  snprintf(t->prev_mark, sizeof t->prev_mark, "%s", p->prev);
  t->prev_before_ns = p->t_ns - p->prev_t_ns;
  t->call_before_ns = p->t_ns - last_call;
  t->saving_at_mark =
      (int64_t)baseline->rss_at_mark - (int64_t)shifted.rss_at_mark;
  return AS_OK;
}

/* Whether b ranks above a: it simulated and a did not; else it is one
 * change and a combines two (single changes first: a user tries one thing
 * at a time); else it saves more at the mark; else it costs less. */
static bool ranks_above(const advise_remedy_t *b, const advise_remedy_t *a) {
  if (a->ok != b->ok)
    return b->ok;
  if (a->changes != b->changes)
    return b->changes < a->changes;
  if (a->saving_at_mark != b->saving_at_mark)
    return b->saving_at_mark > a->saving_at_mark;
  return b->extra_cost_ns < a->extra_cost_ns;
}

static void rank(advise_result_t *out) {
  for (size_t i = 1; i < out->n; i++)
    for (size_t j = i; j > 0; j--) {
      advise_remedy_t *a = &out->remedies[j - 1], *b = &out->remedies[j];
      if (!ranks_above(b, a))
        break;
      advise_remedy_t t = *a;
      *a = *b;
      *b = t;
    }
}

static as_status_t advise_runs(const explain_opts_t *o, explain_open_fn open,
                               void *user, advise_result_t *out,
                               as_err_t *err) {
  memset(out, 0, sizeof *out);
  snprintf(out->model, sizeof out->model, "%s", o->model);
  snprintf(out->libc, sizeof out->libc, "%s", o->libc ? o->libc : "");
  probe_t     probe = {.mark = o->at};
  as_status_t rc = simulate(o, open, user, o->model, o->libc, NULL, 0, &probe,
                            &out->baseline, &out->max_threads, err);
  if (rc != AS_OK)
    return rc;
  if (o->at != NULL && !probe.seen) {
    /* The marks, for the message: a replay that lists them. */
    explain_marks_t marks;
    char            desc[8];
    rc = explain_replay_at(o, open, user, o->at, no_op_at, NULL, &marks, desc,
                           sizeof desc, err);
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "--at %.400s", err->msg + 5);
    return as_err_set(err, rc != AS_OK ? rc : AS_EINVAL, "%s", msg);
  }
  /* Without --at, the mark or the end where RSS exceeds live bytes the
   * most: a capture of a C program often has no mark but the anchor at
   * main, where nothing is held yet. */
  const char *mark = o->at ? o->at
                     : probe.best[0] && probe.best_gap >= probe.end_gap
                         ? probe.best
                         : NULL;
  out->at_end = mark == NULL;
  snprintf(out->mark, sizeof out->mark, "%s", mark ? mark : "end");
  if (mark != NULL && o->at == NULL) { /* measure the baseline at it */
    probe_t again = {.mark = mark};
    rc = simulate(o, open, user, o->model, o->libc, NULL, 0, &again,
                  &out->baseline, NULL, err);
    if (rc != AS_OK)
      return rc;
    probe = again;
  }
  out->has_measured = probe.has_measured;
  out->measured_at_mark = probe.measured;
  if (out->at_end) { /* a capture's last sample, read as the program ended */
    out->has_measured = probe.has_last && probe.last_t_ns == probe.end_t_ns;
    out->measured_at_mark = probe.last_measured;
  }
  const model_methods_t *top_methods;
  char                   top[64];
  model_spec_name(o->model, top, sizeof top);
  top_methods = model_find(top);
  bool composed = top_methods != NULL && top_methods->composition;
  for (size_t i = 0; i < sizeof remedy_rows / sizeof remedy_rows[0] &&
                     out->n < ADVISE_MAX_REMEDIES;
       i++) {
    const remedy_row_t *row = &remedy_rows[i];
    advise_remedy_t    *r = &out->remedies[out->n];
    memset(r, 0, sizeof *r);
    if (!remedy_specs(row, composed, o->model, o->libc ? o->libc : "", r))
      continue;
    fill_mark(row->name, out->mark, r->name, sizeof r->name);
    fill_mark(row->env, out->mark, r->env_or_call, sizeof r->env_or_call);
    trace_insert_t ins;
    size_t         nins = 0;
    as_err_t       e = {0};
    const char    *insert = row->kind == RK_INSERT ? row->arg : row->also;
    if (insert != NULL) {
      char spec[128];
      fill_mark(insert, out->mark, spec, sizeof spec);
      if (trace_insert_parse(spec, &ins, &e) != AS_OK)
        continue;
      if (mark == NULL && ins.every_ns == 0) { /* judged at the end */
        ins.mark[0] = '\0';
        ins.at_end = true;
      }
      nins = 1;
    }
    probe_t p = {.mark = mark};
    rc = simulate(o, open, user, r->model, composed ? r->libc : NULL, &ins,
                  nins, &p, &r->out, NULL, &e);
    if (rc == AS_EUSAGE)
      continue; /* not registered, or an option the model lacks */
    out->n++;
    r->changes = row->also != NULL ? 2 : 1;
    r->ok = rc == AS_OK;
    if (!r->ok) {
      snprintf(r->error, sizeof r->error, "%s", e.msg);
      continue;
    }
    const advise_outcome_t *b = &out->baseline;
    r->saving_at_mark = (int64_t)b->rss_at_mark - (int64_t)r->out.rss_at_mark;
    r->saving_at_end = (int64_t)b->rss_at_end - (int64_t)r->out.rss_at_end;
    r->saving_at_peak = (int64_t)b->peak_rss - (int64_t)r->out.peak_rss;
    r->extra_syscalls = (int64_t)r->out.syscalls - (int64_t)b->syscalls;
    r->extra_faults = (int64_t)r->out.faults - (int64_t)b->faults;
    r->extra_cost_ns = (int64_t)r->out.cost_ns - (int64_t)b->cost_ns;
    if (nins > 0 &&
        periodic_timing(o, open, user, composed, ins, &p, b, r, &e) != AS_OK) {
      r->ok = false;
      snprintf(r->error, sizeof r->error, "%s", e.msg);
    }
  }
  rank(out);
  return AS_OK;
}

/* One simulation per remedy, one after another: each takes over the tables
 * the previous one freed instead of faulting new ones in (sim/reserve.h). */
as_status_t advise_trace(const explain_opts_t *o, explain_open_fn open,
                         void *user, advise_result_t *out, as_err_t *err) {
  as_reserve_reuse_begin();
  as_status_t rc = advise_runs(o, open, user, out, err);
  as_reserve_reuse_end();
  return rc;
}
