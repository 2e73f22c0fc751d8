/* tests/unit/test_libmalloc.c -- the macOS size-class ladder against the
 * allocator course notes' section 8, which measured it with malloc_size()
 * on macOS: the table's boundaries, 54 classes up to 256 KiB, and the mean
 * internal waste over requests of 1..1024 bytes, 42.5 B (8.3% of the mean
 * request).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../helpers/model_fixture.h"

/* Rows of the notes' table: request -> malloc_size. */
static void ladder_matches_the_measured_table(void **state) {
  (void)state;
  static const uint64_t rows[][2] = {
      {1, 16},        {17, 32},         {113, 128},   {129, 160},
      {225, 256},     {257, 320},       {449, 512},   {513, 640},
      {897, 1024},    {1025, 1280},     {1793, 2048}, {32769, 49152},
      {65537, 81920}, {245761, 262144},
  };
  fx_t f;
  fx_open(&f, "libmalloc");
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    if (fx_usable(&f, rows[i][0]) != rows[i][1])
      fail_msg("malloc_size(%llu) = %llu, the notes measured %llu",
               (unsigned long long)rows[i][0],
               (unsigned long long)fx_usable(&f, rows[i][0]),
               (unsigned long long)rows[i][1]);
  fx_close(&f);
}

static void counts_and_waste_match_the_notes(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, "libmalloc");
  uint64_t classes = 0, last = 0, waste = 0, asked = 0;
  for (uint64_t s = 1; s <= 256 * 1024; s++) {
    uint64_t u = fx_usable(&f, s);
    classes += u != last;
    last = u;
    if (s <= 1024) {
      waste += u - s;
      asked += s;
    }
  }
  assert_int_equal(classes, 54);
  assert_int_equal(waste * 10 / 1024, 425);   /* 42.5 B */
  assert_int_equal(waste * 1000 / asked, 82); /* 8.2..8.3% */
  fx_close(&f);
}

/* RSS is the class sizes packed: 1000 requests of 1025 bytes hold
 * 1000 * 1280 bytes, rounded up to pages; freeing gives them back. */
static void rss_is_the_rounded_sizes_packed(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, "libmalloc");
  for (uint64_t i = 0; i < 1000; i++)
    fx_malloc(&f, i, 1025);
  assert_int_equal(fx_rss(&f), (1000 * 1280 + 4095) / 4096 * 4096);
  model_stats_t st;
  model_stats(f.m, &st);
  assert_int_equal(st.live_bytes, 1000 * 1025);
  for (uint64_t i = 0; i < 1000; i++)
    fx_free(&f, i);
  assert_int_equal(fx_rss(&f), 0);
  fx_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ladder_matches_the_measured_table),
      cmocka_unit_test(counts_and_waste_match_the_notes),
      cmocka_unit_test(rss_is_the_rounded_sizes_packed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
