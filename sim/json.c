/* sim/json.c -- JSON string contents and UTF-8 pieces, valid UTF-8
 * (contract in json.h). */
#include "json.h"

#include <stdio.h>
#include <string.h>

/* Length of the well-formed UTF-8 sequence at s, or 0 if the byte at s
 * does not start one (the Unicode Standard's table 3-7 of well-formed
 * byte sequences).  Reads no further than the first byte out of range, so
 * never past a terminating NUL. */
static size_t utf8_len(const unsigned char *s) {
  unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
  size_t        n;
  if (s[0] < 0x80)
    return 1;
  if (s[0] >= 0xc2 && s[0] <= 0xdf)
    n = 2;
  else if (s[0] >= 0xe0 && s[0] <= 0xef) {
    n = 3;
    lo = s[0] == 0xe0 ? 0xa0 : lo; /* not overlong */
    hi = s[0] == 0xed ? 0x9f : hi; /* not a surrogate */
  } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
    n = 4;
    lo = s[0] == 0xf0 ? 0x90 : lo; /* not overlong */
    hi = s[0] == 0xf4 ? 0x8f : hi; /* not above U+10FFFF */
  } else
    return 0;
  if (s[1] < lo || s[1] > hi)
    return 0;
  for (size_t i = 2; i < n; i++)
    if (s[i] < 0x80 || s[i] > 0xbf)
      return 0;
  return n;
}

size_t as_json_piece(const char *s, char piece[AS_JSON_PIECE_MAX]) {
  unsigned char b = (unsigned char)s[0];
  size_t        n = utf8_len((const unsigned char *)s);
  if (b == '"' || b == '\\') {
    snprintf(piece, AS_JSON_PIECE_MAX, "\\%c", b);
    return 1;
  }
  if (n == 0 || b < 0x20) {
    snprintf(piece, AS_JSON_PIECE_MAX, "\\u%04x", b);
    return 1;
  }
  memcpy(piece, s, n);
  piece[n] = '\0';
  return n;
}

size_t as_utf8_piece(const char *s, char piece[AS_UTF8_PIECE_MAX]) {
  unsigned char b = (unsigned char)s[0];
  size_t        n = utf8_len((const unsigned char *)s);
  if (n == 0) { /* U+0080..U+00FF in two bytes */
    piece[0] = (char)(0xc0 | b >> 6);
    piece[1] = (char)(0x80 | (b & 0x3f));
    piece[2] = '\0';
    return 1;
  }
  memcpy(piece, s, n);
  piece[n] = '\0';
  return n;
}

bool as_json_escape(const char *s, char *buf, size_t len) {
  size_t used = 0;
  if (len == 0)
    return false;
  buf[0] = '\0';
  while (*s != '\0') {
    char   piece[AS_JSON_PIECE_MAX];
    size_t n = as_json_piece(s, piece), pl = strlen(piece);
    if (used + pl >= len)
      return false;
    memcpy(buf + used, piece, pl + 1);
    used += pl;
    s += n;
  }
  return true;
}
