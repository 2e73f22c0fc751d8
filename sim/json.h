/* sim/json.h -- JSON string contents that are valid UTF-8 whatever bytes
 * they are made of.
 *
 * Labels, paths and provenance in a trace may hold any byte >= 0x80 (the
 * trace grammar allows them), but JSON text is UTF-8 (RFC 8259 section
 * 8.1): a strict reader refuses a Latin-1 "caf\xe9".  A well-formed UTF-8
 * sequence (RFC 3629: no overlong form, surrogate or code point above
 * U+10FFFF) passes through unchanged; each byte of an ill-formed one is
 * written as \u00XX, that byte read as Latin-1, so "caf\xe9" reads "café".
 * '"', '\' and control bytes are escaped as JSON requires.  Every JSON
 * string allocsim prints or stores is written piece by piece through this.
 */
#ifndef ALLOCSIM_JSON_H
#define ALLOCSIM_JSON_H

#include <stdbool.h>
#include <stddef.h>

/* The longest piece: "\u00XX" or a 4-byte sequence, and its NUL. */
#define AS_JSON_PIECE_MAX 7

/* Writes into piece the JSON text standing for the character at s (which
 * is not the terminating NUL) and returns how many bytes of s it stands
 * for: 1 to 4. */
size_t as_json_piece(const char *s, char piece[AS_JSON_PIECE_MAX]);

/* The longest UTF-8 piece: a 4-byte sequence and its NUL. */
#define AS_UTF8_PIECE_MAX 5

/* Writes into piece the character at s (not the terminating NUL) as valid
 * UTF-8 -- itself when well-formed, else its first byte read as Latin-1, as
 * as_json_piece reads it -- and returns how many bytes of s it stands for:
 * 1 to 4.  For outputs that carry raw UTF-8 (HTML, SVG). */
size_t as_utf8_piece(const char *s, char piece[AS_UTF8_PIECE_MAX]);

/* The JSON string contents of s into buf (len bytes, NUL-terminated);
 * false if they do not fit (buf then holds the whole pieces that do). */
bool as_json_escape(const char *s, char *buf, size_t len);

#endif
