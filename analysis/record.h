/* analysis/record.h -- recording measured runs: storing traces that carry
 * measured RSS (measured-run files, captures) in the store.
 *
 * Type map
 *   record_info_t            what record_trace_file found and stored
 *
 * Samples of a measured run (the store's samples table):
 *   - a mark followed by an rss event at the same time is one
 *     SIM_SAMPLE_MARK sample with measured_rss_bytes = that rss; a mark with
 *     no such rss is a mark sample with measured_rss_bytes 0;
 *   - every other rss event is a SIM_SAMPLE_MEASURED sample;
 *   - rss_bytes (the predicted column) is 0; live_bytes is what the trace's
 *     allocation events hold live at that point;
 *   - samples whose rss event carries "other" (a capture's do) store it
 *     as owner "baseline": the measured bytes no allocator holds.
 */
#ifndef ALLOCSIM_RECORD_H
#define ALLOCSIM_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../sim/status.h"
#include "../models/env.h"
#include "../traces/event.h"
#include "store.h"

/* ---- Recording a trace as a measured run ------------------------------ */

typedef struct record_info_s record_info_t;
struct record_info_s {
  int64_t  run_id;            /* the stored run */
  uint64_t events;            /* events in the trace */
  uint64_t alloc_events;      /* malloc/calloc/realloc/memalign/free */
  uint64_t marks;             /* mark samples stored */
  uint64_t measured;          /* other rss samples stored */
  uint64_t marks_without_rss; /* marks not followed by an rss at their time */
  uint64_t peak_measured_rss_bytes;
  char     sha256[65];        /* "" if the trace has no allocation events */
  char     spec_warning[512]; /* "" or why no model spec could be derived
                                 from the provenance (the run is stored
                                 with none) */
};

/* Reads the trace at path (any format), and stores it in s as a run of
 * kind measured: its provenance (#@ lines) as run_meta, plus extra (may be
 * NULL), its samples as described above, and, if it has allocation events,
 * its path and SHA-256: relative to the store's directory when the trace
 * lies below it, else absolute.  command is the command line stored when
 * the trace has no "command" provenance.  Bad traces fail with the reader's
 * message (file and position), a trace without rss events with AS_EFORMAT;
 * nothing is stored then. */
as_status_t record_trace_file(store_t *s, const char *path, const char *command,
                              const store_kv_t *extra, size_t nextra,
                              record_info_t *info, as_err_t *err);

/* The model and libc specs that predict a recorded run whose provenance
 * get(user, key) returns: the run's own "model" and "libc" provenance when
 * they are specs of registered models (measurement scripts write
 * "model=cpython:version=3.11", "libc=glibc:arena_max=1"), else what its
 * environment implies (models/env.h model_specs_for_run).  AS_EINVAL with
 * the reason (a malformed knob, a version or preloaded allocator no model
 * covers) and what to give instead.
 *
 * given_model and given_libc are the caller's --model and --libc (NULL when
 * not given), which the caller applies over the result as before.  They
 * matter only when the provenance cannot be followed: what they give is not
 * derived, so a Python or glibc version no model knows fails only where its
 * spec is needed (a C run's model is its libc; a Python run's libc is still
 * derived when only --model is given). */
as_status_t record_run_specs(model_env_get_fn get, void *user,
                             const char *given_model, const char *given_libc,
                             char *model, size_t model_len, char *libc,
                             size_t libc_len, as_err_t *err);

#endif
