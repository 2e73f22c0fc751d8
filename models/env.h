/* models/env.h -- from the environment a run was measured in to the model
 * that predicts it.
 *
 * A recorded run carries its environment as provenance (env.LD_PRELOAD,
 * env.MALLOC_ARENA_MAX, env.MALLOC_CONF, env.MIMALLOC_PURGE_DELAY, ...).
 * Which allocator ran is read from LD_PRELOAD against each model's preload
 * name; which knobs it ran with is read through each option row's
 * environment spellings (models/options.h), so adding a model or a knob
 * adds its environment mapping with it and nothing here changes.
 */
#ifndef ALLOCSIM_ENV_H
#define ALLOCSIM_ENV_H

#include <stddef.h>

#include "model.h"

/* Returns the provenance value of key, or NULL.  Environment variables are
 * looked up as "env.NAME" (what capture writes), "env_NAME" and "NAME"; a
 * "malloc_env" entry ("NAME=V NAME=V", as measurement scripts write it) is
 * read too. */
typedef const char *(*model_env_get_fn)(void *user, const char *key);

/* "name[:k=v,...]" for methods, with every knob the environment sets.  An
 * OPT_ENUM knob given as a longer version ("3.11.2") takes the choice it
 * starts with ("3.11").  AS_EINVAL naming the variable and the knob when a
 * value is malformed; AS_EINVAL if buf is too small. */
as_status_t model_spec_from_env(const model_methods_t *methods,
                                model_env_get_fn get, void *user, char *buf,
                                size_t len, as_err_t *err);

/* spec with each knob it leaves unset that reads a fact the run recorded
 * about the measured machine ("meta:KEY" spellings: the allocator's or
 * Python's version, the CPU count, start-up layout) set to that fact, into
 * out: `--model cpython` on a CPython 3.11 capture is cpython:version=3.11.
 * Knobs set by environment variables stay at spec's values: a spec the
 * user gives asks "what if".  AS_EINVAL when a fact is one the knob does
 * not take (a Python 3.9 capture: no cpython version models it), saying
 * to give the knob; AS_EUSAGE for a malformed spec or a too small out. */
as_status_t model_spec_with_facts(const char *spec, model_env_get_fn get,
                                  void *user, char *out, size_t len,
                                  as_err_t *err);

/* The allocator LD_PRELOAD put in place of the C library's: the model whose
 * preload name a listed library starts with (*out), or NULL when none is
 * preloaded.  A preloaded library whose name says it is an allocator that
 * no model covers is AS_EINVAL naming it and suggesting --model. */
as_status_t model_preloaded(model_env_get_fn get, void *user,
                            const model_methods_t **out, as_err_t *err);

/* The model and libc specs that predict a recorded run: the preloaded
 * allocator (else the default libc model) with its knobs as libc; for a
 * Python run ("python" provenance) the CPython composition of that version
 * over it, else the libc model itself. */
as_status_t model_specs_for_run(model_env_get_fn get, void *user, char *model,
                                size_t model_len, char *libc, size_t libc_len,
                                as_err_t *err);

#endif
