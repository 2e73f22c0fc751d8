/* analysis/explain.c -- attributing RSS to what holds it (see explain.h).
 *
 * Trade-off: attribution walks every region the model reports and tests
 * each OS page it covers, O(regions + pages); a heap of a few hundred MiB
 * takes milliseconds, and explain runs at one or two instants, not per
 * event.  Keeping per-mechanism page counts inside every model would be
 * faster and duplicate what the walk already knows.
 */
#include "explain.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/grow.h"
#include "../traces/phases.h"
#include "../traces/sites.h"

#define MAX_MECHS 32
#define MIB       (1024.0 * 1024.0)

typedef struct mech_acc_s mech_acc_t;
struct mech_acc_s {
  const char *key;       /* the region's mechanism key */
  const char *unit_kind; /* kind of the first top-level unit seen */
  uint64_t    resident;  /* resident bytes of its regions */
  uint64_t    live;      /* live bytes in them, capped at resident */
  uint64_t    objects;   /* live objects in (live) or pinning (free) */
  uint64_t    units;     /* top-level units it appears in */
  uint64_t    last_unit; /* the unit counted last, to count each once */
  uint64_t    phase[TRACE_PHASES_MAX]; /* objects of its units, by the
                                          phase they were allocated in */
};

/* Live objects by top-level unit (arena, heap) and allocation phase. */
typedef struct unit_phases_s unit_phases_t;
typedef struct unit_s        unit_t;
struct unit_s {
  sim_addr_t addr;
  uint64_t   bytes;
};
struct unit_phases_s {
  const trace_source_t *tracker; /* traces/phases.h */
  const model_t        *model;
  unit_t               *unit; /* ascending addresses */
  size_t                nunits, cap, nphases;
  uint64_t             *count; /* [unit * nphases + phase] */
};

typedef struct attr_s attr_t;
struct attr_s {
  const sim_kernel_t  *k;
  uint64_t             page;
  uint64_t             unit;         /* 1-based index of the current unit */
  uint64_t             unit_objects; /* its live objects */
  const char          *unit_kind;
  const uint64_t      *unit_phases; /* the current unit's row, or NULL */
  const unit_phases_t *phases;      /* objects by unit and phase, or NULL */
  mech_acc_t           mech[MAX_MECHS];
  size_t               nmech;
  uint64_t             covered[SIM_OWNER_COUNT]; /* by the page's owner */
};

static mech_acc_t *mech_of(attr_t *a, const char *key, as_err_t *err) {
  for (size_t i = 0; i < a->nmech; i++)
    if (strcmp(a->mech[i].key, key) == 0)
      return &a->mech[i];
  if (a->nmech == MAX_MECHS) {
    as_err_set(err, AS_EINVAL, "explain: more than %d mechanisms", MAX_MECHS);
    return NULL;
  }
  a->mech[a->nmech] = (mech_acc_t){.key = key, .unit_kind = a->unit_kind};
  return &a->mech[a->nmech++];
}

/* Resident bytes of [addr, addr + bytes), noting each page's owner. */
static uint64_t resident_bytes(attr_t *a, sim_addr_t addr, uint64_t bytes) {
  uint64_t   total = 0;
  sim_addr_t end = addr + bytes;
  for (sim_addr_t p = addr & ~(a->page - 1); p < end; p += a->page) {
    sim_owner_t owner;
    if (!sim_kernel_resident_owner(a->k, p, &owner))
      continue;
    sim_addr_t lo = p > addr ? p : addr;
    sim_addr_t hi = p + a->page < end ? p + a->page : end;
    total += hi - lo;
    a->covered[owner] += hi - lo;
  }
  return total;
}

/* ---- Objects by unit and allocation phase ------------------------------ */

static as_status_t collect_unit(void *user, const model_region_t *r,
                                as_err_t *err) {
  unit_phases_t *u = user;
  if (r->level != 0)
    return AS_OK;
  unit_t *v = as_grow(u->unit, &u->cap, u->nunits + 1, sizeof *v, 64);
  if (v == NULL)
    return as_err_set(err, AS_ENOMEM, "explain: out of memory");
  u->unit = v;
  u->unit[u->nunits++] = (unit_t){r->addr, r->bytes};
  return AS_OK;
}

static int by_addr(const void *x, const void *y) {
  const unit_t *a = x, *b = y;
  return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* The unit holding addr, or SIZE_MAX. */
static size_t unit_at(const unit_phases_t *u, sim_addr_t addr) {
  size_t lo = 0, hi = u->nunits;
  while (lo < hi) { /* first unit starting above addr */
    size_t mid = lo + (hi - lo) / 2;
    if (u->unit[mid].addr <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0 || addr >= u->unit[lo - 1].addr + u->unit[lo - 1].bytes)
    return SIZE_MAX;
  return lo - 1;
}

static const uint64_t *unit_row(const unit_phases_t *u, sim_addr_t addr) {
  size_t i = u ? unit_at(u, addr) : SIZE_MAX;
  return i == SIZE_MAX ? NULL : &u->count[i * u->nphases];
}

static as_status_t count_object(void *user, uint64_t id, size_t phase,
                                as_err_t *err) {
  (void)err;
  unit_phases_t *u = user;
  sim_addr_t     addr;
  size_t i = model_locate(u->model, id, &addr) ? unit_at(u, addr) : SIZE_MAX;
  if (i != SIZE_MAX)
    u->count[i * u->nphases + phase]++;
  return AS_OK;
}

/* Counts the live objects of tracker by the unit that holds them and the
 * phase they were allocated in; false (nothing to say) when the model
 * cannot locate objects. */
static as_status_t unit_phases_build(const sim_session_t  *s,
                                     const trace_source_t *tracker,
                                     unit_phases_t *u, bool *built,
                                     as_err_t *err) {
  *built = false;
  memset(u, 0, sizeof *u);
  if (tracker == NULL || !model_has_locate(s->model))
    return AS_OK;
  u->tracker = tracker;
  u->model = s->model;
  u->nphases = trace_phases_count(tracker);
  as_status_t rc = model_walk(s->model, collect_unit, u, err);
  if (rc != AS_OK)
    return rc;
  if (u->nunits > 1) /* qsort's array may not be NULL, even empty */
    qsort(u->unit, u->nunits, sizeof *u->unit, by_addr);
  u->count = calloc(u->nunits * u->nphases + 1, sizeof *u->count);
  if (u->count == NULL)
    return as_err_set(err, AS_ENOMEM, "explain: out of memory");
  rc = trace_phases_each_live(tracker, count_object, u, err);
  *built = rc == AS_OK;
  return rc;
}

static void unit_phases_free(unit_phases_t *u) {
  free(u->unit);
  free(u->count);
}

/* "after mark build (4078), before any mark (12)": the phases of the
 * objects, largest first, at most three; "" when there are none. */
static void phases_text(char *buf, size_t len, const unit_phases_t *u,
                        const uint64_t *phase) {
  bool   used[TRACE_PHASES_MAX] = {false};
  size_t n = 0;
  buf[0] = '\0';
  for (size_t k = 0; u && k < 3; k++) {
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < u->nphases; i++)
      if (!used[i] && phase[i] > 0 &&
          (best == SIZE_MAX || phase[i] > phase[best]))
        best = i;
    if (best == SIZE_MAX)
      break;
    used[best] = true;
    const char *label = trace_phases_label(u->tracker, best);
    n += (size_t)snprintf(buf + n, n < len ? len - n : 0,
                          best ? "%safter mark %s (%" PRIu64 ")"
                               : "%s%s (%" PRIu64 ")",
                          k ? ", " : "", label, phase[best]);
  }
}

/* What to call units of kinds a and b together: the kind itself, the
 * shorter when the longer ends with it as a word ("brk heap" and "heap":
 * heaps; the glibc model's main heap and thread heaps), else "region". */
static const char *common_kind(const char *a, const char *b) {
  if (a == NULL || b == NULL || strcmp(a, b) == 0)
    return a != NULL ? a : b;
  size_t      la = strlen(a), lb = strlen(b);
  const char *shorter = la < lb ? a : b, *longer = la < lb ? b : a;
  size_t      ls = la < lb ? la : lb, ll = la < lb ? lb : la;
  if (ls < ll && longer[ll - ls - 1] == ' ' &&
      strcmp(longer + ll - ls, shorter) == 0)
    return shorter;
  return "region";
}

static as_status_t on_region(void *user, const model_region_t *r,
                             as_err_t *err) {
  attr_t *a = user;
  if (r->level == 0) {
    a->unit++;
    a->unit_objects = r->live_objects;
    a->unit_kind = r->kind;
    a->unit_phases = unit_row(a->phases, r->addr);
    return AS_OK;
  }
  const char *key = r->mechanism ? r->mechanism : "unknown";
  mech_acc_t *m = mech_of(a, key, err);
  if (m == NULL)
    return err->code;
  uint64_t res = resident_bytes(a, r->addr, r->bytes);
  m->resident += res;
  m->live += r->live_bytes < res ? r->live_bytes : res;
  if (r->state == MODEL_REGION_LIVE)
    m->objects += r->live_objects;
  if (m->last_unit != a->unit) {
    m->last_unit = a->unit;
    m->units++;
    m->unit_kind = common_kind(m->unit_kind, a->unit_kind);
    if (r->state != MODEL_REGION_LIVE)
      m->objects += a->unit_objects; /* the objects pinning this unit */
    for (size_t i = 0; a->unit_phases && i < a->phases->nphases; i++)
      m->phase[i] += a->unit_phases[i];
  }
  return AS_OK;
}

static explain_item_t *add_item(explain_result_t *out, const char *key,
                                uint64_t bytes) {
  if (bytes == 0 || out->nitems == EXPLAIN_MAX_ITEMS)
    return NULL;
  explain_item_t *it = &out->items[out->nitems++];
  memset(it, 0, sizeof *it);
  snprintf(it->mechanism, sizeof it->mechanism, "%s", key);
  it->bytes = bytes;
  return it;
}

/* "3 arenas", "1 heap": a count with its unit kind. */
static void units_text(char *buf, size_t len, uint64_t n, const char *kind) {
  snprintf(buf, len, "%" PRIu64 " %s%s", n, kind ? kind : "region",
           n == 1 ? "" : "s");
}

/* Appends the phases of m's objects to item it (sentence and field). */
static void note_phases(explain_item_t *it, const mech_acc_t *m,
                        const unit_phases_t *u, const char *whose) {
  if (it == NULL || u == NULL)
    return;
  phases_text(it->allocated_in, sizeof it->allocated_in, u, m->phase);
  /* The phases are counted by unit: where a unit holds objects of other
   * mechanisms too (a jemalloc mapping with slabs and large extents), they
   * are not just these objects, and the sentence says so. */
  uint64_t counted = 0;
  for (size_t i = 0; i < u->nphases; i++)
    counted += m->phase[i];
  char units[64];
  units_text(units, sizeof units, m->units, m->unit_kind);
  size_t n = strlen(it->sentence);
  if (it->allocated_in[0] != '\0' && n < sizeof it->sentence)
    snprintf(it->sentence + n, sizeof it->sentence - n,
             counted == m->objects ? " %s allocated %s."
                                   : " All objects in those %s were "
                                     "allocated %s.",
             counted == m->objects ? whose : units, it->allocated_in);
}

static void mechanism_items(explain_result_t *out, const mech_acc_t *m,
                            const unit_phases_t *u) {
  const model_mechanism_t *row = model_mechanism_find(m->key);
  char                     units[64], key[48];
  units_text(units, sizeof units, m->units, m->unit_kind);
  const char *label = row ? row->label : m->key;
  const char *why = row ? row->why : "The model names no reason.";
  /* A mechanism that holds the program's memory but no objects (running
   * threads' stacks) is told as what it is, not as objects' overhead. */
  if (row == NULL || (row->live && (m->objects > 0 || m->live > 0))) {
    snprintf(key, sizeof key, "%s.live", m->key);
    explain_item_t *it = add_item(out, key, m->live);
    if (it != NULL) {
      it->live = true;
      it->objects = m->objects;
      it->units = m->units;
      snprintf(it->sentence, sizeof it->sentence,
               "%.2f MiB: the program's %" PRIu64 " live objects, in %s (%s).",
               (double)m->live / MIB, m->objects, label, units);
      note_phases(it, m, u, "They were");
    }
    snprintf(key, sizeof key, "%s.overhead", m->key);
    it = add_item(out, key, m->resident - m->live);
    if (it != NULL) {
      it->objects = m->objects;
      it->units = m->units;
      snprintf(it->sentence, sizeof it->sentence,
               "%.2f MiB: the allocator's overhead on those objects. %s",
               (double)(m->resident - m->live) / MIB, why);
    }
    return;
  }
  explain_item_t *it = add_item(out, m->key, m->resident);
  if (it == NULL)
    return;
  it->objects = m->objects;
  it->units = m->units;
  it->releasable = strncmp(row->released_by, "nothing", 7) != 0;
  char pinned[128] = "";
  if (m->objects > 0 && m->units > 1)
    snprintf(pinned, sizeof pinned,
             ", where %" PRIu64 " live objects remain (%.1f per %s)",
             m->objects, (double)m->objects / (double)m->units,
             m->unit_kind ? m->unit_kind : "region");
  else if (m->objects > 0)
    snprintf(pinned, sizeof pinned, ", where %" PRIu64 " live object%s remain",
             m->objects, m->objects == 1 ? "" : "s");
  snprintf(it->sentence, sizeof it->sentence,
           "%.2f MiB: %s in %s%s. %s Released by: %s.",
           (double)m->resident / MIB, label, units, pinned, why,
           row->released_by);
  if (m->objects > 0)
    note_phases(it, m, u, "The objects that remain were");
}

/* Resident bytes no region covers, by the page's owner. */
static void owner_items(explain_result_t *out, const attr_t *a) {
  for (int o = 0; o < SIM_OWNER_COUNT; o++) {
    uint64_t owner_rss = sim_kernel_rss_owner_bytes(a->k, (sim_owner_t)o);
    uint64_t rest = owner_rss > a->covered[o] ? owner_rss - a->covered[o] : 0;
    char     key[48];
    snprintf(key, sizeof key, "owner.%s", sim_owner_name((sim_owner_t)o));
    explain_item_t *it = add_item(out, key, rest);
    if (it == NULL)
      continue;
    if (o == SIM_OWNER_BASELINE)
      snprintf(it->sentence, sizeof it->sentence,
               "%.2f MiB is the program itself before the trace began (code, "
               "libraries, an interpreter's start-up); no allocator policy "
               "returns it.",
               (double)rest / MIB);
    else
      snprintf(it->sentence, sizeof it->sentence,
               "%.2f MiB of %s pages lie outside every region the model "
               "describes (its own bookkeeping or a model with no heap "
               "map).",
               (double)rest / MIB, sim_owner_name((sim_owner_t)o));
  }
}

static int by_bytes_desc(const void *x, const void *y) {
  const explain_item_t *a = x, *b = y;
  return a->bytes < b->bytes ? 1 : a->bytes > b->bytes ? -1 : 0;
}

as_status_t explain_now(const sim_session_t *s, uint64_t live_bytes,
                        const trace_source_t *tracker, explain_result_t *out,
                        as_err_t *err) {
  attr_t       *a = calloc(1, sizeof *a);
  unit_phases_t u;
  bool          have_phases = false;
  if (a == NULL)
    return as_err_set(err, AS_ENOMEM, "explain: out of memory");
  a->k = s->kernel;
  a->page = sim_kernel_page_size(s->kernel);
  as_status_t rc = unit_phases_build(s, tracker, &u, &have_phases, err);
  a->phases = have_phases ? &u : NULL;
  if (rc == AS_OK)
    rc = model_walk(s->model, on_region, a, err);
  if (rc == AS_OK) {
    out->rss_bytes = sim_kernel_rss_bytes(s->kernel);
    out->live_bytes = live_bytes;
    out->nitems = 0;
    for (size_t i = 0; i < a->nmech; i++)
      mechanism_items(out, &a->mech[i], a->phases);
    owner_items(out, a);
    qsort(out->items, out->nitems, sizeof out->items[0], by_bytes_desc);
  }
  unit_phases_free(&u);
  free(a);
  return rc;
}

/* ---- Replaying to an instant ------------------------------------------- */

typedef struct pass_s pass_t;
struct pass_s {
  const sim_session_t *s;
  const char          *want; /* call fn at the first mark so named */
  explain_at_fn        fn;
  void                *fn_user;
  explain_marks_t     *marks;
};

void explain_take_measured(const sim_sample_t *smp, bool found, uint64_t t_ns,
                           bool *has, uint64_t *rss) {
  if (smp->kind == SIM_SAMPLE_MEASURED && found && !*has && smp->t_ns == t_ns) {
    *has = true;
    *rss = smp->measured_rss_bytes;
  }
}

static as_status_t pass_sample(void *user, const sim_sample_t *smp,
                               as_err_t *err) {
  pass_t          *p = user;
  explain_marks_t *m = p->marks;
  explain_take_measured(smp, m->found, m->found_t_ns, &m->has_measured,
                        &m->measured_rss_bytes);
  if (smp->kind != SIM_SAMPLE_MARK)
    return AS_OK;
  const char *label = smp->label ? smp->label : "";
  bool        known = false;
  for (size_t i = 0; i < m->n; i++)
    known |= strcmp(m->label[i], label) == 0;
  if (!known && m->n < EXPLAIN_MAX_MARKS)
    snprintf(m->label[m->n++], sizeof m->label[0], "%s", label);
  uint64_t gap =
      smp->rss_bytes > smp->live_bytes ? smp->rss_bytes - smp->live_bytes : 0;
  if (gap > m->best_gap) { /* a mark with no gap has nothing to explain */
    m->best_gap = gap;
    m->best_t_ns = smp->t_ns;
    snprintf(m->best, sizeof m->best, "%s", label);
  }
  if (p->want != NULL && !m->found && strcmp(label, p->want) == 0) {
    m->found = true;
    m->found_t_ns = smp->t_ns;
    return p->fn(p->fn_user, p->s, smp, err);
  }
  return AS_OK;
}

as_status_t explain_replay_at(const explain_opts_t *o, explain_open_fn open,
                              void *user, const char *mark, explain_at_fn fn,
                              void *fn_user, explain_marks_t *marks,
                              char *model_desc, size_t desc_len,
                              as_err_t *err) {
  trace_source_t *src = NULL;
  sim_session_t   s;
  memset(marks, 0, sizeof *marks);
  as_status_t rc = open(user, &src, err);
  if (rc != AS_OK)
    return rc;
  rc = sim_session_open(o->model, o->libc, &o->kernel, &s, err);
  if (rc != AS_OK) {
    trace_source_close(src);
    return rc;
  }
  if (model_desc != NULL)
    snprintf(model_desc, desc_len, "%s", s.model_desc);
  pass_t p = {
      .s = &s, .want = mark, .fn = fn, .fn_user = fn_user, .marks = marks};
  sim_engine_config_t cfg = {.settle_ns = o->settle_ns,
                             .lenient = o->lenient,
                             .on_sample = pass_sample,
                             .user = &p};
  sim_run_result_t    r;
  rc = sim_engine_run(&cfg, &s, src, &r, err);
  if (rc == AS_OK && mark == NULL) {
    sim_sample_t end = {.t_ns = r.final_t_ns,
                        .kind = SIM_SAMPLE_FINAL,
                        .label = "end",
                        .rss_bytes = r.final_rss_bytes,
                        .live_bytes = r.final_live_bytes};
    rc = fn(fn_user, &s, &end, err);
  }
  if (rc == AS_OK && mark != NULL && !marks->found) {
    char list[EXPLAIN_MAX_MARKS * 66] = "";
    for (size_t i = 0, used = 0; i < marks->n && used < sizeof list; i++)
      used += (size_t)snprintf(list + used, sizeof list - used, "%s%s",
                               i ? ", " : "", marks->label[i]);
    rc = as_err_set(err, AS_EINVAL,
                    "mark %s: the trace has no such mark "
                    "(marks: %.300s)",
                    mark, marks->n ? list : "none");
  }
  sim_session_close(&s);
  trace_source_close(src);
  return rc;
}

/* ---- Explaining --------------------------------------------------------- */

/* One explanation: the caller's source wrapped in a phase tracker
 * (traces/phases.h) as it is opened, so the result can say when the
 * objects were allocated. */
typedef struct explain_job_s explain_job_t;
struct explain_job_s {
  explain_open_fn       open;
  void                 *user;
  trace_source_t       *tracker; /* the open source, closed by the replay */
  trace_source_t       *sites;   /* the call-site tracker inside it */
  explain_result_t     *out;
  const explain_opts_t *o;
};

static as_status_t open_tracked(void *user, trace_source_t **src,
                                as_err_t *err) {
  explain_job_t *j = user;
  as_status_t    rc = j->open(j->user, src, err);
  j->sites = NULL;
  if (rc == AS_OK && j->o->by_site) {
    rc = trace_sites_wrap(*src, src, err);
    j->sites = rc == AS_OK ? *src : NULL;
  }
  if (rc == AS_OK)
    rc = trace_phases_wrap(*src, src, err);
  j->tracker = rc == AS_OK ? *src : NULL;
  return rc;
}

static as_status_t explain_here(void *user, const sim_session_t *s,
                                const sim_sample_t *at, as_err_t *err) {
  explain_job_t    *j = user;
  explain_result_t *out = j->out;
  snprintf(out->label, sizeof out->label, "%s", at->label ? at->label : "end");
  out->t_ns = at->t_ns;
  as_status_t rc = explain_now(s, at->live_bytes, j->tracker, out, err);
  if (rc == AS_OK && j->sites != NULL)
    rc = explain_by_site(s, j->sites, j->o->top, out, err);
  return rc;
}

/* The RSS a recorded run measured at the mark r explains, if any. */
static void note_measured(explain_result_t *r, const explain_marks_t *m) {
  r->has_measured = m->found && m->has_measured;
  r->measured_rss_bytes = m->measured_rss_bytes;
}

as_status_t explain_trace(const explain_opts_t *o, explain_open_fn open,
                          void *user, explain_result_t out[2], size_t *n,
                          char *model_desc, size_t desc_len, as_err_t *err) {
  explain_marks_t marks;
  explain_job_t   job = {.open = open, .user = user, .out = &out[0], .o = o};
  *n = 0;
  as_status_t rc = explain_replay_at(o, open_tracked, &job, o->at, explain_here,
                                     &job, &marks, model_desc, desc_len, err);
  if (rc != AS_OK) {
    if (o->at != NULL && !marks.found) {
      char msg[sizeof err->msg];
      snprintf(msg, sizeof msg, "--at %.400s", err->msg + 5);
      rc = as_err_set(err, rc, "%s", msg);
    }
    return rc;
  }
  *n = 1;
  note_measured(&out[0], &marks);
  if (o->at != NULL || marks.best[0] == '\0')
    return AS_OK;
  if (marks.best_t_ns == out[0].t_ns) {
    /* The widest gap is at a mark of the last instant: one explanation. */
    snprintf(out[0].label, sizeof out[0].label, "%s", marks.best);
    return AS_OK;
  }
  char best[sizeof marks.best]; /* marks is rewritten by the replay */
  memcpy(best, marks.best, sizeof best);
  job.out = &out[1];
  rc = explain_replay_at(o, open_tracked, &job, best, explain_here, &job,
                         &marks, model_desc, desc_len, err);
  if (rc == AS_OK) {
    *n = 2;
    note_measured(&out[1], &marks);
  }
  return rc;
}
