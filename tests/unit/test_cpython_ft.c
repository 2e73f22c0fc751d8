/* tests/unit/test_cpython_ft.c -- the free-threaded composition
 * (models/cpython_ft.c): routing to the four heaps, QSBR parking of emptied
 * object pages, the collect that frees them and what triggers it, the
 * version rules (3.13.0-3.13.5 advance, gh-145615 before 3.14.4), thread
 * exit and bad options.  libc is `ideal`; mimalloc purges at once
 * (purge_delay=0) where a test reads RSS, so RSS shows what was handed
 * back to mimalloc's segments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "models/cpython.h"
#include "models/mimalloc.h"
#include "models/model.h"
#include "sim/kernel.h"

#define FX_IDS (1u << 16)
#define PAGE64 1021 /* 64 B blocks in a 64 KiB page (segment.c:323) */

typedef struct fx_s fx_t;
struct fx_s {
  sim_kernel_t *k;
  model_t      *m;
  uint64_t     *sizes; /* by id: live size, for prev_size */
  uint64_t      t_ns;  /* 1 us per event */
};

static void fx_open(fx_t *f, const char *spec) {
  sim_kernel_config_t cfg;
  as_err_t            err;
  sim_kernel_config_default(&cfg);
  assert_int_equal(sim_kernel_create(&cfg, &f->k, &err), AS_OK);
  f->sizes = calloc(FX_IDS, sizeof *f->sizes);
  assert_non_null(f->sizes);
  f->t_ns = 0;
  model_ctx_t ctx = {.kernel = f->k, .timers = NULL, .libc_spec = "ideal"};
  assert_int_equal(model_create_from_spec(spec, &ctx, &f->m, &err), AS_OK);
}

static void fx_close(fx_t *f) {
  model_destroy(f->m);
  sim_kernel_destroy(f->k);
  free(f->sizes);
}

static as_status_t ev_on(fx_t *f, uint32_t thread, trace_op_t o,
                         trace_domain_t d, uint64_t id, uint64_t size) {
  as_err_t err;
  assert_true(id < FX_IDS);
  f->t_ns += 1000;
  trace_event_t ev = {.t_ns = f->t_ns,
                      .id = id,
                      .size = size,
                      .align = o == TRACE_MEMALIGN ? 64 : 0,
                      .prev_size = f->sizes[id],
                      .thread = thread,
                      .op = (uint8_t)o,
                      .domain = (uint8_t)d};
  as_status_t   rc;
  switch (o) {
  case TRACE_FREE:
    rc = model_free(f->m, &ev, &err);
    break;
  case TRACE_REALLOC:
    rc = model_realloc(f->m, &ev, &err);
    break;
  case TRACE_THREAD_START:
  case TRACE_THREAD_EXIT:
    rc = model_thread(f->m, &ev, &err);
    break;
  default:
    rc = model_alloc(f->m, &ev, &err);
    break;
  }
  if (rc == AS_OK && o != TRACE_THREAD_START && o != TRACE_THREAD_EXIT)
    f->sizes[id] = o == TRACE_FREE ? 0 : size;
  return rc;
}

static void ok(fx_t *f, trace_op_t o, trace_domain_t d, uint64_t id,
               uint64_t size) {
  assert_int_equal(ev_on(f, 0, o, d, id, size), AS_OK);
}

static void option(fx_t *f, const char *name, int64_t value) {
  as_err_t err;
  assert_int_equal(model_set_option(f->m, name, value, f->t_ns, &err), AS_OK);
}

static uint64_t counter(fx_t *f, const char *name) {
  uint64_t v = UINT64_MAX;
  assert_true(model_counter_get(f->m, name, &v));
  return v;
}

static uint8_t tag_of(fx_t *f, uint64_t id) {
  mi_model_t   *mi = cpython_ft_mimalloc(f->m);
  mi_page_ref_t p = mimalloc_object_page(mi, id);
  assert_int_not_equal(p, 0);
  return mimalloc_page_tag(mi, p);
}

/* n objects of size in domain d, ids first.. */
static void build(fx_t *f, trace_domain_t d, uint64_t first, uint64_t n,
                  uint64_t size) {
  for (uint64_t i = 0; i < n; i++)
    ok(f, TRACE_MALLOC, d, first + i, size);
}

/* Frees them backwards, as list_dealloc does. */
static void drop(fx_t *f, trace_domain_t d, uint64_t first, uint64_t n) {
  for (uint64_t i = n; i > 0; i--)
    ok(f, TRACE_FREE, d, first + i - 1, 0);
}

static uint64_t rss(fx_t *f) {
  return sim_kernel_rss_bytes(f->k);
}

/* ---- Routing ------------------------------------------------------------ */

static void domains_go_to_libc_and_the_four_heaps(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, "cpython:build=ft");
  ok(&f, TRACE_MALLOC, TRACE_DOMAIN_RAW, 1, 100);
  ok(&f, TRACE_MALLOC, TRACE_DOMAIN_MEM, 2, 100);
  ok(&f, TRACE_MALLOC, TRACE_DOMAIN_OBJ, 3, 100);
  option(&f, "object_heap", 2);
  ok(&f, TRACE_MALLOC, TRACE_DOMAIN_OBJ, 4, 100);
  option(&f, "object_heap", 3);
  ok(&f, TRACE_MALLOC, TRACE_DOMAIN_OBJ, 5, 100);
  ok(&f, TRACE_MEMALIGN, TRACE_DOMAIN_OBJ, 6, 100);
  mi_model_t *mi = cpython_ft_mimalloc(f.m);
  assert_int_equal(mimalloc_object_page(mi, 1), 0); /* libc */
  assert_int_equal(mimalloc_object_page(mi, 6), 0); /* memalign: libc */
  assert_int_equal(tag_of(&f, 2), 0);               /* MEM */
  assert_int_equal(tag_of(&f, 3), 1);               /* OBJECT */
  assert_int_equal(tag_of(&f, 4), 2);               /* GC */
  assert_int_equal(tag_of(&f, 5), 3);               /* GC_PRE */
  /* Pages of the heaps share the thread's segment. */
  assert_int_equal(counter(&f, "mimalloc.segments"), 1);
  for (uint64_t id = 1; id <= 6; id++)
    ok(&f, TRACE_FREE, id == 1 || id == 6 ? TRACE_DOMAIN_RAW : TRACE_DOMAIN_OBJ,
       id, 0);
  model_stats_t s;
  model_stats(f.m, &s);
  assert_int_equal(s.live_bytes, 0);
  fx_close(&f);
  fx_open(&f, "cpython");
  assert_null(cpython_ft_mimalloc(f.m)); /* the default build has none */
  fx_close(&f);
}

/* ---- Parking and the collect -------------------------------------------- */

static void emptied_object_pages_are_parked_mem_pages_freed(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, "cpython:build=ft,purge_delay=0");
  build(&f, TRACE_DOMAIN_OBJ, 1, 3 * PAGE64, 64);
  build(&f, TRACE_DOMAIN_MEM, 10000, 3 * PAGE64, 64);
  uint64_t full = rss(&f);
  drop(&f, TRACE_DOMAIN_OBJ, 1, 3 * PAGE64);
  /* The page freed first is the only one of its queue: retired, not
   * parked (page.c:477-488); the other two are parked. */
  assert_int_equal(counter(&f, "cpython.parked_pages"), 2);
  assert_int_equal(rss(&f), full);
  drop(&f, TRACE_DOMAIN_MEM, 10000, 3 * PAGE64);
  /* MEM pages have no QSBR: freed to the segment and purged at once. */
  assert_int_equal(counter(&f, "cpython.parked_pages"), 2);
  assert_int_equal(full - rss(&f), 2 * 65536);
  fx_close(&f);
}

static void a_fresh_object_page_hands_parked_pages_back(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, "cpython:build=ft,purge_delay=0");
  build(&f, TRACE_DOMAIN_OBJ, 1, 3 * PAGE64, 64);
  drop(&f, TRACE_DOMAIN_OBJ, 1, 3 * PAGE64);
  uint64_t before = rss(&f);
  /* A MEM allocation needing a fresh page does not collect (the MEM heap
   * has no page_use_qsbr, obmalloc.c:227-229). */
  ok(&f, TRACE_MALLOC, TRACE_DOMAIN_MEM, 9000, 128);
  assert_int_equal(counter(&f, "cpython.parked_pages"), 2);
  /* An object of a class with no page does: two 64 KiB pages, whose goals
   * (the second advanced the sequence past 80 KiB) are reached. */
  uint64_t mid = rss(&f);
  ok(&f, TRACE_MALLOC, TRACE_DOMAIN_OBJ, 9001, 128);
  assert_int_equal(counter(&f, "cpython.parked_pages"), 0);
  assert_int_equal(counter(&f, "cpython.parked_pages_freed"), 2);
  /* Both purged at once (purge_delay=0); the new page's first free-list
   * extension, 4 KiB of 128 B blocks after a 128-byte start offset
   * (page.c:655, segment.c:324), writes two OS pages. */
  assert_true(mid > before);
  assert_int_equal(rss(&f), mid - 2 * 65536 + 2 * 4096);
  fx_close(&f);
}

static void one_parked_page_waits_for_an_advance(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, "cpython:build=ft,purge_delay=0");
  build(&f, TRACE_DOMAIN_OBJ, 1, 2 * PAGE64, 64);
  drop(&f, TRACE_DOMAIN_OBJ, 1, 2 * PAGE64);
  /* One page parked, 64 KiB < 80 KiB: goal = wr_seq + 2, no advance
   * (obmalloc.c:137-152, qsbr.c:123-127). */
  assert_int_equal(counter(&f, "cpython.parked_pages"), 1);
  assert_int_equal(counter(&f, "cpython.qsbr_advances"), 0);
  ok(&f, TRACE_MALLOC, TRACE_DOMAIN_OBJ, 9001, 128);
  assert_int_equal(counter(&f, "cpython.parked_pages"), 1);
  /* The GC advances the sequence (gc_free_threading.c:954); the next
   * collect frees it. */
  option(&f, "gc_collect", 1);
  ok(&f, TRACE_MALLOC, TRACE_DOMAIN_OBJ, 9002, 20000); /* medium page */
  assert_int_equal(counter(&f, "cpython.parked_pages"), 0);
  fx_close(&f);
}

static void a_large_object_collects_and_reuse_clears_the_goal(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, "cpython:build=ft,purge_delay=0");
  build(&f, TRACE_DOMAIN_OBJ, 1, 4 * PAGE64, 64);
  drop(&f, TRACE_DOMAIN_OBJ, 1, 4 * PAGE64);
  assert_int_equal(counter(&f, "cpython.parked_pages"), 3);
  /* The retired page heads the queue and serves first; the next
   * allocation takes a parked page, which leaves the list (page.c:793-796,
   * 819-822). */
  build(&f, TRACE_DOMAIN_OBJ, 1, PAGE64, 64);
  assert_int_equal(counter(&f, "cpython.parked_pages"), 3);
  ok(&f, TRACE_MALLOC, TRACE_DOMAIN_OBJ, 9001, 64);
  assert_int_equal(counter(&f, "cpython.parked_pages"), 2);
  /* More than 128 KiB from an object heap collects first (page.c:915):
   * the first parked page's goal was reached (the second page parked
   * advanced the sequence), the last one's (wr_seq + 2) not yet, and the
   * collect stops there (obmalloc.c:246-248). */
  uint64_t collects = counter(&f, "cpython.qsbr_collects");
  uint64_t before = rss(&f);
  ok(&f, TRACE_MALLOC, TRACE_DOMAIN_OBJ, 9002, 200000);
  assert_int_equal(counter(&f, "cpython.qsbr_collects"), collects + 1);
  assert_int_equal(counter(&f, "cpython.parked_pages_freed"), 1);
  assert_int_equal(counter(&f, "cpython.parked_pages"), 1);
  assert_true(rss(&f) < before + 200000);
  fx_close(&f);
}

/* 3.13.0-3.13.5: every 10th deferral advances (3.13.5 qsbr.c:120-127). */
static void version_3130_advances_at_every_tenth_park(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, "cpython:build=ft,version=3.13.0,purge_delay=0");
  build(&f, TRACE_DOMAIN_OBJ, 1, 10 * PAGE64, 64);
  drop(&f, TRACE_DOMAIN_OBJ, 1, 10 * PAGE64);
  assert_int_equal(counter(&f, "cpython.parked_pages"), 9);
  assert_int_equal(counter(&f, "cpython.qsbr_advances"), 0);
  ok(&f, TRACE_MALLOC, TRACE_DOMAIN_OBJ, 20001, 128);
  assert_int_equal(counter(&f, "cpython.parked_pages"), 9);
  fx_close(&f);
  fx_open(&f, "cpython:build=ft,version=3.13.5,purge_delay=0");
  build(&f, TRACE_DOMAIN_OBJ, 1, 11 * PAGE64, 64);
  drop(&f, TRACE_DOMAIN_OBJ, 1, 11 * PAGE64);
  assert_int_equal(counter(&f, "cpython.qsbr_advances"), 1);
  ok(&f, TRACE_MALLOC, TRACE_DOMAIN_OBJ, 20001, 128);
  assert_int_equal(counter(&f, "cpython.parked_pages"), 0);
  fx_close(&f);
}

/* gh-145615 item 2: before 3.14.4 the GC's heap visit drops parked pages of
 * the GC heaps from the list, so no collect frees them. */
static void the_gc_leaks_parked_gc_pages_before_3144(void **state) {
  (void)state;
  const char *specs[] = {"cpython:build=ft,version=3.14,purge_delay=0",
                         "cpython:build=ft,version=3.14.3,purge_delay=0",
                         "cpython:build=ft,version=3.13,purge_delay=0"};
  for (int s = 0; s < 3; s++) {
    fx_t f;
    fx_open(&f, specs[s]);
    option(&f, "object_heap", 2);
    build(&f, TRACE_DOMAIN_OBJ, 1, 5 * PAGE64, 64);
    drop(&f, TRACE_DOMAIN_OBJ, 1, 5 * PAGE64);
    option(&f, "object_heap", 1);
    assert_int_equal(counter(&f, "cpython.parked_pages"), 4);
    option(&f, "gc_collect", 1);
    uint64_t before = rss(&f);
    ok(&f, TRACE_MALLOC, TRACE_DOMAIN_OBJ, 9001, 200000);
    uint64_t grew = rss(&f) - (before - 4 * 65536);
    if (s == 0) {
      assert_int_equal(counter(&f, "cpython.parked_dropped_by_gc"), 0);
      assert_int_equal(counter(&f, "cpython.parked_pages_freed"), 4);
      assert_true(grew < 4 * 65536 + 200000 + 65536);
    } else {
      assert_int_equal(counter(&f, "cpython.parked_dropped_by_gc"), 4);
      assert_int_equal(counter(&f, "cpython.parked_pages_freed"), 0);
      assert_true(rss(&f) >= before + 200000 - 4096);
    }
    fx_close(&f);
  }
}

/* A thread's exit abandons its heaps; its parked pages leave its list. */
static void thread_exit_abandons_the_four_heaps(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, "cpython:build=ft");
  assert_int_equal(ev_on(&f, 1, TRACE_THREAD_START, TRACE_DOMAIN_RAW, 0, 0),
                   AS_OK);
  for (uint64_t i = 0; i < 3 * PAGE64; i++)
    assert_int_equal(ev_on(&f, 1, TRACE_MALLOC, TRACE_DOMAIN_OBJ, 1 + i, 64),
                     AS_OK);
  for (uint64_t i = 3 * PAGE64; i > 1; i--)
    assert_int_equal(ev_on(&f, 1, TRACE_FREE, TRACE_DOMAIN_OBJ, i, 0), AS_OK);
  /* Object 1 keeps the first page; the last is retired, the middle one
   * parked. */
  assert_int_equal(counter(&f, "cpython.parked_pages"), 1);
  assert_int_equal(ev_on(&f, 1, TRACE_THREAD_EXIT, TRACE_DOMAIN_RAW, 0, 0),
                   AS_OK);
  assert_int_equal(counter(&f, "cpython.parked_pages"), 0);
  /* The live object's segment waits in the abandoned pool; the main
   * thread frees its object there. */
  assert_int_equal(counter(&f, "mimalloc.abandoned_segments"), 1);
  ok(&f, TRACE_FREE, TRACE_DOMAIN_OBJ, 1, 0);
  model_stats_t s;
  model_stats(f.m, &s);
  assert_int_equal(s.live_objects, 0);
  fx_close(&f);
}

/* Pages a thread's exit left parked are freed by a later exit: the later
 * thread parks its retired page first, so its QSBR collect polls (CPython
 * heap.c:159-163 runs it after _mi_heap_collect_retired) and the
 * abandoned-segment collect then finds the earlier goals reached. */
static void a_later_exit_frees_pages_an_earlier_exit_left(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, "cpython:build=ft");
  for (uint32_t th = 1; th <= 2; th++)
    assert_int_equal(ev_on(&f, th, TRACE_THREAD_START, TRACE_DOMAIN_RAW, 0, 0),
                     AS_OK);
  /* Thread 2 empties its only page of the class: retired, not parked. */
  uint64_t id = 10 * PAGE64;
  for (uint64_t i = 0; i < 10; i++)
    assert_int_equal(ev_on(&f, 2, TRACE_MALLOC, TRACE_DOMAIN_OBJ, id + i, 64),
                     AS_OK);
  for (uint64_t i = 0; i < 10; i++)
    assert_int_equal(ev_on(&f, 2, TRACE_FREE, TRACE_DOMAIN_OBJ, id + i, 0),
                     AS_OK);
  assert_int_equal(counter(&f, "cpython.parked_pages"), 0);
  for (uint64_t i = 0; i < 3 * PAGE64; i++)
    assert_int_equal(ev_on(&f, 1, TRACE_MALLOC, TRACE_DOMAIN_OBJ, 1 + i, 64),
                     AS_OK);
  for (uint64_t i = 3 * PAGE64; i > 1; i--)
    assert_int_equal(ev_on(&f, 1, TRACE_FREE, TRACE_DOMAIN_OBJ, i, 0), AS_OK);
  assert_int_equal(ev_on(&f, 1, TRACE_THREAD_EXIT, TRACE_DOMAIN_RAW, 0, 0),
                   AS_OK);
  /* Object 1's page and thread 1's two emptied ones, whose goals nobody
   * has seen reached, plus thread 2's retired page. */
  assert_int_equal(counter(&f, "mimalloc.pages"), 4);
  assert_int_equal(ev_on(&f, 2, TRACE_THREAD_EXIT, TRACE_DOMAIN_RAW, 0, 0),
                   AS_OK);
  /* Thread 1's two empty pages are gone; object 1's page and thread 2's
   * own (its goal is not reached yet) stay. */
  assert_int_equal(counter(&f, "mimalloc.pages"), 2);
  as_err_t err;
  assert_int_equal(model_check(f.m, &err), AS_OK); /* the children's checks */
  fx_close(&f);
}

/* ---- Options ------------------------------------------------------------- */

static void options_name_what_is_wrong(void **state) {
  (void)state;
  sim_kernel_config_t cfg;
  sim_kernel_t       *k;
  as_err_t            err;
  model_t            *m = NULL;
  sim_kernel_config_default(&cfg);
  assert_int_equal(sim_kernel_create(&cfg, &k, &err), AS_OK);
  model_ctx_t ctx = {.kernel = k, .timers = NULL, .libc_spec = "ideal"};
  assert_int_equal(
      model_create_from_spec("cpython:build=ft,version=3.11", &ctx, &m, &err),
      AS_EUSAGE);
  assert_string_equal(err.msg, "cpython: build=ft needs version 3.13 or "
                               "later (the free-threaded build first shipped "
                               "in 3.13), not 3.11");
  assert_int_equal(
      model_create_from_spec("cpython:build=ft,version=3.12", &ctx, &m, &err),
      AS_EUSAGE);
  assert_int_equal(
      model_create_from_spec("cpython:purge_delay=0", &ctx, &m, &err),
      AS_EUSAGE);
  assert_string_equal(err.msg, "cpython: purge_delay is a mimalloc knob of "
                               "build=ft; the default build has no mimalloc");
  /* A recorded run of the default build over a preloaded mimalloc: its
   * MIMALLOC_* variables are the libc's. */
  model_ctx_t over_mimalloc = {.kernel = k,
                               .libc_spec = "mimalloc:version=2.1.2,"
                                            "purge_delay=0"};
  assert_int_equal(model_create_from_spec("cpython:version=3.11,purge_delay=0",
                                          &over_mimalloc, &m, &err),
                   AS_OK);
  model_destroy(m);
  assert_int_equal(model_create_from_spec(
                       "cpython:build=ft,pythonmalloc=malloc", &ctx, &m, &err),
                   AS_EUSAGE);
  assert_int_equal(
      model_create_from_spec("cpython:build=ft,purge_delay=0", &ctx, &m, &err),
      AS_OK);
  char desc[512];
  model_describe(m, desc, sizeof desc);
  assert_string_equal(desc, "cpython:version=3.14,pythonmalloc=mimalloc,"
                            "build=ft,purge_delay=0,purge_extend_delay=1,"
                            "arena_purge_mult=10,purge_decommits=1,"
                            "abandoned_page_purge=0");
  assert_int_equal(model_set_option(m, "object_heap", 0, 0, &err), AS_EINVAL);
  assert_string_equal(err.msg, "cpython: object_heap expects 1 (object), 2 "
                               "(gc) or 3 (gc_pre), got 0");
  model_destroy(m);
  sim_kernel_destroy(k);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(domains_go_to_libc_and_the_four_heaps),
      cmocka_unit_test(emptied_object_pages_are_parked_mem_pages_freed),
      cmocka_unit_test(a_fresh_object_page_hands_parked_pages_back),
      cmocka_unit_test(one_parked_page_waits_for_an_advance),
      cmocka_unit_test(a_large_object_collects_and_reuse_clears_the_goal),
      cmocka_unit_test(version_3130_advances_at_every_tenth_park),
      cmocka_unit_test(the_gc_leaks_parked_gc_pages_before_3144),
      cmocka_unit_test(thread_exit_abandons_the_four_heaps),
      cmocka_unit_test(a_later_exit_frees_pages_an_earlier_exit_left),
      cmocka_unit_test(options_name_what_is_wrong),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
