/* tests/unit/test_musl.c -- the musl model's rules with exact values, each
 * derived from musl 1.2.3's mallocng or measured on Debian 12
 * (docs/models/musl.md); the state-for-state comparison with the real
 * allocator is tests/validation/test_musl_differential.c.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../helpers/model_fixture.h"
#include "models/musl.h"

/* The class of sc in the inspection, or NULL. */
static const musl_class_state_t *class_of(const musl_class_state_t *c, size_t n,
                                          int sc) {
  for (size_t i = 0; i < n; i++)
    if (c[i].sizeclass == sc)
      return &c[i];
  return NULL;
}

/* size_to_class (meta.h:229-238): slots of 16 * size_classes[sc] bytes
 * less 4 header bytes; 131052 and up is a mapping of its own. */
static void usable_sizes_follow_the_classes(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, "musl");
  assert_int_equal(fx_usable(&f, 1), 12);
  assert_int_equal(fx_usable(&f, 12), 12);
  assert_int_equal(fx_usable(&f, 13), 28);
  assert_int_equal(fx_usable(&f, 1000), 1004); /* class 19: 63 units */
  assert_int_equal(fx_usable(&f, 5000), 5436); /* class 29: 340 units */
  assert_int_equal(fx_usable(&f, 131051), 131052);
  assert_int_equal(fx_usable(&f, 131052), 131052); /* 32 pages mapped */
  fx_close(&f);
}

/* A first malloc(16): class 1's 15-slot group nests in a class-15 slot,
 * that group in a class-19 slot, that one in a class-23 slot, whose
 * 2-slot group is the only mapping, one page (alloc_group, malloc.c:
 * 174-284), besides the PROT_NONE guard page the first meta area puts
 * below the program break (malloc.c:61-73).  Freeing the object frees all
 * four and unmaps the page. */
static void small_groups_nest_in_larger_slots(void **state) {
  (void)state;
  fx_t               f;
  musl_class_state_t c[48];
  sim_kernel_calls_t k0, k1;
  fx_open(&f, "musl");
  sim_kernel_calls(f.k, &k0);
  fx_malloc(&f, 0, 16);
  size_t n = musl_inspect(f.m, c, 48);
  assert_int_equal(n, 4);
  const int      sc[4] = {1, 15, 19, 23};
  const uint32_t slots[4] = {15, 2, 2, 2};
  for (int i = 0; i < 4; i++) {
    const musl_class_state_t *k = class_of(c, n, sc[i]);
    assert_non_null(k);
    assert_int_equal(k->ngroups, 1);
    assert_int_equal(k->group[0].slots, slots[i]);
    assert_int_equal(k->group[0].maplen, sc[i] == 23 ? 1 : 0);
  }
  sim_kernel_calls(f.k, &k1);
  assert_int_equal(k1.mmap - k0.mmap, 2); /* the guard and the group */
  fx_free(&f, 0);
  assert_int_equal(musl_inspect(f.m, c, 48), 0);
  sim_kernel_calls(f.k, &k0);
  assert_int_equal(k0.munmap - k1.munmap, 1);
  fx_close(&f);
}

/* The first request of an even class with no groups yet takes the odd
 * class above it (malloc.c:344-354): malloc(70) is class 4 but gets a
 * class-5 slot. */
static void empty_even_classes_borrow_the_coarse_class(void **state) {
  (void)state;
  fx_t               f;
  musl_class_state_t c[48];
  fx_open(&f, "musl");
  fx_malloc(&f, 0, 70);
  size_t n = musl_inspect(f.m, c, 48);
  assert_null(class_of(c, n, 4));
  assert_non_null(class_of(c, n, 5));
  fx_close(&f);
}

/* Measured (scripts/measure/run_tcmusl.sh, strace of alloc_phases bounce
 * 1000 x malloc(5000)/free under musl-gcc): 118 mmaps of 16 KiB and 117
 * munmaps (and one MAP_FIXED guard page below the first meta area).  The
 * class's 3-slot group is unmapped and mapped again until the bounce counter
 * reaches 100 (meta.h:264-286), then kept while it decays by one per activation
 * and unmapped once each time it drops below 100. */
static void bouncing_class_keeps_its_last_group(void **state) {
  (void)state;
  fx_t               f;
  sim_kernel_calls_t k0, k1;
  fx_open(&f, "musl");
  sim_kernel_calls(f.k, &k0);
  for (int i = 0; i < 1000; i++) {
    fx_malloc(&f, 0, 5000);
    fx_free(&f, 0);
  }
  sim_kernel_calls(f.k, &k1);
  assert_int_equal(k1.mmap - k0.mmap, 118 + 1);
  assert_int_equal(k1.munmap - k0.munmap, 117);
  assert_int_equal(fx_counter(&f, "musl.bouncing_classes"), 1);
  fx_close(&f);
}

/* calloc of memory fresh from mmap writes nothing but the headers
 * (calloc.c:41: is_allzero); a reused slot is cleared where it was
 * written. */
static void calloc_skips_fresh_pages(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, "musl");
  uint64_t r0 = fx_rss(&f);
  fx_event(&f, TRACE_CALLOC, 0, 0, 200000, 0, 0);
  /* the chunk's header page, the page of its end marker, and the first
   * meta area */
  assert_int_equal(fx_rss(&f) - r0, 3 * 4096);
  fx_close(&f);
}

/* calloc's mal0_clear reads every page of a slot it does not know zero
 * (calloc.c:7-25): on a kernel whose read faults get pages of their own
 * (zero_page off, as on the machine of the measurement) each page read
 * is resident.  Measured (allocsim oracle --allocator musl --json, 1000 x
 * calloc(70000) kept, musl 1.2.3): 71,172,096 bytes over the replayer's
 * baseline; before the model read those pages it predicted 8,916,992. */
static void
calloc_reads_make_pages_resident_without_the_zero_page(void **state) {
  (void)state;
  uint64_t grew[2];
  for (int zero_page = 0; zero_page <= 1; zero_page++) {
    sim_kernel_config_t cfg;
    sim_kernel_config_default(&cfg);
    cfg.zero_page = zero_page;
    fx_t f;
    fx_open_cfg(&f, "musl", &cfg);
    uint64_t r0 = fx_rss(&f);
    for (uint64_t id = 0; id < 1000; id++)
      fx_event(&f, TRACE_CALLOC, 0, id, 70000, 0, 0);
    grew[zero_page] = fx_rss(&f) - r0;
    fx_close(&f);
  }
  /* within 1 % of the measurement */
  assert_in_range(grew[0], 71172096 * 0.99, 71172096 * 1.01);
  assert_true(grew[1] < grew[0] / 4);
}

/* free releases the whole pages inside a slot with MADV_FREE (free.c:
 * 117-127): they stay in RSS, counted as lazyfree. */
static void freed_slot_pages_are_lazyfree(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, "musl");
  fx_malloc(&f, 0, 10000); /* class 33: 10912-byte slots, several a group */
  fx_malloc(&f, 1, 10000);
  uint64_t r = fx_rss(&f);
  fx_free(&f, 1);
  assert_int_equal(fx_rss(&f), r);
  assert_true(sim_kernel_lazyfree_bytes(f.k) >= 4096);
  fx_close(&f);
}

/* n slots of 20,000 bytes written, then every other one freed: the
 * lazyfree bytes the model leaves, for a version spec. */
static uint64_t lazyfree_after_freeing_half(const char *spec, uint64_t n) {
  fx_t f;
  fx_open(&f, spec);
  for (uint64_t i = 0; i < n; i++)
    fx_malloc(&f, i, 20000);
  for (uint64_t i = 0; i < n; i += 2)
    fx_free(&f, i);
  uint64_t lazy = sim_kernel_lazyfree_bytes(f.k);
  fx_close(&f);
  return lazy;
}

/* Measured on 2026-12-03 with the same calls in static programs, LazyFree
 * from smaps_rollup after the frees and a MADV_COLD elsewhere (which drains
 * the CPU's LRU batch, where the last MADV_FREE'd pages wait to be
 * counted: 16-20 kB less before it): Debian 12's musl 1.2.3 132 kB for 64
 * slots and 672 kB for 128; musl 1.2.5 built from its tag 0 kB, as 1.2.4
 * turned MADV_FREE off (e6e82132, mallocng/glue.h:27 USE_MADV_FREE 0).
 * RSS was the same with both. */
static void madv_free_on_free_follows_the_version(void **state) {
  (void)state;
  assert_int_equal(lazyfree_after_freeing_half("musl", 64), 132 * 1024);
  assert_int_equal(lazyfree_after_freeing_half("musl:version=1.2.3", 128),
                   672 * 1024);
  assert_int_equal(lazyfree_after_freeing_half("musl:version=1.2.4", 64), 0);
  assert_int_equal(lazyfree_after_freeing_half("musl:version=1.2.5", 128), 0);
}

/* enframe (meta.h:204-212): an object starts one unit further into its
 * slot than the last one there (free writes 0 into the slot's field only
 * for an object at the slot's start, free.c:112-115, so the offset counts
 * on), wrapping to the start past the slack.  189 bytes in a 240-byte slot
 * leave 2 units of slack: three places, 16 bytes apart, in turn. */
static void a_reused_slot_moves_its_object_along(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, "musl");
  for (uint64_t id = 0; id < 40; id++) /* fill groups: reuse comes back */
    fx_malloc(&f, id, 189);
  sim_addr_t at[10], lo = UINT64_MAX;
  for (int k = 0; k < 10; k++) {
    fx_free(&f, 5);
    fx_malloc(&f, 5, 189);
    at[k] = fx_addr(&f, 5);
    lo = at[k] < lo ? at[k] : lo;
  }
  for (int k = 1; k < 10; k++)
    assert_int_equal(at[k], at[k - 1] == lo + 32 ? lo : at[k - 1] + 16);
  for (int k = 3; k < 10; k++)
    assert_int_equal(at[k], at[k - 3]);
  fx_close(&f);
}

/* realloc.c:21-23: in place while the slot has room and the class drops by
 * at most one; else malloc, copy, free. */
static void realloc_stays_in_its_slot(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, "musl");
  fx_malloc(&f, 0, 1000); /* class 19 */
  sim_addr_t a = fx_addr(&f, 0);
  fx_event(&f, TRACE_REALLOC, 0, 0, 990, 0, 0);
  assert_int_equal(fx_addr(&f, 0), a);
  fx_event(&f, TRACE_REALLOC, 0, 0, 100, 0, 0); /* class 6: too far down */
  assert_int_not_equal(fx_addr(&f, 0), a);
  fx_close(&f);
}

/* The object table's rewrite from 4-byte to whole entries (alloc_meta,
 * once group numbers outgrow 4 bytes: lowered here to 40) keeps every
 * object where a model that never rewrote it places it, and frees them the
 * same. */
static void objects_stay_put_across_the_rewrite_to_whole_entries(void **state) {
  (void)state;
  fx_t kept, rewritten;
  fx_open(&kept, "musl");
  fx_open(&rewritten, "musl");
  musl_narrow_metas_for_tests(rewritten.m, 40);
  enum { N = 600 };
  fx_t *both[] = {&kept, &rewritten};
  for (int k = 0; k < 2; k++) {
    for (uint64_t id = 0; id < N; id++) /* small, larger, a chunk in 50 */
      fx_malloc(both[k], id,
                id % 50 == 7  ? 140000
                : id % 5 == 4 ? 20000 + 4096 * (id % 7)
                              : 16 + 48 * (id % 9));
    for (uint64_t id = 0; id < N; id += 3)
      fx_free(both[k], id);
    for (uint64_t id = 1; id < N; id += 3) /* moved to another class */
      fx_event(both[k], TRACE_REALLOC, 0, id, 300 + 16 * (id % 11), 0, 0);
  }
  assert_int_equal(musl_object_entry_bytes(kept.m), 4);
  assert_int_equal(musl_object_entry_bytes(rewritten.m), 8);
  fx_check_same_places(&kept, &rewritten, N);
  fx_close(&kept);
  fx_close(&rewritten);
}

/* enframe's offsets stay below 256 units (meta.h:204), which 4-byte
 * entries hold; aligned_alloc moves an object up to the alignment further
 * (aligned_alloc.c:33-39): 1 MiB here, which has the table rewritten to
 * whole entries with the objects before it where they were. */
static void an_aligned_object_far_into_its_slot_widens_the_table(void **state) {
  (void)state;
  enum { N = 300, MiB = 1 << 20 };
  fx_t       f;
  sim_addr_t at[N];
  fx_open(&f, "musl");
  for (uint64_t id = 0; id < N; id++) {
    fx_malloc(&f, id, 16 + 48 * (id % 9));
    at[id] = fx_addr(&f, id);
  }
  assert_int_equal(musl_object_entry_bytes(f.m), 4);
  fx_event(&f, TRACE_MEMALIGN, 0, N, 16, MiB, 0);
  assert_int_equal(musl_object_entry_bytes(f.m), 8);
  assert_int_equal(fx_addr(&f, N) % MiB, 0);
  for (uint64_t id = 0; id < N; id++)
    assert_int_equal(fx_addr(&f, id), at[id]);
  fx_close(&f);
}

/* The dynamic linker's gaps become single-slot groups that serve the
 * first requests (donate.c): with the Debian libc.so gap and a program
 * gap of 3504 bytes, a first malloc(100) needs no mapping. */
static void donated_gaps_serve_first_requests(void **state) {
  (void)state;
  fx_t               f;
  sim_kernel_calls_t k0, k1;
  fx_open(&f, "musl:gap_program_tail=3504,gap_libc_tail=160");
  sim_kernel_calls(f.k, &k0);
  fx_malloc(&f, 0, 100);
  sim_kernel_calls(f.k, &k1);
  assert_int_equal(k1.mmap - k0.mmap, 0);
  fx_close(&f);
  fx_open(&f, "musl");
  sim_kernel_calls(f.k, &k0);
  fx_malloc(&f, 0, 100);
  sim_kernel_calls(f.k, &k1);
  assert_int_equal(k1.mmap - k0.mmap, 2); /* the meta guard and a group */
  fx_close(&f);
}

/* pthread_create maps a thread's stack itself (musl 1.2.3 src/thread/
 * pthread_create.c:284-309): an 8 KiB guard + the 128 KiB stack and the
 * TLS rounded to a page; the TLS, struct pthread and the thread's first
 * frames share the top page, the one page resident; pthread_join unmaps it
 * all (pthread_join.c:24).  The oracle (lab-arenas, 64 threads, the
 * musl-gcc replayer): the model missed 0.25 MiB at 'running' (one page a
 * thread) without the mapping, 0.00 with it; 0.00 after the joins. */
static void threads_map_their_stacks(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, "musl");
  uint64_t r0 = fx_rss(&f), v0 = sim_kernel_mapped_bytes(f.k);
  fx_event(&f, TRACE_THREAD_START, 1, 0, 0, 0, 0);
  fx_event(&f, TRACE_THREAD_START, 2, 0, 0, 0, 0);
  assert_int_equal(fx_rss(&f) - r0, 2 * 4096);
  assert_int_equal(sim_kernel_mapped_bytes(f.k) - v0,
                   2 * (8192 + 131072 + 4096));
  fx_event(&f, TRACE_THREAD_EXIT, 1, 0, 0, 0, 0);
  assert_int_equal(fx_rss(&f) - r0, 4096);
  fx_event(&f, TRACE_THREAD_EXIT, 2, 0, 0, 0, 0);
  assert_int_equal(fx_rss(&f), r0);
  assert_int_equal(sim_kernel_mapped_bytes(f.k), v0);
  fx_close(&f);
  fx_open(&f, "musl:thread_stack_pages=2");
  fx_event(&f, TRACE_THREAD_START, 1, 0, 0, 0, 0);
  assert_int_equal(fx_rss(&f) - r0, 2 * 4096);
  /* 33 pages above the guard: 34 frame pages do not fit */
  model_ctx_t ctx = {.kernel = f.k};
  model_t    *m = NULL;
  as_err_t    err = {0};
  assert_int_equal(
      model_create_from_spec("musl:thread_stack_pages=34", &ctx, &m, &err),
      AS_EUSAGE);
  assert_non_null(strstr(err.msg, "thread_stack_pages=34"));
  fx_close(&f);
}

static void other_page_sizes_are_refused(void **state) {
  (void)state;
  sim_kernel_config_t cfg;
  sim_kernel_t       *k = NULL;
  model_t            *m = NULL;
  as_err_t            err = {0};
  sim_kernel_config_default(&cfg);
  cfg.page_size = 16384;
  assert_int_equal(sim_kernel_create(&cfg, &k, &err), AS_OK);
  model_ctx_t ctx = {.kernel = k};
  assert_int_equal(model_create_from_spec("musl", &ctx, &m, &err), AS_EUSAGE);
  assert_non_null(strstr(err.msg, "4096"));
  assert_int_equal(
      model_create_from_spec("musl:gap_libc_tail=5000", &ctx, &m, &err),
      AS_EUSAGE);
  sim_kernel_destroy(k);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(usable_sizes_follow_the_classes),
      cmocka_unit_test(small_groups_nest_in_larger_slots),
      cmocka_unit_test(empty_even_classes_borrow_the_coarse_class),
      cmocka_unit_test(bouncing_class_keeps_its_last_group),
      cmocka_unit_test(calloc_skips_fresh_pages),
      cmocka_unit_test(calloc_reads_make_pages_resident_without_the_zero_page),
      cmocka_unit_test(freed_slot_pages_are_lazyfree),
      cmocka_unit_test(madv_free_on_free_follows_the_version),
      cmocka_unit_test(a_reused_slot_moves_its_object_along),
      cmocka_unit_test(realloc_stays_in_its_slot),
      cmocka_unit_test(objects_stay_put_across_the_rewrite_to_whole_entries),
      cmocka_unit_test(an_aligned_object_far_into_its_slot_widens_the_table),
      cmocka_unit_test(donated_gaps_serve_first_requests),
      cmocka_unit_test(other_page_sizes_are_refused),
      cmocka_unit_test(threads_map_their_stacks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
