/* sim/units.h -- the one parser for numbers with units: sizes ("64K",
 * "1.5MiB"), durations ("10ms", "2.5s") and page sizes, used by the trace
 * text format, model options, every CLI flag and sweep axes, so that a
 * value means the same wherever it is typed.
 *
 * Numbers are exact decimals: digits ["." digits] [unit].  A fraction needs
 * a unit and must come out as a whole number of the base unit (bytes, ns);
 * values must stay below 2^64.  Size suffixes are powers of 1024.
 */
#ifndef ALLOCSIM_UNITS_H
#define ALLOCSIM_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct as_unit_s as_unit_t;
struct as_unit_s {
  const char *suffix; /* NULL ends a table */
  uint64_t    mult;
};

/* ns, us, ms, s (and min). */
extern const as_unit_t as_time_units[];
/* B, K, KiB, M, MiB, G, GiB, T, TiB. */
extern const as_unit_t as_size_units[];

typedef enum as_num_rc_e {
  AS_NUM_OK,
  AS_NUM_MALFORMED, /* not digits ["." digits] [unit] */
  AS_NUM_OVERFLOW,  /* 2^64 or more */
  AS_NUM_FRACTION   /* not a whole number of the base unit */
} as_num_rc_t;

/* Parses the len bytes at s with the given unit table (NULL: plain digits
 * only) into *out, which is left alone unless AS_NUM_OK. */
as_num_rc_t as_parse_number(const char *s, size_t len, const as_unit_t *units,
                            uint64_t *out);

/* Convenience forms over a NUL-terminated string; false if malformed. */
bool as_parse_bytes(const char *s, uint64_t *out);
bool as_parse_duration_ns(const char *s, uint64_t *out); /* bare = ns */
/* A size that is an OS page size the kernel model supports: 4096, 16384 or
 * 65536 bytes, in any size spelling (4K, 16KiB, 65536). */
bool as_parse_page_size(const char *s, uint64_t *out);

/* A real number as typed on the command line: [-]digits["." digits]
 * [("e"|"E")[+|-]digits], or "." digits for the mantissa, finite.  Not
 * strtod alone, which also takes leading white space, hex floats, "inf"
 * and "nan", so that " 1e-4" and "0x1p-3" were read as numbers.  "-0" is
 * read as 0 (never a negative zero).  False if malformed or out of
 * double's range. */
bool as_parse_real(const char *s, double *out);

#endif
