/* traces/event.c -- op and domain names, and the provenance key/value table.
 *
 * Names come from TRACE_OP_MAP so the enum, the text format and the binary
 * format's documentation cannot disagree.  Parsing takes a length because
 * the text reader hands over tokens that are not NUL-terminated.
 */
#include "event.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "touch_span.h"

static const char *const op_names[TRACE_OP_COUNT] = {
#define TRACE_OP_STR(name, str) str,
    TRACE_OP_MAP(TRACE_OP_STR)
#undef TRACE_OP_STR
};

static const char *const domain_names[TRACE_DOMAIN_COUNT] = {"raw", "mem",
                                                             "obj"};

static const char *const purge_names[TRACE_PURGE_COUNT] = {
#define TRACE_PURGE_STR(name, str) str,
    TRACE_PURGE_MAP(TRACE_PURGE_STR)
#undef TRACE_PURGE_STR
};

const char *trace_op_name(trace_op_t op) {
  return (unsigned)op < TRACE_OP_COUNT ? op_names[op] : NULL;
}

/* Compares a counted token with a NUL-terminated name. */
static bool token_is(const char *s, size_t len, const char *name) {
  return strlen(name) == len && memcmp(s, name, len) == 0;
}

bool trace_op_parse(const char *s, size_t len, trace_op_t *out) {
  for (unsigned i = 0; i < TRACE_OP_COUNT; i++) {
    if (token_is(s, len, op_names[i])) {
      *out = (trace_op_t)i;
      return true;
    }
  }
  return false;
}

const char *trace_domain_name(trace_domain_t d) {
  return (unsigned)d < TRACE_DOMAIN_COUNT ? domain_names[d] : NULL;
}

bool trace_domain_parse(const char *s, size_t len, trace_domain_t *out) {
  for (unsigned i = 0; i < TRACE_DOMAIN_COUNT; i++) {
    if (token_is(s, len, domain_names[i])) {
      *out = (trace_domain_t)i;
      return true;
    }
  }
  return false;
}

const char *trace_purge_name(trace_purge_kind_t k) {
  return (unsigned)k < TRACE_PURGE_COUNT ? purge_names[k] : NULL;
}

bool trace_purge_parse(const char *s, size_t len, trace_purge_kind_t *out) {
  for (unsigned i = 0; i < TRACE_PURGE_COUNT; i++) {
    if (token_is(s, len, purge_names[i])) {
      *out = (trace_purge_kind_t)i;
      return true;
    }
  }
  return false;
}

bool trace_option_name_ok(const char *s, size_t len) {
  if (len == 0 || len > TRACE_LABEL_MAX)
    return false;
  for (size_t i = 0; i < len; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
          s[i] == '_' || s[i] == '.'))
      return false;
  return true;
}

/* ---- Provenance --------------------------------------------------------- */

const char *trace_meta_get(const trace_meta_t *m, const char *key) {
  for (size_t i = 0; i < m->count; i++) {
    if (strcmp(m->key[i], key) == 0)
      return m->value[i];
  }
  return NULL;
}

as_status_t trace_meta_touch_page(const trace_meta_t *m, const char *source,
                                  uint64_t *page, as_err_t *err) {
  const char *ps = trace_meta_get(m, "page_size");
  if (!touch_span_page(trace_meta_get(m, "touch_threshold"), ps, page))
    return as_err_set(err, AS_EFORMAT,
                      "%s: provenance page_size: expected a power of two "
                      "bytes (the page size the touches were measured in), "
                      "got '%s'",
                      source, ps);
  return AS_OK;
}

bool trace_meta_key_ok(const char *key) {
  for (const char *q = key; *q != '\0'; q++)
    if ((unsigned char)*q <= 0x20 || *q == '=' || *q == 0x7f)
      return false;
  return true;
}

bool trace_meta_value_ok(const char *value) {
  for (const char *q = value; *q != '\0'; q++)
    if ((unsigned char)*q < 0x20 && *q != '\t')
      return false;
  return true;
}

as_status_t trace_meta_set(trace_meta_t *m, const char *key, const char *value,
                           as_err_t *err) {
  size_t klen = strlen(key);
  size_t vlen = strlen(value);
  if (klen == 0 || klen >= sizeof m->key[0])
    return as_err_set(err, AS_EINVAL,
                      "provenance key '%.40s' must be 1 to %zu bytes long", key,
                      sizeof m->key[0] - 1);
  if (vlen >= sizeof m->value[0])
    return as_err_set(err, AS_EINVAL,
                      "provenance value for '%s' is %zu bytes, expected at "
                      "most %zu",
                      key, vlen, sizeof m->value[0] - 1);
  size_t i = 0;
  while (i < m->count && strcmp(m->key[i], key) != 0)
    i++;
  if (i == m->count) {
    if (m->count == TRACE_META_MAX)
      return as_err_set(err, AS_EINVAL,
                        "too many provenance keys: '%s' would be number %d, "
                        "expected at most %d",
                        key, TRACE_META_MAX + 1, TRACE_META_MAX);
    memcpy(m->key[i], key, klen + 1);
    m->count++;
  }
  memcpy(m->value[i], value, vlen + 1);
  return AS_OK;
}

/* key = v in decimal, when v is not 0. */
static as_status_t meta_put_u64(trace_meta_t *m, const char *key, uint64_t v,
                                as_err_t *err) {
  char buf[24];
  snprintf(buf, sizeof buf, "%" PRIu64, v);
  return v == 0 ? AS_OK : trace_meta_set(m, key, buf, err);
}

as_status_t trace_meta_put_jemalloc(trace_meta_t *m, uint64_t origin_ns,
                                    const trace_je_state_t *je, as_err_t *err) {
  as_status_t rc;
  if ((rc = meta_put_u64(m, "jemalloc_prng_seed", je->prng_seed, err)) !=
          AS_OK ||
      (rc = meta_put_u64(m, "jemalloc_jitter_seed", je->jitter_seed, err)) !=
          AS_OK)
    return rc;
  uint64_t coarse = je->coarse_origin_ns;
  if (je->res_ns == 0 || coarse == 0 || coarse > origin_ns)
    return AS_OK;
  char lag[24], init[24];
  snprintf(lag, sizeof lag, "%" PRIu64, origin_ns - coarse);
  snprintf(init, sizeof init, "%" PRIu64,
           coarse > je->coarse_init_ns ? coarse - je->coarse_init_ns : 0);
  if ((rc = meta_put_u64(m, "jemalloc_clock_res_ns", je->res_ns, err)) !=
          AS_OK ||
      (rc = trace_meta_set(m, "jemalloc_clock_lag_ns", lag, err)) != AS_OK)
    return rc;
  return trace_meta_set(m, "jemalloc_clock_init_ns", init, err);
}

as_status_t trace_event_validate(const trace_event_t *ev, uint64_t prev_t_ns,
                                 const char *name, uint64_t index,
                                 as_err_t *err) {
  if (ev->op >= TRACE_OP_COUNT)
    return as_err_set(err, AS_EINVAL, "%s: event %" PRIu64 ": unknown op %u",
                      name, index, ev->op);
  if (ev->t_ns < prev_t_ns)
    return as_err_set(err, AS_EINVAL,
                      "%s: event %" PRIu64 ": time %" PRIu64
                      " ns is before the previous event's %" PRIu64 " ns",
                      name, index, ev->t_ns, prev_t_ns);
  switch ((trace_op_t)ev->op) {
  case TRACE_MEMALIGN:
    if (ev->align == 0 || (ev->align & (ev->align - 1)) != 0)
      return as_err_set(err, AS_EINVAL,
                        "%s: event %" PRIu64 ": memalign align %" PRIu64
                        " is not a power of two",
                        name, index, ev->align);
    /* fall through */
  case TRACE_MALLOC:
  case TRACE_CALLOC:
  case TRACE_REALLOC:
  case TRACE_FREE:
    if (ev->domain >= TRACE_DOMAIN_COUNT)
      return as_err_set(err, AS_EINVAL,
                        "%s: event %" PRIu64 ": unknown domain %u", name, index,
                        ev->domain);
    break;
  case TRACE_MARK: {
    const char *l = ev->label != NULL ? ev->label : "";
    size_t      n = strlen(l);
    if (n > TRACE_LABEL_MAX)
      return as_err_set(err, AS_EINVAL,
                        "%s: event %" PRIu64
                        ": label '%.40s...' is %zu bytes, expected at most %d",
                        name, index, l, n, TRACE_LABEL_MAX);
    for (size_t i = 0; i < n; i++) {
      if ((unsigned char)l[i] < 0x20 && l[i] != '\t')
        return as_err_set(err, AS_EINVAL,
                          "%s: event %" PRIu64
                          ": label has control byte 0x%02x at %zu",
                          name, index, (unsigned char)l[i], i);
    }
    break;
  }
  case TRACE_PURGE:
    if (ev->size >= TRACE_PURGE_COUNT)
      return as_err_set(err, AS_EINVAL,
                        "%s: event %" PRIu64 ": unknown purge kind %" PRIu64,
                        name, index, ev->size);
    break;
  case TRACE_OPTION: {
    const char *l = ev->label != NULL ? ev->label : "";
    if (!trace_option_name_ok(l, strlen(l)))
      return as_err_set(err, AS_EINVAL,
                        "%s: event %" PRIu64
                        ": option name '%.40s' is not 1-%d bytes of "
                        "[a-z0-9_.]",
                        name, index, l, TRACE_LABEL_MAX);
    break;
  }
  case TRACE_MODULE: {
    const char *l = ev->label != NULL ? ev->label : "";
    size_t      n = strlen(l);
    if (n == 0 || n > TRACE_PATH_MAX)
      return as_err_set(err, AS_EINVAL,
                        "%s: event %" PRIu64
                        ": module path is %zu bytes, expected 1 to %d",
                        name, index, n, TRACE_PATH_MAX);
    for (size_t i = 0; i < n; i++)
      if ((unsigned char)l[i] < 0x20 || l[i] == '"' || l[i] == '\\')
        return as_err_set(err, AS_EINVAL,
                          "%s: event %" PRIu64
                          ": module path has byte 0x%02x at %zu (control "
                          "bytes, '\"' and '\\' are not carried)",
                          name, index, (unsigned char)l[i], i);
    if (ev->id >= TRACE_DEF_ID_MAX)
      return as_err_set(err, AS_EINVAL,
                        "%s: event %" PRIu64 ": module id %" PRIu64
                        " is not below %u",
                        name, index, ev->id, TRACE_DEF_ID_MAX);
    break;
  }
  case TRACE_SITE:
    if (ev->id == 0 || ev->id >= TRACE_DEF_ID_MAX || ev->nframes == 0 ||
        ev->nframes > TRACE_FRAMES_MAX || ev->frames == NULL)
      return as_err_set(err, AS_EINVAL,
                        "%s: event %" PRIu64 ": site %" PRIu64
                        " with %u frames (expected an id 1 to %u and 1 to "
                        "%d frames)",
                        name, index, ev->id, ev->nframes, TRACE_DEF_ID_MAX - 1,
                        TRACE_FRAMES_MAX);
    break;
  case TRACE_TOUCH:
    if (ev->size == 0 || ev->offset + ev->size < ev->offset)
      return as_err_set(err, AS_EINVAL,
                        "%s: event %" PRIu64 ": touch of %" PRIu64
                        " bytes at offset %" PRIu64
                        " (expected a non-empty range below 2^64)",
                        name, index, ev->size, ev->offset);
    break;
  default:
    break;
  }
  return AS_OK;
}

/* ---- Call-site definitions ------------------------------------------- */

static bool defs_mark(uint8_t **v, size_t *cap, uint64_t id) {
  if (id >= *cap) {
    size_t   old = *cap, n = old ? old : 256;
    uint8_t *nv;
    while (n <= id)
      n *= 2;
    if ((nv = realloc(*v, n)) == NULL)
      return false;
    memset(nv + old, 0, n - old);
    *v = nv;
    *cap = n;
  }
  (*v)[id] = 1;
  return true;
}

static bool defs_has(const uint8_t *v, size_t cap, uint64_t id) {
  return id < cap && v[id] != 0;
}

trace_defs_rc_t trace_defs_note(trace_defs_t *d, const trace_event_t *ev,
                                char *why, size_t len) {
  switch ((trace_op_t)ev->op) {
  case TRACE_MALLOC:
  case TRACE_CALLOC:
  case TRACE_REALLOC:
  case TRACE_MEMALIGN:
    if (ev->site != 0 && !defs_has(d->site, d->site_cap, ev->site)) {
      snprintf(why, len,
               "expected a site id defined by an earlier site event, got "
               "@%" PRIu64,
               ev->site);
      return TRACE_DEFS_BAD;
    }
    return TRACE_DEFS_OK;
  case TRACE_MODULE:
    if (defs_has(d->module, d->module_cap, ev->id)) {
      snprintf(why, len,
               "expected a module id not defined before, got %" PRIu64, ev->id);
      return TRACE_DEFS_BAD;
    }
    return defs_mark(&d->module, &d->module_cap, ev->id) ? TRACE_DEFS_OK
                                                         : TRACE_DEFS_NOMEM;
  case TRACE_SITE:
    if (defs_has(d->site, d->site_cap, ev->id)) {
      snprintf(why, len, "expected a site id not defined before, got %" PRIu64,
               ev->id);
      return TRACE_DEFS_BAD;
    }
    for (uint32_t i = 0; i < ev->nframes; i++)
      if (!defs_has(d->module, d->module_cap, ev->frames[i].module)) {
        snprintf(why, len,
                 "expected frame %u's module to be defined by an earlier "
                 "module event, got module %" PRIu64,
                 i + 1, ev->frames[i].module);
        return TRACE_DEFS_BAD;
      }
    return defs_mark(&d->site, &d->site_cap, ev->id) ? TRACE_DEFS_OK
                                                     : TRACE_DEFS_NOMEM;
  default:
    return TRACE_DEFS_OK;
  }
}

void trace_defs_free(trace_defs_t *d) {
  free(d->site);
  free(d->module);
  memset(d, 0, sizeof *d);
}

bool trace_op_is_alloc(uint8_t op) {
  return op == TRACE_MALLOC || op == TRACE_CALLOC || op == TRACE_REALLOC ||
         op == TRACE_MEMALIGN || op == TRACE_FREE;
}

void *trace_source_wrapper_new(trace_source_t               *inner,
                               const trace_source_methods_t *methods,
                               size_t size, as_err_t *err) {
  trace_source_t *s = calloc(1, size);
  if (s == NULL) {
    trace_source_close(inner);
    as_err_set(err, AS_ENOMEM, "out of memory");
    return NULL;
  }
  s->methods = methods;
  s->meta = inner->meta;
  snprintf(s->name, sizeof s->name, "%s", inner->name);
  return s;
}

void trace_event_position(const trace_source_t *src, const trace_event_t *ev,
                          uint64_t index, char *buf, size_t len) {
  char        at[48];
  const char *op = trace_op_name(ev->op);
  trace_source_where_event(src, ev, at, sizeof at);
  snprintf(buf, len, "%s%s%s: event %" PRIu64 " (t=%" PRIu64 " ns, %s)",
           src->name, at[0] ? ": " : "", at, index, ev->t_ns, op ? op : "?");
}

as_status_t trace_error_at(const trace_source_t *src, const trace_event_t *ev,
                           uint64_t index, as_status_t rc, as_err_t *err) {
  size_t n = strlen(src->name);
  if (err == NULL ||
      (strncmp(err->msg, src->name, n) == 0 && err->msg[n] == ':'))
    return rc;
  char msg[sizeof err->msg], pos[sizeof err->msg];
  memcpy(msg, err->msg, sizeof msg);
  trace_event_position(src, ev, index, pos, sizeof pos);
  (void)as_format_fits(err->msg, sizeof err->msg, "%s: %s", pos,
                       msg[0] ? msg : as_status_message(rc));
  return rc;
}
