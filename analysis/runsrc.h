/* analysis/runsrc.h -- a recorded run as something to replay: its
 * provenance and its trace or workload. */
#ifndef ALLOCSIM_RUNSRC_H
#define ALLOCSIM_RUNSRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../engine/engine.h"
#include "../models/env.h"
#include "../traces/event.h"
#include "../traces/trace_io.h"
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
/* The value of key in the trace_meta_t (a trace's header) at user, or
 * NULL: a model_env_get_fn over a trace's provenance. */
const char *trace_meta_lookup(void *user, const char *key);

/* Opens the run's trace, checking its SHA-256 against the one recorded (a
 * relative path is relative to the store's directory), else the workload
 * its provenance names.  desc receives what was opened; *is_trace tells
 * which. */
as_status_t run_open_source(store_t *s, const store_run_record_t *rec,
                            const run_meta_t *meta, trace_source_t **src,
                            char *desc, size_t desc_len, bool *is_trace,
                            as_err_t *err);

/* A trace file, or run RUN of a store: what replay, explain, advise, map
 * and report work on. */
typedef struct replay_target_s replay_target_t;
struct replay_target_s {
  trace_input_t      trace; /* the trace file (path NULL for a run) */
  store_t           *store; /* the run's store, or NULL */
  store_run_record_t rec;
  run_meta_t         meta;
  char               desc[512]; /* what a run replays */
  bool               is_trace;  /* it replays a trace file (set once its
                                   source was opened), not a workload */
};
/* what is a run id when db is given and it is a positive number, else a
 * trace path (one that reads once, such as stdin or a FIFO, is copied:
 * trace_input_open).  AS_EINVAL for a store that does not exist or a run
 * it does not hold.  Close with replay_target_close, also after a
 * failure. */
as_status_t replay_target_open(replay_target_t *t, const char *what,
                               const char *db, as_err_t *err);
/* Opens (again) the target's events (an explain_open_fn). */
as_status_t replay_target_source(void *user, trace_source_t **src,
                                 as_err_t *err);
/* The model and libc specs its provenance implies (as compare picks);
 * given_model and given_libc as for record_run_specs. */
as_status_t replay_target_specs(replay_target_t *t, const char *given_model,
                                const char *given_libc, char *model,
                                size_t model_len, char *libc, size_t libc_len,
                                as_err_t *err);
/* The specs a user gave (--model, --libc), with each knob they leave unset
 * that reads a fact the run recorded (the Python, glibc or allocator
 * version, the CPU count: models/env.h model_spec_with_facts) set to it,
 * into the buffers; *model and *libc then point at them.  *libc may be
 * NULL: a composition's libc is then the default libc model with its facts;
 * *libc == *model (a C run's model is its libc) stays so.  AS_EINVAL,
 * naming where (the trace or run), for a fact a knob does not take;
 * AS_EUSAGE if a buffer is too small. */
as_status_t record_specs_with_facts(model_env_get_fn get, void *user,
                                    const char *where, const char **model,
                                    char *model_buf, size_t model_len,
                                    const char **libc, char *libc_buf,
                                    size_t libc_len, as_err_t *err);
/* record_specs_with_facts with t's provenance (a trace's header, a run's). */
as_status_t replay_target_with_facts(replay_target_t *t, const char **model,
                                     char *model_buf, size_t model_len,
                                     const char **libc, char *libc_buf,
                                     size_t libc_len, as_err_t *err);
void        replay_target_close(replay_target_t *t);
/* The name messages use for the target. */
const char *replay_target_name(const replay_target_t *t);
/* For a model and libc spec both taken from t's provenance
 * (replay_target_specs): opens a session with them once, so that a spec the
 * file holds wrong (an option out of range) is a bad input naming the file
 * (AS_EFORMAT), not a usage error as a --model typed wrong is. */
as_status_t replay_target_check_specs(const replay_target_t *t,
                                      const char *model, const char *libc,
                                      const sim_kernel_config_t *kcfg,
                                      as_err_t                  *err);

#endif
