/* models/env.c -- from a recorded run's environment to model specs.
 *
 * Everything model-specific comes from the registry: a model's preload
 * name says which LD_PRELOAD'd library it models, and its option rows'
 * environment spellings say which variables set which knob.  This file
 * only knows how the list variables are spelled.
 */
#include "env.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../sim/status.h"

/* Variables that hold several knobs.  Later settings win in both, as in
 * the libraries (glibc 2.36 elf/dl-tunables.c parse_tunables walks the
 * string in order; jemalloc 5.3.0 src/jemalloc.c malloc_conf_init_helper
 * applies each key:value of malloc_conf_next in order). */
static const struct {
  const char *var;      /* variable name */
  char        item_sep; /* between settings */
  char        kv_sep;   /* between a setting's key and value */
  bool        strict;   /* every key must be one the model reads: a knob
                           left at its default would predict another run
                           (GLIBC_TUNABLES also carries ld.so's tunables) */
} list_vars[] = {
    {"GLIBC_TUNABLES", ':', '=', false},
    {"MALLOC_CONF", ',', ':', true},
};

/* A recorded value that says the variable was not set: empty, or what the
 * measurement scripts write for it ("(unset)", "(none)"). */
static bool set_value(const char *v) {
  return v != NULL && *v != '\0' && strcmp(v, "(unset)") != 0 &&
         strcmp(v, "(none)") != 0;
}

/* The value of environment variable name in the run, or NULL. */
static const char *env_value(model_env_get_fn get, void *user, const char *name,
                             char *buf, size_t len) {
  char        key[96];
  const char *v;
  snprintf(key, sizeof key, "env.%s", name);
  if (set_value(v = get(user, key)))
    return v;
  snprintf(key, sizeof key, "env_%s", name);
  if (set_value(v = get(user, key)))
    return v;
  if (set_value(v = get(user, name)))
    return v;
  const char *env = get(user, "malloc_env");
  size_t      nl = strlen(name);
  for (const char *p = env; p != NULL && *p != '\0';) {
    p += strspn(p, " ,;");
    size_t tok = strcspn(p, " ,;");
    if (tok > nl && strncmp(p, name, nl) == 0 && p[nl] == '=') {
      size_t n = tok - nl - 1 < len - 1 ? tok - nl - 1 : len - 1;
      memcpy(buf, p + nl + 1, n);
      buf[n] = '\0';
      return buf;
    }
    p += tok;
  }
  return NULL;
}

/* key's value in the list variable list_vars[i], the last one set; *pos
 * receives its offset in the variable plus one. */
static const char *list_value(model_env_get_fn get, void *user, size_t i,
                              const char *key, char *buf, size_t len,
                              size_t *pos) {
  char        whole[512];
  const char *v = env_value(get, user, list_vars[i].var, whole, sizeof whole);
  const char *found = NULL;
  size_t      found_len = 0, kl = strlen(key);
  for (const char *p = v; p != NULL && *p != '\0';) {
    size_t item = strcspn(p, (char[]){list_vars[i].item_sep, '\0'});
    if (item > kl && strncmp(p, key, kl) == 0 && p[kl] == list_vars[i].kv_sep) {
      found = p + kl + 1;
      found_len = item - kl - 1;
    }
    p += item;
    if (*p != '\0')
      p++;
  }
  if (found == NULL)
    return NULL;
  *pos = (size_t)(found - v) + 1;
  if (found_len >= len)
    found_len = len - 1;
  memcpy(buf, found, found_len);
  buf[found_len] = '\0';
  return buf;
}

/* The value of one spelling (see models/options.h), or NULL; *pos as
 * list_value's for a list variable's key, else 0. */
static const char *spelling_value(model_env_get_fn get, void *user,
                                  const char *sp, size_t sl, char *buf,
                                  size_t len, size_t *pos) {
  *pos = 0;
  char name[96];
  if (sl >= sizeof name)
    return NULL;
  memcpy(name, sp, sl);
  name[sl] = '\0';
  char *colon = strchr(name, ':');
  if (colon == NULL)
    return env_value(get, user, name, buf, len);
  *colon = '\0';
  if (strcmp(name, "meta") == 0) {
    const char *v = get(user, colon + 1);
    return v != NULL && *v != '\0' ? v : NULL;
  }
  for (size_t i = 0; i < sizeof list_vars / sizeof list_vars[0]; i++)
    if (strcmp(name, list_vars[i].var) == 0)
      return list_value(get, user, i, colon + 1, buf, len, pos);
  return NULL;
}

/* For an OPT_ENUM row: the choice v names, exactly or as a longer version
 * ("3.11.2" -> "3.11"); NULL if none. */
static const char *enum_choice(const model_option_t *row, const char *v,
                               char *buf, size_t len) {
  for (const char *p = row->choices; p != NULL && *p != '\0';) {
    size_t n = strcspn(p, "|");
    if (strncmp(v, p, n) == 0 && (v[n] == '\0' || v[n] == '.') && n < len) {
      memcpy(buf, p, n);
      buf[n] = '\0';
      return buf;
    }
    p += n;
    if (*p == '|')
      p++;
  }
  return NULL;
}

/* Whether a spelling's condition "KEY=A|B" (after its '?', cl bytes)
 * holds: row KEY's value so far is one of the choices. */
static bool condition_holds(const model_opts_t *o, const char *c, size_t cl) {
  size_t kl = strcspn(c, "=");
  if (kl >= cl)
    return false;
  int key = model_option_find(o->table, c, kl);
  if (key < 0)
    return false;
  const char *want = o->text[key];
  size_t      wl = strlen(want);
  for (const char *p = c + kl + 1; p < c + cl;) {
    size_t n = strcspn(p, "|");
    if (p + n > c + cl)
      n = (size_t)(c + cl - p);
    if (n == wl && strncmp(p, want, n) == 0)
      return true;
    p += n + 1;
  }
  return false;
}

/* The last spelling of row that the environment sets and whose condition
 * holds, or NULL; *which receives that spelling for messages, *pos its
 * place (spelling_value).  facts_only: only the facts the run recorded
 * about the measured machine ("meta:KEY": versions, CPU count, start-up
 * layout), not what its environment set. */
static const char *row_value(const model_option_t *row, const model_opts_t *o,
                             model_env_get_fn get, void *user, bool facts_only,
                             char *buf, size_t len, char *which, size_t wlen,
                             size_t *pos) {
  const char *found = NULL;
  size_t      at;
  for (const char *p = row->env; p != NULL && *p != '\0';) {
    p += strspn(p, " ");
    size_t tok = strcspn(p, " ");
    size_t n = strcspn(p, "? "); /* the spelling, before any '?' */
    bool   ok = (n == tok || condition_holds(o, p + n + 1, tok - n - 1)) &&
              (!facts_only || strncmp(p, "meta:", 5) == 0);
    const char *v =
        ok && n ? spelling_value(get, user, p, n, buf, len, &at) : NULL;
    if (v != NULL) {
      found = v;
      *pos = at;
      snprintf(which, wlen, "%.*s", (int)n, p);
      if (v != buf) { /* keep it: the next lookup reuses buf */
        snprintf(buf, len, "%s", v);
        found = buf;
      }
    }
    p += tok;
  }
  return found;
}

/* Whether spelling sp (sl bytes) is "VAR:key" for var and the key (kl
 * bytes). */
static bool spells_list_key(const char *sp, size_t sl, const char *var,
                            size_t vl, const char *key, size_t kl) {
  return sl == vl + 1 + kl && strncmp(sp, var, vl) == 0 && sp[vl] == ':' &&
         strncmp(sp + vl + 1, key, kl) == 0;
}

/* Whether methods has a row spelled "VAR:key" for the key (kl bytes), or
 * lists it as neutral. */
static bool reads_list_key(const model_methods_t *methods, const char *var,
                           const char *key, size_t kl) {
  size_t vl = strlen(var);
  for (const char *const *n = methods->neutral_env; n != NULL && *n; n++)
    if (spells_list_key(*n, strlen(*n), var, vl, key, kl))
      return true;
  for (const model_option_t *row = methods->options; row->name; row++)
    for (const char *p = row->env; p != NULL && *p != '\0';) {
      p += strspn(p, " ");
      size_t n = strcspn(p, " ");
      if (spells_list_key(p, n, var, vl, key, kl))
        return true;
      p += n;
    }
  return false;
}

/* A strict list variable that the model reads (some row spells "VAR:")
 * must hold only keys it reads: AS_EINVAL naming the first other key. */
static as_status_t check_list_keys(const model_methods_t *methods,
                                   model_env_get_fn get, void *user,
                                   as_err_t *err) {
  for (size_t i = 0; i < sizeof list_vars / sizeof list_vars[0]; i++) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s:", list_vars[i].var);
    bool reads = false;
    for (const model_option_t *row = methods->options; row->name && !reads;
         row++)
      reads = row->env != NULL && strstr(row->env, prefix) != NULL;
    if (!list_vars[i].strict || !reads)
      continue;
    char        whole[512];
    const char *v = env_value(get, user, list_vars[i].var, whole, sizeof whole);
    for (const char *p = v; p != NULL && *p != '\0';) {
      size_t item = strcspn(p, (char[]){list_vars[i].item_sep, '\0'});
      size_t kl = strcspn(p, (char[]){list_vars[i].kv_sep, '\0'});
      if (kl > item)
        kl = item;
      if (item > 0 && !reads_list_key(methods, list_vars[i].var, p, kl))
        return as_err_set(err, AS_EINVAL,
                          "%s=%s: key '%.*s' is not modelled by %s (its "
                          "knobs: see `allocsim models`); give --model to "
                          "replay without it",
                          list_vars[i].var, v, (int)kl, p, methods->name);
      p += item;
      if (*p != '\0')
        p++;
    }
  }
  return AS_OK;
}

/* Whether value v is the default d: the same text, or a zero spelled as
 * the libraries read a false flag (mimalloc v2.0.9 src/options.c:602,
 * upper-cased first: 0, false, no, off). */
static bool same_setting(const char *v, const char *d) {
  static const char *const zeros[] = {"0", "false", "no", "off", NULL};
  if (strcmp(v, d) == 0)
    return true;
  for (size_t i = 0; strcmp(d, "0") == 0 && zeros[i] != NULL; i++)
    if (strcasecmp(v, zeros[i]) == 0)
      return true;
  return false;
}

/* A setting of the run that the library reads and the model does not
 * (methods->unmodelled_env), away from its default: AS_EINVAL naming it,
 * not a prediction of another run. */
static as_status_t check_unmodelled(const model_methods_t *methods,
                                    model_env_get_fn get, void *user,
                                    as_err_t *err) {
  for (const char *const *u = methods->unmodelled_env; u != NULL && *u; u++) {
    const char *eq = strchr(*u, '=');
    char        buf[128];
    size_t      pos;
    const char *v =
        spelling_value(get, user, *u, (size_t)(eq - *u), buf, sizeof buf, &pos);
    if (v != NULL && !same_setting(v, eq + 1))
      return as_err_set(err, AS_EINVAL,
                        "%.*s=%s: not modelled by %s (it changes what the "
                        "library keeps resident)",
                        (int)(eq - *u), *u, v, methods->name);
  }
  return AS_OK;
}

/* A knob the environment sets: its row, value and place (row_value). */
typedef struct env_knob_s env_knob_t;
struct env_knob_s {
  size_t row, pos;
  char   value[32];
};

static int by_place(const void *a, const void *b) {
  const env_knob_t *x = a, *y = b;
  if (x->pos != y->pos)
    return x->pos < y->pos ? -1 : 1;
  return x->row < y->row ? -1 : x->row > y->row;
}

/* The knobs the environment sets for methods, checked, into knobs[]
 * (*n of them), over the options given ("k=v,...", NULL for none), which
 * it leaves as they are; facts_only as for row_value. */
static as_status_t env_knobs(const model_methods_t *methods,
                             model_env_get_fn get, void *user,
                             const char *given, bool facts_only,
                             env_knob_t knobs[MODEL_OPTS_MAX], size_t *n,
                             as_err_t *err) {
  model_opts_t opts;
  as_status_t  rc =
      model_opts_parse(methods->name, methods->options, given, &opts, err);
  *n = 0;
  for (size_t i = 0; rc == AS_OK && i < opts.count; i++) {
    const model_option_t *row = &methods->options[i];
    char                  v[128], which[96], pick[32];
    size_t                pos = 0;
    const char           *value = model_opt_was_set(&opts, (int)i)
                                      ? NULL
                                      : row_value(row, &opts, get, user, facts_only, v,
                                                  sizeof v, which, sizeof which, &pos);
    if (value == NULL)
      continue;
    if (row->kind == OPT_ENUM) {
      const char *c = enum_choice(row, value, pick, sizeof pick);
      if (c == NULL)
        return as_err_set(err, AS_EINVAL, "%s=%s: %s knob %s expects one of %s",
                          which, value, methods->name, row->name, row->choices);
      value = c;
    }
    as_err_t why;
    if (model_opts_set(methods->name, &opts, (int)i, value, strlen(value),
                       &why) != AS_OK)
      return as_err_set(err, AS_EINVAL, "%s=%s: %s", which, value, why.msg);
    knobs[*n] = (env_knob_t){.row = i, .pos = pos};
    snprintf(knobs[*n].value, sizeof knobs[*n].value, "%s", value);
    (*n)++;
  }
  return rc;
}

/* "k=v,k=v" of knobs into buf; the length it needed (>= len: cut). */
static size_t knobs_text(const model_methods_t *methods, env_knob_t *knobs,
                         size_t n, char *buf, size_t len) {
  /* In the order the list variables give them, where the library takes
   * the last of two spellings of one knob (MALLOC_CONF's lg_tcache_max
   * and tcache_max: model_opt_set_after) */
  qsort(knobs, n, sizeof *knobs, by_place);
  size_t used = 0;
  if (len > 0)
    buf[0] = '\0';
  for (size_t k = 0; k < n && used < len; k++)
    used +=
        (size_t)snprintf(buf + used, len - used, "%s%s=%s", k ? "," : "",
                         methods->options[knobs[k].row].name, knobs[k].value);
  return used;
}

as_status_t model_spec_from_env(const model_methods_t *methods,
                                model_env_get_fn get, void *user, char *buf,
                                size_t len, as_err_t *err) {
  env_knob_t  knobs[MODEL_OPTS_MAX];
  size_t      n;
  as_status_t rc = check_list_keys(methods, get, user, err);
  if (rc == AS_OK)
    rc = check_unmodelled(methods, get, user, err);
  if (rc == AS_OK)
    rc = env_knobs(methods, get, user, NULL, false, knobs, &n, err);
  if (rc != AS_OK)
    return rc;
  size_t used = (size_t)snprintf(buf, len, "%s%s", methods->name, n ? ":" : "");
  if (used < len)
    used += knobs_text(methods, knobs, n, buf + used, len - used);
  if (used >= len)
    return as_err_set(err, AS_EINVAL, "%s spec longer than %zu bytes",
                      methods->name, len);
  return AS_OK;
}

as_status_t model_spec_with_facts(const char *spec, model_env_get_fn get,
                                  void *user, char *out, size_t len,
                                  as_err_t *err) {
  char name[64];
  model_spec_name(spec, name, sizeof name);
  const model_methods_t *methods = model_find(name);
  const char            *colon = strchr(spec, ':');
  env_knob_t             knobs[MODEL_OPTS_MAX];
  size_t                 n = 0;
  char                   add[512];
  as_status_t            rc = methods != NULL
                                  ? env_knobs(methods, get, user, colon ? colon + 1 : NULL,
                                              true, knobs, &n, err)
                                  : AS_OK; /* the session names an unknown model */
  if (rc == AS_EINVAL) {                   /* a fact the knob does not take */
    char why[sizeof err->msg];
    as_format_fits(why, sizeof why, "%s", err->msg);
    return as_err_set(err, rc,
                      "%s (a fact the run recorded; give the knob in the "
                      "spec to choose)",
                      why);
  }
  if (rc != AS_OK)
    return rc;
  bool fits =
      n == 0 ? snprintf(out, len, "%s", spec) < (int)len
             : knobs_text(methods, knobs, n, add, sizeof add) < sizeof add &&
                   model_spec_with(spec, add, out, len);
  return fits ? AS_OK
              : as_err_set(err, AS_EUSAGE, "model spec longer than %zu bytes",
                           len);
}

/* Whether the library path p (n bytes) names an allocator by its file
 * name: "lib...malloc..." or "lib...alloc...". */
static bool looks_like_allocator(const char *p, size_t n) {
  const char *base = p;
  for (size_t i = 0; i < n; i++)
    if (p[i] == '/')
      base = p + i + 1;
  size_t bn = n - (size_t)(base - p);
  for (size_t i = 0; i + 5 <= bn; i++)
    if (strncmp(base + i, "alloc", 5) == 0)
      return strncmp(base, "liballocsim", 11) != 0;
  return false;
}

/* Whether the library file name base (n bytes) is a debug or hardened
 * variant: gperftools' libtcmalloc_minimal_debug.so.4 and
 * libtcmalloc_debug.so.4 add guard words and a free queue to every block
 * (gperftools 2.10 src/debugallocation.cc), mimalloc's libmimalloc-secure
 * and -debug add guard pages and padding (mimalloc 2.0.9 CMakeLists.txt
 * MI_SECURE, MI_DEBUG). */
static bool variant_build(const char *base, size_t n) {
  for (size_t i = 0; i + 5 <= n; i++)
    if (strncmp(base + i, "debug", 5) == 0 ||
        (i + 6 <= n && strncmp(base + i, "secure", 6) == 0))
      return true;
  return false;
}

as_status_t model_preloaded(model_env_get_fn get, void *user,
                            const model_methods_t **out, as_err_t *err) {
  char        buf[512];
  const char *pre = env_value(get, user, "LD_PRELOAD", buf, sizeof buf);
  size_t      nmodels;
  const model_methods_t *const *reg = model_registry(&nmodels);
  *out = NULL;
  for (const char *p = pre; p != NULL && *p != '\0';) {
    p += strspn(p, " :");
    size_t n = strcspn(p, " :");
    if (n == 0)
      break;
    const char *base = p;
    for (size_t i = 0; i < n; i++)
      if (p[i] == '/')
        base = p + i + 1;
    for (size_t m = 0; m < nmodels && *out == NULL; m++) {
      const char *want = reg[m]->preload;
      if (want != NULL && strncmp(base, want, strlen(want)) == 0)
        *out = reg[m];
    }
    if (*out != NULL && variant_build(base, n - (size_t)(base - p)))
      return as_err_set(err, AS_EINVAL,
                        "LD_PRELOAD=%.*s: a debug or secure build of %s, "
                        "whose overheads the %s model does not have (it "
                        "models the release library); pass --model to "
                        "compare anyway",
                        (int)n, p, (*out)->name, (*out)->name);
    if (*out != NULL)
      return AS_OK;
    if (looks_like_allocator(p, n))
      return as_err_set(err, AS_EINVAL,
                        "LD_PRELOAD=%.*s: an allocator allocsim does not "
                        "model; pass --model (allocsim models lists them)",
                        (int)n, p);
    p += n;
  }
  return AS_OK;
}

as_status_t model_specs_for_run(model_env_get_fn get, void *user, char *model,
                                size_t model_len, char *libc, size_t libc_len,
                                as_err_t *err) {
  const model_methods_t *libc_methods;
  as_status_t            rc = model_preloaded(get, user, &libc_methods, err);
  if (rc != AS_OK)
    return rc;
  if (libc_methods == NULL)
    libc_methods = model_find(model_default_libc());
  if ((rc = model_spec_from_env(libc_methods, get, user, libc, libc_len,
                                err)) != AS_OK)
    return rc;
  const char            *python = get(user, "python");
  const model_methods_t *cpython = model_find("cpython");
  const char            *debug_hooks = get(user, "python_debug_hooks");
  if (python != NULL && *python != '\0' && debug_hooks != NULL &&
      strcmp(debug_hooks, "1") == 0)
    return as_err_set(err, AS_EINVAL,
                      "python_debug_hooks=1: the interpreter ran with its "
                      "debug allocator hooks (-X dev, PYTHONDEVMODE=1 or "
                      "PYTHONMALLOC=debug), which add 24 bytes to every "
                      "block and are not modelled; capture without them");
  if (python != NULL && *python != '\0' && cpython != NULL)
    return model_spec_from_env(cpython, get, user, model, model_len, err);
  if (snprintf(model, model_len, "%s", libc) >= (int)model_len)
    return as_err_set(err, AS_EINVAL, "model spec longer than %zu bytes",
                      model_len);
  return AS_OK;
}
