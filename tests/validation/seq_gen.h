/* tests/validation/seq_gen.h -- one seeded sequence of malloc-family calls,
 * for the differential tests that run it through a real allocator and
 * through its model (test_tcmalloc_differential.c, and
 * test_musl_differential.c's helper, musl_replay.c, built with musl-gcc).
 * Header only, with no allocation of its own, so the helper's heap holds
 * exactly the sequence.
 *
 * Call `step` depends only on the seed, the mix and the calls before it: a
 * dead id is allocated (malloc, 1 in 10 calloc, 1 in 10 aligned to a power
 * of two from 16 to 2^max_align_log2), a live
 * one reallocated (1 in 5) or freed; every purge_every calls a purge (the
 * allocator's release call, where it has one).
 */
#ifndef ALLOCSIM_SEQ_GEN_H
#define ALLOCSIM_SEQ_GEN_H

#include <stdint.h>
#include <string.h>

#define SEQ_MAX_IDS 3000

typedef enum seq_op_e {
  SEQ_MALLOC,
  SEQ_CALLOC,
  SEQ_MEMALIGN,
  SEQ_REALLOC,
  SEQ_FREE,
  SEQ_PURGE
} seq_op_t;

typedef enum seq_mix_e {
  SEQ_MIX_MIXED, /* 55% 1-256 B, 33% 257-4352, 10% 4-64 KiB, 2% 64-600 KiB */
  SEQ_MIX_LARGE  /* 256 KiB - 3 MiB: page runs, the page heap's scavenger */
} seq_mix_t;

typedef struct seq_gen_s {
  uint64_t  rng;
  seq_mix_t mix;
  uint32_t  nids;              /* ids used: 0 .. nids-1 */
  uint32_t  purge_every;       /* 0: never */
  uint32_t  max_align_log2;    /* aligned calls use 16 .. 2^max_align_log2 */
  uint64_t  size[SEQ_MAX_IDS]; /* live request size; 0 = not live */
} seq_gen_t;

typedef struct seq_call_s {
  seq_op_t op;
  uint32_t id;
  uint64_t size, align;
  uint64_t prev_size; /* realloc, free: the size being replaced */
} seq_call_t;

/* max_align_log2 (4 .. 16): where the placement of a mapping is random
 * (ASLR), an alignment above the page makes the outcome depend on it. */
static inline void seq_init(seq_gen_t *g, uint64_t seed, seq_mix_t mix,
                            uint32_t nids, uint32_t purge_every,
                            uint32_t max_align_log2) {
  memset(g, 0, sizeof *g);
  g->rng = seed;
  g->mix = mix;
  g->nids = nids <= SEQ_MAX_IDS ? nids : SEQ_MAX_IDS;
  g->purge_every = purge_every;
  g->max_align_log2 = max_align_log2 < 4    ? 4
                      : max_align_log2 > 16 ? 16
                                            : max_align_log2;
}

/* A 64-bit LCG (Knuth's MMIX constants); the high half, modulo bound. */
static inline uint64_t seq_below(seq_gen_t *g, uint64_t bound) {
  g->rng =
      g->rng * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
  return (g->rng >> 32) % bound;
}

static inline uint64_t seq_size(seq_gen_t *g) {
  if (g->mix == SEQ_MIX_LARGE)
    return (256 << 10) + seq_below(g, (3 << 20) - (256 << 10));
  uint64_t r = seq_below(g, 100);
  if (r < 55)
    return 1 + seq_below(g, 256);
  if (r < 88)
    return 257 + seq_below(g, 4096);
  if (r < 98)
    return 4353 + seq_below(g, 61184);
  return 65537 + seq_below(g, 548864);
}

/* Fills *c with call number step (0-based). */
static inline void seq_next(seq_gen_t *g, uint64_t step, seq_call_t *c) {
  memset(c, 0, sizeof *c);
  if (g->purge_every && step % g->purge_every == g->purge_every - 1) {
    c->op = SEQ_PURGE;
    return;
  }
  c->id = (uint32_t)seq_below(g, g->nids);
  c->prev_size = g->size[c->id];
  if (g->size[c->id] == 0) {
    uint64_t kind = seq_below(g, 10);
    c->op = kind == 0 ? SEQ_CALLOC : kind == 1 ? SEQ_MEMALIGN : SEQ_MALLOC;
    c->size = seq_size(g);
    if (c->op == SEQ_MEMALIGN)
      c->align = UINT64_C(16) << seq_below(g, g->max_align_log2 - 3);
    g->size[c->id] = c->size;
  } else if (seq_below(g, 5) == 0) {
    c->op = SEQ_REALLOC;
    c->size = seq_size(g);
    g->size[c->id] = c->size;
  } else {
    c->op = SEQ_FREE;
    g->size[c->id] = 0;
  }
}

#endif
