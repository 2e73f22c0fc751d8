/* traces/sites.h -- the call sites of a trace (docs/trace-format.md, "Call
 * sites") and which site allocated each live object, for explain --by-site.
 *
 * The tracker is a source that passes every event of the source it wraps
 * through unchanged and keeps the module and site definitions it sees and,
 * per object id, the site of the allocation (or realloc) that gave the
 * object its current size, and that size.  Ids being dense
 * (docs/trace-format.md), that is one array indexed by id.
 */
#ifndef ALLOCSIM_SITES_H
#define ALLOCSIM_SITES_H

#include <stddef.h>
#include <stdint.h>

#include "event.h"

/* Wraps inner (taking ownership); meta and name are inner's.  Close the
 * result with trace_source_close. */
as_status_t trace_sites_wrap(trace_source_t *inner, trace_source_t **out,
                             as_err_t *err);

/* Whether any site was defined so far. */
bool trace_sites_any(const trace_source_t *wrapped);
/* The frames of site (innermost first) and their number; NULL if site was
 * not defined. */
const trace_frame_t *trace_sites_frames(const trace_source_t *wrapped,
                                        uint64_t site, uint32_t *n);
/* The path of module id, or NULL if it was not defined. */
const char *trace_sites_module(const trace_source_t *wrapped, uint64_t id);

/* Calls fn for each object live now, with its site (0: none recorded) and
 * its size in bytes. */
typedef as_status_t (*trace_sites_fn)(void *user, uint64_t id, uint64_t site,
                                      uint64_t size, as_err_t *err);
as_status_t trace_sites_each_live(const trace_source_t *wrapped,
                                  trace_sites_fn fn, void *user, as_err_t *err);

#endif
