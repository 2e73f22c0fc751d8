/* traces/workload.h -- deterministic synthetic workloads as trace sources.
 *
 * A workload is a generator that produces events lazily (streaming, never a
 * whole trace in memory) from its options and a seed.  Each registers a
 * name, a one-line summary and an option table; `allocsim run NAME --opt v`
 * creates it and replays it exactly like a trace file.
 */
#ifndef ALLOCSIM_WORKLOAD_H
#define ALLOCSIM_WORKLOAD_H

#include <stddef.h>

#include "event.h"

typedef struct workload_option_s workload_option_t;
struct workload_option_s {
  const char *name;          /* "--name" on the command line, without -- */
  const char *default_value; /* as typed; NULL = required */
  const char *help;          /* one line, with unit */
};

typedef struct workload_def_s workload_def_t;
struct workload_def_s {
  const char              *name;    /* "survivors" */
  const char              *summary; /* one line */
  const workload_option_t *options; /* table ending in a row with name NULL */
  /* Creates the source from option values given in table order (every row
   * filled: given or default).  Bad values: AS_EUSAGE naming the option. */
  as_status_t (*open)(const char *const *values, trace_source_t **out,
                      as_err_t *err);
};

/* Provenance keys a source may carry with a floor on what its program holds
 * at its peak: live objects and live bytes (decimal).  The engine refuses
 * before the first event a run whose floor alone cannot fit the
 * simulator's memory bound (engine/engine.h, --max-memory), instead of
 * finding out after filling the machine.  Floors, not estimates: the
 * refusal must never turn away a run that would fit. */
#define WORKLOAD_META_PEAK_OBJECTS "peak_live_objects"
#define WORKLOAD_META_PEAK_BYTES   "peak_live_bytes"

/* The workload registered under name, or NULL. */
const workload_def_t        *workload_find(const char *name);
const workload_def_t *const *workload_registry(size_t *count);

/* Parses argv of "--key value" / "--key=value" pairs against def's table and
 * opens it.  Unknown options: AS_EUSAGE listing the known ones. */
as_status_t workload_open_argv(const workload_def_t *def, int argc, char **argv,
                               trace_source_t **out, as_err_t *err);

/* Opens a workload from one line: its name, then its options, separated by
 * spaces or tabs ("survivors --size 64 --fraction 1e-4"), the form runs
 * record as their 'workload' provenance.  An unknown name is AS_EUSAGE
 * naming it; option errors are as for workload_open_argv. */
as_status_t workload_open_line(const char *line, trace_source_t **out,
                               as_err_t *err);

#endif
