/* models/ideal.c -- the lower bound: live bytes packed with no rounding, no
 * headers and no retention, so RSS = live bytes rounded up to whole OS pages.
 *
 * No allocator can beat it; the gap between it and a real model is what that
 * allocator's policy costs.  It keeps one contiguous RW region and exactly
 * ceil(live / page) pages of it resident: growth touches the next pages,
 * shrinkage drops the tail with MADV_DONTNEED.
 */
#include "model.h"

#include <stdlib.h>
#include <string.h>

/* Address space reserved for the packed heap: far more than any trace. */
#define IDEAL_REGION_BYTES (UINT64_C(1) << 44)

typedef struct ideal_model_s ideal_model_t;
struct ideal_model_s {
  model_t       base; /* must be first */
  sim_kernel_t *kernel;
  sim_addr_t    region; /* start of the packed heap */
  uint64_t      page_size;
  unsigned      page_shift;     /* log2(page_size) */
  uint64_t      resident_pages; /* pages of region kept resident */
  uint64_t      live_bytes;
  uint64_t      live_objects;
};

static const model_option_t ideal_options[] = {{0}};

static as_status_t ideal_create(const model_opts_t *opts,
                                const model_ctx_t *ctx, model_t **out,
                                as_err_t *err) {
  (void)opts;
  ideal_model_t *im = calloc(1, sizeof *im);
  if (im == NULL)
    return as_err_set(err, AS_ENOMEM, "ideal: out of memory");
  im->kernel = ctx->kernel;
  im->page_size = sim_kernel_page_size(ctx->kernel);
  im->page_shift = (unsigned)__builtin_ctzll(im->page_size);
  as_status_t rc =
      sim_kernel_mmap(ctx->kernel, IDEAL_REGION_BYTES, 0, SIM_PROT_RW,
                      SIM_OWNER_IDEAL, &im->region, err);
  if (rc != AS_OK) {
    free(im);
    return rc;
  }
  *out = &im->base;
  return AS_OK;
}

static void ideal_destroy(model_t *m) {
  free(m);
}

/* ceil(live_bytes / page): a shift, not a division, on every event. */
static uint64_t pages_needed(const ideal_model_t *im) {
  return (im->live_bytes + im->page_size - 1) >> im->page_shift;
}

/* Makes need = ceil(live_bytes / page) pages resident, need differing
 * from resident_pages.  Out of line, so that events crossing no page
 * boundary (most of them) cost no stack frame (settle_pages). */
static __attribute__((noinline)) as_status_t
resize_pages(ideal_model_t *im, uint64_t need, as_err_t *err) {
  if (need > im->resident_pages) {
    sim_addr_t  from = im->region + im->resident_pages * im->page_size;
    as_status_t rc = sim_kernel_touch(
        im->kernel, from, (need - im->resident_pages) * im->page_size, err);
    if (rc != AS_OK)
      return rc;
  } else if (need < im->resident_pages) {
    /* Linux 6.1 mm/madvise.c: MADV_DONTNEED zaps the pages and RSS drops at
     * once (6.1.170 mm/memory.c:1450 zap_pte_range), the cheapest way any
     * allocator returns them. */
    sim_addr_t  from = im->region + need * im->page_size;
    as_status_t rc = sim_kernel_madvise(
        im->kernel, from, (im->resident_pages - need) * im->page_size,
        SIM_MADV_DONTNEED, err);
    if (rc != AS_OK)
      return rc;
  }
  im->resident_pages = need;
  return AS_OK;
}

/* Makes exactly ceil(live_bytes / page) pages resident. */
static inline as_status_t settle_pages(ideal_model_t *im, as_err_t *err) {
  uint64_t need = pages_needed(im);
  return need == im->resident_pages ? AS_OK : resize_pages(im, need, err);
}

static as_status_t ideal_alloc(model_t *m, const trace_event_t *ev,
                               as_err_t *err) {
  ideal_model_t *im = (ideal_model_t *)m;
  im->live_bytes += ev->size;
  im->live_objects++;
  return settle_pages(im, err);
}

static as_status_t ideal_realloc(model_t *m, const trace_event_t *ev,
                                 as_err_t *err) {
  ideal_model_t *im = (ideal_model_t *)m;
  im->live_bytes = im->live_bytes - ev->prev_size + ev->size;
  return settle_pages(im, err);
}

static as_status_t ideal_free(model_t *m, const trace_event_t *ev,
                              as_err_t *err) {
  ideal_model_t *im = (ideal_model_t *)m;
  im->live_bytes -= ev->prev_size;
  im->live_objects--;
  return settle_pages(im, err);
}

static void ideal_stats(const model_t *m, model_stats_t *out) {
  const ideal_model_t *im = (const ideal_model_t *)m;
  memset(out, 0, sizeof *out);
  out->live_bytes = im->live_bytes;
  out->live_objects = im->live_objects;
  out->mapped_bytes = im->resident_pages * im->page_size;
  out->free_bytes = out->mapped_bytes - im->live_bytes;
}

/* The model keeps exactly ceil(live / page) pages of the packed heap, and
 * the kernel has at least those resident (with THP a fault makes its whole
 * 2 MiB block resident, so it may have more). */
static as_status_t ideal_check(const model_t *m, as_err_t *err) {
  const ideal_model_t *im = (const ideal_model_t *)m;
  uint64_t             need = pages_needed(im);
  uint64_t rss = sim_kernel_rss_owner_bytes(im->kernel, SIM_OWNER_IDEAL);
  if (im->resident_pages != need || rss < need * im->page_size)
    return as_err_set(
        err, AS_EINVAL,
        "ideal: %llu live bytes need %llu pages; model keeps "
        "%llu, kernel has %llu bytes resident",
        (unsigned long long)im->live_bytes, (unsigned long long)need,
        (unsigned long long)im->resident_pages, (unsigned long long)rss);
  return AS_OK;
}

const model_methods_t model_ideal_methods = {
    .name = "ideal",
    .summary = "lower bound: live bytes packed, rounded up to whole OS pages",
    .options = ideal_options,
    .create = ideal_create,
    .destroy = ideal_destroy,
    .alloc = ideal_alloc,
    .realloc = ideal_realloc,
    .free = ideal_free,
    .thread = NULL,
    .trim = NULL,
    .stats = ideal_stats,
    .check = ideal_check,
};
