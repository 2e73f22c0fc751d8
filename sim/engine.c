/* sim/engine.c -- replays a trace source against a model on a virtual clock.
 *
 * Ordering rule (tested in tests/unit/test_engine.c): before a trace event
 * stamped t is dispatched, every timer due at or before t fires, in (due,
 * seq) order, each at its own due time; a timer that re-arms itself for a
 * time <= the current instant fires again in the same instant, and more than
 * SIM_ENGINE_MAX_SAME_INSTANT firings in one instant is an error (a model
 * that reschedules itself without advancing time would otherwise hang).
 * Periodic RSS sampling is one such timer, owned by the engine.
 *
 * The live-object table is a bitmap of live ids beside an array of sizes:
 * ids are dense and recycled by trace writers, so both grow with peak live
 * objects, not with trace length.  The bitmap (1 bit per id) stays in cache
 * where the sizes would not, so validating an event rarely misses; only a
 * free or realloc reads the size.
 */
#include "engine.h"

#include <stdlib.h>
#include <string.h>

/* Ids beyond this are refused: the table is indexed by id, and a trace that
 * does not recycle ids would otherwise make replay memory explode. */
#define SIM_ENGINE_MAX_ID (UINT64_C(1) << 32)

typedef struct engine_state_s engine_state_t;
struct engine_state_s {
  const sim_engine_config_t *cfg;
  sim_session_t             *s;
  sim_run_result_t          *res;
  uint64_t                   now_ns;
  uint64_t                  *live_bits; /* bit id set: object id is live */
  uint64_t                  *sizes;     /* by id: size of a live object */
  size_t                     live_cap;  /* ids the two tables cover */
  uint64_t                   live_bytes;
  sim_timer_t                sampler;   /* periodic RSS samples */
  uint64_t                   same_instant_fired;
  uint64_t                   same_instant_ns;
};

/* ---- Sessions ----------------------------------------------------------- */

as_status_t sim_session_open(const char *model_spec, const char *libc_spec,
                             const sim_kernel_config_t *kcfg,
                             sim_session_t *out, as_err_t *err) {
  sim_kernel_config_t defaults;
  memset(out, 0, sizeof *out);
  if (kcfg == NULL) {
    sim_kernel_config_default(&defaults);
    kcfg = &defaults;
  }
  as_status_t rc = sim_kernel_create(kcfg, &out->kernel, err);
  if (rc == AS_OK)
    rc = sim_event_queue_create(&out->timers, err);
  if (rc == AS_OK) {
    model_ctx_t ctx = {out->kernel, out->timers, libc_spec};
    rc              = model_create_from_spec(model_spec, &ctx, &out->model, err);
  }
  if (rc != AS_OK) {
    sim_session_close(out);
    return rc;
  }
  model_describe(out->model, out->model_desc, sizeof out->model_desc);
  return AS_OK;
}

void sim_session_close(sim_session_t *s) {
  model_destroy(s->model);
  sim_event_queue_destroy(s->timers);
  sim_kernel_destroy(s->kernel);
  memset(s, 0, sizeof *s);
}

/* ---- Samples ------------------------------------------------------------ */

static as_status_t emit_sample(engine_state_t *st, sim_sample_kind_t kind,
                               const char *label, uint64_t measured,
                               as_err_t *err) {
  if (st->cfg->on_sample == NULL)
    return AS_OK;
  sim_sample_t smp = {
      .t_ns               = st->now_ns,
      .kind               = kind,
      .label              = label,
      .rss_bytes          = sim_kernel_rss_bytes(st->s->kernel),
      .live_bytes         = st->live_bytes,
      .measured_rss_bytes = measured,
  };
  for (int o = 0; o < SIM_OWNER_COUNT; o++)
    smp.owner_bytes[o] =
        sim_kernel_rss_owner_bytes(st->s->kernel, (sim_owner_t)o);
  return st->cfg->on_sample(st->cfg->user, &smp, err);
}

static as_status_t sampler_fire(sim_timer_t *self, uint64_t now_ns,
                                as_err_t *err) {
  engine_state_t *st = SIM_CONTAINER_OF(self, engine_state_t, sampler);
  as_status_t     rc = emit_sample(st, SIM_SAMPLE_PERIODIC, NULL, 0, err);
  if (rc != AS_OK)
    return rc;
  return sim_event_queue_push(st->s->timers, self,
                              now_ns + st->cfg->sample_every_ns, err);
}

static void note_peak(engine_state_t *st) {
  uint64_t rss = sim_kernel_rss_bytes(st->s->kernel);
  if (rss > st->res->peak_rss_bytes) {
    st->res->peak_rss_bytes = rss;
    st->res->peak_t_ns      = st->now_ns;
  }
  if (st->live_bytes > st->res->peak_live_bytes)
    st->res->peak_live_bytes = st->live_bytes;
}

/* ---- Timers ------------------------------------------------------------- */

/* Fires every timer due at or before until_ns, advancing the clock. */
static as_status_t fire_timers_until(engine_state_t *st, uint64_t until_ns,
                                     as_err_t *err) {
  sim_timer_t *t;
  while ((t = sim_event_queue_peek(st->s->timers)) != NULL &&
         t->due_ns <= until_ns) {
    sim_event_queue_pop(st->s->timers);
    if (t->due_ns > st->now_ns)
      st->now_ns = t->due_ns;
    if (st->now_ns != st->same_instant_ns) {
      st->same_instant_ns    = st->now_ns;
      st->same_instant_fired = 0;
    }
    if (++st->same_instant_fired > SIM_ENGINE_MAX_SAME_INSTANT)
      return as_err_set(err, AS_EINVAL,
                        "more than %d timers fired at t=%llu ns: a model "
                        "reschedules itself without advancing time",
                        SIM_ENGINE_MAX_SAME_INSTANT,
                        (unsigned long long)st->now_ns);
    as_status_t rc = t->fire(t, st->now_ns, err);
    if (rc != AS_OK)
      return rc;
    st->res->timers_fired++;
    note_peak(st);
  }
  return AS_OK;
}

/* ---- Live objects ------------------------------------------------------- */

static as_status_t ensure_id(engine_state_t *st, uint64_t id, as_err_t *err) {
  if (id < st->live_cap)
    return AS_OK;
  if (id >= SIM_ENGINE_MAX_ID)
    return as_err_set(err, AS_EFORMAT,
                      "%s: event %llu: object id %llu is too large (ids must "
                      "be dense and recycled; max %llu)",
                      "trace", (unsigned long long)st->res->events,
                      (unsigned long long)id,
                      (unsigned long long)(SIM_ENGINE_MAX_ID - 1));
  size_t cap = st->live_cap ? st->live_cap : 4096;
  while (cap <= id)
    cap *= 2;
  uint64_t *bits  = realloc(st->live_bits, cap / 8);
  uint64_t *sizes = bits ? realloc(st->sizes, cap * sizeof *sizes) : NULL;
  if (bits != NULL)
    st->live_bits = bits;
  if (sizes == NULL)
    return as_err_set(err, AS_ENOMEM, "out of memory for %zu object ids", cap);
  memset((char *)bits + st->live_cap / 8, 0, (cap - st->live_cap) / 8);
  st->sizes    = sizes;
  st->live_cap = cap;
  return AS_OK;
}

static bool is_live(const engine_state_t *st, uint64_t id) {
  return id < st->live_cap && (st->live_bits[id / 64] >> (id % 64)) & 1;
}

static void set_live(engine_state_t *st, uint64_t id, bool live) {
  uint64_t bit = UINT64_C(1) << (id % 64);
  st->live_bits[id / 64] = live ? st->live_bits[id / 64] | bit
                                : st->live_bits[id / 64] & ~bit;
}

/* A free or realloc of a dead id, or an alloc of a live one: an error, or
 * counted and skipped under --lenient.  Returns AS_DONE when skipped. */
static as_status_t bad_object(engine_state_t *st, const trace_source_t *src,
                              const trace_event_t *ev, uint64_t *counter,
                              const char *what, as_err_t *err) {
  if (st->cfg->lenient) {
    (*counter)++;
    return AS_DONE;
  }
  return as_err_set(err, AS_EFORMAT,
                    "%s: event %llu (t=%llu ns): %s of object %llu %s "
                    "(use --lenient to count and skip such events)",
                    src->name, (unsigned long long)st->res->events,
                    (unsigned long long)ev->t_ns, trace_op_name(ev->op),
                    (unsigned long long)ev->id, what);
}

/* ---- Dispatch ----------------------------------------------------------- */

static as_status_t dispatch_alloc(engine_state_t *st, const trace_source_t *src,
                                  const trace_event_t *ev, as_err_t *err) {
  as_status_t rc = ensure_id(st, ev->id, err);
  if (rc != AS_OK)
    return rc;
  if (is_live(st, ev->id))
    return bad_object(st, src, ev, &st->res->skipped_double_alloc,
                      "that is already live", err);
  rc = model_alloc(st->s->model, ev, err);
  if (rc != AS_OK)
    return rc;
  set_live(st, ev->id, true);
  st->sizes[ev->id] = ev->size;
  st->live_bytes += ev->size;
  return AS_OK;
}

static as_status_t dispatch_realloc(engine_state_t *st,
                                    const trace_source_t *src,
                                    trace_event_t *ev, as_err_t *err) {
  if (!is_live(st, ev->id))
    return bad_object(st, src, ev, &st->res->skipped_bad_realloc,
                      "that is not live", err);
  ev->prev_size  = st->sizes[ev->id];
  as_status_t rc = model_realloc(st->s->model, ev, err);
  if (rc != AS_OK)
    return rc;
  st->live_bytes    = st->live_bytes - ev->prev_size + ev->size;
  st->sizes[ev->id] = ev->size;
  return AS_OK;
}

static as_status_t dispatch_free(engine_state_t *st, const trace_source_t *src,
                                 trace_event_t *ev, as_err_t *err) {
  if (!is_live(st, ev->id))
    return bad_object(st, src, ev, &st->res->skipped_bad_free,
                      "that is not live", err);
  ev->prev_size  = st->sizes[ev->id];
  as_status_t rc = model_free(st->s->model, ev, err);
  if (rc != AS_OK)
    return rc;
  st->live_bytes -= ev->prev_size;
  set_live(st, ev->id, false);
  return AS_OK;
}

static as_status_t dispatch(engine_state_t *st, const trace_source_t *src,
                            trace_event_t *ev, as_err_t *err) {
  switch ((trace_op_t)ev->op) {
  case TRACE_MALLOC:
  case TRACE_CALLOC:
  case TRACE_MEMALIGN:
    return dispatch_alloc(st, src, ev, err);
  case TRACE_REALLOC:
    return dispatch_realloc(st, src, ev, err);
  case TRACE_FREE:
    return dispatch_free(st, src, ev, err);
  case TRACE_THREAD_START:
  case TRACE_THREAD_EXIT:
    return model_thread(st->s->model, ev, err);
  case TRACE_MARK:
    return emit_sample(st, SIM_SAMPLE_MARK, ev->label, 0, err);
  case TRACE_IDLE: {
    /* The clock moves past the idle stretch: later events must not be
     * stamped inside it. */
    as_status_t rc = fire_timers_until(st, ev->t_ns + ev->size, err);
    st->now_ns     = ev->t_ns + ev->size;
    return rc;
  }
  case TRACE_TRIM:
    return model_trim(st->s->model, ev->size, ev->t_ns, err);
  case TRACE_RSS:
    return emit_sample(st, SIM_SAMPLE_MEASURED, NULL, ev->size, err);
  case TRACE_OP_COUNT:
    break;
  }
  return as_err_set(err, AS_EFORMAT, "%s: event %llu: unknown op %u",
                    src->name, (unsigned long long)st->res->events,
                    (unsigned)ev->op);
}

static as_status_t replay(engine_state_t *st, trace_source_t *src,
                          as_err_t *err) {
  trace_event_t ev = {0};
  as_status_t   rc;
  while ((rc = trace_source_next(src, &ev, err)) == AS_OK) {
    if (ev.t_ns < st->now_ns)
      return as_err_set(err, AS_EFORMAT,
                        "%s: event %llu: time %llu ns is before the clock "
                        "(%llu ns)",
                        src->name, (unsigned long long)st->res->events,
                        (unsigned long long)ev.t_ns,
                        (unsigned long long)st->now_ns);
    const sim_timer_t *due = sim_event_queue_peek(st->s->timers);
    if (due != NULL && due->due_ns <= ev.t_ns &&
        (rc = fire_timers_until(st, ev.t_ns, err)) != AS_OK)
      return rc;
    st->now_ns = ev.t_ns;
    rc         = dispatch(st, src, &ev, err);
    if (rc != AS_OK && rc != AS_DONE)
      return rc;
    st->res->events++;
    note_peak(st);
  }
  return rc == AS_DONE ? AS_OK : rc;
}

as_status_t sim_engine_run(const sim_engine_config_t *cfg, sim_session_t *s,
                           trace_source_t *src, sim_run_result_t *result,
                           as_err_t *err) {
  engine_state_t st = {.cfg = cfg, .s = s, .res = result};
  memset(result, 0, sizeof *result);
  sim_timer_init(&st.sampler, sampler_fire);
  as_status_t rc = AS_OK;
  if (cfg->sample_every_ns > 0)
    rc = sim_event_queue_push(s->timers, &st.sampler, cfg->sample_every_ns,
                              err);
  if (rc == AS_OK)
    rc = replay(&st, src, err);
  sim_event_queue_cancel(s->timers, &st.sampler);
  result->final_rss_bytes  = sim_kernel_rss_bytes(s->kernel);
  result->final_live_bytes = st.live_bytes;
  result->final_t_ns       = st.now_ns;
  if (rc == AS_OK)
    rc = emit_sample(&st, SIM_SAMPLE_FINAL, NULL, 0, err);
  free(st.live_bits);
  free(st.sizes);
  return rc;
}
