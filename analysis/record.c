/* analysis/record.c -- measured runs: storing traces that carry measured
 * RSS (measured-run files, converted captures) as runs in the store.
 *
 * `allocsim record` and `allocsim capture` share record_trace_file(): a
 * capture is converted to a trace first and then recorded exactly like a
 * measured-run file somebody else wrote, so both kinds of run look the same
 * in the store.
 */
#include "record.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../sim/idtable.h"
#include "../sim/sha256.h"
#include "../traces/trace_io.h"

/* ---- Recording traces --------------------------------------------------- */

static const char *meta_get_trace(void *user, const char *key) {
  return trace_meta_get(user, key);
}

/* Live bytes by id: ids are dense, so a table indexed by id, in reserved
 * address space (sim/idtable.h): an id far past the others makes only its
 * own page resident, where a grown and zeroed array made every id below
 * it resident (a measured-run file with one id of 4e8 took 4.2 GB). */
typedef struct livetab_s livetab_t;
struct livetab_s {
  sim_idtable_t tab;
  uint64_t     *size; /* bytes + 1 for a live id, 0 for a dead one */
  uint64_t      live_bytes;
};

static as_status_t live_apply(livetab_t *t, const trace_event_t *ev,
                              as_err_t *err) {
  if (ev->op == TRACE_FREE || ev->op == TRACE_REALLOC) {
    if (ev->id < t->tab.len && t->size[ev->id] != 0) {
      t->live_bytes -= t->size[ev->id] - 1;
      t->size[ev->id] = 0;
    }
    if (ev->op == TRACE_FREE)
      return AS_OK;
  }
  as_status_t rc = sim_idtable_reach_ids(&t->tab, ev->id, err);
  if (rc != AS_OK)
    return rc;
  if (t->size[ev->id] != 0)
    t->live_bytes -= t->size[ev->id] - 1;
  t->size[ev->id] = ev->size + 1;
  t->live_bytes += ev->size;
  return AS_OK;
}

/* A measured rss the store cannot hold (SQLite integers are signed) is
 * the trace's error, named by its file and line, not the store's. */
static as_status_t check_storable_rss(const trace_event_t *ev, as_err_t *err) {
  uint64_t v = ev->size > ev->offset ? ev->size : ev->offset;
  if (v <= (uint64_t)INT64_MAX)
    return AS_OK;
  return as_err_set(err, AS_EFORMAT,
                    "rss %" PRIu64 " is larger than a store holds (%" PRId64
                    ")",
                    v, INT64_MAX);
}

as_status_t record_trace_file(store_t *s, const char *path, const char *command,
                              const store_kv_t *extra, size_t nextra,
                              record_info_t *info, as_err_t *err) {
  memset(info, 0, sizeof *info);
  trace_source_t *src = NULL;
  store_samples_t smp = {0};
  livetab_t       live = {0};
  store_kv_t     *kv = NULL;
  as_status_t     rc = trace_open(path, &src, err);
  if (rc != AS_OK)
    return rc;
  if (sim_idtable_init(&live.tab, sizeof *live.size) != AS_OK) {
    trace_source_close(src);
    return as_err_set(err, AS_ENOMEM,
                      "%s: no address space for its object "
                      "ids",
                      path);
  }
  live.size = sim_idtable_base(&live.tab);

  trace_event_t  ev;
  store_sample_t pending;
  bool           have_pending = false;
  while ((rc = trace_source_next(src, &ev, err)) == AS_OK) {
    info->events++;
    if (trace_op_is_alloc(ev.op)) {
      info->alloc_events++;
      if ((rc = live_apply(&live, &ev, err)) != AS_OK) {
        trace_error_at(src, &ev, info->events - 1, rc, err);
        goto done;
      }
    }
    if (have_pending && !(ev.op == TRACE_RSS && ev.t_ns == pending.t_ns)) {
      info->marks_without_rss++;
      info->marks++;
      if ((rc = store_samples_push(&smp, &pending, err)) != AS_OK)
        goto done;
      have_pending = false;
    }
    if (ev.op == TRACE_MARK) {
      memset(&pending, 0, sizeof pending);
      pending.t_ns = ev.t_ns;
      pending.kind = SIM_SAMPLE_MARK;
      as_format_fits(pending.label, sizeof pending.label, "%s",
                     ev.label ? ev.label : "");
      pending.live_bytes = live.live_bytes;
      have_pending = true;
    } else if (ev.op == TRACE_RSS) {
      if ((rc = check_storable_rss(&ev, err)) != AS_OK) {
        trace_error_at(src, &ev, info->events - 1, rc, err);
        goto done;
      }
      if (ev.size > info->peak_measured_rss_bytes)
        info->peak_measured_rss_bytes = ev.size;
      uint64_t other_bytes = ev.offset; /* no allocator holds; 0: unknown */
      if (have_pending) {
        pending.measured_rss_bytes = ev.size;
        pending.owner_bytes[SIM_OWNER_BASELINE] = other_bytes;
        pending.live_bytes = live.live_bytes;
        info->marks++;
        if ((rc = store_samples_push(&smp, &pending, err)) != AS_OK)
          goto done;
        have_pending = false;
      } else {
        store_sample_t m;
        memset(&m, 0, sizeof m);
        m.t_ns = ev.t_ns;
        m.kind = SIM_SAMPLE_MEASURED;
        m.measured_rss_bytes = ev.size;
        m.owner_bytes[SIM_OWNER_BASELINE] = other_bytes;
        m.live_bytes = live.live_bytes;
        info->measured++;
        if ((rc = store_samples_push(&smp, &m, err)) != AS_OK)
          goto done;
      }
    }
  }
  if (rc != AS_DONE)
    goto done;
  if (have_pending) {
    info->marks_without_rss++;
    info->marks++;
    if ((rc = store_samples_push(&smp, &pending, err)) != AS_OK)
      goto done;
  }
  if (info->marks == info->marks_without_rss && info->measured == 0) {
    rc = as_err_set(err, AS_EFORMAT,
                    "%s: no rss events: a measured run needs measured RSS "
                    "(rss lines, or a capture)",
                    path);
    goto done;
  }

  /* The trace is stored by absolute path, or relative to the store's
   * directory when it lies below it, so a store shipped with its traces
   * (data/reference.db, data/captures/) still finds them elsewhere. */
  char        abs_path[PATH_MAX];
  char        db_dir[PATH_MAX];
  const char *stored_path = abs_path;
  /* A capture is a trace even when the program allocated nothing the
   * recorder saw (a replay predicts its start-up RSS throughout); a
   * measured-run file without allocations (an interpreter's baseline) is
   * only measurements. */
  const char *source = trace_meta_get(&src->meta, "source");
  bool        has_trace = info->alloc_events > 0 ||
                   (source != NULL && strcmp(source, "allocsim capture") == 0);
  if (has_trace && trace_path_reads_once(path)) {
    /* compare replays the stored path, checked by its SHA-256. */
    rc = as_err_set(err, AS_EINVAL,
                    "%s: expected a trace file: the store keeps its path for "
                    "compare to replay, and a pipe or FIFO can be read only "
                    "once (copy it to a file)",
                    path);
    goto done;
  }
  if (has_trace) {
    if (realpath(path, abs_path) == NULL)
      as_format_fits(abs_path, sizeof abs_path, "%s", path);
    if (realpath(store_path(s), db_dir) != NULL) {
      char *slash = strrchr(db_dir, '/');
      if (slash != NULL)
        slash[slash == db_dir ? 1 : 0] = '\0';
      size_t dl = strlen(db_dir);
      if (dl > 1 && strncmp(abs_path, db_dir, dl) == 0 && abs_path[dl] == '/')
        stored_path = abs_path + dl + 1;
    }
    if ((rc = as_sha256_file(path, info->sha256, err)) != AS_OK)
      goto done;
  }

  const trace_meta_t *m = &src->meta;
  kv = calloc(m->count + nextra + 2, sizeof *kv);
  if (kv == NULL) {
    rc = as_err_set(err, AS_ENOMEM, "out of memory");
    goto done;
  }
  size_t nkv = 0;
  for (size_t i = 0; i < m->count; i++) {
    bool replaced = false;
    for (size_t j = 0; j < nextra; j++)
      replaced |= strcmp(extra[j].key, m->key[i]) == 0;
    if (!replaced)
      kv[nkv++] = (store_kv_t){m->key[i], m->value[i]};
  }
  for (size_t j = 0; j < nextra; j++)
    kv[nkv++] = extra[j];
  if (trace_meta_get(m, "kind") == NULL)
    kv[nkv++] = (store_kv_t){"kind", "measured"};

  /* The specs are stored for people to read (compare derives them again).
   * A run whose provenance no model follows (a Python or glibc version no
   * model knows) is a measurement all the same: stored without them, and
   * the caller warns. */
  char     libc_spec[256], model_spec[256];
  as_err_t why = {0};
  if (record_run_specs(meta_get_trace, (void *)m, NULL, NULL, model_spec,
                       sizeof model_spec, libc_spec, sizeof libc_spec,
                       &why) != AS_OK) {
    model_spec[0] = libc_spec[0] = '\0';
    as_format_fits(info->spec_warning, sizeof info->spec_warning,
                   "%.200s: provenance: %.300s", path, why.msg);
  }
  uint64_t    page_size = (uint64_t)sysconf(_SC_PAGESIZE);
  const char *ps = trace_meta_get(m, "page_size");
  if (ps != NULL) {
    char              *end;
    unsigned long long v = strtoull(ps, &end, 10);
    if (*end != '\0' || v == 0) {
      rc = as_err_set(err, AS_EFORMAT,
                      "%s: provenance page_size: expected bytes, got '%s'",
                      path, ps);
      goto done;
    }
    page_size = v;
  }
  const char *cmd = trace_meta_get(m, "command");
  store_run_t run = {
      .kind = "measured",
      .model = model_spec,
      .options = libc_spec[0] != '\0' ? libc_spec : NULL,
      .page_size = page_size,
      .source = has_trace ? stored_path : path, /* as the trace is found */
      .command = cmd ? cmd : (command ? command : ""),
      .trace_path = has_trace ? stored_path : NULL,
      .trace_sha256 = has_trace ? info->sha256 : NULL,
      .meta = kv,
      .meta_count = nkv,
  };
  rc = store_write_run(s, &run, smp.v, smp.n, &info->run_id, err);

done:
  free(kv);
  store_samples_free(&smp);
  sim_idtable_free(&live.tab);
  trace_source_close(src);
  return rc;
}
/* ---- Which model predicts a run ---------------------------------------- */

/* True if s looks like "name[:options]" for a registered model. */
static bool is_spec(const char *s) {
  char name[64];
  if (s == NULL)
    return false;
  size_t n = strcspn(s, ":");
  if (n == 0 || n >= sizeof name || strpbrk(s, " \t") != NULL)
    return false;
  memcpy(name, s, n);
  name[n] = '\0';
  return model_find(name) != NULL;
}

/* The provenance spec over the one the environment implies: the same
 * model keeps the environment's knobs (PYTHONMALLOC=malloc,
 * MALLOC_ARENA_MAX) unless the provenance sets them itself; another model
 * replaces it.  False if out is too small. */
static bool spec_over_env(const char *env_spec, const char *meta_spec,
                          char *out, size_t len) {
  char env_name[64], meta_name[64];
  model_spec_name(env_spec, env_name, sizeof env_name);
  model_spec_name(meta_spec, meta_name, sizeof meta_name);
  const char *opts = strchr(meta_spec, ':');
  if (strcmp(env_name, meta_name) != 0)
    return as_format_fits(out, len, "%s", meta_spec);
  if (opts == NULL || opts[1] == '\0')
    return as_format_fits(out, len, "%s", env_spec);
  return model_spec_with(env_spec, opts + 1, out, len);
}

static as_status_t derive_specs(model_env_get_fn get, void *user, char *model,
                                size_t model_len, char *libc, size_t libc_len,
                                as_err_t *err) {
  char        env_model[512], env_libc[512];
  as_status_t rc = model_specs_for_run(get, user, env_model, sizeof env_model,
                                       env_libc, sizeof env_libc, err);
  if (rc != AS_OK)
    return rc;
  const char *meta_model = get(user, "model");
  const char *meta_libc = get(user, "libc"); /* or "glibc 2.36": no spec */
  if (!(is_spec(meta_libc) ? spec_over_env(env_libc, meta_libc, libc, libc_len)
                           : as_format_fits(libc, libc_len, "%s", env_libc)))
    return as_err_set(err, AS_EINVAL, "libc spec longer than %zu bytes",
                      libc_len);
  /* A C program's model is its libc (env_model names the same model as
   * env_libc), so a provenance libc such as "musl" (an oracle replay, a
   * musl-gcc build) is its model too. */
  char env_model_name[64], env_libc_name[64];
  model_spec_name(env_model, env_model_name, sizeof env_model_name);
  model_spec_name(env_libc, env_libc_name, sizeof env_libc_name);
  if (!is_spec(meta_model) && is_spec(meta_libc) &&
      strcmp(env_model_name, env_libc_name) == 0)
    meta_model = libc;
  if (!(is_spec(meta_model)
            ? spec_over_env(env_model, meta_model, model, model_len)
            : as_format_fits(model, model_len, "%s", env_model)))
    return as_err_set(err, AS_EINVAL, "model spec longer than %zu bytes",
                      model_len);
  return AS_OK;
}

/* The provenance without its "python" key: the run's libc as a C
 * program's (models/env.h model_specs_for_run). */
typedef struct without_python_s {
  model_env_get_fn get;
  void            *user;
} without_python_t;

static const char *get_without_python(void *user, const char *key) {
  const without_python_t *w = user;
  return strcmp(key, "python") == 0 ? NULL : w->get(w->user, key);
}

static bool copy_spec(char *out, size_t len, const char *spec) {
  return as_format_fits(out, len, "%s", spec);
}

/* model and libc set to the given specs; AS_EINVAL in *why if one is too
 * long. */
static as_status_t copy_specs(char *model, size_t model_len,
                              const char *model_spec, char *libc,
                              size_t libc_len, const char *libc_spec,
                              as_err_t *why) {
  if (copy_spec(model, model_len, model_spec) &&
      copy_spec(libc, libc_len, libc_spec))
    return AS_OK;
  return as_err_set(why, AS_EINVAL, "spec longer than %zu bytes",
                    model_len < libc_len ? model_len : libc_len);
}

as_status_t record_run_specs(model_env_get_fn get, void *user,
                             const char *given_model, const char *given_libc,
                             char *model, size_t model_len, char *libc,
                             size_t libc_len, as_err_t *err) {
  as_err_t    why = {0};
  as_status_t rc =
      derive_specs(get, user, model, model_len, libc, libc_len, &why);
  if (rc == AS_OK)
    return AS_OK;
  bool python = get(user, "python") != NULL && *get(user, "python") != '\0';
  if (given_model != NULL && given_libc != NULL)
    rc = copy_specs(model, model_len, given_model, libc, libc_len, given_libc,
                    &why);
  else if (given_model != NULL && python) {
    /* The model is given; the libc under it is still the run's. */
    without_python_t w = {get, user};
    char             unused[512];
    rc = derive_specs(get_without_python, &w, unused, sizeof unused, libc,
                      libc_len, &why);
    if (rc == AS_OK && !copy_spec(model, model_len, given_model))
      rc = as_err_set(&why, AS_EINVAL, "model spec longer than %zu bytes",
                      model_len);
  } else if (!python && (given_model != NULL || given_libc != NULL)) {
    /* A C run's model is its libc: either option names both. */
    const char *spec = given_model != NULL ? given_model : given_libc;
    rc = copy_specs(model, model_len, spec, libc, libc_len, spec, &why);
  }
  if (rc == AS_OK)
    return AS_OK;
  return as_err_set(err, rc,
                    "%s; give %s to replay it with the model you "
                    "choose",
                    why.msg,
                    python ? "--model (and --libc)" : "--libc (or --model)");
}
