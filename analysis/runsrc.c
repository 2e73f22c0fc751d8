/* analysis/runsrc.c -- a recorded run as something to replay: its
 * provenance and its trace (checked by SHA-256) or workload.  compare and
 * explain both start from a run id. */
#include "runsrc.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../sim/sha256.h"
#include "record.h"
#include "../traces/trace_io.h"
#include "../traces/workload.h"

static as_status_t meta_collect(void *user, const char *key, const char *value,
                                as_err_t *err) {
  run_meta_t *l = user;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 32;
    char **k = realloc(l->key, cap * sizeof *k);
    if (k == NULL)
      return as_err_set(err, AS_ENOMEM, "out of memory");
    l->key = k;
    char **v = realloc(l->value, cap * sizeof *v);
    if (v == NULL)
      return as_err_set(err, AS_ENOMEM, "out of memory");
    l->value = v;
    l->cap = cap;
  }
  l->key[l->n] = strdup(key);
  l->value[l->n] = strdup(value ? value : "");
  if (l->key[l->n] == NULL || l->value[l->n] == NULL) {
    free(l->key[l->n]);
    free(l->value[l->n]);
    return as_err_set(err, AS_ENOMEM, "out of memory");
  }
  l->n++;
  return AS_OK;
}

const char *run_meta_get(void *user, const char *key) {
  const run_meta_t *l = user;
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->key[i], key) == 0)
      return l->value[i];
  return NULL;
}

void run_meta_free(run_meta_t *l) {
  for (size_t i = 0; i < l->n; i++) {
    free(l->key[i]);
    free(l->value[i]);
  }
  free(l->key);
  free(l->value);
  memset(l, 0, sizeof *l);
}

as_status_t run_meta_read(store_t *s, int64_t run_id, run_meta_t *out,
                          as_err_t *err) {
  memset(out, 0, sizeof *out);
  as_status_t rc = store_list_meta(s, run_id, meta_collect, out, err);
  if (rc != AS_OK)
    run_meta_free(out);
  return rc;
}

/* Opens the run's trace (checking its SHA-256) or its workload. */
as_status_t run_open_source(store_t *s, const store_run_record_t *rec,
                            const run_meta_t *meta, trace_source_t **src,
                            char *desc, size_t desc_len, bool *is_trace,
                            as_err_t *err) {
  *src = NULL;
  *is_trace = false;
  if (rec->trace_path != NULL) {
    /* A relative trace path is relative to the store's directory. */
    char path[PATH_MAX];
    if (rec->trace_path[0] == '/') {
      as_format_fits(path, sizeof path, "%s", rec->trace_path);
    } else {
      const char *sp = store_path(s);
      const char *slash = strrchr(sp, '/');
      if (slash == NULL)
        as_format_fits(path, sizeof path, "%s", rec->trace_path);
      else
        as_format_fits(path, sizeof path, "%.*s/%s", (int)(slash - sp), sp,
                       rec->trace_path);
    }
    char        sha[65];
    as_status_t rc = as_sha256_file(path, sha, err);
    if (rc != AS_OK) {
      char msg[sizeof err->msg];
      as_format_fits(msg, sizeof msg, "run %" PRId64 "'s trace %s%s: %.300s",
                     rec->id, rec->trace_path,
                     rec->trace_path[0] == '/'
                         ? ""
                         : " (relative to the store's directory)",
                     err->msg);
      return as_err_set(err, rc, "%s", msg);
    }
    if (rec->trace_sha256 != NULL && strcmp(sha, rec->trace_sha256) != 0)
      return as_err_set(err, AS_EINVAL,
                        "%s: SHA-256 %s differs from the %s recorded with run "
                        "%" PRId64 " (the trace changed)",
                        path, sha, rec->trace_sha256, rec->id);
    as_format_fits(desc, desc_len, "%s", path);
    *is_trace = true;
    return trace_open(path, src, err);
  }
  const char *wl = run_meta_get((void *)meta, "workload");
  if (wl == NULL || *wl == '\0')
    return as_err_set(err, AS_EINVAL,
                      "run %" PRId64 " has neither a trace nor a 'workload' "
                      "provenance entry to replay",
                      rec->id);
  as_format_fits(desc, desc_len, "%s", wl);
  as_status_t rc = workload_open_line(wl, src, err);
  if (rc != AS_OK && rc != AS_ENOMEM) {
    char msg[sizeof err->msg];
    as_format_fits(msg, sizeof msg, "run %" PRId64 " workload: %.400s", rec->id,
                   err->msg);
    rc = as_err_set(err, AS_EINVAL, "%s", msg);
  }
  return rc;
}

/* ---- A trace file or a recorded run ------------------------------------ */

as_status_t replay_target_open(replay_target_t *t, const char *what,
                               const char *db, as_err_t *err) {
  memset(t, 0, sizeof *t);
  char *end;
  errno = 0;
  long long run_id = strtoll(what, &end, 10);
  if (db == NULL || *end != '\0' || end == what)
    return trace_input_open(&t->trace, what, err);
  /* "0" or "-2" with --db meant a run, unless a file has that name (it
   * said "0: cannot open"). */
  if (run_id <= 0 && access(what, F_OK) == 0)
    return trace_input_open(&t->trace, what, err);
  if (run_id <= 0)
    return as_err_set(err, AS_EINVAL,
                      "%s: no run with id %s (run ids start at 1)", db, what);
  if (errno == ERANGE) /* saturated: named as given, not as LLONG_MAX */
    return as_err_set(err, AS_EINVAL, "%s: no run with id %s", db, what);
  if (access(db, F_OK) != 0)
    return as_err_set(err, AS_EINVAL, "%s: no such store", db);
  as_status_t rc = store_open_existing(db, &t->store, err);
  if (rc == AS_OK)
    rc = store_read_run(t->store, run_id, &t->rec, err);
  if (rc == AS_OK)
    rc = run_meta_read(t->store, run_id, &t->meta, err);
  return rc;
}

as_status_t replay_target_source(void *user, trace_source_t **src,
                                 as_err_t *err) {
  replay_target_t *t = user;
  if (t->trace.path != NULL) {
    t->is_trace = true;
    return trace_input_source(&t->trace, src, err);
  }
  return run_open_source(t->store, &t->rec, &t->meta, src, t->desc,
                         sizeof t->desc, &t->is_trace, err);
}

const char *trace_meta_lookup(void *user, const char *key) {
  return trace_meta_get(user, key);
}

/* t's provenance as a getter and its user: the run's, or the trace's
 * header, whose source *src is opened here for the caller to close (NULL
 * for a run). */
static as_status_t target_meta(replay_target_t *t, model_env_get_fn *get,
                               void **user, trace_source_t **src,
                               as_err_t *err) {
  *src = NULL;
  if (t->store != NULL) {
    *get = run_meta_get;
    *user = &t->meta;
    return AS_OK;
  }
  as_status_t rc = trace_input_source(&t->trace, src, err);
  if (rc != AS_OK) {
    *src = NULL;
    return rc;
  }
  *get = trace_meta_lookup;
  *user = &(*src)->meta;
  return AS_OK;
}

as_status_t replay_target_specs(replay_target_t *t, const char *given_model,
                                const char *given_libc, char *model,
                                size_t model_len, char *libc, size_t libc_len,
                                as_err_t *err) {
  model_env_get_fn get;
  void            *user;
  trace_source_t  *src;
  as_status_t      rc = target_meta(t, &get, &user, &src, err);
  if (rc == AS_OK)
    rc = record_run_specs(get, user, given_model, given_libc, model, model_len,
                          libc, libc_len, err);
  if (src != NULL)
    trace_source_close(src);
  return rc;
}

/* *spec, with the machine facts get finds, into buf (model_spec_with_facts);
 * *spec then points at buf.  A fact the spec's knob does not take is an
 * error naming where the run is. */
static as_status_t spec_with_facts(model_env_get_fn get, void *user,
                                   const char *where, const char **spec,
                                   char *buf, size_t len, as_err_t *err) {
  char given[512];
  as_format_fits(given, sizeof given, "%s", *spec);
  as_status_t rc = model_spec_with_facts(given, get, user, buf, len, err);
  if (rc == AS_OK)
    *spec = buf;
  else if (rc == AS_EINVAL) {
    char why[sizeof err->msg];
    as_format_fits(why, sizeof why, "%s", err->msg);
    as_err_set(err, rc, "%.200s: %s", where, why);
  }
  return rc;
}

as_status_t record_specs_with_facts(model_env_get_fn get, void *user,
                                    const char *where, const char **model,
                                    char *model_buf, size_t model_len,
                                    const char **libc, char *libc_buf,
                                    size_t libc_len, as_err_t *err) {
  bool        same = *libc == *model;
  as_status_t rc =
      spec_with_facts(get, user, where, model, model_buf, model_len, err);
  if (rc != AS_OK)
    return rc;
  if (same) /* a C run's model is its libc */
    *libc = *model;
  else if (*libc != NULL || model_spec_composes(*model)) {
    if (*libc == NULL)
      *libc = model_default_libc();
    rc = spec_with_facts(get, user, where, libc, libc_buf, libc_len, err);
  }
  return rc;
}

as_status_t replay_target_with_facts(replay_target_t *t, const char **model,
                                     char *model_buf, size_t model_len,
                                     const char **libc, char *libc_buf,
                                     size_t libc_len, as_err_t *err) {
  model_env_get_fn get;
  void            *user;
  trace_source_t  *src;
  as_status_t      rc = target_meta(t, &get, &user, &src, err);
  if (rc == AS_OK)
    rc = record_specs_with_facts(get, user, replay_target_name(t), model,
                                 model_buf, model_len, libc, libc_buf, libc_len,
                                 err);
  if (src != NULL)
    trace_source_close(src);
  return rc;
}

void replay_target_close(replay_target_t *t) {
  trace_input_close(&t->trace);
  store_run_record_free(&t->rec);
  run_meta_free(&t->meta);
  store_run_record_free(&t->rec);
  if (t->store != NULL)
    store_close(t->store);
  t->store = NULL;
}

const char *replay_target_name(const replay_target_t *t) {
  return t->trace.path != NULL ? t->trace.path : t->desc;
}

as_status_t replay_target_check_specs(const replay_target_t *t,
                                      const char *model, const char *libc,
                                      const sim_kernel_config_t *kcfg,
                                      as_err_t                  *err) {
  sim_session_t s;
  as_status_t   rc = sim_session_open(model, libc, kcfg, &s, err);
  if (rc == AS_OK) {
    sim_session_close(&s);
    return AS_OK;
  }
  if (rc != AS_EUSAGE)
    return rc;
  char msg[sizeof err->msg];
  as_format_fits(msg, sizeof msg, "%.200s: provenance model '%.80s': %.200s",
                 t->trace.path != NULL ? t->trace.path : store_path(t->store),
                 model, err->msg);
  return as_err_set(err, AS_EFORMAT, "%s", msg);
}
