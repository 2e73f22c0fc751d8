/* analysis/formula.c -- the (1 - p)^k survivor formula (see formula.h).
 *
 * Geometry is never restated here: pymalloc's k comes from
 * pymalloc_geometry() (models/pymalloc.h, the model's own constants), and
 * the only mimalloc rule used, the bin a request falls in, is cited below.
 * (1 - p)^k is computed as exp(k * log1p(-p)) so that p = 1e-6 and
 * k = 16065 lose no precision.
 */
#include "formula.h"

#include <math.h>
#include <stdio.h>

#include "../models/mimalloc.h"
#include "../models/pymalloc.h"
#include "../sim/kernel.h"

as_status_t formula_mimalloc_page(const char *version, uint64_t size,
                                  uint64_t *page_bytes, uint64_t *block_bytes,
                                  uint64_t *blocks, as_err_t *err) {
  char spec[64];
  if (snprintf(spec, sizeof spec, "mimalloc:version=%s", version) >=
      (int)sizeof spec)
    return as_err_set(err, AS_EINVAL,
                      "formula: mimalloc version '%.20s...' "
                      "is too long",
                      version);
  sim_kernel_config_t cfg;
  sim_kernel_config_default(&cfg);
  sim_kernel_t *k = NULL;
  model_t      *m = NULL;
  as_status_t   rc = sim_kernel_create(&cfg, &k, err);
  if (rc != AS_OK)
    return rc;
  model_ctx_t ctx = {.kernel = k};
  as_err_t    why = {0};
  if (model_create_from_spec(spec, &ctx, &m, &why) != AS_OK)
    rc = as_err_set(err, AS_EINVAL, "formula: %s", why.msg);
  if (rc == AS_OK) {
    trace_event_t ev = {.op = TRACE_MALLOC, .id = 0, .size = size};
    if ((rc = model_alloc(m, &ev, err)) == AS_OK) {
      const mi_model_t *mm = (const mi_model_t *)m;
      mi_page_ref_t     p = mimalloc_object_page(mm, 0);
      *page_bytes = mimalloc_page_bytes(mm, p);
      *block_bytes = mimalloc_page_block_size(mm, p);
      *blocks = mimalloc_page_blocks(mm, p);
      if (*blocks < 2)
        rc = as_err_set(err, AS_EINVAL,
                        "formula: %llu-byte objects get a page of their own "
                        "in mimalloc %s",
                        (unsigned long long)size, version);
    }
    model_destroy(m);
  }
  sim_kernel_destroy(k);
  return rc;
}

uint64_t formula_mimalloc_bin_size(uint64_t size) {
  /* mimalloc src/page-queue.c mi_bin (v2.1.2 as vendored in CPython 3.14,
   * unchanged in 2.0.9 .. 2.2): sizes are counted in 8-byte words; up to 8
   * words a bin per 2 words (MI_ALIGN2W: MI_MAX_ALIGN_SIZE 16 on x86-64 and
   * arm64), above that 4 bins per power of two (the top 3 bits of wsize-1);
   * a block is the largest size of its bin.  Large objects end at
   * MI_LARGE_OBJ_WSIZE_MAX = 512 KiB / 8 (include/mimalloc/types.h). */
  const uint64_t word = 8, large_wsize_max = (UINT64_C(512) << 10) / 8;
  if (size == 0)
    return 0;
  uint64_t w = (size + word - 1) / word;
  if (w <= 1)
    return word;
  if (w <= 8)
    return ((w + 1) & ~UINT64_C(1)) * word;
  if (w > large_wsize_max)
    return 0;
  uint64_t wm1 = w - 1;
  unsigned b = 63u - (unsigned)__builtin_clzll(wm1);
  return (((wm1 >> (b - 2)) + 1) << (b - 2)) * word;
}

/* 1 - (1 - p)^n: the probability that a unit holding n objects keeps at
 * least one survivor. */
static double pinned_probability(double p, uint64_t n) {
  return p >= 1 ? (n > 0 ? 1.0 : 0.0) : -expm1((double)n * log1p(-p));
}

/* Units that objects 0, m, 2m, ... pin among the first `objects` objects,
 * k to a unit, the partly filled last unit counting for its fraction as
 * in `units`.  A whole unit is pinned if it holds a multiple of m: all of
 * them when m <= k; otherwise each holds at most one, so as many as there
 * are survivors before the last unit.  The last unit is pinned only if a
 * survivor falls in it: counting survivors as units would pin more units
 * than there are (every = k + 1 gave P(pinned) 1.0035). */
static double stride_pinned(uint64_t objects, uint64_t k, uint64_t m,
                            double units) {
  uint64_t whole = objects / k;
  uint64_t in_whole = (whole * k + m - 1) / m; /* multiples of m below */
  uint64_t survivors = (objects + m - 1) / m;
  double   pinned_whole = m <= k ? (double)whole : (double)in_whole;
  return pinned_whole + (survivors > in_whole ? units - (double)whole : 0.0);
}

as_status_t formula_survivors(const formula_input_t *in, formula_result_t *out,
                              as_err_t *err) {
  *out = (formula_result_t){0};
  if (in->size_bytes == 0)
    return as_err_set(err, AS_EINVAL, "formula: size must be at least 1 byte");
  if (!(in->fraction >= 0 && in->fraction <= 1))
    return as_err_set(err, AS_EINVAL,
                      "formula: fraction must be in [0, 1], got %g",
                      in->fraction);
  if (in->pattern == SURVIVORS_STRIDE && in->every == 0)
    return as_err_set(err, AS_EINVAL, "formula: every must be at least 1");

  formula_result_t r = {0};
  r.objects = survivors_object_count(in->total_bytes, in->size_bytes);
  if (r.objects == 0)
    return as_err_set(err, AS_EINVAL,
                      "formula: total %llu bytes holds no object of %llu "
                      "bytes",
                      (unsigned long long)in->total_bytes,
                      (unsigned long long)in->size_bytes);
  if (in->page_bytes == 0 && in->mimalloc == NULL) {
    pymalloc_geometry_t g;
    if (!pymalloc_geometry(in->size_bytes, in->arena_aligned, &g))
      return as_err_set(err, AS_EINVAL,
                        "formula: size %llu bytes is not a pymalloc size "
                        "(1..%d); such objects go to the libc allocator",
                        (unsigned long long)in->size_bytes,
                        PYMALLOC_SMALL_REQUEST_THRESHOLD);
    r.block_bytes = g.block_size;
    r.per_pool = g.blocks_per_pool;
    r.pools = g.pools_per_arena;
    r.k = g.blocks_per_arena;
    /* A pinned arena keeps the pools it carved resident, not its whole
     * mapping: an arena that is not pool-aligned never touches the pad
     * before its first pool nor the part of a pool after its last (3.11
     * Objects/obmalloc.c:1668-1675 new_arena; 3.14 :2001-2008), so
     * 63 x 16 KiB = 1008 KiB.
     * The measured runs at fractions that pin every arena keep 0.985 of
     * 1 MiB per arena (data/reference.db runs 55, 63: 64 and 512 B). */
    r.unit_bytes = r.pools * PYMALLOC_POOL_SIZE;
  } else if (in->mimalloc != NULL) {
    as_status_t rc = formula_mimalloc_page(
        in->mimalloc, in->size_bytes, &r.unit_bytes, &r.block_bytes, &r.k, err);
    if (rc != AS_OK)
      return rc;
  } else {
    r.block_bytes = formula_mimalloc_bin_size(in->size_bytes);
    if (r.block_bytes == 0 || r.block_bytes > in->page_bytes)
      return as_err_set(err, AS_EINVAL,
                        "formula: a page of %llu bytes holds no block for "
                        "%llu-byte objects",
                        (unsigned long long)in->page_bytes,
                        (unsigned long long)in->size_bytes);
    r.k = in->page_bytes / r.block_bytes;
    r.unit_bytes = in->page_bytes;
  }
  /* Fractional, as in the published formula: a partly filled last unit
   * counts for the part its objects fill. */
  r.units = (double)r.objects / (double)r.k;

  switch (in->pattern) {
  case SURVIVORS_RANDOM: {
    double p = in->fraction + 0.0; /* -0 (sweep's strtod) would give q -0 */
    /* q = 1 - (1 - p)^k for a whole unit; the partly filled last one,
     * holding rest < k objects, is pinned with 1 - (1 - p)^rest */
    uint64_t whole = r.objects / r.k, rest = r.objects % r.k;
    double   part = (double)rest / (double)r.k;
    r.q = pinned_probability(p, r.k);
    double q_last = pinned_probability(p, rest);
    r.pinned = (double)whole * r.q + part * q_last;
    r.sd_bytes = sqrt((double)whole * r.q * (1 - r.q) +
                      part * part * q_last * (1 - q_last)) *
                 (double)r.unit_bytes;
    break;
  }
  case SURVIVORS_STRIDE:
    r.pinned = stride_pinned(r.objects, r.k, in->every, r.units);
    r.q = r.pinned / r.units;
    break;
  case SURVIVORS_OLDEST: {
    uint64_t c = (uint64_t)(in->fraction * (double)r.objects);
    r.pinned = fmin((double)((c + r.k - 1) / r.k), r.units);
    r.q = r.pinned / r.units;
    break;
  }
  }
  r.kept_bytes = r.pinned * (double)r.unit_bytes;
  r.all_bytes = r.units * (double)r.unit_bytes;
  *out = r;
  return AS_OK;
}
