/* traces/wl_emit.c -- event emission shared by the CPython workloads (see
 * traces/wl_emit.h).  Moved here from traces/wl_spike.c unchanged in
 * behaviour, so that traces/wl_webworker.c uses the same id discipline.
 */
#include "wl_emit.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

uint32_t wl_emit_take_id(wl_emit_t *e) {
  if (e->nfree > 0)
    return e->free_ids[--e->nfree];
  return (uint32_t)e->next_id++;
}

trace_event_t *wl_emit_push(wl_emit_t *e, trace_op_t op, uint32_t thread) {
  /* Each workload bounds the events of one step; more is a bug there. */
  assert(e->npending < WL_EMIT_PENDING_MAX);
  trace_event_t *ev = &e->pending[e->npending++];
  trace_event_set(ev, e->t_ns, (uint8_t)op, TRACE_DOMAIN_RAW, 0, 0);
  ev->thread = thread;
  return ev;
}

uint32_t wl_emit_malloc(wl_emit_t *e, uint32_t thread, trace_domain_t dom,
                        uint64_t size) {
  uint32_t       id = wl_emit_take_id(e);
  trace_event_t *ev = wl_emit_push(e, TRACE_MALLOC, thread);
  ev->id = id;
  ev->size = size;
  ev->domain = (uint8_t)dom;
  return id;
}

uint32_t wl_emit_calloc(wl_emit_t *e, uint32_t thread, trace_domain_t dom,
                        uint64_t size) {
  uint32_t       id = wl_emit_take_id(e);
  trace_event_t *ev = wl_emit_push(e, TRACE_CALLOC, thread);
  ev->id = id;
  ev->size = size;
  ev->domain = (uint8_t)dom;
  return id;
}

void wl_emit_realloc(wl_emit_t *e, uint32_t thread, trace_domain_t dom,
                     uint32_t id, uint64_t size) {
  trace_event_t *ev = wl_emit_push(e, TRACE_REALLOC, thread);
  ev->id = id;
  ev->size = size;
  ev->domain = (uint8_t)dom;
}

void wl_emit_free(wl_emit_t *e, uint32_t thread, trace_domain_t dom,
                  uint32_t id) {
  trace_event_t *ev = wl_emit_push(e, TRACE_FREE, thread);
  ev->id = id;
  ev->domain = (uint8_t)dom;
  e->free_ids[e->nfree++] = id;
}

void wl_emit_mark(wl_emit_t *e, const char *label) {
  wl_emit_push(e, TRACE_MARK, 0)->label = label;
}

bool wl_emit_next(wl_emit_t *e, trace_event_t *ev) {
  if (e->ipending == e->npending) {
    e->ipending = e->npending = 0;
    return false;
  }
  *ev = e->pending[e->ipending++];
  return true;
}

as_status_t wl_parse_u64(const char *workload, const char *text,
                         const char *name, uint64_t lo, uint64_t hi,
                         uint64_t *out, as_err_t *err) {
  char *end = NULL;
  errno = 0;
  if (text == NULL || text[0] < '0' || text[0] > '9')
    goto bad;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi)
    goto bad;
  *out = (uint64_t)v;
  return AS_OK;
bad:
  return as_err_set(err, AS_EUSAGE,
                    "%s: --%s must be an integer in [%" PRIu64 ", %" PRIu64
                    "], got '%s'",
                    workload, name, lo, hi, text ? text : "(null)");
}

void wl_event_set(trace_event_t *ev, uint64_t t_ns, trace_op_t op, uint64_t id,
                  uint64_t size, const char *label) {
  trace_event_set(ev, t_ns, (uint8_t)op, TRACE_DOMAIN_RAW, id, size);
  ev->label = label;
}

as_status_t wl_bad_option(const char *workload, const char *name,
                          const char *expect, const char *text, as_err_t *err) {
  return as_err_set(err, AS_EUSAGE, "%s: --%s must be %s, got '%s'", workload,
                    name, expect, text ? text : "(null)");
}

as_status_t wl_describe(trace_source_t *src, const char *generator,
                        as_err_t *err) {
  as_status_t rc = trace_meta_set(&src->meta, "kind", "workload", err);
  if (rc == AS_OK)
    rc = trace_meta_set(&src->meta, "workload", src->name, err);
  if (rc == AS_OK)
    rc = trace_meta_set(&src->meta, "generator", generator, err);
  return rc;
}
