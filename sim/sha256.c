/* sim/sha256.c -- SHA-256 (FIPS 180-4), so that a stored run names the exact
 * trace it was measured with, without a crypto library dependency for one
 * digest of a file per recorded run.
 */
#include "sha256.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

typedef struct sha256_s sha256_t;
struct sha256_s {
  uint32_t      h[8];    /* chaining state */
  uint64_t      total;   /* bytes hashed */
  unsigned char buf[64]; /* pending partial block */
  size_t        buf_len; /* bytes in buf */
};

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror32(uint32_t x, unsigned n) {
  return (x >> n) | (x << (32 - n));
}

static void sha256_block(sha256_t *c, const unsigned char *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
           (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = c->h[0], b = c->h[1], cc = c->h[2], d = c->h[3], e = c->h[4],
           f = c->h[5], g = c->h[6], h = c->h[7];
  for (int i = 0; i < 64; i++) {
    uint32_t s1 = ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25);
    uint32_t ch = (e & f) ^ (~e & g);
    uint32_t t1 = h + s1 + ch + sha_k[i] + w[i];
    uint32_t s0 = ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22);
    uint32_t maj = (a & b) ^ (a & cc) ^ (b & cc);
    uint32_t t2 = s0 + maj;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = cc;
    cc = b;
    b = a;
    a = t1 + t2;
  }
  c->h[0] += a, c->h[1] += b, c->h[2] += cc, c->h[3] += d;
  c->h[4] += e, c->h[5] += f, c->h[6] += g, c->h[7] += h;
}

static void sha256_init(sha256_t *c) {
  static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372,
                                 0xa54ff53a, 0x510e527f, 0x9b05688c,
                                 0x1f83d9ab, 0x5be0cd19};
  memcpy(c->h, iv, sizeof iv);
  c->total = 0;
  c->buf_len = 0;
}

static void sha256_update(sha256_t *c, const void *data, size_t len) {
  const unsigned char *p = data;
  c->total += len;
  while (len > 0) {
    if (c->buf_len == 0 && len >= 64) {
      sha256_block(c, p);
      p += 64;
      len -= 64;
      continue;
    }
    size_t take = 64 - c->buf_len < len ? 64 - c->buf_len : len;
    memcpy(c->buf + c->buf_len, p, take);
    c->buf_len += take;
    p += take;
    len -= take;
    if (c->buf_len == 64) {
      sha256_block(c, c->buf);
      c->buf_len = 0;
    }
  }
}

static void sha256_final(sha256_t *c, char out[65]) {
  uint64_t      bits = c->total * 8;
  unsigned char pad[72] = {0x80};
  size_t        padlen = (c->buf_len < 56 ? 56 : 120) - c->buf_len;
  sha256_update(c, pad, padlen);
  unsigned char len_be[8];
  for (int i = 0; i < 8; i++)
    len_be[i] = (unsigned char)(bits >> (56 - 8 * i));
  sha256_update(c, len_be, 8);
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 4; j++) {
      unsigned byte = (c->h[i] >> (24 - 8 * j)) & 0xff;
      out[8 * i + 2 * j] = hex[byte >> 4];
      out[8 * i + 2 * j + 1] = hex[byte & 15];
    }
  out[64] = '\0';
}

void as_sha256_hex(const void *data, size_t len, char out[65]) {
  sha256_t c;
  sha256_init(&c);
  sha256_update(&c, data, len);
  sha256_final(&c, out);
}

as_status_t as_sha256_file(const char *path, char out[65], as_err_t *err) {
  out[0] = '\0';
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return as_err_set(err, AS_EIO, "%s: cannot open: %s", path,
                      strerror(errno));
  sha256_t      c;
  unsigned char buf[65536];
  size_t        n;
  sha256_init(&c);
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    sha256_update(&c, buf, n);
  int bad = ferror(f);
  fclose(f);
  if (bad)
    return as_err_set(err, AS_EIO, "%s: read error", path);
  sha256_final(&c, out);
  return AS_OK;
}
