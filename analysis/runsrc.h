/* analysis/runsrc.h -- a recorded run as something to replay: its
 * provenance and its trace or workload. */
#ifndef ALLOCSIM_RUNSRC_H
#define ALLOCSIM_RUNSRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../traces/event.h"
#include "store.h"

/* A run's provenance as key/value pairs (owned copies). */
typedef struct run_meta_s run_meta_t;
struct run_meta_s {
  char **key;
  char **value;
  size_t n, cap;
};

/* Reads run run_id's provenance into *out (freed with run_meta_free). */
as_status_t run_meta_read(store_t *s, int64_t run_id, run_meta_t *out,
                          as_err_t *err);
/* The value of key in the run_meta_t at user, or NULL (a model_env_get_fn,
 * so record_run_specs can read it). */
const char *run_meta_get(void *user, const char *key);
void        run_meta_free(run_meta_t *m);

/* Opens the run's trace, checking its SHA-256 against the one recorded (a
 * relative path is relative to the store's directory), else the workload
 * its provenance names.  desc receives what was opened; *is_trace tells
 * which. */
as_status_t run_open_source(store_t *s, const store_run_record_t *rec,
                            const run_meta_t *meta, trace_source_t **src,
                            char *desc, size_t desc_len, bool *is_trace,
                            as_err_t *err);

#endif
