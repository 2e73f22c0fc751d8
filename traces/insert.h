/* traces/insert.h -- events inserted into a trace from the command line,
 * so nobody edits a trace by hand to ask "what if the program called
 * malloc_trim(0) here?".
 *
 * A spec is EVENT@WHEN:
 *   EVENT  trim            malloc_trim(0)
 *          trim:PAD        malloc_trim(PAD)
 *          purge[:KIND]    a purge event, KIND all (default), decay, tcache
 *   WHEN   MARK            just before every mark with that label, so the
 *                          mark's RSS is read after the call
 *          every:DURATION  every DURATION of trace time (10ms, 1s), from
 *                          the first event on, inside idles too
 * e.g. "trim@after_free", "purge:decay@every:1s".
 */
#ifndef ALLOCSIM_INSERT_H
#define ALLOCSIM_INSERT_H

#include <stdbool.h>
#include <stddef.h>

#include "event.h"

#define TRACE_INSERT_MAX 8

/* Calls one periodic insert may make: every:1ns over a trace of 1000 s
 * would be 10^12 of them, hours of replay that look like a hang.  10^7
 * trims take 1.3 s on a small glibc heap (130 ns each, measured), and
 * every:10ms stays within it for 27 hours of trace time, every:1s for 115
 * days. */
#define TRACE_INSERT_CALLS_MAX 10000000

typedef struct trace_insert_s trace_insert_t;
struct trace_insert_s {
  trace_op_t op;                        /* TRACE_TRIM or TRACE_PURGE */
  uint64_t   size;                      /* trim pad, or purge kind */
  char       mark[TRACE_LABEL_MAX + 1]; /* "" for a periodic insert */
  uint64_t   every_ns;                  /* periodic: the period; else 0 */
  uint64_t   phase_ns; /* periodic: the first call comes this long after the
                          first event when nonzero, else one period after it
                          (advise shifts the calls to see what their timing
                          decides); no spec sets it */
  bool at_end;         /* after the trace's last event (mark ""); advise
                          sets it, no spec does */
};

/* Parses spec into *out; AS_EUSAGE saying what was expected. */
as_status_t trace_insert_parse(const char *spec, trace_insert_t *out,
                               as_err_t *err);

/* Wraps inner (taking ownership) in a source that yields inner's events
 * with the n inserts applied; its meta and name are inner's. */
as_status_t trace_insert_wrap(trace_source_t       *inner,
                              const trace_insert_t *inserts, size_t n,
                              trace_source_t **out, as_err_t *err);

/* The time of the first event a wrapped source read, from which periodic
 * inserts count; false before it read any. */
bool trace_insert_origin(const trace_source_t *wrapped, uint64_t *t_ns);

/* After a replay of a wrapped source: false when an insert at a mark never
 * fired (no such mark in the trace), its spec's mark in *mark. */
bool trace_insert_all_fired(const trace_source_t *wrapped, const char **mark);

#endif
