/* tests/unit/test_options.c -- option tables: defaults, parsing, errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "models/model.h"
#include "models/options.h"
#include "sim/units.h"

#define TEST_OPTIONS(X)                                                        \
  X(T_ARENA_MAX, "arena_max", OPT_U64, "0", "", NULL, NULL, "test", "arenas")  \
  X(T_MMAP_THRESHOLD, "mmap_threshold", OPT_BYTES, "128K", "bytes", NULL,      \
    NULL, "test", "threshold")                                                 \
  X(T_DECAY, "dirty_decay_ms", OPT_I64, "10000", "ms", NULL, NULL, "test",     \
    "decay")                                                                   \
  X(T_BG, "background_thread", OPT_BOOL, "false", "", NULL, NULL, "test",      \
    "bg")                                                                      \
  X(T_VERSION, "version", OPT_ENUM, "3.14", "", "3.11|3.14", NULL, "test",     \
    "version")

enum { TEST_OPTIONS(MODEL_OPTION_KEY) T_COUNT };
static const model_option_t table[] = {TEST_OPTIONS(MODEL_OPTION_ROW){0}};

static void defaults_come_from_the_table(void **state) {
  (void)state;
  model_opts_t o;
  assert_int_equal(model_opts_parse("m", table, NULL, &o, NULL), AS_OK);
  assert_int_equal(model_opt_u64(&o, T_ARENA_MAX), 0);
  assert_int_equal(model_opt_u64(&o, T_MMAP_THRESHOLD), 131072);
  assert_int_equal(model_opt_i64(&o, T_DECAY), 10000);
  assert_false(model_opt_bool(&o, T_BG));
  assert_int_equal(model_opt_i64(&o, T_VERSION), 1);
  assert_false(model_opt_was_set(&o, T_ARENA_MAX));
}

static void assignments_override_defaults(void **state) {
  (void)state;
  model_opts_t o;
  assert_int_equal(model_opts_parse("m", table,
                                    "arena_max=2,mmap_threshold=1MiB,"
                                    "dirty_decay_ms=-1,background_thread=true,"
                                    "version=3.11",
                                    &o, NULL),
                   AS_OK);
  assert_int_equal(model_opt_u64(&o, T_ARENA_MAX), 2);
  assert_int_equal(model_opt_u64(&o, T_MMAP_THRESHOLD), 1048576);
  assert_int_equal(model_opt_i64(&o, T_DECAY), -1);
  assert_true(model_opt_bool(&o, T_BG));
  assert_int_equal(model_opt_i64(&o, T_VERSION), 0);
  assert_string_equal(model_opt_text(&o, T_VERSION), "3.11");
  assert_true(model_opt_was_set(&o, T_ARENA_MAX));
}

static void unknown_option_lists_the_known_ones(void **state) {
  (void)state;
  model_opts_t o;
  as_err_t     err = {0};
  assert_int_equal(model_opts_parse("glibc", table, "arena_mx=2", &o, &err),
                   AS_EUSAGE);
  assert_string_equal(err.msg, "glibc: unknown option 'arena_mx' (known: "
                               "arena_max, mmap_threshold, dirty_decay_ms, "
                               "background_thread, version)");
}

static void a_repeated_option_is_an_error(void **state) {
  (void)state;
  model_opts_t o;
  as_err_t     err = {0};
  assert_int_equal(
      model_opts_parse("m", table, "arena_max=1,arena_max=2", &o, &err),
      AS_EUSAGE);
  assert_string_equal(err.msg, "m: option arena_max is given twice");
}

static void malformed_values_name_what_was_expected(void **state) {
  (void)state;
  model_opts_t o;
  as_err_t     err = {0};
  assert_int_equal(model_opts_parse("m", table, "arena_max=2K", &o, &err),
                   AS_EUSAGE);
  assert_string_equal(err.msg, "m: option arena_max expects an unsigned "
                               "integer, got '2K'");
  assert_int_equal(model_opts_parse("m", table, "version=3.12", &o, &err),
                   AS_EUSAGE);
  assert_string_equal(err.msg,
                      "m: option version expects 3.11|3.14, got '3.12'");
  assert_int_equal(model_opts_parse("m", table, "arena_max", &o, &err),
                   AS_EUSAGE);
  assert_string_equal(err.msg,
                      "m: expected key=value (or key:value), got 'arena_max'");
  assert_int_equal(model_opts_parse("m", table,
                                    "mmap_threshold=99999999999999999999", &o,
                                    &err),
                   AS_EUSAGE);
}

/* MALLOC_CONF spells a setting key:value (jemalloc 5.3.0 src/jemalloc.c
 * malloc_conf_next); the same string is accepted after --model. */
static void malloc_conf_spelling_is_accepted(void **state) {
  (void)state;
  model_opts_t o;
  assert_int_equal(
      model_opts_parse("m", table, "arena_max:2,dirty_decay_ms=0", &o, NULL),
      AS_OK);
  assert_int_equal(model_opt_u64(&o, 0), 2);
}

static void format_lists_every_effective_value(void **state) {
  (void)state;
  model_opts_t o;
  char         buf[256];
  assert_int_equal(model_opts_parse("m", table, "arena_max=2", &o, NULL),
                   AS_OK);
  model_opts_format(&o, buf, sizeof buf);
  assert_string_equal(buf, "arena_max=2,mmap_threshold=128K,dirty_decay_ms="
                           "10000,background_thread=false,version=3.14");
}

/* Real numbers as typed: decimal only.  strtod alone took " 1e-4" (a
 * leading space), "0x1p-3", "inf" and "nan". */
static void reals_are_plain_decimals(void **state) {
  (void)state;
  double v = 0;
  assert_true(as_parse_real("1e-4", &v));
  assert_true(v == 1e-4);
  assert_true(as_parse_real("-2.5E+3", &v));
  assert_true(v == -2500);
  assert_true(as_parse_real(".5", &v) && v == 0.5);
  assert_true(as_parse_real("7.", &v) && v == 7);
  assert_true(as_parse_real("-0", &v) && v == 0 && !signbit(v));
  assert_true(as_parse_real("-0.0e5", &v) && !signbit(v));
  static const char *const bad[] = {"",    " 1e-4", "1e-4 ", "0x1p-3", "inf",
                                    "nan", "+1",    "1e",    ".",      "1e400",
                                    "e5",  "--1",   "1.2.3"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_false(as_parse_real(bad[i], &v));
}

static void byte_suffixes_are_powers_of_1024(void **state) {
  (void)state;
  uint64_t v;
  assert_true(as_parse_bytes("4KiB", &v));
  assert_int_equal(v, 4096);
  assert_true(as_parse_bytes("2G", &v));
  assert_int_equal(v, UINT64_C(2147483648));
  assert_false(as_parse_bytes("4kb", &v));
  assert_false(as_parse_bytes("", &v));
  assert_true(as_parse_bytes("1.5K", &v));
  assert_int_equal(v, 1536);
  assert_false(as_parse_bytes("1.0001K", &v)); /* not whole bytes */
  assert_true(as_parse_duration_ns("2.5s", &v));
  assert_int_equal(v, 2500000000u);
  assert_true(as_parse_duration_ns("100", &v));
  assert_int_equal(v, 100);
  assert_true(as_parse_page_size("16K", &v));
  assert_int_equal(v, 16384);
  assert_false(as_parse_page_size("8K", &v));
}

/* OPT_DECIMAL (gperftools' TCMALLOC_RELEASE_RATE): millionths exactly;
 * no sign, no exponent, at most six places. */
static void decimals_parse_exactly(void **state) {
  (void)state;
  static const model_option_t dec[] = {
      {"rate", OPT_DECIMAL, "1.0", "", NULL, NULL, "test", "rate"}, {0}};
  model_opts_t o;
  as_err_t     err = {0};
  assert_int_equal(model_opts_parse("m", dec, NULL, &o, &err), AS_OK);
  assert_true(model_opt_decimal(&o, 0) == 1.0);
  assert_int_equal(model_opts_parse("m", dec, "rate=0.25", &o, &err), AS_OK);
  assert_true(model_opt_decimal(&o, 0) == 0.25);
  assert_int_equal(model_opts_parse("m", dec, "rate=10", &o, &err), AS_OK);
  assert_true(model_opt_decimal(&o, 0) == 10.0);
  assert_int_equal(model_opts_parse("m", dec, "rate=.5", &o, &err), AS_OK);
  assert_true(model_opt_decimal(&o, 0) == 0.5);
  static const char *const bad[] = {
      "rate=-1", "rate=1e3", "rate=", "rate=1.0000001", "rate=x", "rate=."};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(model_opts_parse("m", dec, bad[i], &o, &err), AS_EUSAGE);
    assert_non_null(strstr(err.msg, "decimal"));
  }
}

static void every_registered_model_parses_its_own_defaults(void **state) {
  (void)state;
  size_t                        n;
  const model_methods_t *const *all = model_registry(&n);
  assert_true(n >= 1);
  for (size_t i = 0; i < n; i++) {
    model_opts_t o;
    as_err_t     err = {0};
    assert_int_equal(
        model_opts_parse(all[i]->name, all[i]->options, NULL, &o, &err), AS_OK);
    for (const model_option_t *row = all[i]->options; row->name; row++)
      assert_non_null(row->source);
  }
}

static void unknown_model_lists_the_known_ones(void **state) {
  (void)state;
  model_t *m;
  as_err_t err = {0};
  assert_int_equal(model_create_from_spec("hoard", NULL, &m, &err), AS_EUSAGE);
  assert_non_null(strstr(err.msg, "unknown model 'hoard' (known: ideal"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(defaults_come_from_the_table),
      cmocka_unit_test(assignments_override_defaults),
      cmocka_unit_test(unknown_option_lists_the_known_ones),
      cmocka_unit_test(a_repeated_option_is_an_error),
      cmocka_unit_test(malformed_values_name_what_was_expected),
      cmocka_unit_test(malloc_conf_spelling_is_accepted),
      cmocka_unit_test(format_lists_every_effective_value),
      cmocka_unit_test(byte_suffixes_are_powers_of_1024),
      cmocka_unit_test(decimals_parse_exactly),
      cmocka_unit_test(reals_are_plain_decimals),
      cmocka_unit_test(every_registered_model_parses_its_own_defaults),
      cmocka_unit_test(unknown_model_lists_the_known_ones),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
