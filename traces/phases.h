/* traces/phases.h -- in which phase of a trace each live object was
 * allocated, for explain's "the objects pinning it were allocated in ...".
 *
 * A phase is the stretch after a mark: an object allocated after the last
 * mark labelled "build" and before the next mark belongs to phase "build";
 * marks with the same label are one phase; objects allocated before the
 * first mark belong to phase 0, "before any mark".  A realloc keeps the
 * object's phase (its birth).  The tracker is a source that passes every
 * event of the source it wraps through unchanged and notes, per object id,
 * its phase and whether it is live: one byte per id, ids being dense
 * (docs/trace-format.md), in reserved address space so that an id far
 * past the others makes only its own page resident.
 */
#ifndef ALLOCSIM_PHASES_H
#define ALLOCSIM_PHASES_H

#include <stddef.h>
#include <stdint.h>

#include "event.h"

/* Distinct phases tracked; marks beyond go to the last phase. */
#define TRACE_PHASES_MAX 32

/* Wraps inner (taking ownership); meta and name are inner's.  Close the
 * result with trace_source_close. */
as_status_t trace_phases_wrap(trace_source_t *inner, trace_source_t **out,
                              as_err_t *err);

/* Phases seen so far (at least 1), and the label of phase i. */
size_t      trace_phases_count(const trace_source_t *wrapped);
const char *trace_phases_label(const trace_source_t *wrapped, size_t i);

/* Calls fn for each object live now, with its phase. */
typedef as_status_t (*trace_phases_fn)(void *user, uint64_t id, size_t phase,
                                       as_err_t *err);
as_status_t trace_phases_each_live(const trace_source_t *wrapped,
                                   trace_phases_fn fn, void *user,
                                   as_err_t *err);

#endif
