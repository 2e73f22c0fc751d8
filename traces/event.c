/* traces/event.c -- op and domain names, and the provenance key/value table.
 *
 * Names come from TRACE_OP_MAP so the enum, the text format and the binary
 * format's documentation cannot disagree.  Parsing takes a length because
 * the text reader hands over tokens that are not NUL-terminated.
 */
#include "event.h"

#include <string.h>

static const char *const op_names[TRACE_OP_COUNT] = {
#define TRACE_OP_STR(name, str) str,
    TRACE_OP_MAP(TRACE_OP_STR)
#undef TRACE_OP_STR
};

static const char *const domain_names[TRACE_DOMAIN_COUNT] = {"raw", "mem",
                                                             "obj"};

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

/* ---- Provenance --------------------------------------------------------- */

const char *trace_meta_get(const trace_meta_t *m, const char *key) {
  for (size_t i = 0; i < m->count; i++) {
    if (strcmp(m->key[i], key) == 0)
      return m->value[i];
  }
  return NULL;
}

as_status_t trace_meta_set(trace_meta_t *m, const char *key, const char *value,
                           as_err_t *err) {
  size_t klen = strlen(key);
  size_t vlen = strlen(value);
  if (klen == 0 || klen >= sizeof m->key[0])
    return as_err_set(err, AS_EINVAL,
                      "provenance key '%.40s' must be 1 to %zu bytes long",
                      key, sizeof m->key[0] - 1);
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
