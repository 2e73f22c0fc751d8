/* tests/unit/test_cpython.c -- the CPython composition routes each request
 * where Objects/obmalloc.c sends it, with `ideal` as the libc child so the
 * libc side's byte counts are exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "models/model.h"
#include "models/pymalloc.h"
#include "sim/kernel.h"

/* pymalloc's own blocks in libc after its first arena: the arenas[] vector
 * (16 * 48 B), one radix mid node (256 KiB) and one bottom node (128 KiB). */
#define RAW_BYTES   (16 * 48 + 262144 + 131072)
#define RAW_OBJECTS 3

#define FX_IDS (1u << 17)

typedef struct fx_s fx_t;
struct fx_s {
  sim_kernel_t *k;
  model_t      *m;
  uint64_t     *sizes; /* by id: live size, for the events' prev_size */
};

static void fx_open_spec(fx_t *f, const char *spec) {
  sim_kernel_config_t cfg;
  as_err_t            err;
  sim_kernel_config_default(&cfg);
  assert_int_equal(sim_kernel_create(&cfg, &f->k, &err), AS_OK);
  f->sizes = calloc(FX_IDS, sizeof *f->sizes);
  assert_non_null(f->sizes);
  model_ctx_t ctx = {.kernel = f->k, .timers = NULL, .libc_spec = "ideal"};
  assert_int_equal(model_create_from_spec(spec, &ctx, &f->m, &err), AS_OK);
}

static void fx_open(fx_t *f) {
  fx_open_spec(f, "cpython");
}

static void fx_close(fx_t *f) {
  model_destroy(f->m);
  sim_kernel_destroy(f->k);
  free(f->sizes);
}

/* One event, with prev_size filled in as the engine does. */
static as_status_t op(fx_t *f, trace_op_t o, trace_domain_t d, uint64_t id,
                      uint64_t size) {
  as_err_t err;
  assert_true(id < FX_IDS);
  trace_event_t ev = {.id = id,
                      .size = size,
                      .prev_size = f->sizes[id],
                      .op = (uint8_t)o,
                      .domain = (uint8_t)d};
  as_status_t   rc;
  switch (o) {
  case TRACE_FREE:
    rc = model_free(f->m, &ev, &err);
    break;
  case TRACE_REALLOC:
    rc = model_realloc(f->m, &ev, &err);
    break;
  default:
    rc = model_alloc(f->m, &ev, &err);
    break;
  }
  if (rc == AS_OK)
    f->sizes[id] = o == TRACE_FREE ? 0 : size;
  return rc;
}

static model_stats_t libc_stats(fx_t *f) {
  model_stats_t s;
  model_stats(cpython_libc_child(f->m), &s);
  return s;
}

static model_stats_t pym_stats(fx_t *f) {
  model_stats_t s;
  model_stats(cpython_pymalloc_child(f->m), &s);
  return s;
}

static uint32_t pym_block(fx_t *f, uint64_t id) {
  return pymalloc_block_size_of(cpython_pymalloc_child(f->m), id);
}

/* 3.10 keeps a 48-bit radix tree (3.10.12 obmalloc.c:1300): its first arena
 * callocs an 8 KiB mid node and a 2 KiB bottom node where 3.11 callocs
 * 256 KiB and 128 KiB; blocks are placed alike. */
static void python_3_10_has_small_radix_nodes(void **state) {
  (void)state;
  fx_t f;
  fx_open_spec(&f, "cpython:version=3.10");
  assert_int_equal(op(&f, TRACE_MALLOC, TRACE_DOMAIN_OBJ, 0, 64), AS_OK);
  assert_int_equal(libc_stats(&f).live_bytes, 16 * 48 + 8192 + 2048);
  assert_int_equal(libc_stats(&f).live_objects, RAW_OBJECTS);
  assert_int_equal(pym_block(&f, 0), 64);
  fx_close(&f);
}

static void requests_up_to_512_go_to_pymalloc_and_513_to_libc(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  assert_int_equal(op(&f, TRACE_MALLOC, TRACE_DOMAIN_OBJ, 0, 512), AS_OK);
  assert_int_equal(op(&f, TRACE_MALLOC, TRACE_DOMAIN_OBJ, 1, 513), AS_OK);
  assert_int_equal(pym_block(&f, 0), 512);
  assert_int_equal(pym_block(&f, 1), 0);
  assert_int_equal(pym_stats(&f).live_bytes, 512);
  assert_int_equal(libc_stats(&f).live_bytes, RAW_BYTES + 513);
  assert_int_equal(libc_stats(&f).live_objects, RAW_OBJECTS + 1);
  model_stats_t s;
  model_stats(f.m, &s);
  assert_int_equal(s.live_bytes, 512 + 513); /* pymalloc's own excluded */
  assert_int_equal(s.live_objects, 2);
  assert_int_equal(s.arenas, 1);
  fx_close(&f);
}

static void raw_domain_zero_bytes_and_memalign_go_to_libc(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  assert_int_equal(op(&f, TRACE_MALLOC, TRACE_DOMAIN_RAW, 0, 100), AS_OK);
  assert_int_equal(op(&f, TRACE_MALLOC, TRACE_DOMAIN_MEM, 1, 0), AS_OK);
  assert_int_equal(op(&f, TRACE_MEMALIGN, TRACE_DOMAIN_OBJ, 2, 64), AS_OK);
  assert_int_equal(op(&f, TRACE_CALLOC, TRACE_DOMAIN_MEM, 3, 64), AS_OK);
  assert_int_equal(pym_stats(&f).live_objects, 1); /* only the calloc */
  assert_int_equal(pym_block(&f, 3), 64);
  /* No arena yet when the first three arrived: no pymalloc bookkeeping. */
  assert_int_equal(libc_stats(&f).live_objects, RAW_OBJECTS + 3);
  assert_int_equal(libc_stats(&f).live_bytes, RAW_BYTES + 100 + 0 + 64);
  fx_close(&f);
}

static void a_growing_mem_block_moves_from_pymalloc_to_libc(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  assert_int_equal(op(&f, TRACE_MALLOC, TRACE_DOMAIN_MEM, 5, 100), AS_OK);
  assert_int_equal(pym_block(&f, 5), 112);
  /* 100 -> 90 stays in place (4*90 = 360 > 3*112 = 336). */
  assert_int_equal(op(&f, TRACE_REALLOC, TRACE_DOMAIN_MEM, 5, 90), AS_OK);
  assert_int_equal(pym_block(&f, 5), 112);
  /* 90 -> 300 moves within pymalloc. */
  assert_int_equal(op(&f, TRACE_REALLOC, TRACE_DOMAIN_MEM, 5, 300), AS_OK);
  assert_int_equal(pym_block(&f, 5), 304);
  /* 300 -> 1000 leaves pymalloc for libc. */
  assert_int_equal(op(&f, TRACE_REALLOC, TRACE_DOMAIN_MEM, 5, 1000), AS_OK);
  assert_int_equal(pym_block(&f, 5), 0);
  assert_int_equal(pym_stats(&f).live_objects, 0);
  assert_int_equal(libc_stats(&f).live_bytes, RAW_BYTES + 1000);
  /* Back to 100: a libc block stays in libc (PyMem_RawRealloc). */
  assert_int_equal(op(&f, TRACE_REALLOC, TRACE_DOMAIN_MEM, 5, 100), AS_OK);
  assert_int_equal(pym_block(&f, 5), 0);
  assert_int_equal(libc_stats(&f).live_bytes, RAW_BYTES + 100);
  /* And its free goes to libc. */
  assert_int_equal(op(&f, TRACE_FREE, TRACE_DOMAIN_MEM, 5, 0), AS_OK);
  assert_int_equal(libc_stats(&f).live_bytes, RAW_BYTES);
  assert_int_equal(op(&f, TRACE_FREE, TRACE_DOMAIN_MEM, 5, 0), AS_EINVAL);
  fx_close(&f);
}

static void realloc_to_zero_leaves_pymalloc(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  assert_int_equal(op(&f, TRACE_MALLOC, TRACE_DOMAIN_OBJ, 0, 64), AS_OK);
  /* pymalloc_alloc(0) returns NULL, so _PyObject_Malloc(0) is raw. */
  assert_int_equal(op(&f, TRACE_REALLOC, TRACE_DOMAIN_OBJ, 0, 0), AS_OK);
  assert_int_equal(pym_block(&f, 0), 0);
  assert_int_equal(libc_stats(&f).live_objects, RAW_OBJECTS + 1);
  fx_close(&f);
}

static void version_is_forwarded_and_bad_libc_refused(void **state) {
  (void)state;
  fx_t f;
  fx_open_spec(&f, "cpython:version=3.11");
  char buf[256];
  model_describe(cpython_pymalloc_child(f.m), buf, sizeof buf);
  assert_string_equal(buf, "pymalloc:version=3.11");
  model_describe(f.m, buf, sizeof buf);
  assert_string_equal(buf, "cpython:version=3.11,pythonmalloc=pymalloc");
  assert_int_equal(model_trim(f.m, 0, 0, NULL), AS_OK);
  fx_close(&f);
  /* 3.12 and 3.13 (a micro release too) are the default build's as well:
   * the same pymalloc, named by its minor version. */
  static const char *const later[][2] = {{"3.12", "3.12"}, {"3.13.2", "3.13"}};
  for (size_t i = 0; i < 2; i++) {
    char spec[64], want[64];
    snprintf(spec, sizeof spec, "cpython:version=%s", later[i][0]);
    snprintf(want, sizeof want, "pymalloc:version=%s", later[i][1]);
    fx_open_spec(&f, spec);
    model_describe(cpython_pymalloc_child(f.m), buf, sizeof buf);
    assert_string_equal(buf, want);
    fx_close(&f);
  }

  sim_kernel_config_t cfg;
  sim_kernel_t       *k;
  model_t            *m = NULL;
  as_err_t            err;
  sim_kernel_config_default(&cfg);
  assert_int_equal(sim_kernel_create(&cfg, &k, &err), AS_OK);
  model_ctx_t ctx = {.kernel = k, .timers = NULL, .libc_spec = "cpython"};
  assert_int_equal(model_create_from_spec("cpython", &ctx, &m, &err),
                   AS_EUSAGE);
  assert_null(m);
  sim_kernel_destroy(k);
}

/* Sums the level-1 regions' live objects of a heap map. */
static as_status_t count_live(void *user, const model_region_t *r,
                              as_err_t *err) {
  (void)err;
  if (r->level == 1)
    *(uint64_t *)user += r->live_objects;
  return AS_OK;
}

/* pymalloc's own blocks in libc (its arenas[] vector, arena-map nodes)
 * are the interpreter's bookkeeping in the heap map, not the program's
 * objects, whatever the libc model: one 64 B object is one live object
 * (explain said "the program's 2 live objects" in glibc's brk heap and 1
 * more mmapped).  jemalloc's and tcmalloc's have one more, the 72,704-byte
 * libstdc++ emergency pool their Debian libraries allocate at start-up;
 * tcmalloc's two MallocExtension objects are its own bookkeeping. */
static void pymallocs_own_blocks_are_not_the_programs(void **state) {
  (void)state;
  static const char *const libcs[] = {"glibc", "musl", "mimalloc", "tcmalloc",
                                      "jemalloc"};
  for (size_t i = 0; i < sizeof libcs / sizeof *libcs; i++) {
    sim_kernel_config_t cfg;
    sim_kernel_t       *k;
    model_t            *m;
    as_err_t            err;
    sim_kernel_config_default(&cfg);
    assert_int_equal(sim_kernel_create(&cfg, &k, &err), AS_OK);
    model_ctx_t ctx = {.kernel = k, .libc_spec = libcs[i]};
    assert_int_equal(model_create_from_spec("cpython", &ctx, &m, &err), AS_OK);
    trace_event_t ev = {
        .id = 0, .size = 64, .op = TRACE_MALLOC, .domain = TRACE_DOMAIN_OBJ};
    assert_int_equal(model_alloc(m, &ev, &err), AS_OK);
    uint64_t live = 0;
    assert_int_equal(model_walk(m, count_live, &live, &err), AS_OK);
    bool pool =
        strcmp(libcs[i], "jemalloc") == 0 || strcmp(libcs[i], "tcmalloc") == 0;
    assert_int_equal(live, pool ? 2 : 1);
    model_destroy(m);
    sim_kernel_destroy(k);
  }
}

static void pythonmalloc_malloc_sends_every_domain_to_libc(void **state) {
  (void)state;
  fx_t f;
  fx_open_spec(&f, "cpython:pythonmalloc=malloc");
  assert_int_equal(op(&f, TRACE_MALLOC, TRACE_DOMAIN_OBJ, 0, 64), AS_OK);
  assert_int_equal(op(&f, TRACE_MALLOC, TRACE_DOMAIN_MEM, 1, 512), AS_OK);
  assert_int_equal(op(&f, TRACE_REALLOC, TRACE_DOMAIN_OBJ, 0, 32), AS_OK);
  /* No arena is ever made, so none of pymalloc's own raw blocks either. */
  assert_int_equal(pym_stats(&f).live_objects, 0);
  assert_int_equal(libc_stats(&f).live_objects, 2);
  assert_int_equal(op(&f, TRACE_FREE, TRACE_DOMAIN_OBJ, 0, 0), AS_OK);
  assert_int_equal(libc_stats(&f).live_objects, 1);
  fx_close(&f);
}

static void survivors_pin_arenas_through_the_composition(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  /* Three arenas of 64-B objects; keep one per arena in the first two. */
  const uint64_t n = 3 * 16065;
  for (uint64_t id = 0; id < n; id++)
    assert_int_equal(op(&f, TRACE_MALLOC, TRACE_DOMAIN_OBJ, id, 64), AS_OK);
  for (uint64_t id = 0; id < n; id++)
    if (id != 10 && id != 16065 + 10)
      assert_int_equal(op(&f, TRACE_FREE, TRACE_DOMAIN_OBJ, id, 0), AS_OK);
  model_stats_t s;
  model_stats(f.m, &s);
  /* Arenas 1 and 2 pinned; arena 3 emptied while not last: released. */
  assert_int_equal(s.arenas, 2);
  assert_int_equal(sim_kernel_rss_owner_bytes(f.k, SIM_OWNER_PYMALLOC),
                   2 * 63 * 16384);
  fx_close(&f);
}

/* Each id is in one child at a time and the composition routes its free
 * and realloc there, including an id reused across children; an id in
 * neither is refused even though the libc child (ideal) would not notice. */
static void an_id_goes_back_to_the_child_that_holds_it(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  const uint64_t far = FX_IDS - 1; /* beyond every per-id table so far */
  assert_int_equal(op(&f, TRACE_MALLOC, TRACE_DOMAIN_RAW, 7, 100), AS_OK);
  assert_int_equal(op(&f, TRACE_MALLOC, TRACE_DOMAIN_OBJ, 8, 100), AS_OK);
  assert_int_equal(op(&f, TRACE_MALLOC, TRACE_DOMAIN_MEM, far, 2000), AS_OK);
  assert_int_equal(libc_stats(&f).live_bytes, RAW_BYTES + 100 + 2000);
  assert_int_equal(pym_stats(&f).live_bytes, 100);
  /* realloc of a libc block to a small size stays in libc */
  assert_int_equal(op(&f, TRACE_REALLOC, TRACE_DOMAIN_RAW, 7, 50), AS_OK);
  assert_int_equal(libc_stats(&f).live_bytes, RAW_BYTES + 50 + 2000);
  assert_int_equal(op(&f, TRACE_FREE, TRACE_DOMAIN_RAW, 7, 0), AS_OK);
  assert_int_equal(op(&f, TRACE_FREE, TRACE_DOMAIN_OBJ, 8, 0), AS_OK);
  assert_int_equal(op(&f, TRACE_FREE, TRACE_DOMAIN_MEM, far, 0), AS_OK);
  assert_int_equal(libc_stats(&f).live_bytes, RAW_BYTES);
  assert_int_equal(pym_stats(&f).live_bytes, 0);
  /* Dead ids, in range of the tables or not. */
  assert_int_equal(op(&f, TRACE_FREE, TRACE_DOMAIN_RAW, 7, 0), AS_EINVAL);
  assert_int_equal(op(&f, TRACE_FREE, TRACE_DOMAIN_OBJ, 8, 0), AS_EINVAL);
  assert_int_equal(op(&f, TRACE_REALLOC, TRACE_DOMAIN_OBJ, 7, 10), AS_EINVAL);
  assert_int_equal(op(&f, TRACE_REALLOC, TRACE_DOMAIN_OBJ, far - 1, 10),
                   AS_EINVAL);
  /* Reused the other way round: 7 in pymalloc, 8 in libc. */
  assert_int_equal(op(&f, TRACE_MALLOC, TRACE_DOMAIN_OBJ, 7, 30), AS_OK);
  assert_int_equal(op(&f, TRACE_MALLOC, TRACE_DOMAIN_RAW, 8, 30), AS_OK);
  assert_int_equal(pym_block(&f, 7), 32);
  assert_int_equal(pym_block(&f, 8), 0);
  assert_int_equal(op(&f, TRACE_FREE, TRACE_DOMAIN_OBJ, 8, 0), AS_OK);
  assert_int_equal(libc_stats(&f).live_bytes, RAW_BYTES);
  /* A raw free (PyMem_RawFree) of a pymalloc block is refused, changing
   * nothing (issue 14: it used to be accepted); the obj free works. */
  assert_int_equal(op(&f, TRACE_FREE, TRACE_DOMAIN_RAW, 7, 0), AS_EFORMAT);
  assert_int_equal(op(&f, TRACE_REALLOC, TRACE_DOMAIN_RAW, 7, 40), AS_EFORMAT);
  assert_int_equal(pym_block(&f, 7), 32);
  assert_int_equal(op(&f, TRACE_FREE, TRACE_DOMAIN_OBJ, 7, 0), AS_OK);
  assert_int_equal(pym_stats(&f).live_objects, 0);
  fx_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(requests_up_to_512_go_to_pymalloc_and_513_to_libc),
      cmocka_unit_test(python_3_10_has_small_radix_nodes),
      cmocka_unit_test(raw_domain_zero_bytes_and_memalign_go_to_libc),
      cmocka_unit_test(a_growing_mem_block_moves_from_pymalloc_to_libc),
      cmocka_unit_test(realloc_to_zero_leaves_pymalloc),
      cmocka_unit_test(version_is_forwarded_and_bad_libc_refused),
      cmocka_unit_test(pymallocs_own_blocks_are_not_the_programs),
      cmocka_unit_test(pythonmalloc_malloc_sends_every_domain_to_libc),
      cmocka_unit_test(survivors_pin_arenas_through_the_composition),
      cmocka_unit_test(an_id_goes_back_to_the_child_that_holds_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
