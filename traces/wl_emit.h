/* traces/wl_emit.h -- event emission shared by the CPython workloads
 * (traces/wl_spike.c, traces/wl_webworker.c).
 *
 * A workload's generator runs a state machine; each step pushes a few events
 * into a pending buffer that the source's next() drains.  This file holds the
 * parts every such generator needs and that are not about any one program:
 * the pending buffer, the virtual clock, object ids recycled LIFO from a
 * stack of freed ids (so ids stay below the peak live count), the
 * malloc/realloc/free/mark helpers, the option parser for decimal
 * integers, and the few helpers of workloads that need no pending buffer.  The
 * CPython rules themselves (sizes, free lists, growth) stay in each workload,
 * next to their citations.
 *
 * Types: wl_emit_t -- clock, id stack and pending events of one generator.
 */
#ifndef ALLOCSIM_WL_EMIT_H
#define ALLOCSIM_WL_EMIT_H

#include <stddef.h>
#include <stdint.h>

#include "event.h"

/* Most events a single step may push before next() drains them. */
#define WL_EMIT_PENDING_MAX 256

/* Invariants: ipending <= npending <= WL_EMIT_PENDING_MAX; every id in
 * free_ids[0..nfree) is below next_id and names no live object. */
typedef struct wl_emit_s wl_emit_t;
struct wl_emit_s {
  uint64_t      t_ns;     /* virtual clock stamped on pushed events */
  uint32_t     *free_ids; /* freed ids, reused LIFO; owned by the caller */
  size_t        nfree;    /* entries in free_ids */
  uint64_t      next_id;  /* lowest id never used */
  trace_event_t pending[WL_EMIT_PENDING_MAX]; /* events not yet returned */
  size_t        npending;                     /* events pushed in this step */
  size_t        ipending;                     /* next pending event to return */
};

/* A fresh id: the last freed one, else next_id (which then advances). */
uint32_t wl_emit_take_id(wl_emit_t *e);

/* Appends a zeroed event with op, thread and the current time; returns it
 * for the caller to fill.  Asserts the pending buffer has room. */
trace_event_t *wl_emit_push(wl_emit_t *e, trace_op_t op, uint32_t thread);

/* Pushes a malloc of size bytes in domain dom by thread; returns its id. */
uint32_t wl_emit_malloc(wl_emit_t *e, uint32_t thread, trace_domain_t dom,
                        uint64_t size);

/* Pushes a calloc of size (= nmemb * size) bytes; returns its id. */
uint32_t wl_emit_calloc(wl_emit_t *e, uint32_t thread, trace_domain_t dom,
                        uint64_t size);

/* Pushes a realloc of id to size bytes (domain dom). */
void wl_emit_realloc(wl_emit_t *e, uint32_t thread, trace_domain_t dom,
                     uint32_t id, uint64_t size);

/* Pushes a free of id (domain dom) and returns id to the free-id stack,
 * which must have room (the caller sizes it to the peak live count). */
void wl_emit_free(wl_emit_t *e, uint32_t thread, trace_domain_t dom,
                  uint32_t id);

/* Pushes a mark (thread 0); label must outlive the event. */
void wl_emit_mark(wl_emit_t *e, const char *label);

/* Moves the next pending event to *ev: true, or false when the buffer is
 * drained (npending and ipending are then reset to 0 for the next step). */
bool wl_emit_next(wl_emit_t *e, trace_event_t *ev);

/* Parses decimal text for option --name of workload into [lo, hi].  Bad
 * text: AS_EUSAGE "<workload>: --<name> must be an integer in [lo, hi],
 * got '<text>'". */
as_status_t wl_parse_u64(const char *workload, const char *text,
                         const char *name, uint64_t lo, uint64_t hi,
                         uint64_t *out, as_err_t *err);

/* For workloads that step through a fixed sequence without the pending
 * buffer (traces/wl_lab_purge.c, traces/wl_churn_purge.c): fills *ev as an
 * event of the raw domain, thread 0, at t_ns (label must outlive it). */
void wl_event_set(trace_event_t *ev, uint64_t t_ns, trace_op_t op, uint64_t id,
                  uint64_t size, const char *label);

/* AS_EUSAGE "<workload>: --<name> must be <expect>, got '<text>'". */
as_status_t wl_bad_option(const char *workload, const char *name,
                          const char *expect, const char *text, as_err_t *err);

/* Sets the provenance every workload source carries: kind=workload,
 * workload=<src->name>, generator=<generator> (its source file). */
as_status_t wl_describe(trace_source_t *src, const char *generator,
                        as_err_t *err);

#endif
