/* traces/insert.c -- a source that adds trims and purges to another (see
 * insert.h).  Inserted events take the time and thread of the event they
 * precede (a mark), or the period boundary (periodic ones, on thread 0;
 * an idle they fall inside is split around them). */
#include "insert.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/units.h"

typedef struct insert_src_s insert_src_t;
struct insert_src_s {
  trace_source_t  base; /* must be first */
  trace_source_t *inner;
  trace_insert_t  ins[TRACE_INSERT_MAX];
  size_t          n;
  uint64_t        next_due[TRACE_INSERT_MAX]; /* periodic: next time */
  uint64_t        calls[TRACE_INSERT_MAX];    /* periodic: made so far */
  trace_event_t   held; /* an inner event waiting behind inserts */
  bool            holding;
  size_t          mark_next; /* next insert to try before held (a mark) */
  bool            fired[TRACE_INSERT_MAX];
  bool            started;
  uint64_t        origin_ns; /* the first event's time, once started */
  uint64_t        last_ns;   /* the last event's time handed out */
};

as_status_t trace_insert_parse(const char *spec, trace_insert_t *out,
                               as_err_t *err) {
  memset(out, 0, sizeof *out);
  const char *at = strchr(spec, '@');
  if (at == NULL || at == spec || at[1] == '\0')
    return as_err_set(err, AS_EUSAGE,
                      "--insert expects EVENT@MARK or EVENT@every:DURATION "
                      "(e.g. trim@after_free), got '%s'",
                      spec);
  char   event[32];
  size_t elen = (size_t)(at - spec);
  if (elen >= sizeof event)
    return as_err_set(err, AS_EUSAGE, "--insert: unknown event in '%s'", spec);
  memcpy(event, spec, elen);
  event[elen] = '\0';
  char *colon = strchr(event, ':');
  if (colon != NULL)
    *colon++ = '\0';
  if (strcmp(event, "trim") == 0) {
    out->op = TRACE_TRIM;
    if (colon != NULL && !as_parse_bytes(colon, &out->size))
      return as_err_set(err, AS_EUSAGE,
                        "--insert: trim:PAD expects a size, got '%s'", colon);
  } else if (strcmp(event, "purge") == 0) {
    trace_purge_kind_t k = TRACE_PURGE_ALL;
    if (colon != NULL && !trace_purge_parse(colon, strlen(colon), &k))
      return as_err_set(err, AS_EUSAGE,
                        "--insert: purge:KIND expects all, decay or tcache, "
                        "got '%s'",
                        colon);
    out->op = TRACE_PURGE;
    out->size = k;
  } else {
    return as_err_set(err, AS_EUSAGE,
                      "--insert: unknown event '%s' (expected trim, "
                      "trim:PAD, purge or purge:KIND)",
                      event);
  }
  const char *when = at + 1;
  if (strncmp(when, "every:", 6) == 0) {
    if (!as_parse_duration_ns(when + 6, &out->every_ns) || out->every_ns == 0)
      return as_err_set(err, AS_EUSAGE,
                        "--insert: every:DURATION expects a duration such as "
                        "1s, got '%s'",
                        when + 6);
    return AS_OK;
  }
  if (strlen(when) > TRACE_LABEL_MAX)
    return as_err_set(err, AS_EUSAGE,
                      "--insert: a mark label has at most %d bytes, got '%s'",
                      TRACE_LABEL_MAX, when);
  snprintf(out->mark, sizeof out->mark, "%s", when);
  return AS_OK;
}

static void make_event(const trace_insert_t *ins, uint64_t t_ns,
                       uint32_t thread, trace_event_t *ev) {
  memset(ev, 0, sizeof *ev);
  ev->t_ns = t_ns;
  ev->thread = thread;
  ev->op = (uint8_t)ins->op;
  ev->size = ins->size;
  ev->id = ins->op == TRACE_PURGE ? TRACE_ALL_ARENAS : 0;
}

/* A periodic insert due at or before t, or -1. */
static int due_periodic(insert_src_t *s, uint64_t t) {
  for (size_t i = 0; i < s->n; i++)
    if (s->ins[i].every_ns != 0 && s->next_due[i] <= t)
      return (int)i;
  return -1;
}

/* The earliest time a periodic insert is due; UINT64_MAX if none. */
static uint64_t next_periodic(const insert_src_t *s) {
  uint64_t due = UINT64_MAX;
  for (size_t i = 0; i < s->n; i++)
    if (s->ins[i].every_ns != 0 && s->next_due[i] < due)
      due = s->next_due[i];
  return due;
}

/* Splits a held idle at the first periodic insert due inside it: the part
 * before goes out as an idle of its own, so that the insert runs at its
 * time during the idle, as the engine's samples and timers do, and not
 * behind a clock the whole idle moved past it.  False if none is due. */
static bool split_idle(insert_src_t *s, trace_event_t *ev) {
  trace_event_t *h = &s->held;
  if (h->op != TRACE_IDLE || h->size > UINT64_MAX - h->t_ns)
    return false; /* the engine refuses an idle past the clock's end */
  uint64_t due = next_periodic(s);
  if (due >= h->t_ns + h->size)
    return false;
  *ev = *h;
  ev->size = due - h->t_ns;
  h->t_ns = due;
  h->size -= ev->size;
  return true;
}

/* An insert at the end not yet made, into *ev at the last event's time;
 * false if none is left. */
static bool end_insert(insert_src_t *s, trace_event_t *ev) {
  for (size_t i = 0; i < s->n; i++)
    if (s->ins[i].at_end && !s->fired[i]) {
      make_event(&s->ins[i], s->last_ns, 0, ev);
      s->fired[i] = true;
      return true;
    }
  return false;
}

static as_status_t insert_next(trace_source_t *src, trace_event_t *ev,
                               as_err_t *err) {
  insert_src_t *s = (insert_src_t *)src;
  if (!s->holding) {
    as_status_t rc = trace_source_next(s->inner, &s->held, err);
    if (rc == AS_DONE && end_insert(s, ev))
      return AS_OK;
    if (rc != AS_OK)
      return rc;
    s->holding = true;
    s->mark_next = 0;
    if (!s->started) {
      s->started = true;
      s->origin_ns = s->held.t_ns;
      for (size_t i = 0; i < s->n; i++)
        s->next_due[i] =
            s->held.t_ns +
            (s->ins[i].phase_ns != 0 ? s->ins[i].phase_ns : s->ins[i].every_ns);
    }
  }
  int p = due_periodic(s, s->held.t_ns);
  if (p >= 0) {
    if (++s->calls[p] > TRACE_INSERT_CALLS_MAX)
      return as_err_set(err, AS_EUSAGE,
                        "--insert %s@every:%" PRIu64 "ns: more than %llu "
                        "calls by t=%" PRIu64 " ns of the trace; expected a "
                        "longer period",
                        trace_op_name(s->ins[p].op), s->ins[p].every_ns,
                        (unsigned long long)TRACE_INSERT_CALLS_MAX,
                        s->next_due[p]);
    make_event(&s->ins[p], s->next_due[p], 0, ev);
    s->next_due[p] += s->ins[p].every_ns;
    return AS_OK;
  }
  if (split_idle(s, ev))
    return AS_OK;
  if (s->held.op == TRACE_MARK) {
    for (; s->mark_next < s->n; s->mark_next++) {
      const trace_insert_t *ins = &s->ins[s->mark_next];
      if (ins->every_ns == 0 && s->held.label != NULL &&
          strcmp(ins->mark, s->held.label) == 0) {
        make_event(ins, s->held.t_ns, s->held.thread, ev);
        s->fired[s->mark_next] = true;
        s->mark_next++;
        return AS_OK;
      }
    }
  }
  *ev = s->held;
  s->holding = false;
  s->last_ns = ev->t_ns;
  return AS_OK;
}

static void insert_close(trace_source_t *src) {
  insert_src_t *s = (insert_src_t *)src;
  trace_source_close(s->inner);
  free(s);
}

static void insert_where(const trace_source_t *src, char *buf, size_t len) {
  trace_source_where(((const insert_src_t *)src)->inner, buf, len);
}

static const trace_source_methods_t insert_methods = {
    .next = insert_next,
    .close = insert_close,
    .where = insert_where,
};

as_status_t trace_insert_wrap(trace_source_t       *inner,
                              const trace_insert_t *inserts, size_t n,
                              trace_source_t **out, as_err_t *err) {
  *out = NULL;
  if (n > TRACE_INSERT_MAX) {
    trace_source_close(inner);
    return as_err_set(err, AS_EUSAGE, "at most %d --insert options",
                      TRACE_INSERT_MAX);
  }
  insert_src_t *s =
      trace_source_wrapper_new(inner, &insert_methods, sizeof *s, err);
  if (s == NULL)
    return AS_ENOMEM;
  s->inner = inner;
  memcpy(s->ins, inserts, n * sizeof *inserts);
  s->n = n;
  *out = &s->base;
  return AS_OK;
}

bool trace_insert_origin(const trace_source_t *wrapped, uint64_t *t_ns) {
  const insert_src_t *s = (const insert_src_t *)wrapped;
  *t_ns = s->origin_ns;
  return s->started;
}

bool trace_insert_all_fired(const trace_source_t *wrapped, const char **mark) {
  const insert_src_t *s = (const insert_src_t *)wrapped;
  for (size_t i = 0; i < s->n; i++)
    if (s->ins[i].every_ns == 0 && !s->ins[i].at_end && !s->fired[i]) {
      *mark = s->ins[i].mark;
      return false;
    }
  return true;
}
