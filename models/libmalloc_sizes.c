/* models/libmalloc_sizes.c -- macOS libmalloc's size classes, and nothing
 * else: a request takes its class's bytes in a packed heap (the ideal
 * model's), so RSS shows internal fragmentation only.  Retention is not
 * modelled.
 *
 * The ladder is the one the allocator course notes measured with
 * malloc_size() on macOS (section 8: 54 classes up to 256 KiB; 1025 bytes
 * get 1280), which is libmalloc's xzone ladder:
 *   - 16-byte steps to 128, then four classes per doubling to 32 KiB:
 *     _xzm_bin_sizes[] and _xzm_bin (libmalloc-792.41.1
 *     src/xzone_malloc/xzone_malloc.c:6060-6101, 22-37);
 *   - above XZM_SMALL_BLOCK_SIZE_MAX (32 KiB, xzone_malloc.h:37) a multiple
 *     of XZM_SEGMENT_SLICE_SIZE, 16 KiB (xzone_malloc.h:19, 25;
 *     xzm_good_size, xzone_malloc.c:5333-5344).
 * The older magazine ladders (tiny: 16-byte quantum to 1008 bytes,
 * thresholds.h:38, 60-65; small: 512-byte quantum, 79-81; nano 16..256,
 * nano_zone_common.h:27) would give 1025 -> 1536 and are not what the notes
 * measured.
 */
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define XZM_SMALL_BLOCK_SIZE_MAX (UINT64_C(32) << 10)
#define XZM_SEGMENT_SLICE_SIZE   (UINT64_C(16) << 10)

/* xzone_malloc.c:6060-6101 _xzm_bin_sizes */
static const uint32_t xzm_bin_sizes[] = {
    16,   32,   48,    64,    80,    96,    112,   128,   160,   192,
    224,  256,  320,   384,   448,   512,   640,   768,   896,   1024,
    1280, 1536, 1792,  2048,  2560,  3072,  3584,  4096,  5120,  6144,
    7168, 8192, 10240, 12288, 14336, 16384, 20480, 24576, 28672, 32768,
};

/* _xzm_bin (xzone_malloc.c:22-37). */
static unsigned xzm_bin(uint64_t size) {
  if (size == 0)
    return 0;
  if (size <= 128)
    return (unsigned)((size + 15) / 16 - 1);
  size--;
  int msb = 63 - __builtin_clzll(size);
  return (unsigned)msb * 4 + (unsigned)((size >> (msb - 2)) & 0x3) - 20;
}

/* xzm_good_size (xzone_malloc.c:5333-5344). */
static uint64_t good_size(uint64_t size) {
  if (size <= XZM_SMALL_BLOCK_SIZE_MAX)
    return xzm_bin_sizes[xzm_bin(size)];
  uint64_t r =
      (size + XZM_SEGMENT_SLICE_SIZE - 1) & ~(XZM_SEGMENT_SLICE_SIZE - 1);
  return r < size ? size : r;
}

typedef struct lm_model_s {
  model_t  base;   /* must be first */
  model_t *packed; /* the ideal model, fed class sizes */
  uint64_t live_bytes;
} lm_model_t;

static const model_option_t lm_options[] = {{0}};

static as_status_t lm_create(const model_opts_t *opts, const model_ctx_t *ctx,
                             model_t **out, as_err_t *err) {
  (void)opts;
  *out = NULL;
  lm_model_t *lm = calloc(1, sizeof *lm);
  if (lm == NULL)
    return as_err_set(err, AS_ENOMEM, "libmalloc: out of memory");
  as_status_t rc = model_create_from_spec("ideal", ctx, &lm->packed, err);
  if (rc != AS_OK) {
    free(lm);
    return rc;
  }
  *out = &lm->base;
  return AS_OK;
}

static void lm_destroy(model_t *m) {
  lm_model_t *lm = (lm_model_t *)m;
  model_destroy(lm->packed);
  free(lm);
}

/* The event with its sizes replaced by the classes' sizes. */
static trace_event_t rounded(const trace_event_t *ev) {
  trace_event_t r = *ev;
  r.size = good_size(ev->size);
  r.prev_size = ev->prev_size ? good_size(ev->prev_size) : 0;
  return r;
}

static as_status_t lm_alloc(model_t *m, const trace_event_t *ev,
                            as_err_t *err) {
  lm_model_t   *lm = (lm_model_t *)m;
  trace_event_t r = rounded(ev);
  lm->live_bytes += ev->size;
  return model_alloc(lm->packed, &r, err);
}

static as_status_t lm_realloc(model_t *m, const trace_event_t *ev,
                              as_err_t *err) {
  lm_model_t   *lm = (lm_model_t *)m;
  trace_event_t r = rounded(ev);
  lm->live_bytes = lm->live_bytes - ev->prev_size + ev->size;
  return model_realloc(lm->packed, &r, err);
}

static as_status_t lm_free(model_t *m, const trace_event_t *ev, as_err_t *err) {
  lm_model_t   *lm = (lm_model_t *)m;
  trace_event_t r = rounded(ev);
  lm->live_bytes -= ev->prev_size;
  return model_free(lm->packed, &r, err);
}

static void lm_stats(const model_t *m, model_stats_t *out) {
  const lm_model_t *lm = (const lm_model_t *)m;
  model_stats(lm->packed, out);
  out->free_bytes += out->live_bytes - lm->live_bytes; /* class rounding */
  out->live_bytes = lm->live_bytes;
}

static uint64_t lm_usable_size(const model_t *m, uint64_t size,
                               uint8_t domain) {
  (void)m;
  (void)domain;
  return good_size(size);
}

const model_methods_t model_libmalloc_methods = {
    .name = "libmalloc",
    .summary = "macOS libmalloc (xzone, libmalloc-792) size classes only: "
               "retention not modelled",
    .options = lm_options,
    .create = lm_create,
    .destroy = lm_destroy,
    .alloc = lm_alloc,
    .realloc = lm_realloc,
    .free = lm_free,
    .stats = lm_stats,
    .usable_size = lm_usable_size,
};
