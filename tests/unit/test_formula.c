/* tests/unit/test_formula.c -- the (1 - p)^k survivor formula
 * (analysis/formula.c).  Expected values were computed independently in
 * Python (math.expm1, math.log1p) from pymalloc's geometry (CPython 3.11.2
 * Objects/obmalloc.c:879-1064): for w whole units of k objects and a last
 * one of r, kept = (w q + (r / k) q_r) unit (unit = 63 x 16 KiB, the pools
 * a pinned arena keeps resident), sd = sqrt(w q (1 - q) +
 * (r / k)^2 q_r (1 - q_r)) unit, q = 1 - (1 - p)^k, q_r = 1 - (1 - p)^r.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "analysis/formula.h"
#include "analysis/formula_validate.h"

#define MIB 1048576.0
/* What a pinned arena of 63 pools keeps resident: 63 x 16 KiB. */
#define POOLS_MIB (63 * 16384.0)

static void assert_close(double got, double want, double rel) {
  double tol = rel * (want < 0 ? -want : want);
  if (!(got >= want - tol && got <= want + tol))
    fail_msg("got %.12g, want %.12g (rel tol %g)", got, want, rel);
}

static formula_input_t pym(uint64_t size, double p) {
  formula_input_t in = {.size_bytes = size,
                        .total_bytes = UINT64_C(256) << 20,
                        .pattern = SURVIVORS_RANDOM,
                        .fraction = p};
  return in;
}

static void k_is_63_pools_times_numblocks_for_unaligned_arenas(void **state) {
  (void)state;
  formula_result_t r;
  formula_input_t  in = pym(64, 1e-5);
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_int_equal(r.objects, 4194304);
  assert_int_equal(r.block_bytes, 64);
  assert_int_equal(r.per_pool, 255);
  assert_int_equal(r.pools, 63);
  assert_int_equal(r.k, 16065);
  assert_int_equal(r.unit_bytes, 63 * 16384); /* the pools, resident */
  in.arena_aligned = true;
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_int_equal(r.k, 64 * 255);
  assert_int_equal(r.unit_bytes, 1048576); /* 64 pools: the whole arena */
  in = pym(500, 1e-4);                     /* class 512: 31 blocks per pool */
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_int_equal(r.block_bytes, 512);
  assert_int_equal(r.k, 63 * 31);
}

static void one_in_100000_of_64_byte_objects_keeps_38_7_mib(void **state) {
  (void)state;
  formula_result_t r;
  formula_input_t  in = pym(64, 1e-5);
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_close(r.units, 261.0833488951136, 1e-12);
  assert_close(r.q, 0.14841060856425198, 1e-9);
  assert_close(r.kept_bytes / MIB, 38.131023108760694, 1e-9);
  assert_close(r.sd_bytes / MIB, 5.653651359647372, 1e-9);
}

static void
one_in_10000_pins_most_64_byte_arenas_and_few_512_byte_ones(void **state) {
  (void)state;
  formula_result_t r;
  formula_input_t  in = pym(64, 1e-4);
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_close(r.kept_bytes / MIB, 205.4007376935572, 1e-9);
  assert_close(r.sd_bytes / MIB, 6.368100100544335, 1e-9);
  in = pym(512, 1e-4);
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_close(r.kept_bytes / MIB, 46.8433623947722, 1e-9);
  assert_close(r.sd_bytes / MIB, 6.157530807521766, 1e-9);
}

static void pages_use_mimalloc_bins_and_page_bytes_over_block(void **state) {
  (void)state;
  formula_result_t r;
  formula_input_t  in = pym(512, 1e-3);
  in.page_bytes = 65536;
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_int_equal(r.k, 128);
  assert_int_equal(r.units, 4096);
  assert_close(r.kept_bytes / MIB, 30.771959612391356, 1e-9);
  assert_close(r.sd_bytes / MIB, 1.300794919446339, 1e-9);
  assert_int_equal(formula_mimalloc_bin_size(1), 8);
  assert_int_equal(formula_mimalloc_bin_size(24), 32);
  assert_int_equal(formula_mimalloc_bin_size(64), 64);
  assert_int_equal(formula_mimalloc_bin_size(72), 80);
  assert_int_equal(formula_mimalloc_bin_size(512), 512);
  assert_int_equal(formula_mimalloc_bin_size(513), 640);
  assert_int_equal(formula_mimalloc_bin_size(1000), 1024);
  assert_int_equal(formula_mimalloc_bin_size(UINT64_C(600) << 10), 0);
}

/* --allocator mimalloc: the model's own page (2.x start offsets: one block
 * for 512-byte blocks, three for 64-byte ones, 384 bytes in 2.0.9; 3.4.3
 * keeps the page info apart and starts power-of-two blocks of 8-512 bytes
 * one block in, v3.4.3 src/arena.c:879-884); expected values from the same
 * Python expressions as above with those k. */
static void mimalloc_pages_come_from_the_model(void **state) {
  (void)state;
  formula_result_t r;
  formula_input_t  in = pym(512, 1e-3);
  in.mimalloc = "2.1.2";
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_int_equal(r.k, 127); /* (65536 - 512) / 512 */
  assert_int_equal(r.unit_bytes, 65536);
  assert_close(r.kept_bytes / MIB, 30.78564690109207, 1e-9);
  assert_close(r.sd_bytes / MIB, 1.3017276289876454, 1e-9);
  assert_close(r.all_bytes / MIB, 258.01574803149606, 1e-9);
  in = pym(64, 1e-4);
  in.mimalloc = "2.1.2";
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_int_equal(r.k, 1021); /* (65536 - 3 * 64) / 64 */
  assert_close(r.kept_bytes / MIB, 24.92153821932428, 1e-9);
  in.mimalloc = "2.0.9";
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_int_equal(r.k, 1018); /* (65536 - 384) / 64 */
  in = pym(512, 1e-3);
  in.mimalloc = "3.4.3";
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_int_equal(r.k, 127); /* (65536 - 512) / 512 */
  in = pym(100000, 1e-3);
  in.mimalloc = "2.1.2"; /* a medium page: 512 KiB of 112 KiB blocks */
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_int_equal(r.unit_bytes, 524288);
  assert_int_equal(r.k, 4);
  as_err_t err = {0};
  in.mimalloc = "2.2";
  assert_int_equal(formula_survivors(&in, &r, &err), AS_EINVAL);
  assert_non_null(strstr(err.msg, "formula: mimalloc: option version"));
}

static void
stride_pins_all_when_denser_than_k_else_one_per_survivor(void **state) {
  (void)state;
  formula_result_t r;
  formula_input_t  in = pym(64, 0);
  in.pattern = SURVIVORS_STRIDE;
  in.every = 1000;
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_close(r.kept_bytes / POOLS_MIB, 261.0833488951136, 1e-12);
  assert_true(r.sd_bytes == 0);
  in.every = 100000; /* ceil(4194304 / 100000) = 42 survivors */
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_close(r.kept_bytes / POOLS_MIB, 42, 1e-12);
}

/* 261 whole arenas of k = 16065 hold objects 0 .. 4192964; the last,
 * partly filled one (0.0833 of an arena) holds 4192965 .. 4194303. */
static void stride_never_pins_more_units_than_there_are(void **state) {
  (void)state;
  formula_result_t r;
  formula_input_t  in = pym(64, 0);
  in.pattern = SURVIVORS_STRIDE;
  in.every = 16066; /* 262 survivors, one in each arena, the last included */
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_close(r.pinned, 261.0833488951136, 1e-12);
  assert_close(r.q, 1, 1e-12);
  in.every = 20000; /* 210 survivors, the last (4180000) in a whole arena */
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_close(r.pinned, 210, 1e-12);
  in.every = 15000; /* every whole arena; no multiple of 15000 in the last */
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_close(r.pinned, 261, 1e-12);
  in.every = 1000; /* 4193000 is in the last arena */
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_close(r.pinned, 261.0833488951136, 1e-12);
}

static void oldest_pins_only_the_arenas_they_fill(void **state) {
  (void)state;
  formula_result_t r;
  formula_input_t  in = pym(64, 0.01);
  in.pattern = SURVIVORS_OLDEST;
  /* floor(0.01 * 4194304) = 41943 objects = ceil(41943 / 16065) = 3 */
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_close(r.kept_bytes / POOLS_MIB, 3, 1e-12);
}

/* Half an arena of 64-byte objects (8192 of k = 16065): it is pinned with
 * 1 - (1 - p)^8192 = 0.5592, not the whole arena's q = 0.7994 (which gave
 * 0.40 MiB kept, 0.28 is right). */
static void
a_partly_filled_arena_is_pinned_by_the_objects_it_holds(void **state) {
  (void)state;
  formula_result_t r;
  formula_input_t  in = pym(64, 1e-4);
  in.total_bytes = MIB / 2;
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_close(r.kept_bytes / MIB, 0.2807134943608505, 1e-9);
  assert_close(r.sd_bytes / MIB, 0.24921296089998973, 1e-9);
}

static void edge_fractions_keep_nothing_or_everything(void **state) {
  (void)state;
  formula_result_t r;
  formula_input_t  in = pym(64, 0);
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_true(r.kept_bytes == 0 && r.sd_bytes == 0);
  in.fraction = 1;
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_close(r.kept_bytes / POOLS_MIB, 261.0833488951136, 1e-12);
  assert_true(r.sd_bytes == 0);
  in.fraction = -0.0; /* a sweep's "fraction=-0": printed -0.00 MiB */
  assert_int_equal(formula_survivors(&in, &r, NULL), AS_OK);
  assert_false(signbit(r.q) || signbit(r.kept_bytes) || signbit(r.sd_bytes));
}

static void
inputs_outside_the_formula_are_errors_naming_the_field(void **state) {
  (void)state;
  formula_result_t r;
  as_err_t         err = {0};
  formula_input_t  in = pym(513, 1e-4);
  assert_int_equal(formula_survivors(&in, &r, &err), AS_EINVAL);
  assert_string_equal(err.msg, "formula: size 513 bytes is not a pymalloc "
                               "size (1..512); such objects go to the libc "
                               "allocator");
  in = pym(64, 1.5);
  assert_int_equal(formula_survivors(&in, &r, &err), AS_EINVAL);
  assert_non_null(strstr(err.msg, "fraction"));
  in = pym(4096, 1e-4);
  in.page_bytes = 2048;
  assert_int_equal(formula_survivors(&in, &r, &err), AS_EINVAL);
  assert_non_null(strstr(err.msg, "page of 2048 bytes"));
  in = pym(64, 1e-4);
  in.total_bytes = 10;
  assert_int_equal(formula_survivors(&in, &r, &err), AS_EINVAL);
  assert_non_null(strstr(err.msg, "holds no object"));
}

/* Points drawn from the formula at a known k with 1 % multiplicative noise:
 * the fit recovers k within its interval, and the interval is narrow. */
static void fit_recovers_a_known_k_within_its_interval(void **state) {
  (void)state;
  const double k_true = 16065, unit = 1048576, objects = 4194304;
  const double fraction[] = {1e-5, 3e-5, 1e-4, 3e-4, 1e-3};
  const double noise[] = {1.01, 0.99, 1.004, 0.996, 1.0};
  double       obj[5], measured[5];
  for (size_t i = 0; i < 5; i++) {
    obj[i] = objects;
    measured[i] =
        noise[i] * objects / k_true * (1 - pow(1 - fraction[i], k_true)) * unit;
  }
  double k, lo, hi;
  assert_true(fv_fit_k(fraction, obj, measured, 5, unit, 12000, &k, &lo, &hi));
  assert_true(lo < k_true && k_true < hi);
  assert_true(fabs(k - k_true) / k_true < 0.02);
  assert_true((hi - lo) / k_true < 0.10);
  /* Exact data: k to 1e-6, whatever the start. */
  for (size_t i = 0; i < 5; i++)
    measured[i] /= noise[i];
  assert_true(fv_fit_k(fraction, obj, measured, 5, unit, 40000, &k, &lo, &hi));
  assert_true(fabs(k - k_true) / k_true < 1e-6);
  /* One point is not a fit. */
  assert_false(fv_fit_k(fraction, obj, measured, 1, unit, 16000, &k, &lo, &hi));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(k_is_63_pools_times_numblocks_for_unaligned_arenas),
      cmocka_unit_test(one_in_100000_of_64_byte_objects_keeps_38_7_mib),
      cmocka_unit_test(
          one_in_10000_pins_most_64_byte_arenas_and_few_512_byte_ones),
      cmocka_unit_test(pages_use_mimalloc_bins_and_page_bytes_over_block),
      cmocka_unit_test(mimalloc_pages_come_from_the_model),
      cmocka_unit_test(
          stride_pins_all_when_denser_than_k_else_one_per_survivor),
      cmocka_unit_test(stride_never_pins_more_units_than_there_are),
      cmocka_unit_test(oldest_pins_only_the_arenas_they_fill),
      cmocka_unit_test(a_partly_filled_arena_is_pinned_by_the_objects_it_holds),
      cmocka_unit_test(edge_fractions_keep_nothing_or_everything),
      cmocka_unit_test(inputs_outside_the_formula_are_errors_naming_the_field),
      cmocka_unit_test(fit_recovers_a_known_k_within_its_interval),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
