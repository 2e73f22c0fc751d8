/* analysis/formula.h -- the (1 - p)^k formula: how much memory a few
 * survivors pin, from allocator geometry alone.
 *
 * Objects allocated one after another fill allocation units (pymalloc
 * arenas, or mimalloc-style pages) in order, k objects to a unit.  A unit
 * goes back to the OS only if none of its k objects survived, which for
 * survivors chosen independently with probability p happens with
 * probability (1 - p)^k.  With n = objects / k units:
 *     kept = n * (1 - (1 - p)^k) * unit_bytes
 * and, units being independent, the number pinned is binomial(n, q), so
 *     sd   = sqrt(n * q * (1 - q)) * unit_bytes,   q = 1 - (1 - p)^k.
 * k comes from geometry: for pymalloc it is pools per arena (63 in an
 * arena that is not 16 KiB aligned, 64 otherwise) times NUMBLOCKS for the
 * size class, both from models/pymalloc.h (the constants the model uses);
 * for pages it is page_bytes / block size, the block size being the
 * mimalloc bin the request falls in, or, for a mimalloc version, the blocks
 * the model's page of that size class holds.  For mimalloc the formula
 * gives the memory kept once every empty page is purged; until a purge runs
 * (it needs a trigger, docs/models/mimalloc.md) all units stay resident.
 *
 * Stride and oldest patterns are deterministic, so their sd is 0: every
 * m-th object pins every whole unit when m <= k and one unit per survivor
 * otherwise; the oldest c objects pin ceil(c / k) units.  A partly filled
 * last unit counts for the fraction its objects fill (n is fractional),
 * and is pinned only if a survivor falls in it: under random survivors
 * with probability 1 - (1 - p)^r, r being the objects it holds (q is a
 * whole unit's).  Deliberately left out: the one empty arena pymalloc
 * keeps (bpo-37257), and whatever the program held before.
 */
#ifndef ALLOCSIM_FORMULA_H
#define ALLOCSIM_FORMULA_H

#include <stdbool.h>
#include <stdint.h>

#include "../sim/status.h"
#include "../traces/wl_survivors.h"

typedef struct formula_input_s formula_input_t;
struct formula_input_s {
  uint64_t            size_bytes;  /* each object's request (getsizeof) */
  uint64_t            total_bytes; /* bytes of objects built */
  survivors_pattern_t pattern;
  double              fraction;   /* random, oldest: 0..1 */
  uint64_t            every;      /* stride: >= 1 */
  uint64_t            page_bytes; /* 0: pymalloc arenas; else
                                     mimalloc-style pages of this size */
  bool arena_aligned;             /* pymalloc: arenas 16 KiB aligned
                                     (64 pools), as with OS pages of
                                     16 KiB or more; else 63 pools */
  const char *mimalloc;           /* NULL, or a mimalloc model version:
                                     the unit is the page that version
                                     gives the size (page_bytes unused) */
};

typedef struct formula_result_s formula_result_t;
struct formula_result_s {
  uint64_t objects;     /* floor(total_bytes / size_bytes) */
  uint64_t block_bytes; /* size class / bin the request falls in */
  uint64_t k;           /* objects per arena or page */
  uint64_t per_pool;    /* pymalloc: NUMBLOCKS; pages: 0 */
  uint64_t pools;       /* pymalloc: usable pools per arena; pages: 0 */
  uint64_t unit_bytes;  /* arena (1 MiB) or page bytes */
  double   units;       /* objects / k, arenas or pages (fractional) */
  double   q;           /* probability that a unit is pinned */
  double   pinned;      /* expected units pinned */
  double   kept_bytes;  /* expected kept memory */
  double   all_bytes;   /* every unit (units * unit_bytes): what stays
                           resident when freed units are not returned
                           (mimalloc with no purge after the frees) */
  double sd_bytes;      /* its standard deviation (0: deterministic) */
};

/* Evaluates the formula.  AS_EINVAL naming the field when the input is
 * outside what the formula covers: size 0, a pymalloc size above 512 bytes
 * (such objects go to the libc allocator), a page smaller than one block,
 * a fraction outside [0, 1], every 0, or no object at all. */
as_status_t formula_survivors(const formula_input_t *in, formula_result_t *out,
                              as_err_t *err);

/* The mimalloc version `allocsim formula --allocator mimalloc` uses unless
 * told: the one CPython 3.13/3.14's free-threaded build vendors
 * (Include/internal/mimalloc/mimalloc.h MI_MALLOC_VERSION 212). */
#define FORMULA_MIMALLOC_VERSION "2.1.2"

/* The page the mimalloc model of version gives a request of size bytes:
 * its bytes, block size and blocks (the model lays out one, so nothing is
 * restated: 2.x small pages of 64 KiB hold blocks up to 16 KiB after a
 * start offset of up to 3 blocks, medium pages of 512 KiB up to 128 KiB;
 * 3.x pages begin with their page info).  AS_EINVAL naming the version or
 * the size when there is no such page. */
as_status_t formula_mimalloc_page(const char *version, uint64_t size,
                                  uint64_t *page_bytes, uint64_t *block_bytes,
                                  uint64_t *blocks, as_err_t *err);

/* mimalloc's block size for a request of size bytes (1 .. 512 KiB): the
 * largest size of its bin (src/page-queue.c mi_bin, 2-word alignment as on
 * x86-64 and arm64).  0 above the large-object limit. */
uint64_t formula_mimalloc_bin_size(uint64_t size);

#endif
