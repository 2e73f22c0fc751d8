/* tests/unit/test_pymalloc.c -- pymalloc's geometry, placement order, arena
 * release rule and page touches, with values worked out by hand from
 * CPython 3.11.2's Objects/obmalloc.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "models/model.h"
#include "models/pymalloc.h"
#include "sim/kernel.h"

#define PAGE 4096u
#define POOL 16384u
#define K64  16065u /* 63 pools * 255 blocks of 64 B */
/* A 1 MiB-aligned mmap_top: with the standalone metadata reservation (a
 * whole number of MiB) above it, the first arena is 16 KiB aligned. */
#define ALIGNED_TOP UINT64_C(0x7ffff8000000)

#define FX_IDS (1u << 20)

typedef struct fx_s fx_t;
struct fx_s {
  sim_kernel_t *k;
  model_t      *m;
  uint64_t     *sizes; /* by id: live size, for the events' prev_size */
};

static void fx_open(fx_t *f, uint64_t mmap_top) {
  sim_kernel_config_t cfg;
  as_err_t            err;
  sim_kernel_config_default(&cfg);
  if (mmap_top)
    cfg.mmap_top = mmap_top;
  assert_int_equal(sim_kernel_create(&cfg, &f->k, &err), AS_OK);
  f->sizes = calloc(FX_IDS, sizeof *f->sizes);
  assert_non_null(f->sizes);
  model_ctx_t ctx = {.kernel = f->k, .timers = NULL, .libc_spec = NULL};
  assert_int_equal(model_create_from_spec("pymalloc", &ctx, &f->m, &err),
                   AS_OK);
}

static void fx_close(fx_t *f) {
  as_err_t err;
  assert_int_equal(sim_kernel_check_invariants(f->k, &err), AS_OK);
  model_destroy(f->m);
  sim_kernel_destroy(f->k);
  free(f->sizes);
}

/* One event, with prev_size filled in as the engine does; sizes[] follows
 * only the events the model accepted. */
static as_status_t op(fx_t *f, trace_op_t o, uint64_t id, uint64_t size) {
  as_err_t err;
  assert_true(id < FX_IDS);
  trace_event_t ev = {.id = id,
                      .size = size,
                      .prev_size = f->sizes[id],
                      .op = (uint8_t)o,
                      .domain = TRACE_DOMAIN_OBJ};
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

static void alloc_range(fx_t *f, uint64_t from, uint64_t to, uint64_t size) {
  for (uint64_t id = from; id < to; id++)
    assert_int_equal(op(f, TRACE_MALLOC, id, size), AS_OK);
}

static void free_range(fx_t *f, uint64_t from, uint64_t to) {
  for (uint64_t id = from; id < to; id++)
    assert_int_equal(op(f, TRACE_FREE, id, 0), AS_OK);
}

static uint64_t addr_of(fx_t *f, uint64_t id) {
  uint64_t a = 0;
  assert_true(pymalloc_block_address(f->m, id, &a));
  return a;
}

static pymalloc_stats_t stats(fx_t *f) {
  pymalloc_stats_t s;
  pymalloc_get_stats(f->m, &s);
  return s;
}

static uint64_t rss_pymalloc(fx_t *f) {
  return sim_kernel_rss_owner_bytes(f->k, SIM_OWNER_PYMALLOC);
}

/* ---- Geometry ----------------------------------------------------------- */

static void blocks_per_pool_match_the_spec_table(void **state) {
  (void)state;
  /* NUMBLOCKS(i), 3.11.2 obmalloc.c:1064: class -> blocks per pool */
  static const uint32_t expected[32] = {1021, 510, 340, 255, 204, 170, 145, 127,
                                        113,  102, 92,  85,  78,  72,  68,  63,
                                        60,   56,  53,  51,  48,  46,  44,  42,
                                        40,   39,  37,  36,  35,  34,  32,  31};
  for (unsigned i = 0; i < 32; i++) {
    assert_int_equal(pymalloc_class_size(i), 16 * (i + 1));
    assert_int_equal(pymalloc_blocks_per_pool(16 * (i + 1)), expected[i]);
    /* Every size in the class shares its block count. */
    assert_int_equal(pymalloc_blocks_per_pool(16 * i + 1), expected[i]);
    assert_int_equal(pymalloc_size_class(16 * i + 1), i);
  }
  assert_int_equal(pymalloc_blocks_per_pool(0), 0);
  assert_int_equal(pymalloc_blocks_per_pool(513), 0);
}

static void geometry_gives_k_for_aligned_and_unaligned_arenas(void **state) {
  (void)state;
  pymalloc_geometry_t g;
  assert_true(pymalloc_geometry(64, false, &g));
  assert_int_equal(g.block_size, 64);
  assert_int_equal(g.blocks_per_pool, 255);
  assert_int_equal(g.pools_per_arena, 63);
  assert_int_equal(g.blocks_per_arena, K64);
  assert_int_equal(g.pool_tail_bytes, 16336 % 64);
  assert_true(pymalloc_geometry(512, true, &g));
  assert_int_equal(g.blocks_per_arena, 64 * 31);
  assert_int_equal(g.pool_tail_bytes, 16336 - 31 * 512);
  assert_false(pymalloc_geometry(513, true, &g));
  assert_int_equal(pymalloc_pools_per_arena(0x7fff00000000), 64);
  assert_int_equal(pymalloc_pools_per_arena(0x7fff00001000), 63);
}

static void unaligned_arena_yields_63_pools(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0); /* default layout: arenas 4 KiB past a pool boundary */
  alloc_range(&f, 0, 1, 64);
  pymalloc_stats_t s = stats(&f);
  assert_int_equal(s.arenas_current, 1);
  assert_int_equal(s.arenas_unaligned, 1);
  assert_int_equal(s.pools_used + s.pools_free + s.pools_uncarved, 63);
  /* The first pool starts at the next 16 KiB boundary. */
  assert_int_equal((addr_of(&f, 0) - 48) % POOL, 0);
  fx_close(&f);
}

static void aligned_arena_yields_64_pools(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, ALIGNED_TOP);
  alloc_range(&f, 0, 1, 64);
  pymalloc_stats_t s = stats(&f);
  assert_int_equal(s.arenas_unaligned, 0);
  assert_int_equal(s.pools_used + s.pools_free + s.pools_uncarved, 64);
  /* 64 * 255 objects fit before a second arena. */
  alloc_range(&f, 1, 64 * 255, 64);
  assert_int_equal(stats(&f).arenas_current, 1);
  alloc_range(&f, 64 * 255, 64 * 255 + 1, 64);
  assert_int_equal(stats(&f).arenas_current, 2);
  fx_close(&f);
}

static void one_arena_holds_exactly_16065_objects_of_64_bytes(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  alloc_range(&f, 0, K64, 64);
  pymalloc_stats_t s = stats(&f);
  assert_int_equal(s.arenas_current, 1);
  assert_int_equal(s.pools_full, 63);
  assert_int_equal(s.pools_uncarved, 0);
  assert_int_equal(s.blocks_in_use, K64);
  alloc_range(&f, K64, K64 + 1, 64);
  assert_int_equal(stats(&f).arenas_current, 2);
  assert_int_equal(stats(&f).arenas_allocated_total, 2);
  fx_close(&f);
}

/* ---- Page touches ------------------------------------------------------- */

static void rss_counts_header_blocks_and_the_next_link(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  /* 1 object: header [0,48), block 0 [48,112), block 1's link: 1 page. */
  alloc_range(&f, 0, 1, 64);
  assert_int_equal(rss_pymalloc(&f), 1 * PAGE);
  /* 63 objects end at 48 + 63*64 = 4080; block 63's link ends at 4088. */
  alloc_range(&f, 1, 63, 64);
  assert_int_equal(rss_pymalloc(&f), 1 * PAGE);
  /* The 64th object [4080,4144) crosses into the second page. */
  alloc_range(&f, 63, 64, 64);
  assert_int_equal(rss_pymalloc(&f), 2 * PAGE);
  /* 255 objects fill the pool: blocks end at 16368, no link beyond. */
  alloc_range(&f, 64, 255, 64);
  assert_int_equal(rss_pymalloc(&f), 4 * PAGE);
  /* The 256th carves pool 1: its header page. */
  alloc_range(&f, 255, 256, 64);
  assert_int_equal(rss_pymalloc(&f), 5 * PAGE);
  /* Standalone metadata: arenas[] (16 * 48 B), one mid-node entry page and
   * one bottom-node page holding tail_hi and the next entry's tail_lo. */
  assert_int_equal(sim_kernel_rss_owner_bytes(f.k, SIM_OWNER_METADATA),
                   3 * PAGE);
  assert_int_equal(stats(&f).raw_nodes, 2);
  assert_int_equal(stats(&f).raw_arena_objects, 16);
  fx_close(&f);
}

static void the_link_one_block_beyond_is_written(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  /* 253 blocks of 16 B end exactly at 48 + 253*16 = 4096; block 253's
   * NULL link, written by pymalloc_pool_extend, is on the second page. */
  alloc_range(&f, 0, 253, 16);
  assert_int_equal(rss_pymalloc(&f), 2 * PAGE);
  /* Freeing writes the freed block's first word: no new page here. */
  free_range(&f, 0, 1);
  assert_int_equal(rss_pymalloc(&f), 2 * PAGE);
  fx_close(&f);
}

static void calloc_and_malloc_touch_the_same_pages(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  for (uint64_t id = 0; id < 64; id++)
    assert_int_equal(op(&f, TRACE_CALLOC, id, 64), AS_OK);
  assert_int_equal(rss_pymalloc(&f), 2 * PAGE);
  fx_close(&f);
}

static void arenas_vector_doubles_from_16(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  /* 31 blocks of 512 B per pool, 63 pools per (unaligned) arena. */
  alloc_range(&f, 0, 16 * 63 * 31, 512);
  assert_int_equal(stats(&f).arenas_current, 16);
  assert_int_equal(stats(&f).raw_arena_objects, 16);
  alloc_range(&f, 16 * 63 * 31, 16 * 63 * 31 + 1, 512);
  assert_int_equal(stats(&f).arenas_current, 17);
  assert_int_equal(stats(&f).raw_arena_objects, 32);
  fx_close(&f);
}

/* ---- Reuse order -------------------------------------------------------- */

static void a_freed_block_is_the_next_one_handed_out(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  alloc_range(&f, 0, 3, 64);
  uint64_t a1 = addr_of(&f, 1);
  assert_int_equal(op(&f, TRACE_FREE, 1, 0), AS_OK);
  alloc_range(&f, 3, 4, 64);
  assert_int_equal(addr_of(&f, 3), a1);
  /* Otherwise blocks are carved upward. */
  alloc_range(&f, 4, 5, 64);
  assert_int_equal(addr_of(&f, 4), addr_of(&f, 2) + 64);
  fx_close(&f);
}

typedef struct placed_s {
  uint64_t addr, size;
} placed_t;

static int by_addr(const void *a, const void *b) {
  const placed_t *x = a, *y = b;
  return (x->addr > y->addr) - (x->addr < y->addr);
}

/* The live objects in ids [from, to) overlap no other. */
static void assert_disjoint(fx_t *f, uint64_t from, uint64_t to) {
  placed_t *p = calloc(to - from, sizeof *p);
  assert_non_null(p);
  for (uint64_t id = from; id < to; id++)
    p[id - from] = (placed_t){addr_of(f, id), f->sizes[id]};
  qsort(p, to - from, sizeof *p, by_addr);
  for (uint64_t i = 1; i < to - from; i++)
    assert_true(p[i].addr >= p[i - 1].addr + p[i - 1].size);
  free(p);
}

/* Pools change size class (their links arrays grow, and the arrays they
 * let go of serve fresh pools): the blocks handed out stay disjoint, and
 * freeing them all leaves what was kept. */
static void pools_changing_size_class_hand_out_distinct_blocks(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  uint32_t big = (uint32_t)(PYMALLOC_POOL_SIZE - PYMALLOC_POOL_OVERHEAD) / 512;
  uint32_t small = (uint32_t)(PYMALLOC_POOL_SIZE - PYMALLOC_POOL_OVERHEAD) / 16;
  alloc_range(&f, 0, 4 * big, 512); /* four full pools of 512 B blocks */
  alloc_range(&f, 4 * big, 4 * big + 1, 512); /* a fifth keeps the arena */
  free_range(&f, 0, 4 * big);                 /* four empty pools */
  uint64_t from = 4 * big, to = from + 1 + 2 * small;
  alloc_range(&f, from + 1, to, 16); /* two of them become 16 B pools */
  assert_disjoint(&f, from, to);
  /* Fresh pools of 512 B blocks take the arrays the others let go of. */
  alloc_range(&f, to, to + 8 * big, 512);
  assert_disjoint(&f, from, to + 8 * big);
  free_range(&f, from + 1, to + 8 * big);
  assert_int_equal(stats(&f).blocks_in_use, 1);
  assert_int_equal(stats(&f).pools_used, 1);
  fx_close(&f);
}

static void the_arena_with_fewer_free_pools_serves_first(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  alloc_range(&f, 0, 2 * K64, 64); /* two full arenas */
  /* Empty three pools in arena 1, then one in arena 2. */
  free_range(&f, 0, 3 * 255);
  uint64_t pool_a2 = addr_of(&f, K64) - 48;
  free_range(&f, K64, K64 + 255);
  /* A new size class takes a pool from arena 2 (1 free pool < 3). */
  alloc_range(&f, 2 * K64, 2 * K64 + 1, 128);
  assert_int_equal(addr_of(&f, 2 * K64), pool_a2 + 48);
  fx_close(&f);
}

static void an_arena_gaining_free_pools_slides_behind_its_peers(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  alloc_range(&f, 0, 2 * K64, 64);
  uint64_t pool0_a1 = addr_of(&f, 0) - 48;
  uint64_t pool1_a2 = addr_of(&f, K64 + 255) - 48;
  free_range(&f, 0, 255);               /* a1: 1 free pool, list [a1] */
  free_range(&f, K64, K64 + 255);       /* a2: 1, pushed first [a2 a1] */
  free_range(&f, K64 + 255, K64 + 510); /* a2: 2, slides right [a1 a2] */
  alloc_range(&f, 2 * K64, 2 * K64 + 1, 128);
  assert_int_equal(addr_of(&f, 2 * K64), pool0_a1 + 48);
  /* a1 is full again; a2's freepools are LIFO: its pool 1 comes first. */
  alloc_range(&f, 2 * K64 + 1, 2 * K64 + 2, 256);
  assert_int_equal(addr_of(&f, 2 * K64 + 1), pool1_a2 + 48);
  fx_close(&f);
}

static void
an_emptied_pool_keeps_its_free_list_for_the_same_class(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  alloc_range(&f, 0, 3, 64);
  uint64_t a0 = addr_of(&f, 0), a2 = addr_of(&f, 2);
  free_range(&f, 0, 3); /* pool empty: free list 2, 1, 0, 3(virgin) */
  alloc_range(&f, 3, 4, 64);
  assert_int_equal(addr_of(&f, 3), a2); /* head of the old free list */
  assert_true(a0 < a2);
  fx_close(&f);
}

/* obmalloc's free list, as the test keeps it: freed blocks last freed
 * first, then the blocks never carved, in order. */
typedef struct lifo_s lifo_t;
struct lifo_s {
  uint32_t stack[256], n, carved;
};

/* A 64-bit LCG (Knuth's MMIX constants): the test's own, so that it
 * draws the same orders everywhere. */
static uint64_t coin(uint64_t *state) {
  *state =
      *state * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
  return *state >> 33;
}

static uint32_t lifo_take(lifo_t *l) {
  return l->n > 0 ? l->stack[--l->n] : l->carved++;
}

/* One pool of 64 B blocks (at most 250 live, so one pool serves them all)
 * under allocations and frees in the orders that keep the model's list a
 * run (freed last first, down to an empty pool and back) and in orders
 * that break it: every block handed out is the one obmalloc's LIFO list
 * gives.  The fills stop at 200 live, so that the mixed phase carves
 * blocks past the end of the run the fills went through. */
static void the_free_list_is_lifo_whatever_the_free_order(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  lifo_t          ref = {.n = 0, .carved = 1};
  static uint64_t block_of[65536];
  uint64_t        live[256], nlive = 0, next_id = 1;
  alloc_range(&f, 0, 1, 64);
  uint64_t base = addr_of(&f, 0);
  live[nlive++] = 0;
  uint64_t rng = 12345;
  for (int step = 0; step < 40000; step++) {
    /* fill, free last first to an empty pool, fill again through the run
     * that left, mixed, free first first to an empty pool */
    int  phase = (step / 2000) % 5;
    bool alloc = phase == 0 || phase == 2 ? nlive < 200
                 : phase == 3 ? nlive < 10 || (coin(&rng) % 2 && nlive < 250)
                              : nlive == 0;
    if (alloc) {
      uint64_t id = next_id++;
      assert_int_equal(op(&f, TRACE_MALLOC, id, 64), AS_OK);
      uint32_t want = lifo_take(&ref);
      assert_int_equal((addr_of(&f, id) - base) / 64, want);
      block_of[id] = want;
      live[nlive++] = id;
      continue;
    }
    /* Phase 4 frees the lowest block first, phase 3 any, the others the
     * highest (the list stays a run). */
    uint64_t pick = 0;
    for (uint64_t i = 1; i < nlive; i++)
      if (phase == 4 ? block_of[live[i]] < block_of[live[pick]]
                     : block_of[live[i]] > block_of[live[pick]])
        pick = i;
    if (phase == 3)
      pick = coin(&rng) % nlive;
    uint64_t id = live[pick];
    live[pick] = live[--nlive];
    assert_int_equal(op(&f, TRACE_FREE, id, 0), AS_OK);
    ref.stack[ref.n++] = (uint32_t)block_of[id];
  }
  assert_true(ref.carved <= 255); /* one pool served everything */
  fx_close(&f);
}

/* A pool whose list left the run form (a free out of order) and then
 * emptied: last freed first, its list is a run again and the blocks come
 * back 0, 1, 2, ...; with two frees swapped, they come back swapped. */
static void an_emptied_pool_hands_out_its_list_in_either_form(void **state) {
  (void)state;
  static const uint32_t swapped[] = {9, 8, 7, 6, 4, 5, 3, 2, 1, 0};
  for (int swap = 0; swap < 2; swap++) {
    fx_t f;
    fx_open(&f, 0);
    alloc_range(&f, 0, 10, 64);
    uint64_t base = addr_of(&f, 0);
    assert_int_equal(op(&f, TRACE_FREE, 3, 0), AS_OK); /* list 3, 10 */
    alloc_range(&f, 3, 4, 64);
    assert_int_equal(addr_of(&f, 3), base + 3 * 64);
    for (int i = 0; i < 10; i++) {
      uint32_t id = swap ? swapped[i] : 9 - (uint32_t)i;
      assert_int_equal(op(&f, TRACE_FREE, id, 0), AS_OK);
    }
    alloc_range(&f, 10, 22, 64);
    for (uint32_t i = 0; i < 12; i++) {
      uint32_t want = swap && (i == 4 || i == 5) ? 9 - i : i;
      assert_int_equal(addr_of(&f, 10 + i), base + want * 64);
    }
    fx_close(&f);
  }
}

/* ---- Arena release ------------------------------------------------------ */

static void freeing_everything_keeps_only_the_last_arena(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  alloc_range(&f, 0, 2 * K64 + 1, 64); /* arenas 1, 2 full; 3 has 1 */
  free_range(&f, 0, 2 * K64 + 1);
  pymalloc_stats_t s = stats(&f);
  assert_int_equal(s.arenas_current, 1);
  assert_int_equal(s.arenas_reclaimed, 2);
  assert_int_equal(s.arenas_empty, 1);
  /* The kept arena is the third, which only ever wrote one page. */
  assert_int_equal(rss_pymalloc(&f), 1 * PAGE);
  fx_close(&f);
}

static void the_kept_empty_arena_keeps_its_rss(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  alloc_range(&f, 0, 2 * K64, 64);
  free_range(&f, 0, 2 * K64);
  /* Arena 1 emptied while alone on usable_arenas (bpo-37257 keeps it);
   * arena 2 emptied ahead of it and was released. */
  assert_int_equal(stats(&f).arenas_current, 1);
  assert_int_equal(rss_pymalloc(&f), 63 * POOL);
  fx_close(&f);
}

static void one_survivor_pins_its_arena(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  alloc_range(&f, 0, 2 * K64, 64);
  free_range(&f, 0, 100);
  free_range(&f, 101, 2 * K64); /* id 100 survives in arena 1 */
  pymalloc_stats_t s = stats(&f);
  assert_int_equal(s.arenas_current, 1);
  assert_int_equal(s.arenas_pinned, 1);
  assert_int_equal(s.pools_used, 1);
  assert_int_equal(s.pools_free, 62);
  assert_int_equal(rss_pymalloc(&f), 63 * POOL);
  /* The survivor in arena 2 instead: arena 1 is kept empty (last on the
   * list when it emptied) and arena 2 is pinned: both stay. */
  fx_t g;
  fx_open(&g, 0);
  alloc_range(&g, 0, 2 * K64, 64);
  free_range(&g, 0, K64 + 100);
  free_range(&g, K64 + 101, 2 * K64);
  s = stats(&g);
  assert_int_equal(s.arenas_current, 2);
  assert_int_equal(s.arenas_pinned, 1);
  assert_int_equal(s.arenas_empty, 1);
  fx_close(&g);
  fx_close(&f);
}

/* ---- realloc ------------------------------------------------------------ */

static void realloc_shrinks_in_place_only_above_three_quarters(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  alloc_range(&f, 0, 1, 64);
  uint64_t a = addr_of(&f, 0);
  assert_int_equal(op(&f, TRACE_REALLOC, 0, 49), AS_OK); /* 196 > 192 */
  assert_int_equal(addr_of(&f, 0), a);
  assert_int_equal(op(&f, TRACE_REALLOC, 0, 64), AS_OK); /* same size */
  assert_int_equal(addr_of(&f, 0), a);
  assert_int_equal(op(&f, TRACE_REALLOC, 0, 48), AS_OK); /* 192 = 192 */
  assert_int_not_equal(addr_of(&f, 0), a);
  assert_int_equal(pymalloc_block_size_of(f.m, 0), 48);
  uint64_t b = addr_of(&f, 0);
  assert_int_equal(op(&f, TRACE_REALLOC, 0, 100), AS_OK); /* grows */
  assert_int_not_equal(addr_of(&f, 0), b);
  assert_int_equal(pymalloc_block_size_of(f.m, 0), 112);
  model_stats_t ms;
  model_stats(f.m, &ms);
  assert_int_equal(ms.live_bytes, 100);
  assert_int_equal(ms.live_objects, 1);
  assert_int_equal(stats(&f).blocks_in_use, 1);
  /* Growth past 512 is the composition's job, not pymalloc's. */
  assert_int_equal(op(&f, TRACE_REALLOC, 0, 513), AS_EINVAL);
  fx_close(&f);
}

static void requests_outside_1_to_512_are_refused(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  assert_int_equal(op(&f, TRACE_MALLOC, 0, 0), AS_EINVAL);
  assert_int_equal(op(&f, TRACE_MALLOC, 0, 513), AS_EINVAL);
  assert_int_equal(op(&f, TRACE_MALLOC, 0, 512), AS_OK);
  assert_int_equal(op(&f, TRACE_MALLOC, 0, 16), AS_EINVAL); /* live id */
  assert_int_equal(op(&f, TRACE_FREE, 1, 0), AS_EINVAL);    /* dead id */
  fx_close(&f);
}

/* ---- Object table ------------------------------------------------------- */

/* Every block's location survives the table's packing: arena indexes past
 * one byte, all 63 pools, the last block of a pool. */
static void block_locations_hold_past_256_arenas(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  enum { PER_ARENA = 63 * 31, N = 300 * PER_ARENA }; /* 512 B blocks */
  alloc_range(&f, 0, N, 512);
  assert_int_equal(stats(&f).arenas_current, 300);
  for (uint64_t id = 0; id < N; id++) {
    uint64_t a = addr_of(&f, id), j = id % PER_ARENA;
    /* pool j / 31 of the arena, block j % 31 of the pool */
    uint64_t first_pool = a - 48 - (j % 31) * 512 - (j / 31) * POOL;
    assert_int_equal(first_pool % POOL, 0);
    if (j != 0)
      assert_int_equal(a,
                       addr_of(&f, id - j) + (j / 31) * POOL + (j % 31) * 512);
    assert_int_equal(pymalloc_block_size_of(f.m, id), 512);
  }
  /* Free every other object, then the rest, newest arenas first. */
  for (uint64_t id = N; id-- > 0;)
    if (id % 2)
      assert_int_equal(op(&f, TRACE_FREE, id, 0), AS_OK);
  assert_int_equal(stats(&f).blocks_in_use, N / 2);
  for (uint64_t id = N; id-- > 0;)
    if (id % 2 == 0)
      assert_int_equal(op(&f, TRACE_FREE, id, 0), AS_OK);
  assert_int_equal(stats(&f).arenas_current, 1);
  assert_int_equal(stats(&f).blocks_in_use, 0);
  fx_close(&f);
}

/* Locations start 4 bytes wide and are rewritten 5 bytes wide when
 * arenas[] outgrows 16-bit indices (65,536 slots; lowered here to 64):
 * the same calls on a model that rewrote its table and on one that did
 * not place every object alike, and the objects freed before and after the
 * rewrite read as not live. */
static void
block_locations_hold_across_the_rewrite_to_five_bytes(void **state) {
  (void)state;
  fx_t kept, rewritten;
  fx_open(&kept, 0);
  fx_open(&rewritten, 0);
  pymalloc_narrow_arenas_for_tests(rewritten.m, 64);
  enum { PER_ARENA = 63 * 31, N = 100 * PER_ARENA }; /* 512 B blocks */
  fx_t *both[] = {&kept, &rewritten};
  for (int k = 0; k < 2; k++) {
    alloc_range(both[k], 0, N / 2, 512); /* 50 arenas: 4-byte slots */
    for (uint64_t id = 0; id < N / 2; id += 3)
      assert_int_equal(op(both[k], TRACE_FREE, id, 0), AS_OK);
    alloc_range(both[k], N / 2, N, 512); /* past 64 arenas: rewritten */
    for (uint64_t id = N / 2 + 1; id < N; id += 3)
      assert_int_equal(op(both[k], TRACE_FREE, id, 0), AS_OK);
  }
  assert_true(stats(&rewritten).arenas_current > 64);
  for (uint64_t id = 0; id < N; id++) {
    uint64_t a = 0, b = 0;
    bool     live = id < N / 2 ? id % 3 != 0 : (id - N / 2) % 3 != 1;
    assert_int_equal(pymalloc_block_address(kept.m, id, &a), live);
    assert_int_equal(pymalloc_block_address(rewritten.m, id, &b), live);
    assert_int_equal(a, b);
  }
  assert_int_equal(stats(&rewritten).blocks_in_use, stats(&kept).blocks_in_use);
  fx_close(&kept);
  fx_close(&rewritten);
}

/* Ids are dead until allocated, wherever they fall in the table. */
static void ids_never_allocated_are_dead(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  uint64_t a;
  assert_int_equal(pymalloc_block_size_of(f.m, 5), 0);
  assert_false(pymalloc_block_address(f.m, 5, &a));
  assert_int_equal(op(&f, TRACE_MALLOC, 70000, 64), AS_OK);
  for (uint64_t id = 0; id < 80000; id++)
    assert_int_equal(pymalloc_block_size_of(f.m, id), id == 70000 ? 64 : 0);
  assert_int_equal(op(&f, TRACE_FREE, 69999, 0), AS_EINVAL);
  assert_int_equal(op(&f, TRACE_FREE, 900000, 0), AS_EINVAL);
  assert_int_equal(op(&f, TRACE_REALLOC, 900000, 8), AS_EINVAL);
  assert_int_equal(op(&f, TRACE_MALLOC, 69999, 64), AS_OK);
  assert_int_equal(addr_of(&f, 69999), addr_of(&f, 70000) + 64);
  fx_close(&f);
}

/* pymalloc_free_if_held frees what pymalloc holds and leaves the rest. */
static void free_if_held_says_whether_it_freed(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  assert_int_equal(op(&f, TRACE_MALLOC, 3, 100), AS_OK);
  trace_event_t ev = {.id = 3, .op = TRACE_FREE, .prev_size = 100};
  bool          held = false;
  as_err_t      err;
  assert_int_equal(pymalloc_free_if_held(f.m, &ev, &held, &err), AS_OK);
  assert_true(held);
  model_stats_t ms;
  model_stats(f.m, &ms);
  assert_int_equal(ms.live_bytes, 0);
  assert_int_equal(ms.live_objects, 0);
  assert_int_equal(pymalloc_free_if_held(f.m, &ev, &held, &err), AS_OK);
  assert_false(held);
  ev.id = 1u << 30; /* beyond the table */
  assert_int_equal(pymalloc_free_if_held(f.m, &ev, &held, &err), AS_OK);
  assert_false(held);
  fx_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(blocks_per_pool_match_the_spec_table),
      cmocka_unit_test(geometry_gives_k_for_aligned_and_unaligned_arenas),
      cmocka_unit_test(unaligned_arena_yields_63_pools),
      cmocka_unit_test(aligned_arena_yields_64_pools),
      cmocka_unit_test(one_arena_holds_exactly_16065_objects_of_64_bytes),
      cmocka_unit_test(rss_counts_header_blocks_and_the_next_link),
      cmocka_unit_test(the_link_one_block_beyond_is_written),
      cmocka_unit_test(calloc_and_malloc_touch_the_same_pages),
      cmocka_unit_test(arenas_vector_doubles_from_16),
      cmocka_unit_test(a_freed_block_is_the_next_one_handed_out),
      cmocka_unit_test(pools_changing_size_class_hand_out_distinct_blocks),
      cmocka_unit_test(the_arena_with_fewer_free_pools_serves_first),
      cmocka_unit_test(an_arena_gaining_free_pools_slides_behind_its_peers),
      cmocka_unit_test(an_emptied_pool_keeps_its_free_list_for_the_same_class),
      cmocka_unit_test(the_free_list_is_lifo_whatever_the_free_order),
      cmocka_unit_test(an_emptied_pool_hands_out_its_list_in_either_form),
      cmocka_unit_test(freeing_everything_keeps_only_the_last_arena),
      cmocka_unit_test(the_kept_empty_arena_keeps_its_rss),
      cmocka_unit_test(one_survivor_pins_its_arena),
      cmocka_unit_test(realloc_shrinks_in_place_only_above_three_quarters),
      cmocka_unit_test(requests_outside_1_to_512_are_refused),
      cmocka_unit_test(block_locations_hold_past_256_arenas),
      cmocka_unit_test(block_locations_hold_across_the_rewrite_to_five_bytes),
      cmocka_unit_test(ids_never_allocated_are_dead),
      cmocka_unit_test(free_if_held_says_whether_it_freed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
