/* models/registry.c -- the static table of models and creation from a spec.
 *
 * The table is a static const array searched by name, in the spirit of
 * sqlite3_vfs_find, with no mutable global list: adding a model is one line.
 */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const model_methods_t model_ideal_methods;
extern const model_methods_t model_glibc_methods;
extern const model_methods_t model_pymalloc_methods;
extern const model_methods_t model_cpython_methods;
extern const model_methods_t model_jemalloc_methods;
extern const model_methods_t model_mimalloc_methods;
extern const model_methods_t model_tcmalloc_methods;
extern const model_methods_t model_musl_methods;
extern const model_methods_t model_libmalloc_methods;

static const model_methods_t *const registry[] = {
    &model_ideal_methods,    &model_glibc_methods,    &model_pymalloc_methods,
    &model_cpython_methods,  &model_jemalloc_methods, &model_mimalloc_methods,
    &model_tcmalloc_methods, &model_musl_methods,     &model_libmalloc_methods,
};

const model_methods_t *const *model_registry(size_t *count) {
  *count = sizeof registry / sizeof registry[0];
  return registry;
}

const model_methods_t *model_find(const char *name) {
  for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
    if (strcmp(registry[i]->name, name) == 0)
      return registry[i];
  return NULL;
}

const char *model_default_libc(void) {
  /* CPython 3.14 Objects/obmalloc.c:370 PYRAW_ALLOC is MALLOC_ALLOC: the
   * default build forwards to the C library's malloc, glibc 2.36 on
   * Debian 12. */
  return "glibc";
}

static as_status_t unknown_model(const char *name, size_t len, as_err_t *err) {
  char   known[256] = "";
  size_t used = 0;
  for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
    used += (size_t)snprintf(known + used,
                             used < sizeof known ? sizeof known - used : 0,
                             "%s%s", i ? ", " : "", registry[i]->name);
  return as_err_set(err, AS_EUSAGE, "unknown model '%.*s' (known: %s)",
                    (int)len, name, known);
}

as_status_t model_create_from_spec(const char *spec, const model_ctx_t *ctx,
                                   model_t **out, as_err_t *err) {
  *out = NULL;
  const char *colon = strchr(spec, ':');
  size_t      namelen = colon ? (size_t)(colon - spec) : strlen(spec);
  char        name[64];
  if (namelen == 0 || namelen >= sizeof name)
    return unknown_model(spec, namelen, err);
  memcpy(name, spec, namelen);
  name[namelen] = '\0';
  const model_methods_t *methods = model_find(name);
  if (methods == NULL)
    return unknown_model(spec, namelen, err);
  model_opts_t opts;
  as_status_t  rc = model_opts_parse(name, methods->options,
                                    colon ? colon + 1 : NULL, &opts, err);
  if (rc != AS_OK)
    return rc;
  rc = methods->create(&opts, ctx, out, err);
  /* create() refuses option values it cannot take (AS_EINVAL): a bad
   * option on the command line, so a usage error like an unknown knob. */
  if (rc == AS_EINVAL && err != NULL)
    err->code = AS_EUSAGE;
  if (rc != AS_OK)
    return rc == AS_EINVAL ? AS_EUSAGE : rc;
  /* A model may be one of several variants behind its name (cpython's
   * build=ft) and set its own methods; otherwise they are the registered
   * ones. */
  if ((*out)->methods == NULL)
    (*out)->methods = methods;
  /* A model may store effective values itself (mimalloc's defaults differ
   * by version); otherwise the parsed options are its provenance. */
  if ((*out)->opts.table == NULL)
    (*out)->opts = opts;
  return AS_OK;
}

void model_destroy(model_t *m) {
  if (m != NULL)
    m->methods->destroy(m);
}

void model_describe(const model_t *m, char *buf, size_t len) {
  char opts[400];
  model_opts_format(&m->opts, opts, sizeof opts);
  snprintf(buf, len, "%s%s%s", m->methods->name, opts[0] ? ":" : "", opts);
}

as_status_t model_seed(model_t *m, const char *kind, uint64_t index,
                       uint64_t value, as_err_t *err) {
  return m->methods->seed == NULL
             ? AS_OK
             : m->methods->seed(m, kind, index, value, err);
}

as_status_t model_set_option(model_t *m, const char *name, int64_t value,
                             uint64_t now_ns, as_err_t *err) {
  if (m->methods->set_option == NULL)
    return as_err_set(err, AS_EINVAL,
                      "%s: no option can change at run time (option %s)",
                      m->methods->name, name);
  return m->methods->set_option(m, name, value, now_ns, err);
}

const model_mechanism_t *model_mechanism_find(const char *key) {
  size_t                        n;
  const model_methods_t *const *all = model_registry(&n);
  for (size_t i = 0; i < n; i++)
    for (const model_mechanism_t *row = all[i]->mechanisms;
         row != NULL && row->key != NULL; row++)
      if (strcmp(row->key, key) == 0)
        return row;
  return NULL;
}

/* The model name of spec (up to ':') into buf. */
void model_spec_name(const char *spec, char *buf, size_t len) {
  size_t n = strcspn(spec, ":");
  snprintf(buf, len, "%.*s", (int)n, spec);
}

bool model_spec_composes(const char *spec) {
  char name[64];
  model_spec_name(spec, name, sizeof name);
  const model_methods_t *mm = model_find(name);
  return mm != NULL && mm->composition;
}

as_status_t model_spec_check_syntax(const char *spec, as_err_t *err) {
  const char *colon = strchr(spec, ':');
  if (colon == NULL)
    return AS_OK;
  if (colon[1] == '\0')
    return as_err_set(err, AS_EUSAGE,
                      "expected key=value options after ':', got none "
                      "(write '%.*s' for the defaults)",
                      (int)(colon - spec), spec);
  for (const char *item = colon + 1;; item += strcspn(item, ",") + 1) {
    if (*item == ',' || *item == '\0')
      return as_err_set(err, AS_EUSAGE,
                        "expected key=value, got an empty option at byte %zu",
                        (size_t)(item - spec) + 1);
    if (item[strcspn(item, ",")] == '\0')
      return AS_OK;
  }
}

/* Whether the "k=v,k=v" list sets the key of klen bytes at key. */
static bool has_key(const char *list, const char *key, size_t klen) {
  for (const char *a = list; *a != '\0';) {
    size_t ak = strcspn(a, "=,");
    if (ak == klen && strncmp(a, key, klen) == 0)
      return true;
    a += strcspn(a, ",");
    a += *a == ',';
  }
  return false;
}

/* spec with the options in add ("k=v,k=v"), replacing any already set. */
bool model_spec_with(const char *spec, const char *add, char *out, size_t len) {
  char name[64];
  model_spec_name(spec, name, sizeof name);
  size_t      used = (size_t)snprintf(out, len, "%s:%s", name, add);
  const char *p = strchr(spec, ':');
  for (p = p ? p + 1 : NULL; p != NULL && *p != '\0' && used < len;) {
    size_t item = strcspn(p, ",");
    if (item > 0 && !has_key(add, p, strcspn(p, "=,")))
      used += (size_t)snprintf(out + used, len - used, ",%.*s", (int)item, p);
    p += item;
    p += *p == ',';
  }
  return used < len;
}

as_status_t model_walk_single(model_region_t r, model_region_fn fn, void *user,
                              as_err_t *err) {
  const char *mech = r.mechanism;
  r.mechanism = NULL;
  r.level = 0;
  as_status_t rc = fn(user, &r, err);
  r.mechanism = mech;
  r.level = 1;
  return rc == AS_OK ? fn(user, &r, err) : rc;
}

/* ---- Counters ----------------------------------------------------------- */

bool model_counter_get(const model_t *m, const char *name, uint64_t *value) {
  model_counter_t c[MODEL_COUNTERS_MAX];
  size_t          n = model_counters(m, c, MODEL_COUNTERS_MAX);
  for (size_t i = 0; i < n && i < MODEL_COUNTERS_MAX; i++)
    if (strcmp(c[i].name, name) == 0) {
      *value = c[i].value;
      return true;
    }
  return false;
}

size_t model_counter_put(model_counter_t *out, size_t n, size_t cap,
                         const char *prefix, const char *name, uint64_t value,
                         const char *unit, const char *help) {
  if (n < cap) {
    snprintf(out[n].name, sizeof out[n].name, "%s.%s", prefix, name);
    out[n].value = value;
    out[n].unit = unit;
    out[n].help = help;
  }
  return n + 1;
}
