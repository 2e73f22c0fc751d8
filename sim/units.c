/* sim/units.c -- exact decimal numbers with units (see units.h).
 *
 * Exact, not strtod: "0.1s" must be 100000000 ns and "1.5K" 1536 bytes on
 * every machine, and a value that is not whole in the base unit is an
 * error rather than a rounding.
 */
#include "units.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

__extension__ typedef unsigned __int128 u128;

const as_unit_t as_time_units[] = {{"ns", 1},
                                   {"us", 1000},
                                   {"ms", 1000000},
                                   {"s", 1000000000},
                                   {"min", UINT64_C(60000000000)},
                                   {NULL, 0}};
const as_unit_t as_size_units[] = {{"B", 1},
                                   {"K", 1024},
                                   {"KiB", 1024},
                                   {"M", 1048576},
                                   {"MiB", 1048576},
                                   {"G", 1073741824},
                                   {"GiB", 1073741824},
                                   {"T", UINT64_C(1) << 40},
                                   {"TiB", UINT64_C(1) << 40},
                                   {NULL, 0}};

static bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

/* Parses digits ["." digits] [unit] from units (units NULL: digits only).
 * A fraction needs a unit; the result must be a whole number below 2^64. */
as_num_rc_t as_parse_number(const char *s, size_t len, const as_unit_t *units,
                            uint64_t *out) {
  size_t i = 0;
  u128   ip = 0;
  bool   big = false;
  while (i < len && is_digit(s[i])) {
    ip = ip * 10 + (unsigned)(s[i] - '0');
    if (ip > UINT64_MAX) {
      big = true;
      ip = (u128)UINT64_MAX + 1; /* keep scanning, stay bounded */
    }
    i++;
  }
  if (i == 0)
    return AS_NUM_MALFORMED;
  uint64_t frac = 0;
  unsigned fdigits = 0;
  bool     has_frac = false;
  if (i < len && s[i] == '.') {
    has_frac = true;
    size_t start = ++i;
    while (i < len && is_digit(s[i]))
      i++;
    if (i == start)
      return AS_NUM_MALFORMED;
    size_t stop = i;
    while (stop > start && s[stop - 1] == '0')
      stop--; /* trailing zeros change nothing */
    if (stop - start > 19)
      return AS_NUM_FRACTION;
    for (size_t k = start; k < stop; k++)
      frac = frac * 10 + (unsigned)(s[k] - '0');
    fdigits = (unsigned)(stop - start);
  }
  uint64_t mult = 1;
  if (i < len) {
    if (units == NULL)
      return AS_NUM_MALFORMED;
    const as_unit_t *u = units;
    while (u->suffix != NULL && !(strlen(u->suffix) == len - i &&
                                  memcmp(u->suffix, s + i, len - i) == 0))
      u++;
    if (u->suffix == NULL)
      return AS_NUM_MALFORMED;
    mult = u->mult;
  } else if (has_frac) {
    return AS_NUM_MALFORMED; /* "1.5" has no unit to scale it by */
  }
  if (big)
    return AS_NUM_OVERFLOW;
  u128 pow10 = 1;
  for (unsigned k = 0; k < fdigits; k++)
    pow10 *= 10;
  u128 fnum = (u128)frac * mult;
  if (fnum % pow10 != 0)
    return AS_NUM_FRACTION;
  u128 total = ip * mult + fnum / pow10;
  if (total > UINT64_MAX)
    return AS_NUM_OVERFLOW;
  *out = (uint64_t)total;
  return AS_NUM_OK;
}

bool as_parse_bytes(const char *s, uint64_t *out) {
  return as_parse_number(s, strlen(s), as_size_units, out) == AS_NUM_OK;
}

bool as_parse_duration_ns(const char *s, uint64_t *out) {
  return as_parse_number(s, strlen(s), as_time_units, out) == AS_NUM_OK;
}

bool as_parse_page_size(const char *s, uint64_t *out) {
  uint64_t v;
  if (!as_parse_bytes(s, &v) || (v != 4096 && v != 16384 && v != 65536))
    return false;
  *out = v;
  return true;
}

static const char *skip_digits(const char *p, size_t *n) {
  *n = 0;
  while (*p >= '0' && *p <= '9')
    p++, (*n)++;
  return p;
}

bool as_parse_real(const char *s, double *out) {
  const char *p = s + (*s == '-');
  size_t      whole, frac = 0, exp;
  p = skip_digits(p, &whole);
  if (*p == '.')
    p = skip_digits(p + 1, &frac);
  if (whole + frac == 0)
    return false;
  if (*p == 'e' || *p == 'E') {
    p += 1 + (p[1] == '+' || p[1] == '-');
    p = skip_digits(p, &exp);
    if (exp == 0)
      return false;
  }
  if (*p != '\0')
    return false;
  errno = 0;
  double v = strtod(s, NULL);
  if (errno != 0 || !isfinite(v))
    return false;
  *out = v + 0.0; /* "-0" is 0: printed back, -0 read as "-0 survive" */
  return true;
}
