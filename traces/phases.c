/* traces/phases.c -- the phase each live object was allocated in (see
 * phases.h). */
#include "phases.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/idtable.h"

/* Per id: bit 7 live, bits 0-6 the phase (TRACE_PHASES_MAX <= 127). */
#define LIVE_BIT 0x80u

typedef struct phases_src_s phases_src_t;
struct phases_src_s {
  trace_source_t  base; /* must be first */
  trace_source_t *inner;
  sim_idtable_t   tab;   /* of state: only the pages ids reach resident */
  uint8_t        *state; /* by id */
  uint64_t        ids;   /* highest id noted + 1 */
  uint64_t        live;  /* ids whose state has LIVE_BIT */
  size_t          nphases;
  size_t          current;
  char            label[TRACE_PHASES_MAX][TRACE_LABEL_MAX + 1];
};

static void enter_phase(phases_src_t *s, const char *label) {
  for (size_t i = 1; i < s->nphases; i++)
    if (strcmp(s->label[i], label) == 0) {
      s->current = i;
      return;
    }
  if (s->nphases < TRACE_PHASES_MAX) {
    snprintf(s->label[s->nphases], sizeof s->label[0], "%s", label);
    s->current = s->nphases++;
  } else {
    s->current = TRACE_PHASES_MAX - 1;
  }
}

static as_status_t note(phases_src_t *s, const trace_event_t *ev,
                        as_err_t *err) {
  switch ((trace_op_t)ev->op) {
  case TRACE_MARK:
    enter_phase(s, ev->label ? ev->label : "");
    return AS_OK;
  case TRACE_MALLOC:
  case TRACE_CALLOC:
  case TRACE_MEMALIGN:
  case TRACE_REALLOC:
  case TRACE_FREE:
    break;
  default:
    return AS_OK;
  }
  /* Larger ids are the engine's to refuse, with the event named. */
  if (ev->id >= SIM_IDTABLE_MAX_IDS)
    return AS_OK;
  if (!sim_idtable_reach(&s->tab, ev->id))
    return as_err_set(err, AS_ENOMEM, "%s: out of memory for object phases",
                      s->base.name);
  s->state = sim_idtable_base(&s->tab);
  if (ev->id >= s->ids)
    s->ids = ev->id + 1;
  uint8_t *st = &s->state[ev->id];
  bool     was_live = *st & LIVE_BIT;
  if (ev->op == TRACE_FREE)
    *st = 0;
  else if (ev->op != TRACE_REALLOC || !was_live)
    *st = (uint8_t)(LIVE_BIT | s->current);
  s->live += (*st & LIVE_BIT) != 0;
  s->live -= was_live;
  return AS_OK;
}

static as_status_t phases_next(trace_source_t *src, trace_event_t *ev,
                               as_err_t *err) {
  phases_src_t *s = (phases_src_t *)src;
  as_status_t   rc = trace_source_next(s->inner, ev, err);
  return rc == AS_OK ? note(s, ev, err) : rc;
}

static void phases_close(trace_source_t *src) {
  phases_src_t *s = (phases_src_t *)src;
  trace_source_close(s->inner);
  sim_idtable_free(&s->tab);
  free(s);
}

/* Each event is the inner source's last: errors name its line. */
static void phases_where(const trace_source_t *src, char *buf, size_t len) {
  trace_source_where(((const phases_src_t *)src)->inner, buf, len);
}

static const trace_source_methods_t phases_methods = {
    .next = phases_next,
    .close = phases_close,
    .where = phases_where,
};

as_status_t trace_phases_wrap(trace_source_t *inner, trace_source_t **out,
                              as_err_t *err) {
  *out = NULL;
  phases_src_t *s =
      trace_source_wrapper_new(inner, &phases_methods, sizeof *s, err);
  if (s == NULL)
    return AS_ENOMEM;
  s->inner = inner;
  if (sim_idtable_init(&s->tab, sizeof *s->state) != AS_OK) {
    as_err_set(err, AS_ENOMEM, "%s: no address space for its object phases",
               s->base.name);
    free(s);
    trace_source_close(inner); /* as trace_source_wrapper_new does */
    return AS_ENOMEM;
  }
  s->nphases = 1;
  snprintf(s->label[0], sizeof s->label[0], "before any mark");
  *out = &s->base;
  return AS_OK;
}

size_t trace_phases_count(const trace_source_t *wrapped) {
  return ((const phases_src_t *)wrapped)->nphases;
}

const char *trace_phases_label(const trace_source_t *wrapped, size_t i) {
  const phases_src_t *s = (const phases_src_t *)wrapped;
  return i < s->nphases ? s->label[i] : "";
}

as_status_t trace_phases_each_live(const trace_source_t *wrapped,
                                   trace_phases_fn fn, void *user,
                                   as_err_t *err) {
  const phases_src_t *s = (const phases_src_t *)wrapped;
  /* Up to the last live id only: reading the table past it would make
   * the pages that sparse ids skipped resident. */
  uint64_t left = s->live;
  for (uint64_t id = 0; left > 0 && id < s->ids; id++)
    if (s->state[id] & LIVE_BIT) {
      left--;
      as_status_t rc = fn(user, id, s->state[id] & ~LIVE_BIT, err);
      if (rc != AS_OK)
        return rc;
    }
  return AS_OK;
}
