/* traces/wl_churn.h -- `churn`: a C program's steady malloc/free churn over a
 * fixed working set, the benchmark workload of scripts/bench.sh.
 *
 * The trace: mark start; malloc ids 0 .. live-1 (the working set fills);
 * mark filled; then `steps` steps, each picking a live id uniformly: every
 * realloc_every-th step reallocs it to a new size, every other step frees it
 * and mallocs a new object of a new size under the same id, so exactly
 * `live` objects stay live; mark end.  Random draws are the successive
 * outputs of splitmix64 seeded with seed (survivors_splitmix64_at(seed, n)
 * for the n-th draw), a value below k being (z >> 32) * k >> 32.  Sizes:
 * mixed = 60 % 16-256 B, 30 % 256 B-4 KiB, 9 % 4-64 KiB,
 * 1 % 64-512 KiB (so some chunks are mmapped); small = 60 % 16-256 B, 40 %
 * 256 B-4 KiB.  Every request is in the raw domain; the clock advances by
 * sim/cost.h's C malloc and free costs.
 */
#ifndef ALLOCSIM_WL_CHURN_H
#define ALLOCSIM_WL_CHURN_H

#include "workload.h"

extern const workload_def_t workload_churn;

#endif
