/* tests/unit/test_json.c -- sim/json: JSON string contents are valid UTF-8
 * whatever the bytes: well-formed UTF-8 passes through, each byte of an
 * ill-formed sequence becomes \u00XX, and quotes, backslashes and control
 * bytes are escaped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sim/json.h"

/* The JSON contents for s into out. */
static const char *contents(const char *s, char *out, size_t len) {
  assert_true(as_json_escape(s, out, len));
  return out;
}

static void well_formed_utf8_passes_through(void **state) {
  (void)state;
  char out[64];
  assert_string_equal(contents("plain ~\x7f", out, sizeof out), "plain ~\x7f");
  assert_string_equal(contents("caf\xc3\xa9", out, sizeof out), "caf\xc3\xa9");
  assert_string_equal(contents("\xe2\x82\xac", out, sizeof out),
                      "\xe2\x82\xac");
  /* U+10FFFF, the last code point, and U+FFFF. */
  assert_string_equal(contents("\xf4\x8f\xbf\xbf\xef\xbf\xbf", out, sizeof out),
                      "\xf4\x8f\xbf\xbf\xef\xbf\xbf");
}

static void each_byte_of_an_ill_formed_sequence_is_escaped(void **state) {
  (void)state;
  char out[128];
  /* Latin-1, a cut 3-byte sequence at the end, a lone continuation. */
  assert_string_equal(contents("caf\xe9", out, sizeof out), "caf\\u00e9");
  assert_string_equal(contents("x\xe2\x82", out, sizeof out),
                      "x\\u00e2\\u0082");
  assert_string_equal(contents("\x80y", out, sizeof out), "\\u0080y");
  /* Overlong forms, a surrogate, above U+10FFFF, bytes never in UTF-8. */
  assert_string_equal(contents("\xc0\xaf", out, sizeof out), "\\u00c0\\u00af");
  assert_string_equal(contents("\xe0\x80\xaf", out, sizeof out),
                      "\\u00e0\\u0080\\u00af");
  assert_string_equal(contents("\xed\xa0\x80", out, sizeof out),
                      "\\u00ed\\u00a0\\u0080");
  assert_string_equal(contents("\xf4\x90\x80\x80", out, sizeof out),
                      "\\u00f4\\u0090\\u0080\\u0080");
  assert_string_equal(contents("\xff\xfe", out, sizeof out), "\\u00ff\\u00fe");
  /* A lead byte followed by ASCII: the ASCII stays. */
  assert_string_equal(contents("\xc3"
                               "a",
                               out, sizeof out),
                      "\\u00c3a");
}

static void quotes_backslashes_and_control_bytes_are_escaped(void **state) {
  (void)state;
  char out[64];
  assert_string_equal(contents("a\"b\\c", out, sizeof out), "a\\\"b\\\\c");
  assert_string_equal(contents("\t\n\x1f", out, sizeof out),
                      "\\u0009\\u000a\\u001f");
}

/* What does not fit is refused, with only whole pieces written. */
static void escaping_into_a_short_buffer_is_refused(void **state) {
  (void)state;
  char out[8];
  assert_false(as_json_escape("ab\xe9"
                              "cd",
                              out, sizeof out));
  assert_string_equal(out, "ab");
  assert_true(as_json_escape("abcdefg", out, sizeof out));
  assert_false(as_json_escape("abcdefgh", out, sizeof out));
}

/* The UTF-8 of s, piece by piece, into out. */
static const char *utf8(const char *s, char *out) {
  out[0] = '\0';
  while (*s != '\0') {
    char piece[AS_UTF8_PIECE_MAX];
    s += as_utf8_piece(s, piece);
    strcat(out, piece);
  }
  return out;
}

/* Raw UTF-8 for HTML and SVG: what JSON escapes as \u00XX is that
 * character's UTF-8; well-formed sequences and control bytes are as they
 * were (the caller's to escape). */
static void utf8_pieces_read_ill_formed_bytes_as_latin1(void **state) {
  (void)state;
  char out[64];
  assert_string_equal(utf8("caf\xc3\xa9\t", out), "caf\xc3\xa9\t");
  assert_string_equal(utf8("caf\xe9", out), "caf\xc3\xa9");
  assert_string_equal(utf8("x\xe2\x82", out), "x\xc3\xa2\xc2\x82");
  assert_string_equal(utf8("\xff\xc3"
                           "a",
                           out),
                      "\xc3\xbf\xc3\x83"
                      "a");
  assert_string_equal(utf8("\xf4\x8f\xbf\xbf", out), "\xf4\x8f\xbf\xbf");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(well_formed_utf8_passes_through),
      cmocka_unit_test(each_byte_of_an_ill_formed_sequence_is_escaped),
      cmocka_unit_test(quotes_backslashes_and_control_bytes_are_escaped),
      cmocka_unit_test(escaping_into_a_short_buffer_is_refused),
      cmocka_unit_test(utf8_pieces_read_ill_formed_bytes_as_latin1),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
