/* traces/wl_survivors.h -- the survivor rule of the `survivors` workload,
 * exposed so tests, the formula and the sweep use exactly the rule that the
 * generator (traces/wl_survivors.c) and scripts/measure/survivors.py use.
 *
 * Rule (identical in C and Python):
 *   random  object i (0-based, in allocation order) survives iff
 *           (splitmix64_at(seed, i) >> 11) * 2^-53 < fraction, where
 *           splitmix64_at(seed, i) is the (i+1)-th output of Vigna's
 *           splitmix64 generator whose state starts at seed;
 *   stride  object i survives iff i % every == 0;
 *   oldest  object i survives iff i < floor(fraction * nobjects).
 */
#ifndef ALLOCSIM_WL_SURVIVORS_H
#define ALLOCSIM_WL_SURVIVORS_H

#include <stdbool.h>
#include <stdint.h>

#include "workload.h"

typedef enum survivors_pattern_e {
  SURVIVORS_RANDOM,
  SURVIVORS_STRIDE,
  SURVIVORS_OLDEST
} survivors_pattern_t;

/* The (i+1)-th output of splitmix64 seeded with seed: the state after i+1
 * steps is seed + (i+1) * 0x9E3779B97F4A7C15 (mod 2^64), then mixed.  Random
 * access: the survivor set is a function of the index, which the generator
 * draws once into a bitmap (one bit per object) when the selection starts. */
uint64_t survivors_splitmix64_at(uint64_t seed, uint64_t i);

typedef struct survivors_rule_s survivors_rule_t;
struct survivors_rule_s {
  survivors_pattern_t pattern;
  double              fraction;     /* random, oldest: in [0, 1] */
  uint64_t            every;        /* stride: >= 1 */
  uint64_t            seed;         /* random */
  uint64_t            oldest_count; /* oldest: floor(fraction * nobjects) */
};

/* Whether object i survives under rule r. */
bool survivors_is_kept(const survivors_rule_t *r, uint64_t i);

/* "random", "stride", "oldest"; parses them back (false if unknown). */
const char *survivors_pattern_name(survivors_pattern_t p);
bool        survivors_pattern_parse(const char *s, survivors_pattern_t *out);

/* Objects the workload builds: floor(total_bytes / size_bytes). */
uint64_t survivors_object_count(uint64_t total_bytes, uint64_t size_bytes);

/* Smallest --size the workload accepts: sys.getsizeof of a 2-byte bytes
 * object (PyBytesObject_SIZE 33 + 2); shorter bytes are shared singletons. */
#define SURVIVORS_MIN_SIZE 35

/* The workload itself, registered in traces/workload.c. */
extern const workload_def_t workload_survivors;

#endif
