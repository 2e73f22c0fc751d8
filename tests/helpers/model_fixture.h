/* tests/helpers/model_fixture.h -- a simulated kernel and one model from a
 * spec, fed events directly (no engine), for unit tests of a model.
 *
 * The fixture keeps each live object's size, so free and realloc carry
 * prev_size as the engine would, and counts the model's counters by name.
 * Closing checks the kernel's invariants.
 */
#ifndef ALLOCSIM_MODEL_FIXTURE_H
#define ALLOCSIM_MODEL_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "models/model.h"
#include "sim/kernel.h"

#define FX_MAX_IDS 4096

typedef struct fx_s {
  sim_kernel_t *k;
  model_t      *m;
  uint64_t      size[FX_MAX_IDS]; /* live object's size + 1; 0 = dead */
  uint64_t      t_ns;
} fx_t;

static inline void fx_open_cfg(fx_t *f, const char *spec,
                               const sim_kernel_config_t *cfg) {
  as_err_t err = {0};
  memset(f, 0, sizeof *f);
  if (sim_kernel_create(cfg, &f->k, &err) != AS_OK)
    fail_msg("kernel: %s", err.msg);
  model_ctx_t ctx = {.kernel = f->k, .timers = NULL, .libc_spec = NULL};
  if (model_create_from_spec(spec, &ctx, &f->m, &err) != AS_OK)
    fail_msg("%s: %s", spec, err.msg);
}

static inline void fx_open(fx_t *f, const char *spec) {
  sim_kernel_config_t cfg;
  sim_kernel_config_default(&cfg);
  fx_open_cfg(f, spec, &cfg);
}

static inline void fx_close(fx_t *f) {
  as_err_t err = {0};
  if (sim_kernel_check_invariants(f->k, &err) != AS_OK)
    fail_msg("kernel: %s", err.msg);
  model_destroy(f->m);
  sim_kernel_destroy(f->k);
}

/* One event; fails the test on an error.  flags: TRACE_FLAG_UNWRITTEN. */
static inline void fx_event(fx_t *f, trace_op_t op, uint32_t thread,
                            uint64_t id, uint64_t size, uint64_t align,
                            uint8_t flags) {
  trace_event_t e = {.op = (uint8_t)op,
                     .thread = thread,
                     .id = id,
                     .size = size,
                     .align = align,
                     .flags = flags,
                     .t_ns = f->t_ns++};
  as_err_t      err = {0};
  as_status_t   rc = AS_OK;
  if (id < FX_MAX_IDS && f->size[id] != 0)
    e.prev_size = f->size[id] - 1;
  switch (op) {
  case TRACE_MALLOC:
  case TRACE_CALLOC:
  case TRACE_MEMALIGN:
    rc = model_alloc(f->m, &e, &err);
    f->size[id] = size + 1;
    break;
  case TRACE_REALLOC:
    rc = model_realloc(f->m, &e, &err);
    f->size[id] = size + 1;
    break;
  case TRACE_FREE:
    rc = model_free(f->m, &e, &err);
    f->size[id] = 0;
    break;
  case TRACE_THREAD_START:
  case TRACE_THREAD_EXIT:
    rc = model_thread(f->m, &e, &err);
    break;
  case TRACE_PURGE:
    e.id = TRACE_ALL_ARENAS;
    rc = model_purge(f->m, &e, &err);
    break;
  default:
    fail_msg("fx_event: op %d", (int)op);
  }
  if (rc != AS_OK)
    fail_msg("%s of id %llu: %s", trace_op_name(op), (unsigned long long)id,
             err.msg);
}

static inline void fx_malloc(fx_t *f, uint64_t id, uint64_t size) {
  fx_event(f, TRACE_MALLOC, 0, id, size, 0, 0);
}

static inline void fx_free(fx_t *f, uint64_t id) {
  fx_event(f, TRACE_FREE, 0, id, 0, 0, 0);
}

static inline uint64_t fx_counter(const fx_t *f, const char *name) {
  uint64_t v;
  if (!model_counter_get(f->m, name, &v))
    fail_msg("no counter %s", name);
  return v;
}

static inline uint64_t fx_rss(const fx_t *f) {
  return sim_kernel_rss_bytes(f->k);
}

static inline sim_addr_t fx_addr(const fx_t *f, uint64_t id) {
  sim_addr_t a = 0;
  if (!model_locate(f->m, id, &a))
    fail_msg("id %llu is not live", (unsigned long long)id);
  return a;
}

static inline uint64_t fx_usable(const fx_t *f, uint64_t size) {
  return f->m->methods->usable_size(f->m, size, TRACE_DOMAIN_RAW);
}

/* Two models given the same calls on ids [0, n), every third id from 0
 * freed: the same ids live at the same addresses in both, and freeing the
 * rest leaves both with the same RSS.  For a model whose object table was
 * rewritten to another width against one whose was not. */
static inline void fx_check_same_places(fx_t *kept, fx_t *rewritten,
                                        uint64_t n) {
  for (uint64_t id = 0; id < n; id++) {
    sim_addr_t a = 0, b = 0;
    bool       live = id % 3 != 0;
    assert_int_equal(model_locate(kept->m, id, &a), live);
    assert_int_equal(model_locate(rewritten->m, id, &b), live);
    assert_int_equal(a, b);
  }
  for (uint64_t id = 1; id < n; id++)
    if (id % 3 != 0) {
      fx_free(kept, id);
      fx_free(rewritten, id);
    }
  assert_int_equal(fx_rss(rewritten), fx_rss(kept));
}

#endif
