/* models/options.c -- "knob=value,..." parsing against per-model tables.
 *
 * Knob names and value forms follow the real allocators' own (glibc 2.36
 * elf/dl-tunables.list glibc.malloc.*, jemalloc 5.3 MALLOC_CONF, mimalloc
 * 2.0 src/options.c), so a user's setting carries over verbatim.
 * The table is the single truth for a model's knobs: defaults are parsed
 * with the same code as user input, so a bad default fails loudly in tests
 * instead of silently becoming zero.
 */
#include "options.h"

#include "../sim/units.h"

#include <assert.h>
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static bool parse_i64(const char *s, size_t len, int64_t *out) {
  bool     neg = len > 0 && s[0] == '-';
  uint64_t mag = 0;
  if (neg) {
    s++;
    len--;
  }
  if (len == 0)
    return false;
  for (size_t i = 0; i < len; i++) {
    if (!isdigit((unsigned char)s[i]) || mag > (uint64_t)INT64_MAX / 10)
      return false;
    mag = mag * 10 + (uint64_t)(s[i] - '0');
  }
  if (mag > (uint64_t)INT64_MAX)
    return false;
  *out = neg ? -(int64_t)mag : (int64_t)mag;
  return true;
}

/* A non-negative decimal with at most six places after the point, in
 * millionths (gperftools parses TCMALLOC_RELEASE_RATE with strtod; the
 * exponent form is refused here). */
static bool parse_decimal(const char *s, size_t len, int64_t *out) {
  uint64_t whole = 0, frac = 0, scale = 1000000;
  size_t   i = 0, digits = 0;
  for (; i < len && isdigit((unsigned char)s[i]); i++, digits++) {
    if (whole > (uint64_t)INT64_MAX / 10000000)
      return false;
    whole = whole * 10 + (uint64_t)(s[i] - '0');
  }
  if (i < len && s[i] == '.')
    for (i++; i < len && isdigit((unsigned char)s[i]); i++, digits++) {
      if (scale == 1)
        return false;
      scale /= 10;
      frac += (uint64_t)(s[i] - '0') * scale;
    }
  if (digits == 0 || i != len)
    return false;
  *out = (int64_t)(whole * 1000000 + frac);
  return true;
}

static bool word_eq(const char *s, size_t len, const char *word) {
  return strlen(word) == len && strncmp(s, word, len) == 0;
}

static bool parse_bool(const char *s, size_t len, int64_t *out) {
  if (word_eq(s, len, "true") || word_eq(s, len, "1") ||
      word_eq(s, len, "yes")) {
    *out = 1;
    return true;
  }
  if (word_eq(s, len, "false") || word_eq(s, len, "0") ||
      word_eq(s, len, "no")) {
    *out = 0;
    return true;
  }
  return false;
}

/* Index of the word s in the '|'-separated list choices, or -1. */
static int64_t choice_index(const char *choices, const char *s, size_t len) {
  int64_t     idx = 0;
  const char *p = choices;
  while (p != NULL && *p) {
    const char *bar = strchr(p, '|');
    size_t      wlen = bar ? (size_t)(bar - p) : strlen(p);
    if (wlen == len && strncmp(p, s, len) == 0)
      return idx;
    idx++;
    p = bar ? bar + 1 : NULL;
  }
  return -1;
}

static const char *kind_expectation(const model_option_t *row) {
  switch (row->kind) {
  case OPT_U64:
    return "an unsigned integer";
  case OPT_I64:
    return "an integer";
  case OPT_BYTES:
    return "a byte count such as 131072, 128K or 1MiB";
  case OPT_BOOL:
    return "true or false";
  case OPT_ENUM:
    return row->choices;
  case OPT_DECIMAL:
    return "a decimal number such as 1.0 or 0.25";
  }
  return "a value";
}

static as_status_t set_value(const char *model, const model_option_t *row,
                             const char *v, size_t len, int64_t *num,
                             as_err_t *err) {
  uint64_t u = 0;
  bool     ok = false;
  switch (row->kind) {
  case OPT_U64:
  case OPT_BYTES:
    ok = as_parse_number(v, len, as_size_units, &u) == AS_NUM_OK &&
         u <= (uint64_t)INT64_MAX &&
         (row->kind == OPT_BYTES || strspn(v, "0123456789") == len);
    *num = (int64_t)u;
    break;
  case OPT_I64:
    ok = parse_i64(v, len, num);
    break;
  case OPT_BOOL:
    ok = parse_bool(v, len, num);
    break;
  case OPT_ENUM:
    *num = choice_index(row->choices, v, len);
    ok = *num >= 0;
    break;
  case OPT_DECIMAL:
    ok = parse_decimal(v, len, num);
    break;
  }
  if (!ok)
    return as_err_set(err, AS_EUSAGE, "%s: option %s expects %s, got '%.*s'",
                      model, row->name, kind_expectation(row), (int)len, v);
  return AS_OK;
}

static size_t table_rows(const model_option_t *table) {
  size_t n = 0;
  while (table != NULL && table[n].name != NULL)
    n++;
  return n;
}

static as_status_t unknown_option(const char           *model,
                                  const model_option_t *table, const char *k,
                                  size_t klen, as_err_t *err) {
  char   known[256] = "";
  size_t used = 0;
  for (size_t i = 0; table != NULL && table[i].name != NULL; i++)
    used += (size_t)snprintf(known + used,
                             used < sizeof known ? sizeof known - used : 0,
                             "%s%s", i ? ", " : "", table[i].name);
  return as_err_set(err, AS_EUSAGE, "%s: unknown option '%.*s' (known: %s)",
                    model, (int)klen, k, used ? known : "none");
}

int model_option_find(const model_option_t *table, const char *name,
                      size_t len) {
  for (int i = 0; table != NULL && table[i].name != NULL; i++)
    if (word_eq(name, len, table[i].name))
      return i;
  return -1;
}

as_status_t model_opts_set(const char *model, model_opts_t *o, int key,
                           const char *value, size_t len, as_err_t *err) {
  assert(key >= 0 && (size_t)key < o->count);
  int64_t     num;
  as_status_t rc = set_value(model, &o->table[key], value, len, &num, err);
  if (rc != AS_OK)
    return rc;
  if (len >= sizeof o->text[key])
    return as_err_set(
        err, AS_EUSAGE, "%s: option %s: value '%.*s' is longer than %zu bytes",
        model, o->table[key].name, (int)len, value, sizeof o->text[key] - 1);
  o->num[key] = num;
  o->set[key] = true;
  /* saturates: past 255 settings (run-time option events) later ones tie */
  o->set_order[key] = o->nset < UINT8_MAX ? ++o->nset : UINT8_MAX;
  snprintf(o->text[key], sizeof o->text[key], "%.*s", (int)len, value);
  return AS_OK;
}

static as_status_t apply_one(const char *model, model_opts_t *o,
                             const char *item, size_t len, as_err_t *err) {
  /* key=value, or key:value as MALLOC_CONF spells it (jemalloc 5.3.0
   * src/jemalloc.c malloc_conf_next splits at ':') */
  const char *eq = memchr(item, '=', len);
  if (eq == NULL)
    eq = memchr(item, ':', len);
  if (eq == NULL)
    return as_err_set(err, AS_EUSAGE,
                      "%s: expected key=value (or key:value), got '%.*s'",
                      model, (int)len, item);
  size_t klen = (size_t)(eq - item);
  int    key = model_option_find(o->table, item, klen);
  if (key < 0)
    return unknown_option(model, o->table, item, klen, err);
  if (o->set[key])
    return as_err_set(err, AS_EUSAGE, "%s: option %.*s is given twice", model,
                      (int)klen, item);
  return model_opts_set(model, o, key, eq + 1, len - klen - 1, err);
}

as_status_t model_opts_parse(const char *model, const model_option_t *table,
                             const char *assignments, model_opts_t *out,
                             as_err_t *err) {
  memset(out, 0, sizeof *out);
  out->table = table;
  out->count = table_rows(table);
  assert(out->count <= MODEL_OPTS_MAX);
  for (size_t i = 0; i < out->count; i++) {
    const char *d = table[i].default_value;
    as_status_t rc =
        set_value(model, &table[i], d, strlen(d), &out->num[i], err);
    if (rc != AS_OK)
      return rc;
    snprintf(out->text[i], sizeof out->text[i], "%s", d);
  }
  const char *p = assignments;
  while (p != NULL && *p) {
    const char *comma = strchr(p, ',');
    size_t      len = comma ? (size_t)(comma - p) : strlen(p);
    if (len > 0) {
      as_status_t rc = apply_one(model, out, p, len, err);
      if (rc != AS_OK)
        return rc;
    }
    p = comma ? comma + 1 : NULL;
  }
  return AS_OK;
}

/* key as an index; keys come from the model's own enum, so one outside
 * its table is a programmer error. */
static size_t row(const model_opts_t *o, int key) {
  (void)o;
  assert(key >= 0 && (size_t)key < o->count);
  return (size_t)key;
}

int64_t model_opt_i64(const model_opts_t *o, int key) {
  return o->num[row(o, key)];
}
uint64_t model_opt_u64(const model_opts_t *o, int key) {
  return (uint64_t)o->num[row(o, key)];
}
bool model_opt_bool(const model_opts_t *o, int key) {
  return o->num[row(o, key)] != 0;
}
const char *model_opt_text(const model_opts_t *o, int key) {
  return o->text[row(o, key)];
}
double model_opt_decimal(const model_opts_t *o, int key) {
  return (double)o->num[row(o, key)] / 1e6;
}
bool model_opt_set_after(const model_opts_t *o, int key, int other) {
  return o->set[row(o, key)] &&
         o->set_order[row(o, key)] > o->set_order[row(o, other)];
}

bool model_opt_was_set(const model_opts_t *o, int key) {
  return o->set[row(o, key)];
}

void model_opts_format(const model_opts_t *o, char *buf, size_t len) {
  /* the set rows in the order given (an insertion sort: 24 rows at most) */
  size_t by_order[MODEL_OPTS_MAX], nset = 0, next = 0, used = 0;
  for (size_t i = 0; i < o->count; i++) {
    if (!o->set[i])
      continue;
    size_t k = nset++;
    for (; k > 0 && o->set_order[by_order[k - 1]] > o->set_order[i]; k--)
      by_order[k] = by_order[k - 1];
    by_order[k] = i;
  }
  if (len > 0)
    buf[0] = '\0';
  for (size_t i = 0; i < o->count && used < len; i++) {
    size_t r = o->set[i] ? by_order[next++] : i;
    used += (size_t)snprintf(buf + used, len - used, "%s%s=%s", i ? "," : "",
                             o->table[r].name, o->text[r]);
  }
}
